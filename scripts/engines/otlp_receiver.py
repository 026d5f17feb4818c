#!/usr/bin/env python3
"""A local OTLP trace receiver that keeps every export it is sent (the engine harnesses' collector).

    python otlp_receiver.py --layout sglang|vllm OUT READY_FILE

Listens on 127.0.0.1 only, on free ports chosen by the OS:
  - OTLP/gRPC:  opentelemetry.proto.collector.trace.v1.TraceService/Export;
  - OTLP/HTTP:  POST /v1/traces, body = protobuf ExportTraceServiceRequest
                (Content-Encoding gzip or deflate accepted).

Each request body is written as it arrived (after gzip/deflate decoding for HTTP) to OUT/NNN.pb, and as one line of
OUT/spans.jsonl in OTLP JSON: the opentelemetry-proto JSON mapping (lowerCamelCase keys, 64-bit integers as decimal
strings, enums as numbers, fields at their default value left out) with trace and span ids as lowercase hex, as the
OTLP/JSON spec and the Collector's file exporter write them. The index of the bodies and the numbering follow the
layout of the harness whose fixtures they are:

  sglang  (sglang-trace/)  bodies 001, 002, ...; OUT/bodies.jsonl, one line per body: file, transport ("grpc" or
                           "http"), bytes; READY_FILE: {"http": PORT, "grpc": PORT}
  vllm    (vllm-trace/)    bodies 000, 001, ...; OUT/exports.json, a list: file, transport ("grpc" or
                           "http/protobuf"), path, bytes, spans, the exporter's user agent; READY_FILE:
                           {"grpc": "127.0.0.1:PORT", "http": "http://127.0.0.1:PORT/v1/traces"}

READY_FILE appears once both servers listen. Stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import signal
import sys
import threading
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

ExportReq = trace_service_pb2.ExportTraceServiceRequest
ExportResp = trace_service_pb2.ExportTraceServiceResponse
SERVICE = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
GRPC_PATH = f"/{SERVICE}/Export"

_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def _hex_ids(obj):
    """MessageToDict writes bytes fields as base64; OTLP JSON wants hex ids."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in _ID_KEYS and isinstance(v, str):
                obj[k] = base64.b64decode(v).hex()
            else:
                _hex_ids(v)
    elif isinstance(obj, list):
        for v in obj:
            _hex_ids(v)
    return obj


class Store:
    """OUT/NNN.pb and OUT/spans.jsonl; the index as the layout has it."""

    def __init__(self, out: str, layout: str):
        self.out = out
        self.layout = layout
        os.makedirs(out, exist_ok=True)
        self.lock = threading.Lock()
        self.n = 0
        self.index = []
        self.jsonl = open(os.path.join(out, "spans.jsonl"), "w", encoding="utf-8")
        self.bodies = open(os.path.join(out, "bodies.jsonl"), "w", encoding="utf-8") if layout == "sglang" else None

    def save(self, body: bytes, grpc_call: bool, path: str, user_agent: str) -> None:
        msg = ExportReq.FromString(body)
        line = json.dumps(_hex_ids(MessageToDict(msg, use_integers_for_enums=True)), separators=(",", ":"))
        with self.lock:
            if self.layout == "sglang":
                self.n += 1
                name = f"{self.n:03d}.pb"
            else:
                name = f"{self.n:03d}.pb"
                self.n += 1
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(body)
            self.jsonl.write(line + "\n")
            self.jsonl.flush()
            if self.layout == "sglang":
                transport = "grpc" if grpc_call else "http"
                self.bodies.write(json.dumps({"file": name, "transport": transport, "bytes": len(body)}) + "\n")
                self.bodies.flush()
            else:
                spans = sum(len(ss.spans) for rs in msg.resource_spans for ss in rs.scope_spans)
                self.index.append({"file": name, "transport": "grpc" if grpc_call else "http/protobuf",
                                   "path": path, "bytes": len(body), "spans": spans, "user_agent": user_agent})
                with open(os.path.join(self.out, "exports.json"), "w") as f:
                    json.dump(self.index, f, indent=1)
                    f.write("\n")

    def close(self) -> None:
        with self.lock:
            self.jsonl.close()
            if self.bodies is not None:
                self.bodies.close()


def make_http(store: Store) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server naming)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            enc = (self.headers.get("Content-Encoding") or "").lower()
            if enc == "gzip":
                body = gzip.decompress(body)
            elif enc == "deflate":
                body = zlib.decompress(body)
            if self.path.split("?")[0] != "/v1/traces":
                self.send_error(404)
                return
            if "protobuf" not in (self.headers.get("Content-Type") or ""):
                self.send_error(415)
                return
            try:
                store.save(body, False, self.path, self.headers.get("User-Agent", ""))
            except Exception as e:  # a body we cannot parse: say so, keep running
                self.send_error(400, str(e))
                return
            resp = ExportResp().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(resp)))
            self.end_headers()
            self.wfile.write(resp)

        def log_message(self, *args):
            pass

    return ThreadingHTTPServer(("127.0.0.1", 0), Handler)


def make_grpc(store: Store):
    # The generated add_TraceServiceServicer_to_server() would hand us a parsed message; registering the same
    # service and method with no request deserializer keeps the body exactly as the exporter sent it.
    def export(body: bytes, context):
        meta = dict(context.invocation_metadata())
        store.save(body, True, GRPC_PATH, meta.get("user-agent", ""))
        return ExportResp()

    handler = grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Export": grpc.unary_unary_rpc_method_handler(
                export,
                request_deserializer=None,
                response_serializer=ExportResp.SerializeToString,
            )
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    return server, port


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", required=True, choices=("sglang", "vllm"),
                    help="numbering and index of the bodies, ports in READY_FILE (see above)")
    ap.add_argument("out", help="folder for NNN.pb, spans.jsonl and the index")
    ap.add_argument("ready_file", help="where to write the ports as JSON once listening")
    args = ap.parse_args()

    store = Store(args.out, args.layout)
    httpd = make_http(store)
    gsrv, gport = make_grpc(store)
    gsrv.start()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())

    hport = httpd.server_address[1]
    if args.layout == "sglang":
        ready = {"http": hport, "grpc": gport}
    else:
        ready = {"grpc": f"127.0.0.1:{gport}", "http": f"http://127.0.0.1:{hport}/v1/traces"}
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.replace(tmp, args.ready_file)

    # Polled: the signal may reach one of gRPC's threads, and the handler runs only when the main thread is back
    # in the interpreter, which a wait without a timeout would never let it be.
    while not stop.wait(0.2):
        pass
    gsrv.stop(grace=1.0).wait()
    httpd.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
