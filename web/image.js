// Images <-> tensors with onnxruntime-web's options: Tensor.fromImage, tensor.toImageData and
// tensor.toDataURL (tensor.js calls these).
//
// fromImage(image, { tensorFormat, tensorLayout, dataType, norm, resizedWidth, resizedHeight })
//   image: ImageData or any {data, width, height} of RGBA bytes (what Node can pass), and in a
//   page or a Web Worker also an HTMLImageElement, ImageBitmap, HTMLCanvasElement,
//   OffscreenCanvas, HTMLVideoElement, VideoFrame, or a URL (string or URL; data: URLs too).
//   tensorFormat: "RGB" (default), "BGR", "RBG" or "RGBA": the tensor's channels, in order.
//   tensorLayout: "NCHW" (default: dims [1, C, H, W]) or "NHWC" ([1, H, W, C]).
//   dataType: "float32" (default) or "uint8".
//   norm: { mean, bias }: each value is (pixel + bias) / mean; mean and bias are one number
//     for every channel or 3 or 4 numbers in R, G, B, A order whatever tensorFormat is (as
//     onnxruntime-web). Default mean 255 and bias 0, so float32 values lie in [0, 1]; for
//     uint8 the default is the pixels themselves (mean 1), and values are rounded and
//     clamped to 0..255.
//   resizedWidth / resizedHeight: the tensor's size; the image is resized to it by bilinear
//     interpolation with half-pixel centers (ONNX Resize, mode "linear", "half_pixel"). Either
//     alone keeps the other side as it is.
// toImageData / toDataURL({ format, tensorLayout, norm }): pixel = (value - bias) * mean as
//   onnxruntime-web (fromImage's inverse when bias is 0), rounded and clamped to 0..255, of a
//   [1, C, H, W] (or NHWC) tensor of 3 or 4 channels; format defaults to "RGB" or "RGBA" by
//   the channel count; a tensor of integers takes its values as pixels (default mean 1),
//   floats are scaled by 255. Of a batch, the first image. toImageData gives an ImageData
//   (under Node, where there is none, an object of its fields: data, width, height,
//   colorSpace). toDataURL gives a PNG (lossless, alpha included) and, unlike
//   onnxruntime-web, needs no canvas: it works in a Web Worker and under Node.
//
// Where onnxruntime-web 1.30's implementation departs from its documented options, this
// follows the documentation: onnxruntime-web ignores dataType (always float32), throws on
// NHWC ("not supported yet"), crops instead of resizing, gives an HTMLImageElement 4
// channels and refuses tensorFormat for it, needs options for an ImageBitmap, reads BGR as
// RGB in toImageData, wants `format` whenever toImageData has options, and toDataURL makes
// every pixel whose alpha is at least 1 (of 255) opaque.

const FORMATS = { RGB: [0, 1, 2], BGR: [2, 1, 0], RBG: [0, 2, 1], RGBA: [0, 1, 2, 3] };
const LAYOUTS = ["NCHW", "NHWC"];
const DATA_TYPES = ["float32", "uint8"];

function choice(value, allowed, fallback, what, where) {
  if (value === undefined) return fallback;
  if (!allowed.includes(value)) {
    throw new TypeError(`${where}: ${what} must be one of ${allowed.join(", ")}; got '${value}'`);
  }
  return value;
}

// norm -> [mean, bias], four numbers each in R, G, B, A order
function normOf(norm, defaultMean, where) {
  const four = (value, fallback, what) => {
    if (value === undefined) return [fallback, fallback, fallback, fallback];
    if (typeof value === "number") return [value, value, value, value];
    if (!Array.isArray(value) || (value.length !== 3 && value.length !== 4) ||
        value.some((v) => typeof v !== "number")) {
      throw new TypeError(`${where}: norm.${what} must be a number or 3 or 4 numbers (R, G, B, A)`);
    }
    return [value[0], value[1], value[2], value[3] ?? fallback];
  };
  return [four(norm?.mean, defaultMean, "mean"), four(norm?.bias, 0, "bias")];
}

function describe(value) {
  if (typeof value === "string") return value.length > 64 ? `${value.slice(0, 61)}...` : value;
  return value?.constructor?.name ?? typeof value;
}

// ---------------------------------------------------------------------------------------
// Image -> tensor

