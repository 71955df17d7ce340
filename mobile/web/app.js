// Runs the packed model on seeded random inputs of the shapes in edgerun-pack.json and prints
// the outputs; window.edgerunPack holds what ran (for tests and the console).
import { InferenceSession, Tensor, env } from "./edgerun/index.js";

env.pyodide.indexURL = new URL("./pyodide/", location.href);
const ARRAYS = { float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
                 int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
                 int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array };
const result = window.edgerunPack = { done: false, error: null };
const status = (text) => { document.getElementById("status").textContent = text; };
const print = (line) => { document.getElementById("out").textContent += line + "\n"; };

// Deterministic pseudo-random numbers in [0, 1) (mulberry32).
function random(seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomTensor({ name, dtype, shape }, next) {
  const Typed = ARRAYS[dtype];
  if (!Typed) throw new Error(`input '${name}': random ${dtype} values are not supported by this page`);
  const data = new Typed(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) {
    const u = next();
    if (dtype.startsWith("float")) data[i] = 2 * u - 1;                 // [-1, 1)
    else if (dtype === "bool") data[i] = u < 0.5 ? 1 : 0;
    else if (Typed === BigInt64Array || Typed === BigUint64Array) data[i] = BigInt(Math.floor(10 * u));
    else data[i] = Math.floor(10 * u);                                  // 0..9
  }
  return new Tensor(dtype, data, shape);
}

const plain = (t) => ({ type: t.type, dims: [...t.dims], data: Array.from(t.data, Number) });

async function main() {
  const manifest = await (await fetch("./edgerun-pack.json")).json();
  const asked = new URLSearchParams(location.search).get("providers");
  const providers = asked ? asked.split(",") : manifest.providers;
  const started = performance.now();
  const session = await InferenceSession.create(`./${manifest.model}`, {
    executionProviders: providers,
    onProgress: ({ phase, progress }) => status(`loading ${phase}… ${Math.round(progress * 100)}%`),
  });
  const createMs = performance.now() - started;
  const counts = {};
  for (const n of session.explain().nodes) counts[n.provider] = (counts[n.provider] ?? 0) + 1;
  print(`placement: ${Object.entries(counts).map(([p, k]) => `${p} ${k} nodes`).join(", ")}`);

  const next = random(42);
  const feeds = Object.fromEntries(manifest.inputs.map((spec) => [spec.name, randomTensor(spec, next)]));
  const runStarted = performance.now();
  const outputs = await session.run(feeds);
  const runMs = performance.now() - runStarted;
  for (const [name, t] of Object.entries(outputs)) {
    const values = Array.from(t.data.subarray(0, 10), (v) => (typeof v === "bigint" ? v : +v.toPrecision(6)));
    print(`${name}: ${t.type} [${t.dims.join(", ")}] ${values.join(", ")}${t.size > 10 ? ", …" : ""}`);
  }
  print(`session ${createMs.toFixed(0)} ms (with Pyodide), run ${runMs.toFixed(1)} ms`);
  Object.assign(result, {
    providers, placement: counts, createMs, runMs,
    inputs: Object.fromEntries(Object.entries(feeds).map(([k, t]) => [k, plain(t)])),
    outputs: Object.fromEntries(Object.entries(outputs).map(([k, t]) => [k, plain(t)])),
  });
  status(`ran ${manifest.model} on ${providers.join(", ")}`);
}

main().catch((e) => {
  result.error = String(e.message ?? e);
  status(`error: ${result.error}`);
  document.getElementById("status").className = "error";
}).finally(() => { result.done = true; });
