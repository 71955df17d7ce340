// A session in this thread's Pyodide (engine/edgerun/web/bridge.py). index.js uses it
// directly, or through worker.js inside a Web Worker; either way values cross as
// [name, type, dims, bytes or strings] and errors carry Python's message.
import { keepSession, keptSlot, restoreKept } from "./kept.js";
import { ProgramReplays } from "./replay.js";
import { applyCustomOps, env, firstResultCame, getRuntime, mark, readBytes,
         wheelBytes } from "./runtime.js";

// With JSPI (Chromium), Python may wait on JavaScript promises (WebGPU buffer maps) while it
// runs; that needs entering Python through callPromising. Without JSPI, calls stay synchronous.
const JSPI = typeof WebAssembly.Suspending === "function";

async function callPython(fn, ...args) {
  return JSPI ? await fn.callPromising(...args) : fn(...args);
}

// A session for InferenceSession.create (in the page, or in worker.js): the one an earlier
// visit kept (kept.js) when there is one, else a new PythonSession.
// options: { executionProviders, graphOptimizationLevel, gpuOutputs: output names or "all" }
export async function createSession(model, options, onProgress) {
  const modelBytes = readBytes(model);       // downloading while Python starts
  modelBytes.catch(() => {});                // (its error surfaces where it is awaited)
  wheelBytes().catch(() => {});              // needed either way: the engine, or to check a kept session
  const requested = options.executionProviders ?? [];
  const providers = (requested.length ? requested : defaultProviders())
    .map((p) => (typeof p === "string" ? p : p.name));
  const slot = await keptSlot(model, modelBytes, providers, options);
  const create = (progress) => PythonSession.create(modelBytes, providers, options, progress, slot);
  if (slot?.entry) {
    onProgress({ phase: "model", progress: 0 });
    const kept = await restoreKept(slot, () => create(() => {}));
    onProgress({ phase: "model", progress: 1 });
    if (kept) return kept;
  }
  return create(onProgress);
}

export class PythonSession {
  #session;
  #pyodide;
  #replays = new ProgramReplays();   // runs replayed without entering Python (replay.js)
  #inPython = false;
  #slot;                             // where the session is kept for the next visit (kept.js)

  constructor(pyodide, session, info, slot) {
    this.#pyodide = pyodide;
    this.#session = session;
    this.#slot = slot;
    this.info = info;        // names, metadata, placement (bridge.WebSession.describe)
  }

  // modelBytes: a promise of the model's bytes; providers: their names
  static async create(modelBytes, names, options, onProgress, slot = null) {
    const { pyodide, bridge } = await getRuntime(onProgress);
    await applyCustomOps(pyodide);
    onProgress({ phase: "model", progress: 0 });
    const bytes = await modelBytes;
    onProgress({ phase: "model", progress: 1 });
    try {
      const gpuOutputs = options.gpuOutputs ?? [];
      const session = await callPython(bridge.WebSession, bytes, pyodide.toPy(names),
                                       options.graphOptimizationLevel ?? "all",
                                       typeof gpuOutputs === "string" ? gpuOutputs : pyodide.toPy(gpuOutputs));
      const described = session.describe();
      // plain JSON (Python's None, which arrives as undefined, as null): a kept session's is
      // the same after a visit in Cache Storage
      const info = JSON.parse(JSON.stringify(described.toJs({ dict_converter: Object.fromEntries }),
                                             (key, value) => value ?? null));
      described.destroy();
      mark("session-created");
      // onnxruntime-web's env.webgpu.device: the device sessions compute on (a new one after a loss)
      if (info.webgpu) env.webgpu.device = session.gpu_device();
      return new PythonSession(pyodide, session, info, slot);
    } catch (e) {
      throw pythonError(e);
    }
  }

  // items: [[name, type, dims, Uint8Array (a string tensor: its strings)]] -> the same for the
  // outputs; a GPU buffer crosses as [name, type, dims, GPUBuffer, "gpu-buffer"]
  async run(items, fetches, signal) {
    if (!this.#session) throw new Error("InferenceSession.run: this session was released");
    const direct = !signal && !this.#inPython;     // a run with a signal: Python watches it
    if (direct) {
      const replayed = this.#replays.run(items, fetches);
      if (replayed) return replayed;
    }
    let outputs;
    this.#inPython = true;
    try {
      const pyFeeds = this.#pyodide.toPy(items);
      const pyFetches = fetches ? this.#pyodide.toPy(fetches) : null;
      const run = this.#session.run;
      try {
        outputs = await callPython(run, pyFeeds, pyFetches, ...(signal ? [signal] : []));
      } finally {
        run.destroy();
        pyFeeds.destroy();
        pyFetches?.destroy();
      }
      if (direct && this.#replays.learn(this.#pyodide, this.#session, items) && this.#slot) {
        keepSession(this.#slot, this.#session, this.info, this.#replays.tickets);
      }
    } catch (e) {
      throw pythonError(e);
    } finally {
      this.#inPython = false;
    }
    const result = outputs.toJs();
    outputs.destroy();
    firstResultCame();
    return result;
  }

  release() {
    this.#session?.release();      // the GPU buffers a captured graph holds (bridge.py)
    this.#session?.destroy();
    this.#session = null;
  }
}

export function pythonError(e) {
  if (e?.constructor?.name !== "PythonError") return e;
  const lines = String(e.message).trim().split("\n");
  const error = new Error(lines[lines.length - 1]);   // "NotImplementedOp: ..." — the Python message
  if (error.message.startsWith("RunTerminated:")) error.name = "AbortError";
  error.pythonTraceback = e.message;
  return error;
}

// onnxruntime-web's default: the providers that work where the page runs (WebGPU where the
// browser has it, then wasm). Never the numpy CPU provider: a page has no numpy.
export function defaultProviders() {
  return typeof navigator !== "undefined" && navigator.gpu ? ["webgpu", "wasm"] : ["wasm"];
}
