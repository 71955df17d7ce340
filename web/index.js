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
    const buffer = model instanceof ArrayBuffer ||
      (typeof SharedArrayBuffer !== "undefined" && model instanceof SharedArrayBuffer);
    if (buffer && typeof rest[0] === "number") {
      const [offset, length, opts] = rest;
      if (!Number.isSafeInteger(offset) || offset < 0 || offset >= model.byteLength) {
        throw new RangeError(`'byteOffset' is out of range [0, ${model.byteLength}).`);
      }
      if (length !== undefined && typeof length !== "number") throw new TypeError("'byteLength' must be a number.");
      if (length !== undefined && (!Number.isSafeInteger(length) || length <= 0 ||
                                   offset + length > model.byteLength)) {
        throw new RangeError(`'byteLength' is out of range (0, ${model.byteLength - offset}].`);
      }
      model = new Uint8Array(model, offset, length ?? model.byteLength - offset);
      options = opts ?? {};
    } else if (buffer) {
      model = new Uint8Array(model);
    }
    if (typeof options !== "object" || options === null) throw new TypeError("'options' must be an object.");
    const onProgress = options.onProgress ?? (() => {});
    const inWorker = options.worker ?? (env.worker || env.wasm.proxy);
    if (inWorker) {
      onProgress({ phase: "model", progress: 0 });
      const bytes = await readBytes(model);
      return new InferenceSession(await WorkerSession.create(bytes, options, onProgress));
    }
    return new InferenceSession(await PythonSession.create(model, options, onProgress));
  }

  // run(feeds, fetches?, options?) as onnxruntime-web: fetches is an array of output names
  // or an object naming outputs (null, or a Tensor the output is copied into); run(feeds,
  // options) too. With options.signal (an AbortSignal), aborting stops the run before its
  // next node (in a Web Worker the run cannot be reached once it started: an abort then only
  // drops its result).
  async run(feeds, fetches, options) {
    if (!this.#backend) throw new Error("InferenceSession.run: this session was released");
    const [names, into, opts] = this.#fetchesAndOptions(feeds, fetches, options);
    const signal = opts?.signal;
    signal?.throwIfAborted();
    for (const name of this.inputNames) {
      if (feeds[name] === undefined) throw new Error(`input '${name}' is missing in 'feeds'.`);
    }
    const items = Object.entries(feeds).map(([name, value]) => {
      const t = asTensor(name, value);
      return [name, t.type, [...t.dims], t.payload()];
    });
    const outputs = await this.#backend.run(items, names, signal);
    signal?.throwIfAborted();
    const result = {};
    for (const [name, type, dims, payload] of outputs) {
      const tensor = Tensor.fromPayload(type, dims, payload);
      result[name] = into[name] ? copyInto(name, tensor, into[name]) : tensor;
    }
    return result;
  }

  // onnxruntime-web's reading of run's second and third arguments -> [output names or null
  // for all, {name: Tensor to fill}, options]
  #fetchesAndOptions(feeds, arg1, arg2) {
    if (typeof feeds !== "object" || feeds === null || feeds instanceof Tensor || Array.isArray(feeds)) {
      throw new TypeError("'feeds' must be an object that use input names as keys and OnnxValue as corresponding values.");
    }
    const options = (value) => {
      if (value === undefined || (typeof value === "object" && value !== null)) return value;
      throw new TypeError("'options' must be an object.");
    };
    if (arg1 === undefined) return [null, {}, options(arg2)];
    if (typeof arg1 !== "object") throw new TypeError("Unexpected argument[1]: must be 'fetches' or 'options'.");
    if (arg1 === null) throw new TypeError("Unexpected argument[1]: cannot be null.");
    if (arg1 instanceof Tensor) throw new TypeError("'fetches' cannot be a Tensor");
    if (Array.isArray(arg1)) {
      if (arg1.length === 0) throw new TypeError("'fetches' cannot be an empty array.");
      for (const name of arg1) {
        if (typeof name !== "string") throw new TypeError("'fetches' must be a string array or an object.");
        if (!this.outputNames.includes(name)) throw new RangeError(`'fetches' contains invalid output name: ${name}.`);
      }
      return [[...arg1], {}, options(arg2)];
    }
    // an object: fetches when it names outputs (null or a Tensor each), otherwise options
    const named = this.outputNames.filter((name) => Object.hasOwn(arg1, name) &&
      (arg1[name] === null || arg1[name] instanceof Tensor));
    if (!named.length) return [null, {}, arg1];
    const into = Object.fromEntries(named.filter((n) => arg1[n] !== null).map((n) => [n, arg1[n]]));
    return [named, into, options(arg2)];
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

// An output copied into the Tensor the caller passed for it in fetches (onnxruntime-web's
// pre-allocated outputs).
function copyInto(name, tensor, target) {
  if (target.type !== tensor.type || target.size !== tensor.size || target.type === "string") {
    throw new TypeError(`fetches '${name}': the output is ${tensor.type} [${tensor.dims}], the tensor given ` +
                        `for it is ${target.type} [${target.dims}]`);
  }
  target.data.set(tensor.data);
  return target;
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
