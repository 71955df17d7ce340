// edgerun for JavaScript: onnxruntime-web's API over the edgerun Python engine in Pyodide.
//
//   import { InferenceSession, Tensor } from "edgerun";
//   const session = await InferenceSession.create("model.onnx", { executionProviders: ["webgpu", "wasm"] });
//   const results = await session.run({ input: new Tensor("float32", data, [1, 64]) });
//
// With `worker: true` (or env.worker / env.wasm.proxy) Pyodide runs in a module Web Worker,
// so a run never blocks the page; the API is the same.
import { env, readBytes } from "./runtime.js";
import { PythonSession } from "./engine.js";
import { WorkerSession } from "./proxy.js";
import { Tensor } from "./tensor.js";

export { env, Tensor };

export class InferenceSession {
  #backend;

  constructor(backend) {
    this.#backend = backend;
    const { inputNames, outputNames, inputMetadata, outputMetadata } = backend.info;
    this.inputNames = inputNames;
    this.outputNames = outputNames;
    this.inputMetadata = inputMetadata;
    this.outputMetadata = outputMetadata;
  }

  // create(model, options?) or, as onnxruntime-web, create(buffer, byteOffset, byteLength?,
  // options?) for a model inside a larger ArrayBuffer.
  static async create(model, ...rest) {
    let options = rest[0] ?? {};
    if (model instanceof ArrayBuffer && typeof rest[0] === "number") {
      const [offset, length, opts] = rest;
      model = new Uint8Array(model, offset, length ?? model.byteLength - offset);
      options = opts ?? {};
    }
    const onProgress = options.onProgress ?? (() => {});
    const inWorker = options.worker ?? (env.worker || env.wasm.proxy);
    if (inWorker) {
      onProgress({ phase: "model", progress: 0 });
      const bytes = await readBytes(model);
      return new InferenceSession(await WorkerSession.create(bytes, options, onProgress));
    }
    return new InferenceSession(await PythonSession.create(model, options, onProgress));
  }

  // run(feeds, fetches?, options?) as onnxruntime-web; also run(feeds, options). With
  // options.signal (an AbortSignal), aborting stops the run before its next node (in a Web
  // Worker the run cannot be reached once it started: an abort then only drops its result).
  async run(feeds, fetches, options) {
    if (!this.#backend) throw new Error("InferenceSession.run: this session was released");
    if (fetches && !Array.isArray(fetches) && typeof fetches === "object") {
      [fetches, options] = [undefined, fetches];
    }
    const signal = options?.signal;
    signal?.throwIfAborted();
    const items = Object.entries(feeds).map(([name, value]) => {
      const t = asTensor(name, value);
      return [name, t.type, [...t.dims], t.bytes()];
    });
    const outputs = await this.#backend.run(items, fetches, signal);
    signal?.throwIfAborted();
    const result = {};
    for (const [name, type, dims, bytes] of outputs) {
      result[name] = Tensor.fromBytes(type, dims, bytes);
    }
    return result;
  }

  // Placement is fixed when the session is created, so this needs no call into Python.
  explain() {
    if (!this.#backend) throw new Error("InferenceSession.explain: this session was released");
    return structuredClone(this.#backend.info.explain);
  }

  async release() {
    const backend = this.#backend;
    this.#backend = null;
    await backend?.release();
  }
}

// Any onnxruntime-common-style tensor ({type, data, dims}: onnxruntime-web's own, or the one
// transformers.js builds) is accepted as a feed, as onnxruntime-web accepts it.
function asTensor(name, value) {
  if (value instanceof Tensor) return value;
  if (value && typeof value.type === "string" && value.dims && value.data !== undefined) {
    try {
      return new Tensor(value.type, value.data, [...value.dims]);
    } catch (e) {
      throw new TypeError(`feed '${name}': ${e.message}`);
    }
  }
  throw new TypeError(`feed '${name}' must be a Tensor (an object with type, data and dims), ` +
                      `got ${value?.constructor?.name ?? typeof value}`);
}
