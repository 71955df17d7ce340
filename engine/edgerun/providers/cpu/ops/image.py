"""ImageDecoder (opset 20): encoded image bytes -> HWC uint8 pixels.

Decoding needs an image codec library; the core stays dependency-free, so Pillow is imported
only when an ImageDecoder node actually runs.
"""
import io

import numpy as np

from ..registry import kernel

_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


def _pillow_image():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("ImageDecoder needs the Pillow package to decode images: "
                          "pip install pillow") from None
    return Image


@kernel("ImageDecoder", since=20)
def image_decoder(ctx, encoded_stream, pixel_format="RGB"):
    """Decode JPEG/PNG/BMP/TIFF/WebP/PNM/... bytes. An undecodable stream gives an empty
    [0, 0, channels] tensor, as the spec asks."""
    if pixel_format not in _CHANNELS:
        raise ValueError(f"pixel_format must be RGB, BGR or Grayscale, got {pixel_format!r}")
    Image = _pillow_image()
    data = np.ascontiguousarray(encoded_stream, dtype=np.uint8).tobytes()
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            converted = image.convert("L" if pixel_format == "Grayscale" else "RGB")
    except Exception:   # Pillow raises many types for corrupt or unknown data
        return np.zeros((0, 0, _CHANNELS[pixel_format]), dtype=np.uint8)
    pixels = np.asarray(converted, dtype=np.uint8)
    if pixel_format == "Grayscale":
        return pixels[:, :, np.newaxis]
    if pixel_format == "BGR":
        return np.ascontiguousarray(pixels[:, :, ::-1])
    return pixels
