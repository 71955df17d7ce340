"""A small static file server for edgerun's web pages: the demos, packed sites, test pages.

    python -m edgerun.web.serve [FOLDER] [--port 8000]     # FOLDER: the current one by default

It listens on 127.0.0.1 only: that address is a secure context, so `navigator.gpu` exists
(http://0.0.0.0, which `python -m http.server` prints, is not). It also sends the MIME types
module scripts and WebAssembly need whatever the platform's table says, and no caching, so a
rebuilt wheel is picked up on reload. It serves files only: no directory listings, and
nothing a symlink reaches outside the folder (tests that link a development layout name the
extra folders they trust).
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

    def __init__(self, *args, roots=(), **kwargs):
        self.roots = roots              # real paths a served file may lie in
        super().__init__(*args, **kwargs)

    def send_head(self):
        """A 404, as for any missing file, when the real location of the path asked for
        (links followed) is outside the served roots."""
        real = os.path.realpath(self.translate_path(self.path))
        if not any(real == root or real.startswith(root + os.sep) for root in self.roots):
            self.send_error(404, "File not found")
            return None
        return super().send_head()

    def list_directory(self, path):
        self.send_error(404, "No directory listings")
        return None

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):      # quiet: pages and tests report what matters
        pass


def serve(root: str, port: int = 0, also=()):
    """Start serving `root` in a daemon thread; returns (server, base URL). Port 0: any free.
    `also`: folders that symlinks inside `root` may lead to (a development layout)."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"cannot serve '{root}': not a folder")
    roots = tuple(os.path.realpath(r) for r in (root, *also))
    handler = functools.partial(_Handler, directory=os.path.abspath(root), roots=roots)
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
