// Runs models through a JavaScript inference API under Node and records outputs and latency.
//
//   node bench/web/run_cases.mjs CASES.json OUT_DIR [--engine edgerun|ort] [--repeat N]
//
// CASES.json: [{ name, model, feeds: [{ name, type, dims, file }] }] with each feed's raw
// little-endian bytes in `file` (onnxruntime-web's type names: float32, int64, ...).
// Writes OUT_DIR/results.json: [{ name, engine, create_ms, first_ms, run_ms (median of the
// repeats), runs, outputs: [{ name, type, dims, file }] } | { name, engine, error }] and each
// output's bytes to OUT_DIR/<case>.<i>.out: those of the LAST run, so a later run that
// differs from the first (edgerun replays recorded programs) is what gets checked.
// After the first run and before the timed repeats, each engine runs untimed for
// --warmup-ms (default 500): V8 compiles WebAssembly with a baseline compiler first and
// optimizes hot functions later, for both engines alike.
//
// engine "edgerun": edgerun's API (web/index.js: Pyodide, executionProviders ["wasm"]).
// engine "ort": onnxruntime-web's wasm backend with one thread (installed by
// `npm install --prefix bench/web`; it is not a dependency of the edgerun package).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [casesPath, outDir, ...flags] = process.argv.slice(2);
const option = (name, fallback) => {
  const i = flags.indexOf(name);
  return i >= 0 ? flags[i + 1] : fallback;
};
const engine = option("--engine", "edgerun");
const repeat = Number(option("--repeat", "1"));
const budgetMs = Number(option("--budget-ms", "3000"));   // per case, after the first run
const warmupMs = Number(option("--warmup-ms", "500"));

async function loadApi() {
  if (engine === "edgerun") return import("../../web/index.js");
  const ort = await import("onnxruntime-web");
  ort.env.wasm.numThreads = 1;
  ort.env.logLevel = "error";
  return ort;
}

const TYPED = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
};

function readFeed(api, f) {
  const bytes = readFileSync(f.file);
  const Typed = TYPED[f.type];
  const copy = new Uint8Array(bytes);        // aligned memory of its own
  return new api.Tensor(f.type, new Typed(copy.buffer, 0, copy.byteLength / Typed.BYTES_PER_ELEMENT), f.dims);
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

const api = await loadApi();
const cases = JSON.parse(readFileSync(casesPath, "utf8"));
mkdirSync(outDir, { recursive: true });
const results = [];
for (const c of cases) {
  try {
    const feeds = Object.fromEntries(c.feeds.map((f) => [f.name, readFeed(api, f)]));
    let t = performance.now();
    const options = engine === "ort" ? { executionProviders: ["wasm"], logSeverityLevel: 3 }
      : { executionProviders: ["wasm"] };
    const session = await api.InferenceSession.create(new Uint8Array(readFileSync(c.model)), options);
    const createMs = performance.now() - t;
    t = performance.now();
    let out = await session.run(feeds);
    const firstMs = performance.now() - t;
    const warm = performance.now();
    while (repeat > 1 && performance.now() - warm < warmupMs) out = await session.run(feeds);
    const times = [];
    const started = performance.now();
    while (times.length < repeat - 1 && (times.length < 2 || performance.now() - started < budgetMs)) {
      t = performance.now();
      out = await session.run(feeds);
      times.push(performance.now() - t);
    }
    const outputs = session.outputNames.map((name, i) => {
      const tensor = out[name];
      const file = join(outDir, `${c.name}.${i}.out`);
      const data = tensor.data;
      writeFileSync(file, new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      return { name, type: tensor.type, dims: [...tensor.dims], file };
    });
    await session.release();
    results.push({ name: c.name, engine, create_ms: createMs, first_ms: firstMs,
      run_ms: times.length ? median(times) : firstMs, runs: times.length + 1, outputs });
  } catch (e) {
    results.push({ name: c.name, engine, error: String(e?.message ?? e) });
  }
  console.log(JSON.stringify({ ...results[results.length - 1], outputs: undefined }));
}
writeFileSync(join(outDir, "results.json"), JSON.stringify(results, null, 1));
