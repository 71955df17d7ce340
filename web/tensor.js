// Tensor: onnxruntime-web's (onnxruntime-common's) Tensor: its constructors, fields
// (type, data, dims, size, location, gpuBuffer), getData, dispose, reshape, the factories
// (fromImage, fromPinnedBuffer, fromGpuBuffer) and the image conversions (toImageData,
// toDataURL). A "gpu-buffer" tensor holds a GPUBuffer (a session's output with
// preferredOutputLocation "gpu-buffer", or the caller's own) and reads it with getData().
import { imageToTensorData, tensorToDataURL, tensorToImageData } from "./image.js";

const Float16 = globalThis.Float16Array;       // where the platform has it, as onnxruntime-web

// type -> the typed array holding its data (bool: one byte each; int4/uint4: two per byte)
const TYPED_ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array,
  float16: Float16 ?? Uint16Array, int4: Uint8Array, uint4: Uint8Array,
};
// typed array -> the type `new Tensor(data, dims)` infers from it
const TYPE_OF_ARRAY = {
  Float32Array: "float32", Float64Array: "float64", Int8Array: "int8", Uint8Array: "uint8",
  Int16Array: "int16", Uint16Array: "uint16", Int32Array: "int32", Uint32Array: "uint32",
  BigInt64Array: "int64", BigUint64Array: "uint64", ...(Float16 ? { Float16Array: "float16" } : {}),
};
export const TENSOR_TYPES = ["string", ...Object.keys(TYPED_ARRAYS)];

// The same constructor, or one of the same name from another realm (a worker, an iframe).
function isArrayOf(data, Typed) {
  return data instanceof Typed || (ArrayBuffer.isView(data) && data.constructor?.name === Typed.name);
}

function checkedSize(dims) {
  if (!Array.isArray(dims)) {
    throw new TypeError("Tensor: dims must be an array of integers");
  }
  let size = 1;
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i];
    if (typeof d !== "number" || !Number.isSafeInteger(d)) {
      throw new TypeError(`Tensor: dims[${i}] must be an integer, got: ${d}`);
    }
    if (d < 0) throw new RangeError(`Tensor: dims[${i}] must be a non-negative integer, got: ${d}`);
    size *= d;
  }
  return size;
}

// `data` of `type` as the typed array (or string array) the tensor holds.
function typedData(type, data) {
  if (type === "string") {
    if (!Array.isArray(data)) throw new TypeError("Tensor: a string tensor's data must be a string array");
    const bad = data.findIndex((s) => typeof s !== "string");
    if (bad >= 0) throw new TypeError(`Tensor: a string tensor's data must be strings; element ${bad} is a ${typeof data[bad]}`);
    return data;
  }
  const Typed = TYPED_ARRAYS[type];
  if (!Typed) {
    throw new TypeError(`Tensor: unsupported type '${type}'; supported: ${TENSOR_TYPES.join(", ")}`);
  }
  if (Array.isArray(data)) {
    if ((type === "float16" && !Float16) || type === "int4" || type === "uint4") {
      throw new TypeError(`Tensor: a ${type} tensor cannot be made from a number array here; ` +
                          `pass its bits in a ${Typed.name}`);
    }
    return type === "int64" || type === "uint64" ? Typed.from(data, BigInt) : Typed.from(data);
  }
  if (isArrayOf(data, Typed)) return data;
  if (type === "uint8" && isArrayOf(data, Uint8ClampedArray)) return Uint8Array.from(data);
  if (type === "float16" && isArrayOf(data, Uint16Array)) {     // the bits, as onnxruntime-web takes them
    return new Float16(data.buffer, data.byteOffset, data.length);
  }
  throw new TypeError(`Tensor: type '${type}' needs a ${Typed.name} or an array, got ` +
                      `${data?.constructor?.name ?? typeof data}`);
}

// `new Tensor(data, dims?)`: the type from the data, as onnxruntime-web infers it.
function inferred(data) {
  if (Array.isArray(data)) {
    if (data.length === 0) throw new TypeError("Tensor: the type cannot be inferred from an empty array");
    if (typeof data[0] === "string") return ["string", data];
    if (typeof data[0] === "boolean") return ["bool", Uint8Array.from(data)];
    throw new TypeError(`Tensor: the type cannot be inferred from an array of ${typeof data[0]}; ` +
                        `name it: new Tensor(type, data, dims)`);
  }
  if (isArrayOf(data, Uint8ClampedArray)) return ["uint8", Uint8Array.from(data)];
  const type = ArrayBuffer.isView(data) ? TYPE_OF_ARRAY[data.constructor?.name] : undefined;
  if (!type) throw new TypeError(`Tensor: unsupported data ${data?.constructor?.name ?? typeof data}`);
  return [type, data];
}

