// edgerun for JavaScript: onnxruntime-web's API over the edgerun Python engine in Pyodide.
//
//   import { InferenceSession, Tensor } from "edgerun";
//   const session = await InferenceSession.create("model.onnx", { executionProviders: ["webgpu", "wasm"] });
//   const results = await session.run({ input: new Tensor("float32", data, [1, 64]) });
//
// With `worker: true` (or env.worker / env.wasm.proxy) Pyodide runs in a module Web Worker,
// so a run never blocks the page; the API is the same.
import { addCustomOps, env, readBytes } from "./runtime.js";
import { createSession } from "./engine.js";
import { WorkerSession } from "./proxy.js";
import { Tensor } from "./tensor.js";
// The modules those import, named here too: an unbundled page then fetches every module of
// the package at once instead of a level at a time, and Pyodide starts loading a round trip
// sooner (bundlers make one file either way).
import "./image.js";
import "./kept.js";
import "./memory_image.js";
import "./replay.js";

export { env, Tensor };

// Python custom operators for the sessions created after this call, in the page or a worker:
// `source` registers them with edgerun.custom_ops.onnx_op (onnxruntime-extensions' style);
// `packages` are Pyodide packages it imports (["numpy"]: without numpy the functions get
// and return edgerun HostTensors). The wasm provider runs them. Errors in the source are
// reported by the next InferenceSession.create.
export function registerCustomOps(source, { packages = [] } = {}) {
  if (typeof source !== "string") throw new TypeError("registerCustomOps: 'source' must be Python source text");
  if (!Array.isArray(packages) || packages.some((p) => typeof p !== "string")) {
    throw new TypeError("registerCustomOps: 'packages' must be an array of Pyodide package names");
  }
  addCustomOps(source, [...packages]);
}

// onnxruntime-web's output locations; edgerun keeps outputs in memory or in GPU buffers
const LOCATIONS = ["cpu", "cpu-pinned", "gpu-buffer", "texture", "ml-tensor"];
// GPU buffers a session reads in place (the layout of its own GPU tensors); other types are
// read back first
const IN_PLACE_GPU_TYPES = ["float32", "int32", "uint32"];

export class InferenceSession {
  #backend;
  #inWorker;

  constructor(backend, inWorker = false) {
    this.#backend = backend;
    this.#inWorker = inWorker;
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
    const gpuOutputs = gpuOutputsOf(options.preferredOutputLocation);
    if (inWorker && gpuOutputs.length) {
      throw new TypeError("preferredOutputLocation 'gpu-buffer' does not work with worker: true: " +
                          "a GPUBuffer cannot leave the worker's GPUDevice");
    }
    if (inWorker) {
      onProgress({ phase: "model", progress: 0 });
      const bytes = await readBytes(model);
      return new InferenceSession(await WorkerSession.create(bytes, options, onProgress), true);
    }
    return new InferenceSession(await createSession(model, { ...options, gpuOutputs }, onProgress));
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
    const items = await Promise.all(Object.entries(feeds).map(([name, value]) =>
      this.#feedItem(name, asTensor(name, value))));
    const outputs = await this.#backend.run(items, names, signal);
    signal?.throwIfAborted();
    const result = {};
    for (const [name, type, dims, payload, location] of outputs) {
      const tensor = location === "gpu-buffer"
        ? Tensor.fromGpuPayload(type, dims, payload, env.webgpu.device)
        : Tensor.fromPayload(type, dims, payload);
      result[name] = into[name] ? await copyInto(name, tensor, into[name]) : tensor;
    }
    return result;
  }

  // What crosses for one feed: its bytes or strings, or a GPU buffer the session's WebGPU
  // provider reads in place (others are read back first, as a worker must).
  async #feedItem(name, t) {
    if (t.location !== "gpu-buffer") return [name, t.type, [...t.dims], t.payload()];
    if (!this.#inWorker && this.#backend.info.webgpu && IN_PLACE_GPU_TYPES.includes(t.type)) {
      return [name, t.type, [...t.dims], t.gpuBuffer, "gpu-buffer"];
    }
    const data = await t.getData();
    return [name, t.type, [...t.dims], new Tensor(t.type, data, [...t.dims]).payload()];
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
// pre-allocated outputs): into its memory, or on the GPU into its GPUBuffer.
async function copyInto(name, tensor, target) {
  if (target.type !== tensor.type || target.size !== tensor.size || target.type === "string") {
    tensor.dispose();
    throw new TypeError(`fetches '${name}': the output is ${tensor.type} [${tensor.dims}], the tensor given ` +
                        `for it is ${target.type} [${target.dims}]`);
  }
  if (target.location === "gpu-buffer") {
    const source = tensor.location === "gpu-buffer" ? tensor.gpuBuffer : null;
    const device = env.webgpu.device;
    if (!source || !device) throw new TypeError(`fetches '${name}': a GPU-buffer tensor is filled only from an output kept on the GPU (preferredOutputLocation 'gpu-buffer')`);
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(source, 0, target.gpuBuffer, 0, Math.min(source.size, target.gpuBuffer.size));
    device.queue.submit([encoder.finish()]);
    tensor.dispose();
    return target;
  }
  target.data.set(tensor.location === "gpu-buffer" ? await tensor.getData(true) : tensor.data);
  return target;
}

// preferredOutputLocation (one location, or one per output name) -> the outputs to keep in
// GPU buffers: their names, or "all".
function gpuOutputsOf(preferred) {
  if (preferred === undefined) return [];
  const check = (location, where) => {
    if (!LOCATIONS.includes(location)) {
      throw new TypeError(`${where}: unknown location '${location}'; one of ${LOCATIONS.join(", ")}`);
    }
    if (location === "texture" || location === "ml-tensor") {
      throw new TypeError(`${where}: '${location}' is not supported by edgerun; use 'gpu-buffer' or 'cpu'`);
    }
    return location === "gpu-buffer";
  };
  if (typeof preferred === "string") return check(preferred, "preferredOutputLocation") ? "all" : [];
  if (typeof preferred !== "object" || preferred === null) {
    throw new TypeError("preferredOutputLocation must be a location or an object of locations by output name");
  }
  return Object.entries(preferred)
    .filter(([name, location]) => check(location, `preferredOutputLocation['${name}']`))
    .map(([name]) => name);
}

// Any onnxruntime-common-style tensor ({type, data, dims}: onnxruntime-web's own, or the one
// transformers.js builds) is accepted as a feed, as onnxruntime-web accepts it.
function asTensor(name, value) {
  if (value instanceof Tensor) return value;
  if (value?.location === "gpu-buffer" && value.gpuBuffer) {      // onnxruntime-common's GPU tensor
    return Tensor.fromGpuBuffer(value.gpuBuffer, { dataType: value.type, dims: [...value.dims],
                                                   download: () => value.getData() });
  }
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
