// Tensor.fromImage, tensor.toImageData and tensor.toDataURL under Node: ImageData-like
// sources ({data, width, height} of RGBA bytes) work, DOM-only sources fail clearly.
import { test } from "node:test";
import assert from "node:assert/strict";
import { inflateSync } from "node:zlib";
import { Tensor } from "../index.js";

// 3 x 2 RGBA pixels, every byte different
const W = 3;
const H = 2;
const RGBA = Uint8ClampedArray.from({ length: W * H * 4 }, (_, i) => (i * 37 + 11) % 256);
const IMAGE = { data: RGBA, width: W, height: H };
const px = (p, k) => RGBA[p * 4 + k];          // pixel p's channel k (0 R, 1 G, 2 B, 3 A)

function near(actual, expected, tol = 1e-6) {
  assert.equal(actual.length, expected.length);
  actual.forEach((v, i) => assert.ok(Math.abs(v - expected[i]) <= tol, `${i}: ${v} vs ${expected[i]}`));
}

// The tensor fromImage must give: channels `order` (R=0, G=1, B=2, A=3) in `layout`.
function expected(order, layout, value = (v) => v / 255) {
  const out = [];
  const plane = W * H;
  if (layout === "NCHW") for (const k of order) for (let p = 0; p < plane; p++) out.push(value(px(p, k), k));
  else for (let p = 0; p < plane; p++) for (const k of order) out.push(value(px(p, k), k));
  return out;
}

test("fromImage defaults: float32, NCHW, RGB, pixel / 255", async () => {
  const t = await Tensor.fromImage(IMAGE);
  assert.equal(t.type, "float32");
  assert.deepEqual(t.dims, [1, 3, H, W]);
  near(Array.from(t.data), expected([0, 1, 2], "NCHW"));
});

test("fromImage tensorFormat, tensorLayout, dataType and norm", async () => {
  const formats = { RGB: [0, 1, 2], BGR: [2, 1, 0], RBG: [0, 2, 1], RGBA: [0, 1, 2, 3] };
  for (const [tensorFormat, order] of Object.entries(formats)) {
    for (const tensorLayout of ["NCHW", "NHWC"]) {
      const t = await Tensor.fromImage(IMAGE, { tensorFormat, tensorLayout });
      const c = order.length;
      assert.deepEqual(t.dims, tensorLayout === "NCHW" ? [1, c, H, W] : [1, H, W, c]);
      near(Array.from(t.data), expected(order, tensorLayout), 1e-6);
      const u = await Tensor.fromImage(IMAGE, { tensorFormat, tensorLayout, dataType: "uint8" });
      assert.equal(u.type, "uint8");
      assert.deepEqual(Array.from(u.data), expected(order, tensorLayout, (v) => v));
    }
  }
  // norm: (pixel + bias) / mean, arrays in R, G, B(, A) order whatever the tensor's order
  const mean = [58.395, 57.12, 57.375];
  const bias = [-123.675, -116.28, -103.53];
  const t = await Tensor.fromImage(IMAGE, { tensorFormat: "BGR", norm: { mean, bias } });
  near(Array.from(t.data), expected([2, 1, 0], "NCHW", (v, k) => (v + bias[k]) / mean[k]), 1e-5);
  const s = await Tensor.fromImage(IMAGE, { norm: { mean: 127.5, bias: -127.5 } });
  near(Array.from(s.data), expected([0, 1, 2], "NCHW", (v) => (v - 127.5) / 127.5), 1e-6);
  const a = await Tensor.fromImage(IMAGE, { tensorFormat: "RGBA", norm: { mean: [1, 2, 4] } });   // A: 255
  near(Array.from(a.data), expected([0, 1, 2, 3], "NCHW", (v, k) => v / [1, 2, 4, 255][k]), 1e-6);
  const q = await Tensor.fromImage(IMAGE, { dataType: "uint8", norm: { mean: 0.5, bias: 0 } });  // clamped
  assert.deepEqual(Array.from(q.data), expected([0, 1, 2], "NCHW", (v) => Math.min(255, v * 2)));
});

