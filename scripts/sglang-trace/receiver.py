#!/usr/bin/env python3
"""A local OTLP trace receiver that keeps every export it is sent.

Listens on 127.0.0.1 only, on free ports chosen by the OS:
  - OTLP/HTTP:  POST /v1/traces, body = protobuf ExportTraceServiceRequest
                (Content-Encoding gzip or deflate accepted);
  - OTLP/gRPC:  opentelemetry.proto.collector.trace.v1.TraceService/Export.

Each request body is written as it arrived to OUT/NNN.pb (NNN = arrival order,
from 001), and as one line of OUT/spans.jsonl in OTLP JSON (the protobuf JSON
mapping with OTLP's rules: lowerCamelCase keys, trace/span ids as lowercase hex,
64-bit integers as decimal strings, enums as numbers; fields at their default
value are left out, as recent collectors do). OUT/bodies.jsonl says for each body
which transport brought it and its size.

When it is listening it writes {"http": port, "grpc": port} to --ready-file.
It stops on SIGTERM/SIGINT, or when its standard input is closed (--stdin-eof).
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


def to_otlp_json(body: bytes) -> dict:
    msg = ExportReq()
    msg.ParseFromString(body)
    d = MessageToDict(msg, use_integers_for_enums=True, preserving_proto_field_name=False)
    return _hex_ids(d)


class Store:
    def __init__(self, out: str):
        self.out = out
        os.makedirs(out, exist_ok=True)
        self.lock = threading.Lock()
        self.n = 0
        self.jsonl = open(os.path.join(out, "spans.jsonl"), "w", encoding="utf-8")
        self.index = open(os.path.join(out, "bodies.jsonl"), "w", encoding="utf-8")

    def save(self, body: bytes, transport: str) -> None:
        line = json.dumps(to_otlp_json(body), separators=(",", ":"))
        with self.lock:
            self.n += 1
            name = f"{self.n:03d}.pb"
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(body)
            self.jsonl.write(line + "\n")
            self.jsonl.flush()
            self.index.write(
                json.dumps({"file": name, "transport": transport, "bytes": len(body)}) + "\n"
            )
            self.index.flush()
        print(f"receiver: {name} via {transport}, {len(body)} bytes", file=sys.stderr)

    def close(self) -> None:
        with self.lock:
            self.jsonl.close()
            self.index.close()


def make_http(store: Store) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server naming)
            if self.path.split("?")[0] != "/v1/traces":
                self.send_error(404)
                return
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            enc = (self.headers.get("Content-Encoding") or "").lower()
            if enc == "gzip":
                body = gzip.decompress(body)
            elif enc == "deflate":
                body = zlib.decompress(body)
            try:
                store.save(body, "http")
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
    # The generated add_TraceServiceServicer_to_server() would hand us a parsed
    # message; registering the same service and method with an identity
    # deserializer keeps the body exactly as the exporter sent it.
    def export(body: bytes, context):
        store.save(body, "grpc")
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
    ap.add_argument("--out", required=True, help="folder for NNN.pb, spans.jsonl, bodies.jsonl")
    ap.add_argument("--ready-file", required=True, help="where to write the ports as JSON")
    ap.add_argument("--stdin-eof", action="store_true", help="stop when stdin is closed")
    args = ap.parse_args()

    store = Store(args.out)
    httpd = make_http(store)
    gsrv, gport = make_grpc(store)
    gsrv.start()
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    signal.signal(signal.SIGINT, lambda *a: stop.set())
    if args.stdin_eof:
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()

    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"http": httpd.server_address[1], "grpc": gport}, f)
    os.replace(tmp, args.ready_file)

    stop.wait()
    gsrv.stop(grace=1.0).wait()
    httpd.shutdown()
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
