// Loads Pyodide and the edgerun wheel once per thread (page, Web Worker or Node process).
import { expandImage, imageLength } from "./memory_image.js";

export const env = {
  // Where Pyodide's files are (pyodide.mjs, pyodide.asm.wasm, python_stdlib.zip, ...).
  // Default: the `pyodide` module as this page resolves it (node_modules in Node and
  // bundlers; an import map in a plain page). Set it to serve Pyodide from your own folder.
  pyodide: { indexURL: undefined },
  wheelURL: undefined,                   // default: dist/edgerun.whl next to this file
  // The start-up snapshot (scripts/make_snapshot.mjs): Pyodide's memory with edgerun
  // imported, restored instead of starting Python. Default: dist/edgerun-snapshot.json next
  // to this file (its data file beside it); null: always start Python from scratch.
  snapshotURL: undefined,
  worker: false,                         // run sessions in a Web Worker (InferenceSession.create's `worker`)
  // onnxruntime-web's spelling of `worker: true`; numThreads and simd are accepted for
  // scripts that set them (the engine runs one thread in the page)
  wasm: { proxy: false, numThreads: 1, simd: true },
  // accepted for scripts that touch it; the webgpu provider requests its own GPUDevice
  webgpu: { device: undefined },
  logLevel: "warning",
  // Keep a session whose whole model runs as recorded wasm programs in Cache Storage, so
  // that a later visit creating the same session runs without starting Python (kept.js).
  keepSessions: true,
};

let runtimePromise = null;

// A named point of the start-up on the page's performance timeline ("edgerun:<what>"), for
// profilers and bench/web/cold_start.py's breakdown.
export function mark(what) {
  globalThis.performance?.mark?.(`edgerun:${what}`);
}

// Python custom operators (edgerun.custom_ops.onnx_op) registered with registerCustomOps:
// each thread's Pyodide (the page's, a worker's) runs each source once, before its next
// session; a source that fails is reported by that session and not run again.
const customOps = [];          // [{ id, source, packages }], in registration order
const customOpsRun = new Set();    // ids this thread's Pyodide has run (or tried)

export function addCustomOps(source, packages) {
  customOps.push({ id: customOps.length + 1, source, packages });
}

export function hasCustomOps() {
  return customOps.length > 0;
}

export async function applyCustomOps(pyodide) {
  for (const { id, source, packages } of customOps) {
    if (customOpsRun.has(id)) continue;
    customOpsRun.add(id);
    if (packages.length) await pyodide.loadPackage(packages);
    try {
      await pyodide.runPythonAsync(source);
    } catch (e) {
      const lines = String(e?.message ?? e).trim().split("\n");
      const error = new Error(`registerCustomOps: source ${id} failed: ${lines[lines.length - 1]}`);
      error.pythonTraceback = e?.message;
      throw error;
    }
  }
}

export function getRuntime(onProgress = () => {}) {
  runtimePromise ??= startRuntime(onProgress).catch((e) => { runtimePromise = null; throw e; });
  return runtimePromise;
}

async function startRuntime(onProgress) {
  onProgress({ phase: "pyodide", progress: 0 });
  const indexURL = env.pyodide.indexURL && directoryURL(env.pyodide.indexURL);
  // the wheel and the snapshot download while Pyodide's module loads
  const wheel = wheelBytes();
  const described = describeSnapshot();
  // From an indexURL, Pyodide's module is imported from there: no import map needed (and
  // module workers have none).
  const { loadPyodide, version } = await (indexURL ? import(new URL("pyodide.mjs", indexURL).href)
                                                   : import("pyodide"));
  mark("pyodide-imported");
  const options = indexURL ? { indexURL } : {};
  // how this thread's Python started: from the snapshot, or why not (web/test/snapshot.test.mjs)
  const start = { snapshot: false, why: "" };
  const snapshot = await usableSnapshot(await described, version);
  mark("snapshot-checked");
  let pyodide = null;
  if (typeof snapshot === "string") {
    start.why = snapshot;
  } else {
    try {
      pyodide = await restoreSnapshot(loadPyodide, options, snapshot, indexURL);
      start.snapshot = true;
    } catch (e) {
      start.why = `it did not restore (${e?.message ?? e})`;
      console.warn(`edgerun: the start-up snapshot ${start.why}; starting Python`);
    }
  }
  pyodide ??= await loadPyodide(options);
  mark("python-started");
  onProgress({ phase: "pyodide", progress: 1, snapshot: start.snapshot, why: start.why });
  onProgress({ phase: "edgerun", progress: 0 });
  installWheel(pyodide, await wheel);
  const bridge = pyodide.pyimport("edgerun.web.bridge");
  mark("engine-imported");
  onProgress({ phase: "edgerun", progress: 1 });
  return { pyodide, bridge, start };
}

