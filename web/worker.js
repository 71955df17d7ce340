// The module Web Worker behind `InferenceSession.create(model, { worker: true })`: Pyodide
// and the sessions live here, so the page's thread never waits for Python.
//
// Messages in:  { id, op: "create", args: [modelBytes, options, config] }
//               { id, op: "run", args: [handle, items, fetches] }   (items: [name, type, dims,
//                                       bytes, or an array of strings for a string tensor])
//               { id, op: "release", args: [handle] }
// Messages out: { id, progress } while creating, then { id, ok: true, result }
//               or { id, ok: false, error: { message, pythonTraceback } }.
import { configure } from "./runtime.js";
import { createSession } from "./engine.js";

const sessions = new Map();
let nextHandle = 1;

const OPS = {
  async create(id, [model, options, config]) {
    configure(config);
    const session = await createSession(model, options,
                                               (progress) => self.postMessage({ id, progress }));
    const handle = nextHandle++;
    sessions.set(handle, session);
    return [{ handle, info: session.info }, []];
  },

  async run(id, [handle, items, fetches]) {
    const outputs = await session(handle).run(items, fetches);
    // a numeric output's bytes are transferred, not copied; a string output's strings are copied
    const owned = outputs.map(([name, type, dims, payload]) =>
      [name, type, dims, type === "string" ? Array.from(payload) : new Uint8Array(payload)]);
    return [owned, owned.filter((item) => item[1] !== "string").map((item) => item[3].buffer)];
  },

  async release(id, [handle]) {
    sessions.get(handle)?.release();
    sessions.delete(handle);
    return [null, []];
  },
};

function session(handle) {
  const found = sessions.get(handle);
  if (!found) throw new Error("InferenceSession.run: this session was released");
  return found;
}

self.onmessage = async ({ data: { id, op, args } }) => {
  try {
    const [result, transfer] = await OPS[op](id, args);
    self.postMessage({ id, ok: true, result }, transfer);
  } catch (e) {
    self.postMessage({ id, ok: false,
                       error: { message: String(e?.message ?? e), pythonTraceback: e?.pythonTraceback } });
  }
};
