// A session whose Pyodide runs in a module Web Worker (worker.js): the same calls as
// engine.js's PythonSession, as messages. One worker per page, shared by its sessions.
import { workerConfig } from "./runtime.js";

let worker = null;
const pending = new Map();       // message id -> { resolve, reject, onProgress }
let nextId = 1;

function startWorker() {
  if (typeof Worker === "undefined") {
    throw new Error("InferenceSession.create: `worker: true` needs a browser's Web Worker; " +
                    "this JavaScript environment has none (in Node, leave it off)");
  }
  const started = new Worker(new URL("./worker.js", import.meta.url), { type: "module" });
  started.onmessage = ({ data }) => {
    const call = pending.get(data.id);
    if (!call) return;
    if (data.progress) return call.onProgress(data.progress);
    pending.delete(data.id);
    if (data.ok) return call.resolve(data.result);
    const error = new Error(data.error.message);
    if (data.error.pythonTraceback) error.pythonTraceback = data.error.pythonTraceback;
    call.reject(error);
  };
  started.onerror = (event) => {         // the worker's script failed to load or threw
    const error = new Error(`edgerun worker failed: ${event.message ?? "its script did not load"}`);
    for (const call of pending.values()) call.reject(error);
    pending.clear();
    worker = null;
  };
  return started;
}

function call(op, args, transfer = [], onProgress = () => {}) {
  worker ??= startWorker();
  const id = nextId++;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject, onProgress });
    worker.postMessage({ id, op, args }, transfer);
  });
}

export class WorkerSession {
  #handle;

  constructor(handle, info) {
    this.#handle = handle;
    this.info = info;
  }

  static async create(bytes, options, onProgress) {
    const copy = bytes.slice();          // the caller keeps its buffer
    const { executionProviders, graphOptimizationLevel } = options;
    const { handle, info } = await call("create", [copy, { executionProviders, graphOptimizationLevel },
                                                   workerConfig()], [copy.buffer], onProgress);
    return new WorkerSession(handle, info);
  }

  async run(items, fetches) {
    if (this.#handle === null) throw new Error("InferenceSession.run: this session was released");
    const owned = items.map(([name, type, dims, payload]) => [name, type, dims, payload.slice()]);
    return call("run", [this.#handle, owned, fetches ?? null],
                owned.filter((item) => item[1] !== "string").map((item) => item[3].buffer));
  }

  async release() {
    if (this.#handle === null) return;
    const handle = this.#handle;
    this.#handle = null;
    await call("release", [handle]);
  }
}
