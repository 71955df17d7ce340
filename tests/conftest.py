"""Shared test setup.

In CI (CI=true) a missing tool is a failure, never a skip: `need()` turns the skip into an
error there. Locally a skip says exactly what to install.
"""
import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def need(condition: bool, what: str, install: str) -> None:
    """Skip locally (saying how to install `what`), fail in CI."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"{what} is required in CI: {install}")
    pytest.skip(f"{what} is missing: {install}")