// the types a GPU-buffer tensor may hold (onnxruntime-web's)
const GPU_BUFFER_TYPES = ["float32", "float16", "int32", "int64", "uint32", "uint8", "int8", "bool",
                          "uint4", "int4"];

export class Tensor {
  #data;
  #location;
  #gpuBuffer;
  #download;        // () => Promise<typed array>: a GPU tensor's read back
  #dispose;         // releases what the tensor holds on the GPU
  #downloading = false;

  // new Tensor(type, data, dims?), new Tensor(data, dims?) (type inferred),
  // new Tensor({ location: "cpu-pinned", type, data, dims }) or
  // new Tensor({ location: "gpu-buffer", type, gpuBuffer, dims, download?, dispose? }), as
  // onnxruntime-web.
  constructor(typeOrData, data, dims) {
    let type;
    let location = "cpu";
    if (typeof typeOrData === "string") {
      type = typeOrData;
      data = typedData(type, data);
    } else if (typeOrData && typeof typeOrData === "object" && "location" in typeOrData) {
      ({ type, dims, location } = typeOrData);
      if (location === "gpu-buffer") {
        this.#initGpuBuffer(typeOrData);
        return;
      }
      if (location !== "cpu" && location !== "cpu-pinned") {
        throw new TypeError(`Tensor: edgerun holds tensors in memory or in GPU buffers; a ` +
                            `tensor on '${location}' is not supported: read it first`);
      }
      if (type === "string") throw new TypeError("Tensor: a string tensor cannot be 'cpu-pinned'");
      data = typedData(type, typeOrData.data);
      if (!ArrayBuffer.isView(typeOrData.data)) throw new TypeError("Tensor: a pinned buffer must be a typed array");
    } else {
      dims = data;
      [type, data] = inferred(typeOrData);
    }
    dims = dims ?? [data.length];
    const size = checkedSize(dims);
    const packed = type === "int4" || type === "uint4";
    if (size !== data.length && !(packed && Math.ceil(size / 2) === data.length)) {
      throw new Error(`Tensor: dims [${dims}] hold ${size} elements, data has ${data.length}`);
    }
    this.type = type;
    this.dims = Object.freeze([...dims]);
    this.size = size;
    this.#data = data;
    this.#location = location;
  }

