// onnxruntime-web's Tensor surface (constructors of each type, reshape, dispose, pinned
// buffers), string tensors through a session, and run's fetches forms, under Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { InferenceSession, Tensor } from "../index.js";

// StringNormalizer (UPPER, stopword "the") -> upper; RegexFullMatch -> is_email (opset 20)
const TEXT_OPS = new URL("./text_ops.onnx", import.meta.url);
const DIGITS = new URL("../../examples/digits/digits_mlp.onnx", import.meta.url);

test("the constructors infer types as onnxruntime-web does", () => {
  const cases = [
    [new Tensor(Float32Array.from([1, 2])), "float32", Float32Array],
    [new Tensor(Int32Array.from([1, 2]), [2, 1]), "int32", Int32Array],
    [new Tensor(BigInt64Array.from([1n])), "int64", BigInt64Array],
    [new Tensor(new Uint8ClampedArray([1, 300])), "uint8", Uint8Array],
    [new Tensor([true, false]), "bool", Uint8Array],
    [new Tensor(["a", "b"]), "string", Array],
    [new Tensor("uint64", [1, 2]), "uint64", BigUint64Array],
    [new Tensor("bool", [true, false, true]), "bool", Uint8Array],
    [new Tensor("int4", Uint8Array.from([0x21, 0x03]), [3]), "int4", Uint8Array],
  ];
  for (const [t, type, Typed] of cases) {
    assert.equal(t.type, type);
    assert.equal(t.data.constructor, Typed, type);
    assert.equal(t.location, "cpu");
  }
  assert.deepEqual(Array.from(new Tensor(new Uint8ClampedArray([1, 300])).data), [1, 255]);
  const f16 = new Tensor("float16", Uint16Array.from([0x3c00]), [1]);
  assert.equal(f16.data.constructor.name, globalThis.Float16Array ? "Float16Array" : "Uint16Array");
  assert.throws(() => new Tensor([]), /cannot be inferred from an empty array/);
  assert.throws(() => new Tensor([1, 2]), /cannot be inferred from an array of number/);
  assert.throws(() => new Tensor("string", ["a", 2]), /element 1 is a number/);
  assert.throws(() => new Tensor("string", "ab"), /string tensor's data must be a string array/);
  assert.throws(() => new Tensor("int8", new Uint8ClampedArray(1)), /type 'int8' needs a Int8Array/);
  assert.throws(() => new Tensor("float32", [1], [-1]), RangeError);
  assert.throws(() => new Tensor("float32", [1], [1.5]), /dims\[0\] must be an integer/);
  assert.throws(() => new Tensor("int4", [1, 2]), /cannot be made from a number array/);
  assert.throws(() => new Tensor({ location: "gpu-buffer", type: "float32", dims: [1] }),
                /needs a GPUBuffer/);
  assert.throws(() => new Tensor({ location: "texture", type: "float32", dims: [1] }),
                /a tensor on 'texture' is not supported/);
  assert.throws(() => Tensor.fromGpuBuffer({ size: 16 }, { dataType: "string", dims: [1] }),
                /cannot hold a 'string' tensor/);
});

test("reshape, getData, dispose and pinned buffers follow onnxruntime-web", async () => {
  const t = new Tensor("float32", [1, 2, 3, 4, 5, 6], [2, 3]);
  const r = t.reshape([3, 2]);
  assert.deepEqual(r.dims, [3, 2]);
  assert.equal(r.data, t.data);
  assert.throws(() => t.reshape([4]), /hold 4 elements, data has 6/);
  assert.equal(await t.getData(), t.data);
  t.dispose();
  assert.equal(t.location, "none");
  assert.throws(() => t.data, /disposed/);
  const pinned = Tensor.fromPinnedBuffer("int32", Int32Array.from([1, 2, 3]));
  assert.equal(pinned.location, "cpu-pinned");
  assert.deepEqual(pinned.dims, [3]);
  assert.equal(pinned.reshape([3, 1]).location, "cpu-pinned");
});

test("a GPU-buffer tensor reads back once with getData, as onnxruntime-web's", async () => {
  let destroyed = 0;
  const buffer = { size: 16, destroy() { destroyed++; } };
  let downloads = 0;
  const download = async () => { downloads++; return Float32Array.from([1, 2, 3]); };
  const t = Tensor.fromGpuBuffer(buffer, { dataType: "float32", dims: [3], download,
                                           dispose: () => buffer.destroy() });
  assert.equal(t.location, "gpu-buffer");
  assert.equal(t.gpuBuffer, buffer);
  assert.equal(t.size, 3);
  assert.throws(() => t.data, /The data is not on CPU/);
  assert.deepEqual(Array.from(await t.getData(true)), [1, 2, 3]);
  assert.equal(t.location, "cpu");
  assert.equal(destroyed, 1);                       // releaseData
  assert.deepEqual(Array.from(await t.getData()), [1, 2, 3]);
  assert.equal(downloads, 1);
  assert.throws(() => t.gpuBuffer, /not stored as a WebGPU buffer/);
  const kept = Tensor.fromGpuBuffer(buffer, { dataType: "int32", dims: [2], dispose: () => buffer.destroy() });
  await assert.rejects(kept.getData(), /not created with a specified data downloader/);
  kept.dispose();
  assert.equal(kept.location, "none");
  assert.equal(destroyed, 2);
});

test("string tensors cross into the engine and come back: StringNormalizer and RegexFullMatch on wasm", async () => {
  const session = await InferenceSession.create(TEXT_OPS, { executionProviders: ["wasm"] });
  assert.deepEqual(session.inputMetadata, [{ name: "words", isTensor: true, type: "string", shape: ["n"] }]);
  assert.deepEqual(session.outputMetadata.map((m) => m.type), ["string", "bool"]);
  assert.deepEqual([...new Set(session.explain().nodes.map((n) => n.provider))], ["wasm"]);
  const words = new Tensor("string", ["The", "quick", "bob@example.com", "the", "Café", "naïve ünïcode", "x@y"], [7]);
  const { upper, is_email } = await session.run({ words });
  assert.equal(upper.type, "string");
  assert.ok(Array.isArray(upper.data));
  assert.deepEqual(upper.dims, [5]);
  // what onnxruntime gives (its CPU provider, locale C.UTF-8)
  assert.deepEqual(upper.data, ["QUICK", "BOB@EXAMPLE.COM", "CAFÉ", "NAÏVE ÜNÏCODE", "X@Y"]);
  assert.deepEqual(Array.from(is_email.data), [0, 0, 1, 0, 0, 0, 0]);
  // an onnxruntime-common-style string tensor is a feed too
  const plain = await session.run({ words: { type: "string", data: ["a.b@c.de"], dims: [1] } }, ["is_email"]);
  assert.deepEqual(Array.from(plain.is_email.data), [1]);
  await assert.rejects(session.run({ words: new Tensor("float32", [1], [1]) }),
                       /input 'words': expected tensor\(string\), got tensor\(float\)/);
  await session.release();
});

test("run's fetches: a list, an object of nulls, a pre-allocated output; argument errors as onnxruntime-web", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  const input = new Tensor("float32", new Float32Array(64), [1, 64]);
  assert.deepEqual(Object.keys(await session.run({ input }, { probabilities: null })), ["probabilities"]);
  const target = new Tensor("float32", new Float32Array(10), [1, 10]);
  const into = await session.run({ input }, { probabilities: target });
  assert.equal(into.probabilities, target);
  assert.ok(Math.abs(target.data.reduce((a, b) => a + b, 0) - 1) < 1e-5);
  await assert.rejects(session.run({ input }, { probabilities: new Tensor("float32", new Float32Array(3)) }),
                       /fetches 'probabilities': the output is float32 \[1,10\]/);
  await assert.rejects(session.run({}), /input 'input' is missing in 'feeds'/);
  await assert.rejects(session.run({ input }, []), /'fetches' cannot be an empty array/);
  await assert.rejects(session.run({ input }, ["nope"]), /'fetches' contains invalid output name: nope/);
  await assert.rejects(session.run(input), /'feeds' must be an object/);
  await assert.rejects(session.run({ input }, ["label"], 3), /'options' must be an object/);
  await session.release();
});

test("create(buffer, byteOffset, byteLength) checks its range as onnxruntime-web", async () => {
  const model = new Uint8Array(readFileSync(DIGITS));
  await assert.rejects(InferenceSession.create(model.buffer, model.length), /'byteOffset' is out of range/);
  await assert.rejects(InferenceSession.create(model.buffer, 0, model.length + 1), /'byteLength' is out of range/);
  await assert.rejects(InferenceSession.create(model.buffer, 0, {}), /'byteLength' must be a number/);
  const session = await InferenceSession.create(model.slice().buffer, { executionProviders: ["wasm"] });
  assert.deepEqual(session.inputNames, ["input"]);
  await session.release();
});
