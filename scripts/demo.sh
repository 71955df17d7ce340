#!/usr/bin/env bash
# Set up edgerun and run the main job: classify the built-in digits example.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install --disable-pip-version-check -q -e .
python -m edgerun demo "$@"