// The wheel is imported as a zip on sys.path (its package data read through
// importlib.resources): one file written, nothing unpacked. A snapshot already has the path.
export const WHEEL_PATH = "/lib/edgerun.whl";

export function installWheel(pyodide, wheel) {
  pyodide.FS.writeFile(WHEEL_PATH, wheel);
  pyodide.runPython(`import sys\nif ${JSON.stringify(WHEEL_PATH)} not in sys.path: sys.path.insert(0, ${JSON.stringify(WHEEL_PATH)})`);
}

// ---- the start-up snapshot --------------------------------------------------------------
// edgerun-snapshot.json: { pyodide, wheel_sha256, variants: { jspi, plain: { data,
// data_sha256, bytes } } } (see scripts/make_snapshot.mjs). A snapshot is used only with the
// Pyodide version and the exact wheel it was made with; anything else (no file, another
// version, a rebuilt wheel, no WebCrypto to check with) starts Python from scratch, as
// without one.

// The snapshot's description, its image loading, or why none is used (a string).
async function describeSnapshot() {
  if (env.snapshotURL === null) return "env.snapshotURL is null";
  if (!globalThis.crypto?.subtle) return "no WebCrypto here (not a secure context) to check the wheel with";
  if (typeof DecompressionStream === "undefined") return "no DecompressionStream here";
  const url = absoluteURL(env.snapshotURL ?? new URL("./dist/edgerun-snapshot.json", import.meta.url));
  let info;
  try {
    info = JSON.parse(new TextDecoder().decode(await readBytes(url)));
  } catch (e) {
    return `none at ${url} (${e?.message ?? e})`;     // none shipped: a normal start
  }
  // Python records at start-up what the engine offers (JSPI, how C calls JavaScript-made
  // functions): the variant made where those are as here, "jspi" (made in Chromium) where
  // WebAssembly.Suspending exists, "plain" (made in Node 20) where no JSPI does
  const variant = jspiHere();
  if (variant === "old") return "this engine has the old JSPI API (WebAssembly.Suspender), which no snapshot is made for";
  const chosen = info.variants?.[variant];
  if (!chosen) return `${url} has no ${variant} variant`;
  // The data file: the one named next to a chosen snapshotURL; by default the literal URLs
  // below, which bundlers (Vite) see and emit as assets.
  const data = env.snapshotURL ? new URL(chosen.data, url)
    : variant === "jspi" ? new URL("./dist/edgerun-snapshot-jspi.bin.gz", import.meta.url)
      : new URL("./dist/edgerun-snapshot-plain.bin.gz", import.meta.url);
  const snapshot = { pyodide: info.pyodide, wheel_sha256: info.wheel_sha256, variant, ...chosen,
                     url: data };
  snapshot.image = snapshotImage(snapshot);    // loading before it is known to be usable
  snapshot.image.catch(() => {});              // (its error surfaces where it is awaited)
  return snapshot;
}

// The stack switching (JSPI) Pyodide finds when it starts: "jspi", "old" (the old API) or
// "plain" (none), by Pyodide's own test.
function jspiHere() {
  try {
    new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]));
  } catch {
    return "plain";                               // a CSP that forbids compiling wasm
  }
  return "Suspending" in WebAssembly ? "jspi" : "Suspender" in WebAssembly ? "old" : "plain";
}

