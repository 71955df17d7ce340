// The JavaScript API under Node: Tensor, InferenceSession.create/run, errors with Python's message.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { InferenceSession, Tensor } from "../index.js";

const DIGITS = new URL("../../examples/digits/digits_mlp.onnx", import.meta.url);

test("Tensor checks dims against data", () => {
  const t = new Tensor("float32", [1, 2, 3, 4], [2, 2]);
  assert.equal(t.size, 4);
  assert.deepEqual(t.dims, [2, 2]);
  assert.throws(() => new Tensor("float32", [1, 2, 3], [2, 2]), /dims \[2,2\] hold 4 elements, data has 3/);
  assert.throws(() => new Tensor("complex", [1]), /unsupported type 'complex'/);
  assert.equal(new Tensor("int64", [1, 2]).data.constructor, BigInt64Array);
});

test("a corrupt model is a clear error carrying Python's message", async () => {
  const bytes = new Uint8Array(readFileSync(DIGITS)).slice(0, 300);
  await assert.rejects(InferenceSession.create(bytes), /InvalidProtobuf: .*not a valid ONNX model/);
});

test("without numpy in Pyodide, a model no provider claims names the missing provider", async () => {
  await assert.rejects(InferenceSession.create(DIGITS, { executionProviders: ["cpu"] }),
    /no execution provider can run here \(cpu: numpy is not installed\)/);
});

// 24 held-out rows of the digits set (web/test/digits_holdout_24.json: pixels, true labels,
// and the labels and probabilities edgerun's CPU provider gives them).
const HOLDOUT = JSON.parse(readFileSync(new URL("./digits_holdout_24.json", import.meta.url), "utf8"));

test("the digits model runs on wasm inside Pyodide: names, accuracy, CPU parity, release", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  assert.deepEqual(session.inputNames, ["input"]);
  assert.deepEqual(session.outputNames, ["label", "probabilities"]);
  const placed = new Set(session.explain().nodes.map((n) => n.provider));
  assert.deepEqual([...placed], ["wasm"]);

  const input = new Tensor("float32", Float32Array.from(HOLDOUT.X), HOLDOUT.dims);
  const { label, probabilities } = await session.run({ input });
  assert.equal(label.type, "int64");
  assert.deepEqual(label.dims, [24]);
  assert.deepEqual(probabilities.dims, [24, 10]);
  const labels = Array.from(label.data, Number);
  assert.deepEqual(labels, HOLDOUT.expected_label);
  const correct = labels.filter((v, i) => v === HOLDOUT.y[i]).length;
  assert.ok(correct / labels.length >= 0.9, `accuracy ${correct}/${labels.length} below 0.9`);
  probabilities.data.forEach((p, i) => {     // rtol 1e-3, atol 1e-5 against the CPU provider
    const e = HOLDOUT.expected_probabilities[i];
    assert.ok(Math.abs(p - e) <= 1e-5 + 1e-3 * Math.abs(e), `probability ${i}: ${p} vs ${e}`);
  });

  const only = await session.run({ input }, ["probabilities"]);
  assert.deepEqual(Object.keys(only), ["probabilities"]);

  await session.release();
  await assert.rejects(session.run({ input }), /this session was released/);
});

test("a feed of the wrong element type fails with the Python message naming input and types", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  const wrong = new Tensor("int32", new Int32Array(64), [1, 64]);
  await assert.rejects(session.run({ input: wrong }),
    /InvalidArgument: input 'input': expected tensor\(float\), got tensor\(int32\)/);
  const shape = new Tensor("float32", new Float32Array(63), [1, 63]);
  await assert.rejects(session.run({ input: shape }), /input 'input': dimension 1 must be 64/);
  await session.release();
});

test("inputMetadata and outputMetadata follow onnxruntime-web (symbolic dims as null)", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  assert.deepEqual(session.inputMetadata, [{ name: "input", isTensor: true, type: "float32", shape: [null, 64] }]);
  assert.deepEqual(session.outputMetadata.map((m) => [m.name, m.type, m.shape]),
                   [["label", "int64", [null]], ["probabilities", "float32", [null, 10]]]);
  assert.deepEqual(session.explain().providers, ["WasmExecutionProvider"]);
  await session.release();
});

