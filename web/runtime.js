// Loads Pyodide and the edgerun wheel once per thread (page, Web Worker or Node process).
export const env = {
  // Where Pyodide's files are (pyodide.mjs, pyodide.asm.wasm, python_stdlib.zip, ...).
  // Default: the `pyodide` module as this page resolves it (node_modules in Node and
  // bundlers; an import map in a plain page). Set it to serve Pyodide from your own folder.
  pyodide: { indexURL: undefined },
  wheelURL: undefined,                   // default: dist/edgerun.whl next to this file
  worker: false,                         // run sessions in a Web Worker (InferenceSession.create's `worker`)
  // onnxruntime-web's spelling of `worker: true`; numThreads and simd are accepted for
  // scripts that set them (the engine runs one thread in the page)
  wasm: { proxy: false, numThreads: 1, simd: true },
  // accepted for scripts that touch it; the webgpu provider requests its own GPUDevice
  webgpu: { device: undefined },
  logLevel: "warning",
};

let runtimePromise = null;

// Python custom operators (edgerun.custom_ops.onnx_op) registered with registerCustomOps:
// each thread's Pyodide (the page's, a worker's) runs each source once, before its next
// session; a source that fails is reported by that session and not run again.
const customOps = [];          // [{ id, source, packages }], in registration order
const customOpsRun = new Set();    // ids this thread's Pyodide has run (or tried)

export function addCustomOps(source, packages) {
  customOps.push({ id: customOps.length + 1, source, packages });
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
  // From an indexURL, Pyodide's module is imported from there: no import map needed (and
  // module workers have none).
  const { loadPyodide } = await (indexURL ? import(new URL("pyodide.mjs", indexURL).href)
                                          : import("pyodide"));
  const pyodide = await loadPyodide(indexURL ? { indexURL } : {});
  onProgress({ phase: "pyodide", progress: 1 });
  onProgress({ phase: "edgerun", progress: 0 });
  const wheel = await readBytes(env.wheelURL ?? new URL("./dist/edgerun.whl", import.meta.url));
  const site = pyodide.runPython("import site; site.getsitepackages()[0]");
  pyodide.unpackArchive(wheel, "wheel", { extractDir: site });
  const bridge = pyodide.pyimport("edgerun.web.bridge");
  onProgress({ phase: "edgerun", progress: 1 });
  return { pyodide, bridge };
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
           customOps: customOps.slice() };
}

export function configure({ indexURL, wheelURL, customOps: registered = [] }) {
  env.pyodide.indexURL = indexURL;
  env.wheelURL = wheelURL;
  customOps.splice(0, customOps.length, ...registered);
}

function absoluteURL(source) {
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
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}