export async function imageToTensorData(image, options) {
  const where = "Tensor.fromImage";
  options ??= {};
  const format = choice(options.tensorFormat, Object.keys(FORMATS), "RGB", "tensorFormat", where);
  const layout = choice(options.tensorLayout, LAYOUTS, "NCHW", "tensorLayout", where);
  const dataType = choice(options.dataType, DATA_TYPES, "float32", "dataType", where);
  const [mean, bias] = normOf(options.norm, dataType === "uint8" ? 1 : 255, where);

  let pixels = await pixelsOf(image, where);
  const width = options.resizedWidth ?? pixels.width;
  const height = options.resizedHeight ?? pixels.height;
  for (const [name, v] of [["resizedWidth", width], ["resizedHeight", height]]) {
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${where}: ${name} must be a positive integer, got ${v}`);
  }
  if (width !== pixels.width || height !== pixels.height) pixels = resized(pixels, width, height);

  const order = FORMATS[format];
  const channels = order.length;
  const plane = width * height;
  const out = dataType === "uint8" ? new Uint8ClampedArray(channels * plane) : new Float32Array(channels * plane);
  const src = pixels.data;
  for (let c = 0; c < channels; c++) {
    const k = order[c];
    const m = mean[k];
    const b = bias[k];
    let i = layout === "NCHW" ? c * plane : c;
    const step = layout === "NCHW" ? 1 : channels;
    for (let p = 0; p < plane; p++, i += step) out[i] = (src[p * 4 + k] + b) / m;
  }
  return {
    type: dataType,
    data: dataType === "uint8" ? new Uint8Array(out.buffer) : out,
    dims: layout === "NCHW" ? [1, channels, height, width] : [1, height, width, channels],
  };
}

// {data (RGBA, 4 values a pixel), width, height} of any source fromImage takes
async function pixelsOf(image, where) {
  if (typeof image === "string" || (typeof URL === "function" && image instanceof URL)) {
    return drawn(await loadImage(String(image), where), where);
  }
  if (image && typeof image === "object" && "data" in image && "width" in image && "height" in image) {
    const { data, width, height } = image;
    if (!Number.isSafeInteger(width) || !Number.isSafeInteger(height) || width <= 0 || height <= 0) {
      throw new RangeError(`${where}: the image's width and height must be positive integers, got ${width} x ${height}`);
    }
    const bytes = data instanceof Uint8ClampedArray || data instanceof Uint8Array || Array.isArray(data) ||
      (ArrayBuffer.isView(data) && /^Uint8(Clamped)?Array$/.test(data.constructor?.name));
    if (!bytes) {
      throw new TypeError(`${where}: an ImageData-like image's data must be RGBA bytes (Uint8ClampedArray, ` +
                          `Uint8Array or an array), got ${describe(data)}`);
    }
    if (data.length !== width * height * 4) {
      throw new RangeError(`${where}: ${width} x ${height} RGBA pixels are ${width * height * 4} values, ` +
                           `the image's data has ${data.length}`);
    }
    return { data, width, height };
  }
  if (image && typeof image === "object" && sizeOf(image)) return drawn(image, where);
  throw new TypeError(`${where}: unsupported image (${describe(image)}); pass ImageData or an ` +
                      `{data, width, height} of RGBA bytes, an HTMLImageElement, ImageBitmap, canvas, ` +
                      `OffscreenCanvas, video frame, or a URL`);
}

// [width, height] of a drawable source (natural size for an <img>), or null
function sizeOf(source) {
  for (const [w, h] of [["naturalWidth", "naturalHeight"], ["videoWidth", "videoHeight"],
                        ["displayWidth", "displayHeight"], ["width", "height"]]) {
    if (typeof source[w] === "number" && typeof source[h] === "number") return [source[w], source[h]];
  }
  return null;
}

function context2d(width, height, where, what) {
  let canvas;
  if (typeof OffscreenCanvas === "function") {
    canvas = new OffscreenCanvas(width, height);
  } else if (typeof document !== "undefined") {
    canvas = document.createElement("canvas");
    canvas.width = width;
    canvas.height = height;
  } else {
    throw new TypeError(`${where}: reading the pixels of ${what} needs a canvas (a browser page or ` +
                        `Web Worker); in Node pass an ImageData-like {data, width, height} of RGBA bytes`);
  }
  const context = canvas.getContext("2d", { willReadFrequently: true });
  if (!context) throw new Error(`${where}: no 2D canvas context to read ${what} with`);
  return context;
}

