export type TensorType = "float32" | "float64" | "float16" | "int8" | "uint8" | "int16" | "uint16"
  | "int32" | "uint32" | "int64" | "uint64" | "bool";

export class Tensor {
  constructor(type: TensorType, data: ArrayLike<number | bigint> | ArrayBufferView, dims?: readonly number[]);
  readonly type: TensorType;
  readonly data: ArrayBufferView;
  readonly dims: readonly number[];
  readonly size: number;
}

export interface Progress { phase: "pyodide" | "edgerun" | "model"; progress: number }

export interface SessionOptions {
  executionProviders?: Array<"webgpu" | "wasm" | "cpu" | { name: string }>;
  graphOptimizationLevel?: "disabled" | "basic" | "extended" | "all";
  onProgress?: (p: Progress) => void;
}

/** Errors from the engine carry Python's message (e.g. "InvalidArgument: input 'x': expected
 * tensor(float), got tensor(int32)") and the full traceback in `pythonTraceback`. */
export interface EdgerunError extends Error { pythonTraceback?: string }

export class InferenceSession {
  static create(model: string | URL | Uint8Array | ArrayBuffer, options?: SessionOptions): Promise<InferenceSession>;
  readonly inputNames: string[];
  readonly outputNames: string[];
  run(feeds: Record<string, Tensor>, fetches?: string[]): Promise<Record<string, Tensor>>;
  explain(): { nodes: Array<{ node: string; op_type: string; provider: string; refused_by: string[] }>; copies_per_run: number };
  /** Drops the session: its memory (wasm linear memory included) is freed once collected; later calls throw. */
  release(): Promise<void>;
}

export const env: { pyodide: { indexURL?: string }; wheelURL?: string | URL; logLevel: string };
