// The playground: any .onnx file, the providers you pick, random or .npy inputs; shows
// explain()'s placement and run timings. State for tests and the console: window.playground.
import { InferenceSession, Tensor, env } from "../../web/index.js";

env.pyodide.indexURL = new URL("../../node_modules/pyodide/", location.href);

const $ = (id) => document.getElementById(id);
const state = window.playground = { busy: false, loaded: 0, runs: 0, info: null, inputs: null,
                                    outputs: null, timings: null, error: null };
let session = null;

function status(text, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const cell of cells) {
    const td = document.createElement("td");
    if (cell instanceof Node) td.append(cell); else td.textContent = cell;
    tr.append(td);
  }
  return tr;
}

const fmtDims = (dims) => `[${dims.map((d) => d ?? "?").join(", ")}]`;

// ---- loading a model -----------------------------------------------------------------------
async function load() {
  const file = $("model").files[0];
  if (!file || state.busy) return;
  state.busy = true;
  state.error = null;
  $("load").disabled = true;
  const providers = ["webgpu", "wasm", "cpu"].filter((p) => $(`p-${p}`).checked);
  try {
    await session?.release();
    session = null;
    status(`loading ${file.name}…`);
    const started = performance.now();
    session = await InferenceSession.create(file, {
      executionProviders: providers, worker: $("worker").checked,
      onProgress: ({ phase, progress }) => status(`loading ${phase}… ${Math.round(progress * 100)}%`),
    });
    const createMs = performance.now() - started;
    state.info = { inputs: session.inputMetadata, outputs: session.outputMetadata,
                   explain: session.explain(), createMs, providers, worker: $("worker").checked };
    showInputs(session.inputMetadata);
    showPlacement(state.info.explain);
    $("timings").textContent = `session created in ${createMs.toFixed(0)} ms (the first one includes loading Pyodide)`;
    $("outputs").tBodies[0].replaceChildren();
    $("session").hidden = false;
    status(`${file.name}: ${session.inputNames.length} inputs, ${session.outputNames.length} outputs` +
           `${state.info.worker ? " (in a Web Worker)" : ""}`);
    state.loaded++;
  } catch (e) {
    fail(e);
  } finally {
    state.busy = false;
    $("load").disabled = false;
  }
}

function fail(e) {
  state.error = String(e.message ?? e);
  status(state.error, true);
}

function showInputs(metadata) {
  $("inputs").tBodies[0].replaceChildren(...metadata.map((m) => {
    const dims = document.createElement("input");
    dims.id = `dims-${m.name}`;
    dims.value = m.shape.map((d) => (typeof d === "number" && d > 0 ? d : 1)).join(",");
    dims.size = 16;
    const npy = document.createElement("input");
    npy.type = "file";
    npy.accept = ".npy";
    npy.id = `npy-${m.name}`;
    return row([m.name, m.type, fmtDims(m.shape), dims, npy]);
  }));
}

function showPlacement(explain) {
  const counts = {};
  for (const n of explain.nodes) counts[n.provider] = (counts[n.provider] ?? 0) + 1;
  $("placement-summary").textContent = Object.entries(counts).map(([p, k]) => `${p}: ${k} nodes`)
    .join(", ") + `; ${explain.copies_per_run} device/host copies per run`;
  $("placement").tBodies[0].replaceChildren(...explain.nodes.map((n) =>
    row([n.node, `${n.domain === "ai.onnx" ? "" : n.domain + "::"}${n.op_type}`, n.provider,
         n.refused_by.join("; ")])));
}

// ---- inputs --------------------------------------------------------------------------------
const NPY_TYPES = { f4: "float32", f8: "float64", f2: "float16", i1: "int8", u1: "uint8",
                    i2: "int16", u2: "uint16", i4: "int32", u4: "uint32", i8: "int64",
                    u8: "uint64", b1: "bool" };
const ARRAYS = { float32: Float32Array, float64: Float64Array, float16: Uint16Array,
                 int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array,
                 int32: Int32Array, uint32: Uint32Array, int64: BigInt64Array,
                 uint64: BigUint64Array, bool: Uint8Array };

