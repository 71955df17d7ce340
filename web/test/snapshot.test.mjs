// The start-up snapshot (scripts/make_snapshot.mjs, restored by web/runtime.js): a thread's
// Python starts from it when it matches the Pyodide and the wheel, and otherwise starts from
// scratch, with the same answers either way. Each case is its own Node process, as a
// process starts Python once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const DIST = new URL("../dist/", import.meta.url);
const SHIPPED = JSON.parse(readFileSync(new URL("edgerun-snapshot.json", DIST), "utf8"));
const HOLDOUT = JSON.parse(readFileSync(new URL("./digits_holdout_24.json", import.meta.url), "utf8"));

// In a new Node process (`nodeFlags` for it): set env.snapshotURL (undefined: the shipped
// one), start, run the digits model on wasm; returns { start, labels, canWait } (canWait:
// whether Python entered through callPromising can wait on a promise, as the WebGPU
// provider does).
function startAndRun(snapshotURL, nodeFlags = []) {
  const script = `
    import { env, InferenceSession, Tensor } from ${JSON.stringify(new URL("../index.js", import.meta.url).href)};
    import { getRuntime } from ${JSON.stringify(new URL("../runtime.js", import.meta.url).href)};
    ${snapshotURL === undefined ? "" : `env.snapshotURL = ${JSON.stringify(snapshotURL)};`}
    const holdout = ${JSON.stringify({ X: HOLDOUT.X, dims: HOLDOUT.dims })};
    const { start } = await getRuntime();
    const session = await InferenceSession.create(
      ${JSON.stringify(new URL("../../examples/digits/digits_mlp.onnx", import.meta.url).href)},
      { executionProviders: ["wasm"] });
    const { label } = await session.run({ input: new Tensor("float32", Float32Array.from(holdout.X), holdout.dims) });
    const wait = (await getRuntime()).pyodide.runPython(
      "from pyodide.ffi import can_run_sync, run_sync; from js import Promise; " +
      "(lambda: can_run_sync() and run_sync(Promise.resolve(7)) == 7)");
    const canWait = typeof WebAssembly.Suspending === "function" || "Suspender" in WebAssembly
      ? await wait.callPromising() : false;
    console.log(JSON.stringify({ start, labels: Array.from(label.data, Number), canWait }));`;
  const out = execFileSync(process.execPath, [...nodeFlags, "--input-type=module", "-e", script],
                           { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  return JSON.parse(out.trim().split("\n").pop());
}

function snapshotJson(changes) {
  const folder = mkdtempSync(join(tmpdir(), "edgerun-snapshot-"));
  const path = join(folder, "edgerun-snapshot.json");
  // data: the shipped file, named by absolute URL so this folder needs no copy
  const variants = Object.fromEntries(Object.entries(SHIPPED.variants).map(
    ([name, v]) => [name, { ...v, data: new URL(v.data, DIST).href, ...changes.variant }]));
  writeFileSync(path, JSON.stringify({ ...SHIPPED, variants, ...changes, variant: undefined }));
  return path;
}

test("the shipped snapshot matches the pinned Pyodide and the built wheel", () => {
  const pinned = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
  assert.equal(SHIPPED.pyodide, pinned.dependencies.pyodide);
  // jspi is made in Chromium: CI's build always has it (scripts/build_web.py)
  for (const variant of process.env.CI ? ["jspi", "plain"] : Object.keys(SHIPPED.variants)) {
    const { data, bytes } = SHIPPED.variants[variant];
    assert.equal(data, `edgerun-snapshot-${variant}.bin.gz`);
    assert.ok(bytes > 16e6, `a snapshot of ${bytes} bytes is too small to hold Python`);
  }
});

test("Python starts from the shipped snapshot, and the model gives the CPU provider's labels", () => {
  const { start, labels, canWait } = startAndRun(undefined);
  assert.deepEqual(start, { snapshot: true, why: "" });
  assert.deepEqual(labels, HOLDOUT.expected_label);
  assert.equal(canWait, false);            // Node 20 without its flag has no JSPI
});

test("with the old JSPI API no snapshot is restored, and Python can wait on promises", () => {
  // (the jspi variant is Chromium's, tested by the browser tests: tests/test_web_demos.py)
  const { start, labels, canWait } = startAndRun(undefined, ["--experimental-wasm-stack-switching"]);
  assert.equal(start.snapshot, false);
  assert.match(start.why, /old JSPI API/);
  assert.deepEqual(labels, HOLDOUT.expected_label);
  assert.equal(canWait, true);
});

test("a snapshot of another wheel or Pyodide is not used: Python starts from scratch, same labels", () => {
  for (const [changes, why] of [[{ wheel_sha256: "0".repeat(64) }, /another edgerun wheel/],
                                [{ pyodide: "0.0.1" }, /made with Pyodide 0\.0\.1, this is /]]) {
    const { start, labels } = startAndRun(snapshotJson(changes));
    assert.equal(start.snapshot, false);
    assert.match(start.why, why);
    assert.deepEqual(labels, HOLDOUT.expected_label);
  }
});

test("a snapshot that does not restore falls back to a fresh start; null turns it off", () => {
  const broken = startAndRun(snapshotJson({ variant: { bytes: SHIPPED.variants.plain.bytes + 1 } }));
  assert.equal(broken.start.snapshot, false);
  assert.match(broken.start.why, /did not restore \(the snapshot inflated to \d+ bytes, not \d+\)/);
  assert.deepEqual(broken.labels, HOLDOUT.expected_label);
  const off = startAndRun(null);
  assert.deepEqual(off.start, { snapshot: false, why: "env.snapshotURL is null" });
  assert.deepEqual(off.labels, HOLDOUT.expected_label);
});

test("a session created after a restore imports no module the snapshot lacks (none is compiled in the page)", () => {
  const script = `
    import { InferenceSession } from ${JSON.stringify(new URL("../index.js", import.meta.url).href)};
    import { getRuntime } from ${JSON.stringify(new URL("../runtime.js", import.meta.url).href)};
    const { pyodide, start } = await getRuntime();
    const before = pyodide.runPython("import sys; set(sys.modules)");
    await InferenceSession.create(
      ${JSON.stringify(new URL("../../examples/digits/digits_mlp.onnx", import.meta.url).href)},
      { executionProviders: ["wasm"] });
    pyodide.globals.set("before", before);
    const added = pyodide.runPython("import sys; sorted(set(sys.modules) - before)").toJs();
    console.log(JSON.stringify({ start, added }));`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script],
                           { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const { start, added } = JSON.parse(out.trim().split("\n").pop());
  assert.deepEqual(start, { snapshot: true, why: "" });
  // the CPU provider (numpy's) once came in here, with ctypes and its native-kernel modules
  assert.deepEqual(added, []);
});
