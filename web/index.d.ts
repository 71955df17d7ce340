export type TensorType = "float32" | "float64" | "float16" | "int8" | "uint8" | "int16" | "uint16"
  | "int32" | "uint32" | "int64" | "uint64" | "bool" | "string" | "int4" | "uint4";

/** A tensor's data: a typed array (bool: Uint8Array; float16: Float16Array where the platform
 * has it, else Uint16Array of the bits; int4/uint4: two values a byte), or strings. */
export type TensorData = Float32Array | Float64Array | Int8Array | Uint8Array | Int16Array
  | Uint16Array | Int32Array | Uint32Array | BigInt64Array | BigUint64Array | string[];

/** Tensor.fromImage's options, as onnxruntime-web documents them. */
export interface TensorFromImageOptions {
  /** The tensor's channels, in order (default "RGB"). */
  tensorFormat?: "RGB" | "RGBA" | "BGR" | "RBG";
  /** "NCHW" (default): dims [1, C, H, W]; "NHWC": [1, H, W, C]. */
  tensorLayout?: "NCHW" | "NHWC";
  /** Default "float32"; "uint8" holds the pixels (rounded and clamped when norm is given). */
  dataType?: "float32" | "uint8";
  /** Each value is (pixel + bias) / mean; one number, or 3 or 4 in R, G, B, A order.
   * Defaults: mean 255 (uint8: 1), bias 0. */
  norm?: { mean?: number | number[]; bias?: number | number[] };
  /** The tensor's size: the image is resized bilinearly (ONNX Resize linear, half_pixel). */
  resizedWidth?: number;
  resizedHeight?: number;
}

/** toImageData's and toDataURL's options: pixel = (value - bias) * mean, rounded and clamped
 * (defaults: mean 255 for floats, 1 for integers; bias 0); format defaults by the tensor's
 * channel count ("RGB" for 3, "RGBA" for 4). */
export interface TensorToImageOptions {
  format?: "RGB" | "RGBA" | "BGR" | "RBG";
  tensorLayout?: "NCHW" | "NHWC";
  norm?: { mean?: number | number[]; bias?: number | number[] };
}

/** ImageData's fields: what toImageData gives where ImageData does not exist (Node), and
 * what fromImage takes there (RGBA bytes, 4 a pixel). */
export interface ImageDataLike {
  readonly data: Uint8ClampedArray | Uint8Array | ArrayLike<number>;
  readonly width: number;
  readonly height: number;
}

/** What fromImage reads: ImageData or an ImageDataLike anywhere; in a page or Web Worker also
 * an <img>, ImageBitmap, canvas, OffscreenCanvas, video or VideoFrame, or a URL (string or URL). */
export type ImageSource = ImageDataLike | string | URL | CanvasImageSourceLike;
/** A drawable DOM image (HTMLImageElement, ImageBitmap, HTMLCanvasElement, OffscreenCanvas, ...). */
export interface CanvasImageSourceLike { readonly width: unknown; readonly height: unknown }

