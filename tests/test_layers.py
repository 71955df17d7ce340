"""The import contract in pyproject.toml ([tool.importlinter]): layers point one way
(onnx/ir at the bottom, then shape inference, the optimizer, the runtime, the providers, the
session, and the tools, packaging and web bridge on top), and no provider imports another
provider beyond the debt listed there. And ruff's lint ([tool.ruff]) finds nothing, and mypy
finds no type error in the engine package ([tool.mypy])."""
import os
import subprocess
import sys

from conftest import ROOT, need


def test_layers_and_providers_keep_their_import_contract():
    try:
        import importlinter  # noqa: F401
    except ImportError:
        need(False, "import-linter", "pip install import-linter==2.17")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "engine"))
    script = "import sys; from importlinter.cli import lint_imports_command; " \
             "sys.exit(lint_imports_command())"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in out.stdout, out.stdout[-2000:]


LINTED = ["engine", "bench", "scripts", "tests", "wasm_kernels", "examples"]


def test_ruff_finds_nothing():
    try:
        import ruff  # noqa: F401
    except ImportError:
        need(False, "ruff", "pip install ruff==0.17.6")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *LINTED],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_core_packages_type_check():
    try:
        import mypy  # noqa: F401
    except ImportError:
        need(False, "mypy", "pip install mypy==2.4.1")
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_generated_schema_tables_are_those_of_the_pinned_onnx():
    """ir/op_schema.py and ir/op_types.py are generated from onnx's schemas
    (scripts/gen_op_schema.py); regenerate them when the onnx pin moves."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location(
        "gen_op_schema", os.path.join(ROOT, "scripts", "gen_op_schema.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    from edgerun.ir import op_schema, op_types

    for module, table in ((op_schema, gen.count_table()), (op_types, gen.type_table())):
        committed = json.loads("".join(module._TABLE))
        assert committed == json.loads(json.dumps(table)), \
            f"{module.__name__} is stale: run python scripts/gen_op_schema.py"
