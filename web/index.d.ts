export type TensorType = "float32" | "float64" | "float16" | "int8" | "uint8" | "int16" | "uint16"
  | "int32" | "uint32" | "int64" | "uint64" | "bool";

export class Tensor {
  constructor(type: TensorType, data: ArrayLike<number | bigint> | ArrayBufferView, dims?: readonly number[]);
  readonly type: TensorType;
  readonly data: ArrayBufferView;
  readonly dims: readonly number[];
  readonly size: number;
  /** Where the data lives: always "cpu" (in memory) for edgerun's tensors. */
  readonly location: "cpu";
  getData(): Promise<ArrayBufferView>;
  dispose(): void;
}

/** What run() takes as a feed: edgerun's Tensor or any onnxruntime-common-style tensor. */
export interface TensorLike {
  readonly type: string;
  readonly data: ArrayLike<number | bigint> | ArrayBufferView;
  readonly dims: readonly number[];
}

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
  static create(buffer: ArrayBuffer, byteOffset: number, byteLength?: number, options?: SessionOptions): Promise<InferenceSession>;
  readonly inputNames: string[];
  readonly outputNames: string[];
  readonly inputMetadata: ValueMetadata[];
  readonly outputMetadata: ValueMetadata[];
  run(feeds: Record<string, Tensor | TensorLike>, fetches?: string[]): Promise<Record<string, Tensor>>;
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

export const env: {
  /** Folder holding pyodide.mjs and its files (absolute or relative to the page). Default: the
   * `pyodide` module as the page resolves it (node_modules, a bundler, or an import map). */
  pyodide: { indexURL?: string | URL };
  /** The edgerun wheel. Default: dist/edgerun.whl next to index.js. */
  wheelURL?: string | URL;
  /** Default for SessionOptions.worker. */
  worker: boolean;
  /** onnxruntime-web's spelling of `worker`; numThreads and simd are accepted (one thread). */
  wasm: { proxy: boolean; numThreads: number; simd: boolean };
  /** Accepted for scripts that touch it; the webgpu provider requests its own GPUDevice. */
  webgpu: { device?: unknown };
  logLevel: string;
};