  #initGpuBuffer({ type, dims, gpuBuffer, download, dispose }) {
    if (!GPU_BUFFER_TYPES.includes(type)) {
      throw new TypeError(`Tensor: a GPU buffer cannot hold a '${type}' tensor; types: ` +
                          `${GPU_BUFFER_TYPES.join(", ")}`);
    }
    if (!gpuBuffer || typeof gpuBuffer.size !== "number") {
      throw new TypeError("Tensor: a 'gpu-buffer' tensor needs a GPUBuffer (gpuBuffer)");
    }
    for (const [name, fn] of [["download", download], ["dispose", dispose]]) {
      if (fn !== undefined && typeof fn !== "function") throw new TypeError(`Tensor: '${name}' must be a function`);
    }
    this.type = type;
    this.dims = Object.freeze([...(dims ?? [])]);
    this.size = checkedSize(this.dims);
    this.#gpuBuffer = gpuBuffer;
    this.#download = download;
    this.#dispose = dispose;
    this.#location = "gpu-buffer";
  }

  // onnxruntime-web's accessors: a CPU tensor's data is in memory until dispose(); a GPU
  // tensor's is read with getData().
  get data() {
    if (this.#location === "none") throw new Error("Tensor: the tensor is disposed");
    if (this.#location === "gpu-buffer") {
      throw new Error("The data is not on CPU. Use `getData()` to download GPU data to CPU, " +
                      "or use `gpuBuffer` property to access the GPU data directly.");
    }
    return this.#data;
  }

  get location() {
    return this.#location;
  }

  get gpuBuffer() {
    if (this.#location !== "gpu-buffer") throw new Error("The data is not stored as a WebGPU buffer.");
    return this.#gpuBuffer;
  }

  // A GPU tensor's data, read back once; the tensor is then on the CPU (with releaseData,
  // its GPU buffer is released too), as onnxruntime-web's getData.
  async getData(releaseData) {
    if (this.#location !== "gpu-buffer") return this.data;
    if (!this.#download) throw new Error("The current tensor is not created with a specified data downloader.");
    if (this.#downloading) throw new Error("The current tensor is being downloaded.");
    this.#downloading = true;
    try {
      const data = await this.#download();
      this.#download = undefined;
      this.#data = data;
      this.#location = "cpu";
      if (releaseData && this.#dispose) {
        this.#dispose();
        this.#dispose = undefined;
      }
      this.#gpuBuffer = undefined;
      return data;
    } finally {
      this.#downloading = false;
    }
  }

  dispose() {
    this.#dispose?.();
    this.#dispose = undefined;
    this.#download = undefined;
    this.#gpuBuffer = undefined;
    this.#data = undefined;
    this.#location = "none";
  }

  reshape(dims) {
    return this.#location === "cpu-pinned"
      ? new Tensor({ location: "cpu-pinned", type: this.type, data: this.data, dims })
      : new Tensor(this.type, this.data, dims);
  }

  // An image (ImageData or any {data, width, height} of RGBA bytes; in a page also an
  // HTMLImageElement, ImageBitmap, canvas, OffscreenCanvas or a URL) as a tensor, as
  // onnxruntime-web: see image.js for the options.
  static async fromImage(image, options) {
    const { type, data, dims } = await imageToTensorData(image, options);
    return new Tensor(type, data, dims);
  }

  static fromPinnedBuffer(type, buffer, dims) {
    return new Tensor({ location: "cpu-pinned", type, data: buffer, dims: dims ?? [buffer.length] });
  }

  static fromTexture() {
    throw new TypeError("Tensor.fromTexture: edgerun keeps tensors in memory; read the texture's pixels first");
  }

  // A tensor over a GPUBuffer of the device edgerun computes on (env.webgpu.device, set by
  // the first session on "webgpu"): options { dataType, dims, download?, dispose? }.
  static fromGpuBuffer(gpuBuffer, { dataType, dims, download, dispose } = {}) {
    return new Tensor({ location: "gpu-buffer", type: dataType, gpuBuffer, dims, download, dispose });
  }

  static fromMLTensor() {
    throw new TypeError("Tensor.fromMLTensor: edgerun keeps tensors in memory; read the MLTensor first");
  }

  // The tensor as an image: ImageData (an {data, width, height} object where there is no
  // ImageData, as under Node) or a PNG data URL.
  toImageData(options) {
    return tensorToImageData(this, options);
  }

  toDataURL(options) {
    return tensorToDataURL(this, options);
  }

  // What crosses into Python: a numeric tensor's bytes, or a string tensor's strings.
  payload() {
    const data = this.data;
    if (this.type === "string") return data;
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  }

  // A session's output left in a GPUBuffer it gave the caller: read back with the device's
  // copy and map, destroyed by dispose() (or getData(true)).
  static fromGpuPayload(type, dims, gpuBuffer, device) {
    const Typed = TYPED_ARRAYS[type];
    const size = dims.reduce((a, b) => a * b, 1);
    const bytes = type === "int4" || type === "uint4" ? Math.ceil(size / 2) : size * Typed.BYTES_PER_ELEMENT;
    const download = async () => {
      const copy = await readGpuBuffer(device, gpuBuffer, bytes);
      return new Typed(copy, 0, copy.byteLength / Typed.BYTES_PER_ELEMENT);
    };
    return new Tensor({ location: "gpu-buffer", type, gpuBuffer, dims, download,
                        dispose: () => gpuBuffer.destroy() });
  }

  static fromPayload(type, dims, payload) {
    if (type === "string") return new Tensor("string", Array.from(payload), dims);
    const Typed = TYPED_ARRAYS[type];
    if (!Typed) throw new TypeError(`output of unsupported type '${type}'`);
    const copy = new Uint8Array(payload);      // own, aligned memory
    return new Tensor(type, new Typed(copy.buffer, 0, copy.byteLength / Typed.BYTES_PER_ELEMENT), dims);
  }
}

// The first `bytes` of a GPUBuffer (usage COPY_SRC) as a new ArrayBuffer.
export async function readGpuBuffer(device, buffer, bytes) {
  const padded = Math.max(Math.ceil(bytes / 4) * 4, 4);
  const staging = device.createBuffer({ size: padded, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  try {
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(buffer, 0, staging, 0, padded);
    device.queue.submit([encoder.finish()]);
    await staging.mapAsync(GPUMapMode.READ);
    return staging.getMappedRange().slice(0, bytes);
  } finally {
    staging.destroy();
  }
}