async function drawn(source, where) {
  const what = `this ${describe(source)}`;
  if (typeof source.decode === "function" && source.complete === false) {
    try {
      await source.decode();                   // an <img> still loading
    } catch {
      throw new Error(`${where}: the image element's picture did not load (${describe(source.src ?? "")})`);
    }
  }
  const [width, height] = sizeOf(source);
  if (!(width > 0 && height > 0)) throw new RangeError(`${where}: ${what} of size ${width} x ${height} has no pixels`);
  const context = context2d(width, height, where, what);
  context.drawImage(source, 0, 0, width, height);
  const { data } = context.getImageData(0, 0, width, height);
  return { data, width, height };
}

async function loadImage(url, where) {
  if (typeof document !== "undefined" && typeof Image === "function") {
    const image = new Image();
    image.crossOrigin = "anonymous";
    image.src = url;
    try {
      await image.decode();
    } catch {
      throw new Error(`${where}: cannot load an image from ${describe(url)}`);
    }
    return image;
  }
  if (typeof createImageBitmap === "function" && typeof fetch === "function") {     // a Web Worker
    const response = await fetch(url);
    if (!response.ok) throw new Error(`${where}: cannot fetch ${describe(url)}: HTTP ${response.status}`);
    try {
      return await createImageBitmap(await response.blob());
    } catch (e) {
      throw new Error(`${where}: cannot decode the image at ${describe(url)}: ${e?.message ?? e}`);
    }
  }
  throw new TypeError(`${where}: loading an image from a URL needs a browser to decode it; in Node ` +
                      `decode it yourself and pass an ImageData-like {data, width, height} of RGBA bytes`);
}

// Sample positions along one axis: half-pixel centers, clamped at the edges.
function axis(from, to) {
  const lo = new Int32Array(to);
  const hi = new Int32Array(to);
  const frac = new Float64Array(to);
  for (let i = 0; i < to; i++) {
    const s = Math.min(Math.max((i + 0.5) * from / to - 0.5, 0), from - 1);
    lo[i] = Math.floor(s);
    hi[i] = Math.min(lo[i] + 1, from - 1);
    frac[i] = s - lo[i];
  }
  return { lo, hi, frac };
}

// Bilinear resize of RGBA pixels (ONNX Resize linear / half_pixel); values stay fractional.
function resized({ data, width: w0, height: h0 }, width, height) {
  const xs = axis(w0, width);
  const ys = axis(h0, height);
  const out = new Float32Array(width * height * 4);
  let o = 0;
  for (let y = 0; y < height; y++) {
    const r0 = ys.lo[y] * w0;
    const r1 = ys.hi[y] * w0;
    const fy = ys.frac[y];
    for (let x = 0; x < width; x++) {
      const fx = xs.frac[x];
      const a = (r0 + xs.lo[x]) * 4;
      const b = (r0 + xs.hi[x]) * 4;
      const c = (r1 + xs.lo[x]) * 4;
      const d = (r1 + xs.hi[x]) * 4;
      for (let k = 0; k < 4; k++, o++) {
        out[o] = (data[a + k] * (1 - fx) + data[b + k] * fx) * (1 - fy) +
                 (data[c + k] * (1 - fx) + data[d + k] * fx) * fy;
      }
    }
  }
  return { data: out, width, height };
}

// ---------------------------------------------------------------------------------------
// Tensor -> image

// {data: Uint8ClampedArray RGBA, width, height, channels} of an image tensor
function tensorPixels(tensor, options, where) {
  options ??= {};
  const { type, dims } = tensor;
  if (type === "string" || type === "bool" || type === "int4" || type === "uint4" ||
      (type === "float16" && !(globalThis.Float16Array && tensor.data instanceof globalThis.Float16Array))) {
    throw new TypeError(`${where}: needs a tensor of numbers (float32, uint8, ...), got ${type}`);
  }
  const layout = choice(options.tensorLayout, LAYOUTS, "NCHW", "tensorLayout", where);
  if (dims.length !== 4 || dims[0] < 1) {
    throw new RangeError(`${where}: needs an image tensor of dims [1, C, H, W] (NCHW) or [1, H, W, C] ` +
                         `(NHWC), got [${dims}]`);
  }
  const [channels, height, width] = layout === "NCHW" ? [dims[1], dims[2], dims[3]] : [dims[3], dims[1], dims[2]];
  if (channels !== 3 && channels !== 4) {
    throw new RangeError(`${where}: an image tensor has 3 or 4 channels; [${dims}] (${layout}) has ${channels}`);
  }
  const format = choice(options.format, Object.keys(FORMATS), channels === 4 ? "RGBA" : "RGB", "format", where);
  const order = FORMATS[format];
  if (order.length !== channels) {
    throw new RangeError(`${where}: format '${format}' has ${order.length} channels, the tensor [${dims}] ` +
                         `(${layout}) has ${channels}`);
  }
  const [mean, bias] = normOf(options.norm, type.startsWith("float") ? 255 : 1, where);
  const plane = width * height;
  const out = new Uint8ClampedArray(plane * 4);
  if (channels === 3) for (let p = 3; p < out.length; p += 4) out[p] = 255;
  const values = tensor.data;
  const big = typeof values[0] === "bigint";
  for (let c = 0; c < channels; c++) {
    const k = order[c];
    const m = mean[k];
    const b = bias[k];
    let i = layout === "NCHW" ? c * plane : c;
    const step = layout === "NCHW" ? 1 : channels;
    for (let p = 0; p < plane; p++, i += step) {
      out[p * 4 + k] = ((big ? Number(values[i]) : values[i]) - b) * m;
    }
  }
  return { data: out, width, height, channels };
}

