"""A local OTLP trace receiver: OTLP/gRPC and OTLP/HTTP (protobuf) on 127.0.0.1, ephemeral ports.

Every export request body is written as it arrived (after gzip/deflate decoding for HTTP) to OUT/NNN.pb, and the
same `ExportTraceServiceRequest` as one OTLP-JSON line to OUT/spans.jsonl: the opentelemetry-proto JSON mapping
(lowerCamelCase names, 64-bit integers as decimal strings, enums as integers) with trace and span ids as lowercase
hex, as the OTLP/JSON spec and the Collector's file exporter write them. OUT/exports.json lists each body with its
transport, path, size and the exporter's user agent.

    python receiver.py OUT READY_FILE

READY_FILE appears once both servers listen: {"grpc": "127.0.0.1:P", "http": "http://127.0.0.1:Q/v1/traces"}.

Stops on SIGTERM or SIGINT.
"""

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
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

GRPC_SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def hex_ids(node):
    """The proto3 JSON mapping writes bytes as base64; OTLP/JSON writes trace and span ids as hex."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            hex_ids(item)
    return node


class Store:
    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()
        self.count = 0
        self.index = []
        os.makedirs(out, exist_ok=True)

    def save(self, body, transport, path, user_agent):
        message = ExportTraceServiceRequest.FromString(body)
        doc = json_format.MessageToDict(message, use_integers_for_enums=True)
        line = json.dumps(hex_ids(doc), separators=(",", ":"))
        with self.lock:
            name = f"{self.count:03d}.pb"
            self.count += 1
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(body)
            with open(os.path.join(self.out, "spans.jsonl"), "a") as f:
                f.write(line + "\n")
            spans = sum(len(ss.spans) for rs in message.resource_spans for ss in rs.scope_spans)
            self.index.append(
                {"file": name, "transport": transport, "path": path, "bytes": len(body), "spans": spans,
                 "user_agent": user_agent}
            )
            with open(os.path.join(self.out, "exports.json"), "w") as f:
                json.dump(self.index, f, indent=1)
                f.write("\n")


def grpc_server(store):
    def export(body, context):
        meta = dict(context.invocation_metadata())
        store.save(body, "grpc", f"/{GRPC_SERVICE}/Export", meta.get("user-agent", ""))
        return ExportTraceServiceResponse().SerializeToString()

    handler = grpc.method_handlers_generic_handler(
        GRPC_SERVICE,
        {"Export": grpc.unary_unary_rpc_method_handler(export)},  # no (de)serializers: raw bytes both ways
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def http_server(store):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = (self.headers.get("Content-Encoding") or "").lower()
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path != "/v1/traces" or "protobuf" not in (self.headers.get("Content-Type") or ""):
                self.send_error(404 if self.path != "/v1/traces" else 415)
                return
            store.save(body, "http/protobuf", self.path, self.headers.get("User-Agent", ""))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def main():
    out, ready = sys.argv[1], sys.argv[2]
    store = Store(out)
    g, gport = grpc_server(store)
    h, hport = http_server(store)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tmp = ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"grpc": f"127.0.0.1:{gport}", "http": f"http://127.0.0.1:{hport}/v1/traces"}, f)
    os.replace(tmp, ready)
    stop.wait()
    h.shutdown()
    g.stop(grace=1).wait()


if __name__ == "__main__":
    main()