test("fromImage resizes bilinearly with half-pixel centers (ONNX Resize linear)", async () => {
  const gray = (values, width, height) => ({
    data: Uint8Array.from(values.flatMap((v) => [v, v, v, 255])), width, height,
  });
  // 2 x 2 -> 4 x 4: sample positions -0.25 (clamped), 0.25, 0.75, 1.25 (clamped)
  const up = await Tensor.fromImage(gray([0, 100, 200, 40], 2, 2),
                                    { resizedWidth: 4, resizedHeight: 4, dataType: "uint8" });
  assert.deepEqual(up.dims, [1, 3, 4, 4]);
  const lerp = (a, b, f) => a + (b - a) * f;
  const f = [0, 0.25, 0.75, 1];
  const want = [];
  for (const fy of f) for (const fx of f) want.push(Math.round(lerp(lerp(0, 100, fx), lerp(200, 40, fx), fy)));
  assert.deepEqual(Array.from(up.data.subarray(0, 16)), want);
  // 4 x 2 -> 2 x 1: each output pixel is the mean of a 2 x 2 block
  const down = await Tensor.fromImage(gray([0, 10, 20, 30, 40, 50, 60, 70], 4, 2), { resizedWidth: 2, resizedHeight: 1 });
  near(Array.from(down.data.subarray(0, 2)), [25 / 255, 45 / 255], 1e-6);
  // one side alone keeps the other
  const wide = await Tensor.fromImage(IMAGE, { resizedWidth: 6 });
  assert.deepEqual(wide.dims, [1, 3, H, 6]);
});

test("toImageData inverts fromImage for every format and layout", async () => {
  for (const tensorFormat of ["RGB", "BGR", "RBG", "RGBA"]) {
    for (const tensorLayout of ["NCHW", "NHWC"]) {
      for (const dataType of ["float32", "uint8"]) {
        const norm = dataType === "float32" ? { mean: [2, 3, 4, 5] } : undefined;
        const t = await Tensor.fromImage(IMAGE, { tensorFormat, tensorLayout, dataType, norm });
        const image = t.toImageData({ format: tensorFormat, tensorLayout, norm });
        assert.equal(image.width, W);
        assert.equal(image.height, H);
        assert.ok(image.data instanceof Uint8ClampedArray);
        const want = Array.from(RGBA, (v, i) => (tensorFormat !== "RGBA" && i % 4 === 3 ? 255 : v));
        assert.deepEqual(Array.from(image.data), want, `${tensorFormat} ${tensorLayout} ${dataType}`);
      }
    }
  }
  // with a bias, as onnxruntime-web: pixel = (value - bias) * mean (fromImage's inverse only
  // when bias is 0)
  const b = new Tensor("float32", [0.5, 0.25, 1], [1, 3, 1, 1]);
  assert.deepEqual(Array.from(b.toImageData({ norm: { mean: 100, bias: [0.5, -0.25, 1] } }).data), [0, 50, 0, 255]);
  // format defaults by the channel count; values out of range clamp
  const t = new Tensor("float32", [-1, 0.5, 2, 0, 0, 0, 1, 1, 1, 0.25, 0.25, 0.25], [1, 4, 1, 3]);
  assert.deepEqual(Array.from(t.toImageData().data), [0, 0, 255, 64, 128, 0, 255, 64, 255, 0, 255, 64]);
});

test("toImageData and toDataURL refuse what is not an image tensor", async () => {
  const t = await Tensor.fromImage(IMAGE);
  assert.throws(() => t.toImageData({ format: "RGBA" }), /format 'RGBA' has 4 channels, the tensor \[1,3,2,3\]/);
  assert.throws(() => new Tensor("float32", [1, 2, 3], [3]).toImageData(), /dims \[1, C, H, W\]/);
  assert.throws(() => new Tensor("float32", new Float32Array(8), [1, 2, 2, 2]).toDataURL(), /3 or 4 channels/);
  assert.throws(() => new Tensor("string", ["a", "b", "c"], [1, 3, 1, 1]).toImageData(), /tensor of numbers/);
  assert.throws(() => t.toImageData({ tensorLayout: "CHW" }), /tensorLayout must be one of NCHW, NHWC/);
});

