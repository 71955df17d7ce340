// Tensor: onnxruntime-web's constructor and fields (type, data, dims, size).
const TYPED_ARRAYS = {
  float32: Float32Array, float64: Float64Array, int8: Int8Array, uint8: Uint8Array,
  int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array, bool: Uint8Array, float16: Uint16Array,
};

export class Tensor {
  constructor(type, data, dims) {
    if (!(type in TYPED_ARRAYS)) {
      throw new TypeError(`Tensor: unsupported type '${type}'; supported: ${Object.keys(TYPED_ARRAYS).join(", ")}`);
    }
    const Typed = TYPED_ARRAYS[type];
    if (Array.isArray(data)) {
      data = type === "int64" || type === "uint64" ? Typed.from(data, BigInt) : Typed.from(data);
    } else if (!(data instanceof Typed) &&
               !(ArrayBuffer.isView(data) && data.constructor?.name === Typed.name)) {   // another realm's
      throw new TypeError(`Tensor: type '${type}' needs a ${Typed.name} or an array, got ${data?.constructor?.name ?? typeof data}`);
    }
    dims = dims ?? [data.length];
    const size = dims.reduce((a, b) => a * b, 1);
    if (size !== data.length) {
      throw new RangeError(`Tensor: dims [${dims}] hold ${size} elements, data has ${data.length}`);
    }
    this.type = type;
    this.data = data;
    this.dims = Object.freeze([...dims]);
    this.size = size;
    this.location = "cpu";
  }

  // onnxruntime-web's accessors for tensors that may live elsewhere; these are in memory.
  async getData() {
    return this.data;
  }

  dispose() {}

  bytes() {
    return new Uint8Array(this.data.buffer, this.data.byteOffset, this.data.byteLength);
  }

  static fromBytes(type, dims, bytes) {
    const Typed = TYPED_ARRAYS[type];
    if (!Typed) throw new TypeError(`output of unsupported type '${type}'`);
    const copy = new Uint8Array(bytes);      // own, aligned memory
    return new Tensor(type, new Typed(copy.buffer, 0, copy.byteLength / Typed.BYTES_PER_ELEMENT), dims);
  }
}
