// Sessions kept for the next visit (web/kept.js) under Node, with an in-memory Cache Storage
// standing in for the browser's (tests/test_browser.py checks the real one in Chromium).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { env, InferenceSession, Tensor } from "../index.js";

const DIGITS = new URL("../../examples/digits/digits_mlp.onnx", import.meta.url);
const HOLDOUT = JSON.parse(readFileSync(new URL("./digits_holdout_24.json", import.meta.url), "utf8"));
const ROW = HOLDOUT.X.length / HOLDOUT.dims[0];

// Cache Storage's calls kept.js makes (open, match, put, keys, delete), over a Map.
class MemoryCache {
  entries = new Map();
  async match(request) {
    const bytes = this.entries.get(url(request));
    return bytes && new Response(bytes);
  }
  async put(request, response) {
    this.entries.set(url(request), new Uint8Array(await response.arrayBuffer()));
  }
  async keys() {
    return [...this.entries.keys()].map((u) => new Request(u));
  }
  async delete(request) {
    return this.entries.delete(url(request));
  }
}
const url = (request) => (typeof request === "string" ? request : request.url);
const storage = new Map();
globalThis.caches = { open: async (name) => storage.get(name) ?? storage.set(name, new MemoryCache()).get(name) };
const kept = () => storage.get("edgerun-sessions")?.entries ?? new Map();

function rows(n) {
  return new Tensor("float32", Float32Array.from(HOLDOUT.X.slice(0, n * ROW)), [n, HOLDOUT.dims[1]]);
}

async function keptAfter(session, feeds) {
  const before = new Map(kept());
  const outputs = await session.run(feeds);
  for (let i = 0; i < 100 && [...kept()].every(([k, v]) => before.get(k) === v); i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));        // kept after the run
  }
  return outputs;
}

const restoredCount = () => performance.getEntriesByName("edgerun:session-restored").length;
const createdCount = () => performance.getEntriesByName("edgerun:session-created").length;

function assertSameOutputs(got, expected) {
  assert.deepEqual(Object.keys(got), Object.keys(expected));
  for (const name of Object.keys(expected)) {
    assert.equal(got[name].type, expected[name].type);
    assert.deepEqual(got[name].dims, expected[name].dims);
    assert.deepEqual(Array.from(got[name].data), Array.from(expected[name].data), name);  // bit for bit
  }
}

test("a session wholly on wasm is kept after its first run; creating it again restores it and replays without Python", async () => {
  storage.clear();
  const first = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  const expected = await keptAfter(first, { input: rows(24) });
  assert.equal(kept().size, 1, "the session was not kept");
  assert.deepEqual(Array.from(expected.label.data, Number), HOLDOUT.expected_label);

  const before = restoredCount();
  const created = createdCount();
  const second = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  assert.equal(restoredCount(), before + 1, "the second session was not restored");
  assert.deepEqual(second.inputNames, first.inputNames);
  assert.deepEqual(second.outputNames, first.outputNames);
  assert.deepEqual(second.inputMetadata, first.inputMetadata);
  assert.deepEqual(second.explain(), first.explain());
  assertSameOutputs(await second.run({ input: rows(24) }), expected);
  assertSameOutputs(await second.run({ input: rows(24) }, ["probabilities"]),
                    { probabilities: expected.probabilities });
  assert.equal(createdCount(), created, "a run the kept ticket matches created a Python session");

  // a batch no kept ticket matches: Python creates the session then, and runs it
  const three = await second.run({ input: rows(3) });
  assertSameOutputs(three, await first.run({ input: rows(3) }));
  assert.equal(createdCount(), created + 1);
  assertSameOutputs(await second.run({ input: rows(24) }), expected);      // still replayed
  assertSameOutputs(await second.run({ input: rows(3) }), three);
  assert.equal(createdCount(), created + 1);
  await first.release();
  await second.release();
  await assert.rejects(second.run({ input: rows(24) }), /this session was released/);
});

test("a kept session is used only for the same model bytes and options", async () => {
  storage.clear();
  const bytes = new Uint8Array(readFileSync(DIGITS));
  const first = await InferenceSession.create(bytes, { executionProviders: ["wasm"] });
  await keptAfter(first, { input: rows(24) });
  assert.equal(kept().size, 1);
  const before = restoredCount();
  const other = bytes.slice();
  other[other.length - 1] ^= 0;          // the same bytes in another buffer: restored
  const same = await InferenceSession.create(other, { executionProviders: ["wasm"] });
  assert.equal(restoredCount(), before + 1);
  const unoptimized = await InferenceSession.create(bytes, { executionProviders: ["wasm"],
                                                            graphOptimizationLevel: "disabled" });
  assert.equal(restoredCount(), before + 1, "another optimization level restored the kept session");
  for (const s of [first, same, unoptimized]) await s.release();
});

test("an entry made from another model's bytes, or a damaged one, is dropped and the session created", async () => {
  storage.clear();
  const first = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  const expected = await keptAfter(first, { input: rows(24) });
  const [[key, entry]] = kept();
  const header = 8 + new DataView(entry.buffer).getUint32(4, true);
  const text = new TextDecoder().decode(entry.subarray(8, header));
  const model = JSON.parse(text).model;
  const before = restoredCount();

  // the header names another model (as when the file behind the URL changed)
  const forged = new Uint8Array(entry);
  forged.set(new TextEncoder().encode(text.replace(model, "0".repeat(model.length))), 8);
  kept().set(key, forged);
  const again = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
  assert.equal(restoredCount(), before, "an entry of other model bytes was restored");
  assert.equal(kept().has(key), false, "the stale entry was not dropped");
  assertSameOutputs(await again.run({ input: rows(24) }), expected);

  // a truncated entry
  kept().set(key, entry.subarray(0, header + 100));
  const warnings = [];
  const warn = console.warn;
  console.warn = (message) => warnings.push(message);
  try {
    const damaged = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
    assertSameOutputs(await damaged.run({ input: rows(24) }), expected);
    await damaged.release();
  } finally {
    console.warn = warn;
  }
  assert.equal(restoredCount(), before);
  assert.match(warnings.join("\n"), /the kept session could not be restored \(.*\); creating it/);
  for (const s of [first, again]) await s.release();
});

test("env.keepSessions = false keeps nothing", async () => {
  storage.clear();
  env.keepSessions = false;
  try {
    const session = await InferenceSession.create(DIGITS, { executionProviders: ["wasm"] });
    await session.run({ input: rows(24) });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(kept().size, 0);
    await session.release();
  } finally {
    env.keepSessions = true;
  }
});