test("worker: true outside a browser is a clear error", async () => {
  await assert.rejects(InferenceSession.create(DIGITS, { worker: true }),
    /`worker: true` needs a browser's Web Worker/);
});

test("onnxruntime-web's defaults and feeds: no providers named, any {type, data, dims} tensor", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: [] });
  assert.deepEqual([...new Set(session.explain().nodes.map((n) => n.provider))], ["wasm"]);
  const plain = { type: "float32", data: Float32Array.from(HOLDOUT.X.slice(0, 64)), dims: [1, 64] };
  const { label, probabilities } = await session.run({ input: plain });
  assert.equal(Number(label.data[0]), HOLDOUT.expected_label[0]);
  assert.equal(probabilities.location, "cpu");
  assert.deepEqual(Array.from(await probabilities.getData()), Array.from(probabilities.data));
  await assert.rejects(session.run({ input: { dims: [1, 64] } }),
    /feed 'input' must be a Tensor \(an object with type, data and dims\)/);
  await assert.rejects(session.run({ input: { type: "float32", data: new Float32Array(3), dims: [1, 64] } }),
    /feed 'input': Tensor: dims \[1,64\] hold 64 elements, data has 3/);
  await session.release();
});

test("run takes an AbortSignal: aborted before the run, it rejects with an AbortError", async () => {
  const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  const input = new Tensor("float32", Float32Array.from(HOLDOUT.X.slice(0, 64)), [1, 64]);
  const controller = new AbortController();
  const { label } = await session.run({ input }, { signal: controller.signal });   // options second
  assert.equal(Number(label.data[0]), HOLDOUT.expected_label[0]);
  controller.abort();
  await assert.rejects(session.run({ input }, undefined, { signal: controller.signal }),
    (e) => e.name === "AbortError");
  await session.release();
});

test("create(buffer, byteOffset, byteLength, options) reads a model inside a larger buffer", async () => {
  const model = new Uint8Array(readFileSync(DIGITS));
  const big = new Uint8Array(model.length + 100);
  big.set(model, 40);
  const session = await InferenceSession.create(big.buffer, 40, model.length,
                                                { executionProviders: ["wasm"], logSeverityLevel: 3 });
  assert.deepEqual(session.inputNames, ["input"]);
  await session.release();
  await assert.rejects(InferenceSession.create(big.buffer, 0, 10), /InvalidProtobuf/);
});

// A Python custom operator in the page's Pyodide (no numpy there: HostTensors in and out),
// run by the wasm provider between its own kernels; a string output included.
export const AFFINE_LABEL = `
from edgerun.custom_ops import PyCustomOpDef, onnx_op
from edgerun.ir.host_tensor import HostTensor

@onnx_op(op_type="AffineLabel", inputs=[PyCustomOpDef.dt_float],
         outputs=[PyCustomOpDef.dt_float, PyCustomOpDef.dt_string], attrs={"alpha": PyCustomOpDef.dt_float})
def affine_label(x, alpha=1.0):
    values = x.values()
    return (HostTensor.from_values(1, x.shape, [alpha * v + 1 for v in values]),
            HostTensor(8, x.shape, ["zero" if v == 0 else "positive" for v in values]))
`;

test("registerCustomOps: a Python custom operator runs on wasm in Pyodide", async () => {
  const { registerCustomOps } = await import("../index.js");
  const model = new URL("./custom_op.onnx", import.meta.url);
  await assert.rejects(InferenceSession.create(model, { executionProviders: ["wasm"] }),
    /no provider implements \(wasm: no wasm kernel for ai.onnx.contrib::AffineLabel\)/);
  assert.throws(() => registerCustomOps(42), /'source' must be Python source text/);
  registerCustomOps("raise ValueError('broken on purpose')");
  await assert.rejects(InferenceSession.create(model, { executionProviders: ["wasm"] }),
    /registerCustomOps: source 1 failed: ValueError: broken on purpose/);
  registerCustomOps(AFFINE_LABEL);
  const session = await InferenceSession.create(model, { executionProviders: ["wasm"] });
  assert.deepEqual([...new Set(session.explain().nodes.map((n) => n.provider))], ["wasm"]);
  for (const shift of [0, 1]) {          // the second run goes through the recorded program's path
    const { y, label } = await session.run({ x: new Tensor("float32", [-1, 0, 2 + shift], [3]) });
    assert.deepEqual(Array.from(y.data), [1, 1, 5 + 2 * shift]);
    assert.deepEqual(label.data, ["zero", "zero", "positive"]);
  }
  await session.release();
});
