#!/usr/bin/env bash
# Set up everything the test suite needs (system packages included), then run all of it.
# `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_system.sh
echo "== installing edgerun with its test dependencies"
python -m pip install --disable-pip-version-check -q -e ".[test]"
echo "== installing the web package's npm dependencies and building its wheel"
npm ci --silent --no-audit --no-fund
# transformers.js for the drop-in test (its install script only fetches CUDA files)
npm ci --silent --no-audit --no-fund --ignore-scripts --prefix tests/transformers_js
python scripts/build_web.py
echo "== running the Python test suite"
python -m pytest "$@"
echo "== running the JavaScript API tests (Node)"
npm test --silent