// A .npy file (format 1.0-3.0, little-endian, C order) as a Tensor.
export function parseNpy(buffer, what) {
  const bytes = new Uint8Array(buffer);
  const magic = String.fromCharCode(...bytes.subarray(1, 6));
  if (bytes[0] !== 0x93 || magic !== "NUMPY") throw new Error(`${what}: not a .npy file`);
  const view = new DataView(buffer);
  const [headerLen, start] = bytes[6] === 1 ? [view.getUint16(8, true), 10] : [view.getUint32(8, true), 12];
  const header = new TextDecoder().decode(bytes.subarray(start, start + headerLen));
  const descr = /'descr':\s*'([<>|=]?)(\w+)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || !shape) throw new Error(`${what}: cannot read the .npy header ${header.trim()}`);
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${what}: Fortran-ordered .npy files are not supported; save with np.ascontiguousarray`);
  if (descr[1] === ">") throw new Error(`${what}: big-endian .npy files are not supported`);
  const type = NPY_TYPES[descr[2]];
  if (!type) throw new Error(`${what}: .npy dtype '${descr[2]}' is not a tensor type edgerun's JavaScript API takes`);
  const dims = shape[1].split(",").map((d) => d.trim()).filter(Boolean).map(Number);
  const data = bytes.slice(start + headerLen);          // own, aligned copy
  const Typed = ARRAYS[type];
  return new Tensor(type, new Typed(data.buffer, 0, data.byteLength / Typed.BYTES_PER_ELEMENT), dims);
}

// Deterministic pseudo-random values (mulberry32), so runs can be repeated.
function random(seed) {
  return () => {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomTensor(m, dims, next) {
  const size = dims.reduce((a, b) => a * b, 1);
  const Typed = ARRAYS[m.type];
  if (!Typed || m.type === "float16") throw new Error(`input '${m.name}': random ${m.type} values are not supported; give a .npy file`);
  const data = new Typed(size);
  for (let i = 0; i < size; i++) {
    if (m.type.startsWith("float")) data[i] = 2 * next() - 1;                  // [-1, 1)
    else if (m.type === "bool") data[i] = next() < 0.5 ? 1 : 0;
    else if (m.type.endsWith("64")) data[i] = BigInt(Math.floor(10 * next()));  // 0..9
    else data[i] = Math.floor(10 * next());
  }
  return new Tensor(m.type, data, dims);
}

async function feeds() {
  const next = random(1234);
  const result = {};
  for (const m of session.inputMetadata) {
    const file = $(`npy-${m.name}`).files[0];
    if (file) {
      result[m.name] = parseNpy(await file.arrayBuffer(), `input '${m.name}' (${file.name})`);
      continue;
    }
    const dims = $(`dims-${m.name}`).value.split(",").map((d) => Number(d.trim()));
    if (dims.some((d) => !Number.isInteger(d) || d < 0)) {
      throw new Error(`input '${m.name}': dims must be comma-separated non-negative integers, got '${$(`dims-${m.name}`).value}'`);
    }
    result[m.name] = randomTensor(m, dims, next);
  }
  return result;
}

// ---- running -------------------------------------------------------------------------------
async function run() {
  if (!session || state.busy) return;
  state.busy = true;
  state.error = null;
  $("run").disabled = true;
  try {
    const inputs = await feeds();
    const repeat = Math.max(1, Number($("repeat").value) || 1);
    const times = [];
    let outputs;
    for (let i = 0; i < repeat; i++) {
      status(`run ${i + 1} of ${repeat}…`);
      const started = performance.now();
      outputs = await session.run(inputs);
      times.push(performance.now() - started);
    }
    const rest = times.slice(1).sort((a, b) => a - b);
    const median = rest.length ? rest[rest.length >> 1] : times[0];
    state.timings = { runs: times, first: times[0], median };
    $("timings").textContent = `${state.info.createMs.toFixed(0)} ms to create the session; ` +
      `first run ${times[0].toFixed(1)} ms, median of the next ${rest.length}: ${median.toFixed(1)} ms`;
    const plain = (t) => ({ type: t.type, dims: [...t.dims], data: Array.from(t.data, Number) });
    state.inputs = Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, plain(t)]));
    state.outputs = Object.fromEntries(Object.entries(outputs).map(([k, t]) => [k, plain(t)]));
    $("outputs").tBodies[0].replaceChildren(...Object.entries(outputs).map(([name, t]) => {
      const values = Array.from(t.data.subarray(0, 8), (v) => (typeof v === "bigint" ? v : +v.toPrecision(6)));
      const td = document.createElement("span");
      td.textContent = values.join(", ") + (t.size > 8 ? ", …" : "");
      return row([name, t.type, fmtDims(t.dims), td]);
    }));
    $("outputs").querySelectorAll("tbody td:last-child").forEach((td) => td.classList.add("values"));
    status(`ran ${repeat} times`);
    state.runs++;
  } catch (e) {
    fail(e);
  } finally {
    state.busy = false;
    $("run").disabled = false;
  }
}

$("model").addEventListener("change", () => { $("load").disabled = !$("model").files.length; load(); });
$("load").addEventListener("click", load);
$("run").addEventListener("click", run);
state.ready = true;