export function tensorToImageData(tensor, options) {
  const { data, width, height } = tensorPixels(tensor, options, "tensor.toImageData");
  if (typeof ImageData === "function") return new ImageData(data, width, height);
  return { data, width, height, colorSpace: "srgb" };       // Node: ImageData's fields
}

export function tensorToDataURL(tensor, options) {
  const pixels = tensorPixels(tensor, options, "tensor.toDataURL");
  return `data:image/png;base64,${base64(png(pixels))}`;
}

// ---------------------------------------------------------------------------------------
// PNG, written here so toDataURL needs no canvas: 8-bit RGB or RGBA, stored (uncompressed)
// deflate blocks.

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function zlibStored(raw) {
  const BLOCK = 65535;
  const blocks = Math.max(1, Math.ceil(raw.length / BLOCK));
  const out = new Uint8Array(2 + blocks * 5 + raw.length + 4);
  out[0] = 0x78;                             // deflate, 32 KiB window
  out[1] = 0x01;                             // no preset dictionary; (0x7801 % 31) === 0
  let at = 2;
  for (let i = 0; i < blocks; i++) {
    const chunk = raw.subarray(i * BLOCK, (i + 1) * BLOCK);
    const n = chunk.length;
    out[at++] = i === blocks - 1 ? 1 : 0;    // BFINAL, BTYPE 00 (stored)
    out[at++] = n & 0xff;
    out[at++] = n >>> 8;
    out[at++] = ~n & 0xff;
    out[at++] = (~n >>> 8) & 0xff;
    out.set(chunk, at);
    at += n;
  }
  let a = 1;
  let b = 0;
  for (let i = 0; i < raw.length; i++) {
    a = (a + raw[i]) % 65521;
    b = (b + a) % 65521;
  }
  new DataView(out.buffer).setUint32(at, ((b << 16) | a) >>> 0);
  return out;
}

function png({ data, width, height, channels }) {
  const row = width * channels + 1;
  const raw = new Uint8Array(row * height);
  for (let y = 0; y < height; y++) {          // filter 0 (none) on each row
    for (let x = 0; x < width; x++) {
      for (let k = 0; k < channels; k++) raw[y * row + 1 + x * channels + k] = data[(y * width + x) * 4 + k];
    }
  }
  const header = new Uint8Array(13);
  const view = new DataView(header.buffer);
  view.setUint32(0, width);
  view.setUint32(4, height);
  header.set([8, channels === 4 ? 6 : 2, 0, 0, 0], 8);      // 8 bits, RGBA or RGB
  const chunks = [["IHDR", header], ["IDAT", zlibStored(raw)], ["IEND", new Uint8Array(0)]];
  const out = new Uint8Array(8 + chunks.reduce((n, [, body]) => n + 12 + body.length, 0));
  out.set([137, 80, 78, 71, 13, 10, 26, 10]);
  let at = 8;
  const dv = new DataView(out.buffer);
  for (const [name, body] of chunks) {
    dv.setUint32(at, body.length);
    const typed = out.subarray(at + 4, at + 8 + body.length);
    typed.set([...name].map((ch) => ch.charCodeAt(0)));
    typed.set(body, 4);
    dv.setUint32(at + 8 + body.length, crc32(typed));
    at += 12 + body.length;
  }
  return out;
}

function base64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}