// The snapshot, or why it cannot be used here (a string).
async function usableSnapshot(snapshot, pyodideVersion) {
  if (typeof snapshot === "string") return snapshot;
  if (snapshot.pyodide !== pyodideVersion) return `it was made with Pyodide ${snapshot.pyodide}, this is ${pyodideVersion}`;
  if (snapshot.wheel_sha256 !== await wheelSha256()) return "it was made with another edgerun wheel";
  return snapshot;
}

// Python started from the snapshot. Pyodide is started at once, so that its module, standard
// library and lock file download (and the module compiles) while the snapshot's image still
// downloads and inflates: the restore waits for the image only once the module is
// instantiated. An image that fails to load rejects here (the caller then starts Python from
// scratch); the half-started Pyodide is left to the garbage collector.
async function restoreSnapshot(loadPyodide, options, snapshot, indexURL) {
  const memory = new Uint8Array(snapshot.bytes);       // what Pyodide restores from
  const written = snapshot.image.then((sparse) => { expandImage(sparse, memory, true); });
  const never = new Promise(() => {});
  return Promise.race([
    loadPyodide({ ...options, _loadSnapshot: memory,
                  createPyodideModule: restoringModule(snapshot, indexURL, written) }),
    written.then(() => never)]);
}

// Pyodide's module factory, wrapped for a restore: the new instance's memory grows to the
// snapshot's size (Pyodide restores into the memory its module starts with, and fails,
// "offset is out of bounds", when Python had grown it past that before the snapshot was
// taken), and the instance reaches Pyodide once the image is written.
function restoringModule(snapshot, indexURL, written) {
  const script = import(indexURL ? new URL("pyodide.asm.mjs", indexURL).href
    : new URL("pyodide.asm.mjs", import.meta.resolve("pyodide")).href);
  script.catch(() => {});                      // (its error surfaces where it is awaited)
  return async (settings) => {
    const createModule = (await script).default;
    const instantiate = settings.instantiateWasm;
    settings.instantiateWasm = (imports, receive) => instantiate(imports, (instance, module) => {
      mark("pyodide-instantiated");
      const memory = instance.exports.memory;
      const missing = snapshot.bytes - memory.buffer.byteLength;
      if (missing > 0) memory.grow(Math.ceil(missing / 65536));
      written.then(() => receive(instance, module), () => {});
    });
    return createModule(settings);
  };
}