export class Tensor {
  /** onnxruntime-web's constructors: new Tensor(type, data, dims?) ... */
  constructor(type: TensorType, data: TensorData | ArrayLike<number | bigint | boolean | string> | Uint8ClampedArray,
              dims?: readonly number[]);
  /** ... new Tensor(data, dims?), the type from the data (a typed array, string[] or boolean[]) ... */
  constructor(data: TensorData | boolean[] | Uint8ClampedArray, dims?: readonly number[]);
  /** ... new Tensor({ location: "cpu-pinned", type, data, dims }) ... */
  constructor(params: { location: "cpu" | "cpu-pinned"; type: TensorType; data: TensorData; dims: readonly number[] });
  /** ... and new Tensor({ location: "gpu-buffer", type, gpuBuffer, dims, download?, dispose? }). */
  constructor(params: { location: "gpu-buffer"; type: GpuBufferDataType; gpuBuffer: GPUBufferLike;
                        dims: readonly number[]; download?: () => Promise<TensorData>; dispose?: () => void });
  readonly type: TensorType;
  /** Throws once the tensor is disposed, and while it is in a GPU buffer (use getData()). */
  readonly data: TensorData;
  dims: readonly number[];
  readonly size: number;
  /** Where the data lives: in memory ("cpu", or "cpu-pinned" from fromPinnedBuffer), in a
   * GPUBuffer ("gpu-buffer": preferredOutputLocation, fromGpuBuffer); "none" once disposed. */
  readonly location: "cpu" | "cpu-pinned" | "gpu-buffer" | "none";
  /** A "gpu-buffer" tensor's GPUBuffer (throws for other locations). */
  readonly gpuBuffer: GPUBufferLike;
  /** The data; a GPU tensor's is read back once, after which the tensor is on "cpu"
   * (releaseData: its GPU buffer is released too). */
  getData(releaseData?: boolean): Promise<TensorData>;
  /** Releases the data (a session's GPU-buffer output: destroys its GPUBuffer). */
  dispose(): void;
  /** The same data with other dims. */
  reshape(dims: readonly number[]): Tensor;
  /** The image as a tensor (float32 [1, 3, H, W] pixel / 255 by default). Under Node only
   * ImageData-like sources work; DOM sources and URLs reject, saying so. */
  static fromImage(image: ImageSource, options?: TensorFromImageOptions): Promise<Tensor>;
  static fromPinnedBuffer(type: Exclude<TensorType, "string">, buffer: TensorData, dims?: readonly number[]): Tensor;
  /** A tensor over a GPUBuffer of env.webgpu.device (usage STORAGE | COPY_SRC). A session on
   * "webgpu" reads float32, int32 and uint32 buffers in place; other types through `download`. */
  static fromGpuBuffer(buffer: GPUBufferLike, options: { dataType: GpuBufferDataType; dims: readonly number[];
                       download?: () => Promise<TensorData>; dispose?: () => void }): Tensor;
  /** Not supported: WebGL textures and WebNN tensors (these throw, saying so). */
  static fromTexture(texture: unknown, options: unknown): never;
  static fromMLTensor(tensor: unknown, options: unknown): never;
  /** An image tensor ([1, C, H, W] or NHWC, 3 or 4 channels) as ImageData (an ImageDataLike
   * with colorSpace under Node). */
  toImageData(options?: TensorToImageOptions): ImageData;
  /** An image tensor as a PNG data URL (no canvas needed: works in workers and Node too). */
  toDataURL(options?: TensorToImageOptions): string;
}

/** What run() takes as a feed: edgerun's Tensor or any onnxruntime-common-style tensor. */
export interface TensorLike {
  readonly type: string;
  readonly data: ArrayLike<number | bigint> | ArrayBufferView | readonly string[];
  readonly dims: readonly number[];
}

/** The types a GPU-buffer tensor holds (onnxruntime-web's). */
export type GpuBufferDataType = "float32" | "float16" | "int32" | "int64" | "uint32" | "uint8" | "int8"
  | "bool" | "uint4" | "int4";
/** A WebGPU GPUBuffer (typed loosely so that pages without @webgpu/types compile). */
export interface GPUBufferLike { readonly size: number; destroy(): void }

export type OutputLocation = "cpu" | "cpu-pinned" | "gpu-buffer";

export interface Progress { phase: "pyodide" | "edgerun" | "model"; progress: number }

export interface SessionOptions {
  /** In priority order; omitted or empty: the providers that work here ("webgpu" where
   * navigator.gpu exists, then "wasm"), as onnxruntime-web chooses. */
  executionProviders?: Array<"webgpu" | "wasm" | "cpu" | { name: string }>;
  graphOptimizationLevel?: "disabled" | "basic" | "extended" | "all";
  onProgress?: (p: Progress) => void;
  /** Run Pyodide and this session in a module Web Worker, so runs never block the page
   * (browsers only). Default: env.worker || env.wasm.proxy. */
  worker?: boolean;
  /** onnxruntime-web's log options: accepted (edgerun reports through errors and warnings). */
  logSeverityLevel?: 0 | 1 | 2 | 3 | 4;
  logVerbosityLevel?: number;
  /** "gpu-buffer" keeps outputs (all, or those named) in GPUBuffers of env.webgpu.device:
   * needs the "webgpu" provider, and not `worker: true`. */
  preferredOutputLocation?: OutputLocation | Record<string, OutputLocation>;
}

