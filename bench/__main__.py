"""`python -m bench`: run the CPU benchmark (see bench/runner.py)."""
import sys

from bench.runner import main

sys.exit(main())