export async function sha256(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

// The edgerun wheel's bytes and their SHA-256, each read or computed once per thread
// (env.wheelURL, or dist/edgerun.whl next to this file): the start-up snapshot and a kept
// session (kept.js) are both checked against the hash.
let wheelPromise = null;
let wheelHash = null;
let wheelSource = null;

export function wheelBytes() {
  const source = env.wheelURL ?? new URL("./dist/edgerun.whl", import.meta.url);
  if (wheelPromise === null || String(source) !== String(wheelSource)) {
    wheelSource = source;
    wheelHash = null;
    wheelPromise = readBytes(source);
    wheelPromise.catch(() => { wheelPromise = null; });
  }
  return wheelPromise;
}

export function wheelSha256() {
  const bytes = wheelBytes();
  if (wheelHash === null || wheelHash.bytes !== bytes) {
    wheelHash = { bytes, hash: bytes.then(sha256) };
    wheelHash.hash.catch(() => {});
  }
  return wheelHash.hash;
}

// The snapshot's memory image, without its zero pages (memory_image.js): from Cache Storage
// when an earlier visit kept it (inflated, so a second visit skips inflating it), else
// downloaded and inflated as it arrives.
async function snapshotImage(snapshot) {
  const key = typeof caches !== "undefined" && /^https?:/.test(snapshot.url.href) &&
    new Request(`${snapshot.url.href}?inflated=${snapshot.data_sha256}`);
  const cache = key && await caches.open("edgerun-snapshot").catch(() => null);
  const kept = cache && await cache.match(key).catch(() => null);
  let sparse;
  if (kept) {
    sparse = new Uint8Array(await kept.arrayBuffer());
  } else {
    sparse = await inflated(snapshot.url);
    if (cache) afterFirstResult(() => keep(cache, key, sparse));
  }
  mark(kept ? "snapshot-read" : "snapshot-inflated");
  const length = imageLength(sparse);
  if (length !== snapshot.bytes) throw new Error(`the snapshot inflated to ${length} bytes, not ${snapshot.bytes}`);
  return sparse;
}

// A gzipped file's bytes, inflated while they download.
async function inflated(url) {
  let body;
  if (url.protocol === "file:") {
    body = new Blob([await readBytes(url)]).stream();
  } else {
    body = (await fetched(url)).body;
  }
  return new Uint8Array(await new Response(body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer());
}

// Store the inflated image for the next visit, replacing older ones; best effort (a full
// quota only costs the next visit the inflating).
async function keep(cache, key, bytes) {
  try {
    for (const old of await cache.keys()) if (old.url !== key.url) await cache.delete(old);
    await cache.put(key, new Response(bytes));
  } catch { /* quota or private mode: fine */ }
}

// Work done for later visits (writing the inflated snapshot to Cache Storage: ~20 MB) waits
// for this thread's first result, or FIRST_RESULT_WAIT_MS: on a first visit it competed for
// the CPU with the session's creation (~60 ms later on two cores).
const FIRST_RESULT_WAIT_MS = 10_000;
const forLater = [];
let firstResult = false;

function afterFirstResult(task) {
  if (firstResult) {
    setTimeout(task, 0);
    return;
  }
  if (!forLater.length) setTimeout(firstResultCame, FIRST_RESULT_WAIT_MS);
  forLater.push(task);
}

// A session of this thread gave its first result (engine.js): the work for later starts.
export function firstResultCame() {
  if (firstResult) return;
  firstResult = true;
  for (const task of forLater.splice(0)) setTimeout(task, 0);
}

// The configuration a Web Worker needs, with every URL absolute: relative ones would
// resolve against the worker script, not against the page that set them.
export function workerConfig() {
  let indexURL = env.pyodide.indexURL;
  if (!indexURL) {
    try {
      indexURL = new URL(".", import.meta.resolve("pyodide")).href;
    } catch {
      throw new Error("edgerun: a Web Worker cannot resolve the bare module 'pyodide' (workers " +
                      "have no import map): set env.pyodide.indexURL to the folder holding pyodide.mjs");
    }
  }
  return { indexURL: directoryURL(indexURL),
           wheelURL: env.wheelURL ? absoluteURL(env.wheelURL).href : undefined,
           snapshotURL: env.snapshotURL ? absoluteURL(env.snapshotURL).href : env.snapshotURL,
           keepSessions: env.keepSessions, customOps: customOps.slice() };
}

export function configure({ indexURL, wheelURL, snapshotURL, keepSessions = true,
                            customOps: registered = [] }) {
  env.pyodide.indexURL = indexURL;
  env.keepSessions = keepSessions;
  env.wheelURL = wheelURL;
  env.snapshotURL = snapshotURL;
  customOps.splice(0, customOps.length, ...registered);
}

export function absoluteURL(source) {
  return source instanceof URL ? source
    : new URL(source, globalThis.location?.href ?? `file://${process.cwd()}/`);
}

function directoryURL(source) {
  const url = absoluteURL(source).href;
  return url.endsWith("/") ? url : url + "/";
}

export async function readBytes(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  if (typeof Blob !== "undefined" && source instanceof Blob) {
    return new Uint8Array(await source.arrayBuffer());
  }
  const url = absoluteURL(source);
  if (url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    return new Uint8Array(await readFile(url));
  }
  return new Uint8Array(await (await fetched(url)).arrayBuffer());
}

async function fetched(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return response;
}