/** run()'s options: onnxruntime-web's are accepted; `signal` aborts the run before its next node. */
export interface RunOptions {
  signal?: AbortSignal;
  logSeverityLevel?: 0 | 1 | 2 | 3 | 4;
  logVerbosityLevel?: number;
  tag?: string;
}

/** onnxruntime-web's value metadata; symbolic dims are their names (or null when unnamed). */
export interface ValueMetadata {
  name: string;
  isTensor: boolean;
  type: TensorType | string;
  shape: Array<number | string | null>;
}

/** Errors from the engine carry Python's message (e.g. "InvalidArgument: input 'x': expected
 * tensor(float), got tensor(int32)") and the full traceback in `pythonTraceback`. */
export interface EdgerunError extends Error { pythonTraceback?: string }

export class InferenceSession {
  static create(model: string | URL | Uint8Array | ArrayBuffer | Blob, options?: SessionOptions): Promise<InferenceSession>;
  /** The model is `byteLength` bytes (default: to the end) at `byteOffset` of `buffer`. */
  static create(buffer: ArrayBuffer | SharedArrayBuffer, byteOffset: number, byteLength?: number, options?: SessionOptions): Promise<InferenceSession>;
  readonly inputNames: string[];
  readonly outputNames: string[];
  readonly inputMetadata: ValueMetadata[];
  readonly outputMetadata: ValueMetadata[];
  /** fetches: output names, or an object naming outputs (null, or a Tensor of the output's
   * type and size that the output is copied into). Without fetches: every output. */
  run(feeds: Record<string, Tensor | TensorLike>, fetches?: readonly string[] | Record<string, Tensor | null>,
      options?: RunOptions): Promise<Record<string, Tensor>>;
  run(feeds: Record<string, Tensor | TensorLike>, options?: RunOptions): Promise<Record<string, Tensor>>;
  /** Where each node runs (fixed at creation; synchronous in a worker too). */
  explain(): {
    nodes: Array<{ node: string; op_type: string; domain: string; provider: string; refused_by: string[] }>;
    copies_per_run: number;
    copies_per_subgraph_run: number;
    providers: string[];
  };
  /** Drops the session: its memory (wasm linear memory included) is freed once collected; later calls throw. */
  release(): Promise<void>;
}

/** Python custom operators (edgerun.custom_ops.onnx_op) for the sessions created after
 * this call, run by the wasm provider; `packages`: Pyodide packages the source imports. */
export function registerCustomOps(source: string, options?: { packages?: string[] }): void;

export const env: {
  /** Folder holding pyodide.mjs and its files (absolute or relative to the page). Default: the
   * `pyodide` module as the page resolves it (node_modules, a bundler, or an import map). */
  pyodide: { indexURL?: string | URL };
  /** The edgerun wheel. Default: dist/edgerun.whl next to index.js. */
  wheelURL?: string | URL;
  /** The start-up snapshot's description (its data file beside it). Default:
   * dist/edgerun-snapshot.json next to index.js; null: start Python from scratch. */
  snapshotURL?: string | URL | null;
  /** Default for SessionOptions.worker. */
  worker: boolean;
  /** onnxruntime-web's spelling of `worker`; numThreads and simd are accepted (one thread). */
  wasm: { proxy: boolean; numThreads: number; simd: boolean };
  /** The GPUDevice the webgpu provider computes on, set when the first session on "webgpu"
   * is created (make fromGpuBuffer's buffers on it). */
  webgpu: { device?: unknown };
  logLevel: string;
  /** Keep a session whose whole model runs as recorded wasm programs in Cache Storage, so a
   * later visit creating it (same model bytes, wheel, providers, optimization level) runs
   * without starting Python. Default true. */
  keepSessions: boolean;
};