// PNG chunks -> { IHDR, IDAT (inflated) }
function readPNG(url) {
  assert.ok(url.startsWith("data:image/png;base64,"));
  const png = Buffer.from(url.slice(url.indexOf(",") + 1), "base64");
  assert.deepEqual([...png.subarray(0, 8)], [137, 80, 78, 71, 13, 10, 26, 10]);
  const chunks = {};
  for (let at = 8; at < png.length;) {
    const n = png.readUInt32BE(at);
    const type = png.toString("latin1", at + 4, at + 8);
    chunks[type] = Buffer.concat([chunks[type] ?? Buffer.alloc(0), png.subarray(at + 8, at + 8 + n)]);
    at += 12 + n;
  }
  return { width: chunks.IHDR.readUInt32BE(0), height: chunks.IHDR.readUInt32BE(4),
           colorType: chunks.IHDR[9], pixels: inflateSync(chunks.IDAT), end: "IEND" in chunks };
}

test("toDataURL writes a PNG of the pixels toImageData gives (RGB or RGBA), with no canvas", async () => {
  for (const tensorFormat of ["RGB", "RGBA"]) {
    const t = await Tensor.fromImage(IMAGE, { tensorFormat });
    const png = readPNG(t.toDataURL());
    assert.equal(png.width, W);
    assert.equal(png.height, H);
    assert.ok(png.end);
    const c = tensorFormat.length;
    assert.equal(png.colorType, c === 4 ? 6 : 2);
    const rows = [];
    for (let y = 0; y < H; y++) {
      assert.equal(png.pixels[y * (W * c + 1)], 0);      // filter: none
      rows.push(...png.pixels.subarray(y * (W * c + 1) + 1, (y + 1) * (W * c + 1)));
    }
    const want = [];
    for (let p = 0; p < W * H; p++) for (let k = 0; k < c; k++) want.push(px(p, k));
    assert.deepEqual(rows, want);
  }
  // larger than one stored deflate block (65535 bytes)
  const big = new Tensor("uint8", new Uint8Array(3 * 200 * 150).map((_, i) => i % 251), [1, 150, 200, 3]);
  const png = readPNG(big.toDataURL({ tensorLayout: "NHWC" }));
  assert.equal(png.pixels.length, 150 * (200 * 3 + 1));
  assert.equal(png.pixels[1 + 5], 5);
});

test("fromImage under Node: DOM-only sources and bad images fail clearly", async () => {
  await assert.rejects(Tensor.fromImage("https://example.com/cat.png"),
                       /loading an image from a URL needs a browser to decode it; in Node .* ImageData-like/);
  await assert.rejects(Tensor.fromImage({ width: 4, height: 4, naturalWidth: 4, naturalHeight: 4 }),
                       /needs a canvas .* in Node pass an ImageData-like \{data, width, height\}/);
  await assert.rejects(Tensor.fromImage({ data: new Uint8Array(10), width: 2, height: 2 }),
                       /2 x 2 RGBA pixels are 16 values, the image's data has 10/);
  await assert.rejects(Tensor.fromImage({ data: new Float32Array(16), width: 2, height: 2 }),
                       /data must be RGBA bytes/);
  await assert.rejects(Tensor.fromImage(42), /unsupported image \(Number\)/);
  await assert.rejects(Tensor.fromImage(IMAGE, { tensorFormat: "BGRA" }), /tensorFormat must be one of RGB, BGR, RBG, RGBA/);
  await assert.rejects(Tensor.fromImage(IMAGE, { dataType: "float16" }), /dataType must be one of float32, uint8/);
  await assert.rejects(Tensor.fromImage(IMAGE, { norm: { mean: [1, 2] } }), /norm.mean must be a number or 3 or 4 numbers/);
  await assert.rejects(Tensor.fromImage(IMAGE, { resizedWidth: 0 }), /resizedWidth must be a positive integer/);
});
