// Loads Pyodide and the edgerun wheel once per page (or Node process).
import { loadPyodide } from "pyodide";

export const env = {
  pyodide: { indexURL: undefined },      // default: the bundled `pyodide` npm package
  wheelURL: undefined,                   // default: dist/edgerun.whl next to this file
  logLevel: "warning",
};

let runtimePromise = null;

export function getRuntime(onProgress = () => {}) {
  runtimePromise ??= startRuntime(onProgress).catch((e) => { runtimePromise = null; throw e; });
  return runtimePromise;
}

async function startRuntime(onProgress) {
  onProgress({ phase: "pyodide", progress: 0 });
  const pyodide = await loadPyodide(env.pyodide.indexURL ? { indexURL: env.pyodide.indexURL } : {});
  onProgress({ phase: "pyodide", progress: 1 });
  onProgress({ phase: "edgerun", progress: 0 });
  const wheel = await readBytes(env.wheelURL ?? new URL("./dist/edgerun.whl", import.meta.url));
  const site = pyodide.runPython("import site; site.getsitepackages()[0]");
  pyodide.unpackArchive(wheel, "wheel", { extractDir: site });
  const bridge = pyodide.pyimport("edgerun.web.bridge");
  onProgress({ phase: "edgerun", progress: 1 });
  return { pyodide, bridge };
}

export async function readBytes(source) {
  if (source instanceof Uint8Array) return source;
  if (source instanceof ArrayBuffer) return new Uint8Array(source);
  const url = source instanceof URL ? source : new URL(source, globalThis.location?.href ?? `file://${process.cwd()}/`);
  if (url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    return new Uint8Array(await readFile(url));
  }
  const response = await fetch(url);
  if (!response.ok) throw new Error(`cannot fetch ${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}
