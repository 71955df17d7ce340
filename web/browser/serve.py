"""The browser tests' static server: edgerun.web.serve (127.0.0.1, module and wasm MIME types).

    python web/browser/serve.py [ROOT] [PORT]      # the repository root, port 8765 by default
"""
from __future__ import annotations

import os
import sys

from edgerun.web.serve import serve  # noqa: F401 - what tests/test_browser.py imports
from edgerun.web.serve import main

if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    main([root, "--port", sys.argv[2] if len(sys.argv) > 2 else "8765"])
