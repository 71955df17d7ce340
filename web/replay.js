// Recorded wasm programs the page replays itself, with no call into Python.
//
// A session whose whole model runs on the wasm provider records one program per input
// signature (engine/edgerun/providers/wasm/program.py) and, inside Python, replays it on
// later runs. Entering Python and building its values costs more than the whole run of a
// small model, so after a Python run the page asks once per signature for the program's
// ticket (bridge.WebSession.replay_ticket): the kernels' exports, the program's word list,
// and where each input is written and each output read in linear memory. A later run whose
// feeds match a ticket (names, types, dims, byte lengths and the values of small integer
// feeds, which the recording's decisions read) copies the feeds in, calls er_run_program
// and copies the outputs out: the same computation Python's replay makes.
// Anything else (no ticket, a program that fails: an index out of range) goes to Python,
// which runs it and names the error.

const MAX_ASKED = 64;       // feed signatures asked about per session (then: Python only)

export class ProgramReplays {
  #tickets = [];
  #asked = new Set();

  // [[name, type, dims, bytes]] for the outputs `names` (null: all), or null when no ticket
  // matches `items` or the program reported a failure.
  run(items, names) {
    if (!this.#tickets.length) return null;
    const byName = new Map(items.map((item) => [item[0], item]));
    const ticket = this.#tickets.find((t) => matches(t, items, byName));
    if (!ticket) return null;
    const { exports } = ticket;
    let memory = new Uint8Array(exports.memory.buffer);
    for (const input of ticket.inputs) {
      if (input) memory.set(byName.get(input.name)[3], input.ptr);
    }
    if (ticket.nwords && exports.er_run_program(ticket.words, ticket.nwords) !== 0) return null;
    memory = new Uint8Array(exports.memory.buffer);     // a kernel may have grown memory
    return (names ?? ticket.outputNames).map((name) => {
      const o = ticket.outputs.get(name);
      return [name, o.type, [...o.dims], memory.slice(o.ptr, o.ptr + o.nbytes)];
    });
  }

  // The tickets learned or adopted, in order.
  get tickets() {
    return this.#tickets;
  }

  // After a Python run with `items`: ask `session` (a bridge.WebSession) once per signature
  // for a ticket. True when it gave a new one.
  learn(pyodide, session, items) {
    if (this.#asked.size >= MAX_ASKED) return false;
    const key = signature(items);
    if (key === null || this.#asked.has(key)) return false;
    this.#asked.add(key);
    const pyItems = pyodide.toPy(items);
    const ask = session.replay_ticket;
    let proxy;
    try {
      proxy = ask(pyItems);
    } finally {
      ask.destroy();
      pyItems.destroy();
    }
    if (!proxy) return false;
    const ticket = proxy.toJs({ dict_converter: Object.fromEntries });
    proxy.destroy();
    this.adopt(ticket);
    return true;
  }

  // A ticket made elsewhere (kept.js restores them): { exports, words, nwords, inputs:
  // [{ name, type, dims, ptr, nbytes, ints } or null], outputs: [{ name, type, dims, ptr,
  // nbytes }] }.
  adopt(ticket) {
    this.#tickets.push({ ...ticket, outputNames: ticket.outputs.map((o) => o.name),
                         outputs: new Map(ticket.outputs.map((o) => [o.name, o])),
                         fed: ticket.inputs.filter((input) => input).length });
  }
}

function matches(ticket, items, byName) {
  if (items.length !== ticket.fed) return false;
  for (const input of ticket.inputs) {
    if (!input) continue;
    const item = byName.get(input.name);
    if (!item || item.length > 4 || item[1] !== input.type) return false;
    const [, , dims, bytes] = item;
    if (!(bytes instanceof Uint8Array) || bytes.byteLength !== input.nbytes) return false;
    if (dims.length !== input.dims.length || dims.some((d, i) => d !== input.dims[i])) return false;
    if (input.ints && bytes.some((b, i) => b !== input.ints[i])) return false;
  }
  return true;
}

// The key under which a run's feeds were asked about; null for feeds no ticket takes (a
// string tensor, a GPU buffer).
function signature(items) {
  const parts = [];
  for (const [name, type, dims, bytes, location] of items) {
    if (location || !(bytes instanceof Uint8Array)) return null;
    const small = bytes.byteLength <= 512 && type !== "float32" && type !== "float16" && type !== "float64";
    parts.push([name, type, [...dims], small ? [...bytes] : bytes.byteLength]);
  }
  return JSON.stringify(parts);
}
