// edgerun for JavaScript: onnxruntime-web's API over the edgerun Python engine in Pyodide.
//
//   import { InferenceSession, Tensor } from "edgerun";
//   const session = await InferenceSession.create("model.onnx", { executionProviders: ["webgpu", "wasm"] });
//   const results = await session.run({ input: new Tensor("float32", data, [1, 64]) });
import { env, getRuntime, readBytes } from "./runtime.js";
import { Tensor } from "./tensor.js";

export { env, Tensor };

// With JSPI (Chromium), Python may wait on JavaScript promises (WebGPU buffer maps) while it
// runs; that needs entering Python through callPromising. Without JSPI, calls stay synchronous.
const JSPI = typeof WebAssembly.Suspending === "function";

async function callPython(fn, ...args) {
  return JSPI ? await fn.callPromising(...args) : fn(...args);
}

export class InferenceSession {
  #session;
  #pyodide;

  constructor(pyodide, session) {
    this.#pyodide = pyodide;
    this.#session = session;
    this.inputNames = session.input_names.toJs();
    this.outputNames = session.output_names.toJs();
  }

  static async create(model, options = {}) {
    const onProgress = options.onProgress ?? (() => {});
    const { pyodide, bridge } = await getRuntime(onProgress);
    onProgress({ phase: "model", progress: 0 });
    const bytes = await readBytes(model);
    onProgress({ phase: "model", progress: 1 });
    const providers = options.executionProviders ?? ["wasm"];
    const names = providers.map((p) => (typeof p === "string" ? p : p.name));
    try {
      const session = await callPython(bridge.WebSession, bytes, pyodide.toPy(names),
                                       options.graphOptimizationLevel ?? "all");
      return new InferenceSession(pyodide, session);
    } catch (e) {
      throw pythonError(e);
    }
  }

  async run(feeds, fetches) {
    if (!this.#session) throw new Error("InferenceSession.run: this session was released");
    const items = Object.entries(feeds).map(([name, t]) => {
      if (!(t instanceof Tensor)) throw new TypeError(`feed '${name}' must be a Tensor`);
      return [name, t.type, [...t.dims], t.bytes()];
    });
    let outputs;
    try {
      const pyFeeds = this.#pyodide.toPy(items);
      const pyFetches = fetches ? this.#pyodide.toPy(fetches) : null;
      const run = this.#session.run;
      try {
        outputs = await callPython(run, pyFeeds, pyFetches);
      } finally {
        run.destroy();
      }
    } catch (e) {
      throw pythonError(e);
    }
    const result = {};
    for (const item of outputs.toJs()) {
      const [name, type, dims, bytes] = item;
      result[name] = Tensor.fromBytes(type, dims, bytes);
    }
    outputs.destroy();
    return result;
  }

  explain() {
    if (!this.#session) throw new Error("InferenceSession.explain: this session was released");
    return this.#session.explain().toJs({ dict_converter: Object.fromEntries });
  }

  async release() {
    this.#session?.destroy();
    this.#session = null;
  }
}

function pythonError(e) {
  if (e?.constructor?.name !== "PythonError") return e;
  const lines = String(e.message).trim().split("\n");
  const error = new Error(lines[lines.length - 1]);   // "NotImplementedOp: ..." — the Python message
  error.pythonTraceback = e.message;
  return error;
}
