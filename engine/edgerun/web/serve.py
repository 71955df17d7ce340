"""A small static file server for edgerun's web pages: the demos, packed sites, test pages.

    python -m edgerun.web.serve [FOLDER] [--port 8000]     # FOLDER: the current one by default

It listens on 127.0.0.1 only: that address is a secure context, so `navigator.gpu` exists
(http://0.0.0.0, which `python -m http.server` prints, is not). It also sends the MIME types
module scripts and WebAssembly need whatever the platform's table says, and no caching, so a
rebuilt wheel is picked up on reload.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import threading

TYPES = {".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
         ".json": "application/json", ".onnx": "application/octet-stream",
         ".whl": "application/zip", ".zip": "application/zip", ".wgsl": "text/plain",
         ".npy": "application/octet-stream"}


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **TYPES}

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):      # quiet: pages and tests report what matters
        pass


def serve(root: str, port: int = 0):
    """Start serving `root` in a daemon thread; returns (server, base URL). Port 0: any free."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"cannot serve '{root}': not a folder")
    handler = functools.partial(_Handler, directory=os.path.abspath(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m edgerun.web.serve",
                                     description="serve a folder on http://127.0.0.1")
    parser.add_argument("folder", nargs="?", default=".")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    server, url = serve(args.folder, args.port)
    print(f"serving {os.path.abspath(args.folder)} at {url}/ (Ctrl-C stops)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.shutdown()


if __name__ == "__main__":
    main()
