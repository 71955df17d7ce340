"""A tiny static file server for the browser tests: serves one folder on 127.0.0.1.

Pages must come from http://127.0.0.1 (a secure context, so `navigator.gpu` exists), and
module scripts and WebAssembly need their proper MIME types, which Python's table may lack.

    python web/browser/serve.py [ROOT] [PORT]      # the repository root, port 8765 by default
"""
from __future__ import annotations

import functools
import http.server
import os
import sys
import threading

TYPES = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
         ".json": "application/json", ".onnx": "application/octet-stream",
         ".whl": "application/zip", ".zip": "application/zip", ".wgsl": "text/plain"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):      # quiet: tests print what matters
        pass


def serve(root: str, port: int = 0):
    """Start serving `root` in a daemon thread; returns (server, base URL). Port 0: any free."""
    handler = functools.partial(_Handler, directory=os.path.abspath(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    server, url = serve(root, int(sys.argv[2]) if len(sys.argv) > 2 else 8765)
    print(f"serving {os.path.abspath(root)} at {url}/ (Ctrl-C stops)")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()
