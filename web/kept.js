// Sessions kept for the next visit, in Cache Storage.
//
// A session whose whole model runs as recorded wasm programs needs nothing of Python to
// replay the runs it recorded (replay.js): only the kernels' module, its linear memory
// (weights, packed constants, the programs' word lists) and the tickets saying where each
// feed is written and each output read. Once such a session has learned a ticket, the page
// keeps those three (and the session's names, metadata and placement); a later visit that
// creates the same session (the same model bytes, edgerun wheel, providers and optimization
// level) restores them in tens of milliseconds and answers every run that matches a ticket
// without starting Pyodide. Any other run starts Python then, and creates the session there
// as it would have been created without a kept one.
//
// An entry is found by the model's URL (or its bytes' hash) and the options, so a visit that
// has none starts Python at once; an entry found is used only when the model's and the
// wheel's SHA-256 are those it was made with. env.keepSessions = false turns this off.
import { expandImage, imageLength, sparseImage } from "./memory_image.js";
import { ProgramReplays } from "./replay.js";
import { absoluteURL, env, hasCustomOps, mark, sha256, wheelSha256 } from "./runtime.js";

const CACHE = "edgerun-sessions";
const FORMAT = 1;
const MAX_KEPT = 8;              // sessions kept per origin; the oldest entry goes first
const MAGIC = 0x314b5245;        // "ERK1"
const LISTED = "edgerun:kept-sessions";    // localStorage: the kept sessions' keys

// Where the session `create` makes would be kept, and what is kept there already:
// { key, cache (a promise), entry (a Response) or null, modelBytes, modelHash }; null when
// nothing is kept for these options (no Cache Storage here, custom operators, GPU outputs,
// env.keepSessions off).
export async function keptSlot(model, modelBytes, providers, options) {
  if (!env.keepSessions || typeof caches === "undefined" || !globalThis.crypto?.subtle) return null;
  if (hasCustomOps() || options.gpuOutputs?.length) return null;
  const slot = { key: null, cache: null, entry: null, modelBytes, modelHash: null };
  const source = typeof model === "string" || model instanceof URL ? absoluteURL(model).href
    : `sha256:${await modelHash(slot)}`;
  const query = new URLSearchParams({ format: FORMAT, model: source, providers: providers.join(","),
                                      level: options.graphOptimizationLevel ?? "all" });
  const key = slot.key = new Request(`https://edgerun.invalid/session?${query}`);
  const cache = slot.cache = caches.open(CACHE);
  cache.catch(() => {});                 // storage refused (private mode): nothing is kept
  // A page's first visit has nothing kept: the list in localStorage says so at once, so
  // Python starts without waiting for Cache Storage to open (tens of milliseconds).
  if (keptKeys()?.includes(key.url) === false) return slot;
  try {
    slot.entry = (await (await cache).match(key)) ?? null;
  } catch {
    return null;
  }
  return slot;
}

// The restored session in `slot` (its entry read, the module compiled and the memory
// written while the model's and the wheel's hashes are checked), or null when the entry
// cannot be used: made from other model bytes or another wheel, or damaged. Such an entry
// is dropped.
export async function restoreKept(slot, startPython) {
  hashes(slot).catch(() => {});          // hashing while the rest goes on (errors: below)
  try {
    const { header, module, image } = parseEntry(new Uint8Array(await slot.entry.arrayBuffer()));
    const { instance } = await WebAssembly.instantiate(module, {});
    const { memory } = instance.exports;
    const length = imageLength(image);
    const missing = length - memory.buffer.byteLength;
    if (missing > 0) memory.grow(Math.ceil(missing / 65536));
    expandImage(image, new Uint8Array(memory.buffer, 0, length));
    const [model, wheel] = await hashes(slot);
    if (header.model !== model || header.wheel !== wheel) {
      await drop(slot);
      return null;
    }
    const replays = new ProgramReplays();
    for (const ticket of header.tickets) {
      replays.adopt({ ...ticket, exports: instance.exports,
                      inputs: ticket.inputs.map((i) => i && { ...i, ints: i.ints && new Uint8Array(i.ints) }) });
    }
    mark("session-restored");
    return new KeptSession(header.info, replays, startPython);
  } catch (e) {
    console.warn(`edgerun: the kept session could not be restored (${e?.message ?? e}); creating it`);
    await drop(slot).catch(() => {});
    return null;
  }
}

// The SHA-256 of the slot's model, computed once.
function modelHash(slot) {
  slot.modelHash ??= slot.modelBytes.then(sha256);
  return slot.modelHash;
}

// [the model's SHA-256, the wheel's].
function hashes(slot) {
  return Promise.all([modelHash(slot), wheelSha256()]);
}

async function drop(slot) {
  const cache = await slot.cache;
  await cache.delete(slot.key);
  remember(await cache.keys());
}

// The keys of the kept sessions, as the last one kept or dropped left them in localStorage;
// null where there is no localStorage (a Web Worker, Node): then Cache Storage is asked.
function keptKeys() {
  try {
    const storage = globalThis.localStorage;
    if (!storage) return null;
    return JSON.parse(storage.getItem(LISTED) ?? "[]");
  } catch {
    return null;
  }
}

function remember(requests) {
  try {
    globalThis.localStorage?.setItem(LISTED, JSON.stringify(requests.map((r) => r.url)));
  } catch { /* no localStorage, or it is full: Cache Storage is asked instead */ }
}

// A restored session: runs that match a kept ticket are replayed here; the first that does
// not starts Python and creates the session there (startPython), which runs it and every
// later one that no ticket matches.
export class KeptSession {
  #replays;
  #startPython;
  #python = null;

  constructor(info, replays, startPython) {
    this.info = info;
    this.#replays = replays;
    this.#startPython = startPython;
  }

  async run(items, fetches, signal) {
    if (!this.#replays) throw new Error("InferenceSession.run: this session was released");
    const replayed = this.#replays.run(items, fetches);
    if (replayed) return replayed;
    this.#python ??= this.#startPython().catch((e) => {
      this.#python = null;
      throw e;
    });
    return (await this.#python).run(items, fetches, signal);
  }

  async release() {
    this.#replays = null;
    const python = this.#python;
    this.#python = null;
    (await python?.catch(() => null))?.release();
  }
}

// Keep `session` (a bridge.WebSession whose page session learned `tickets`) in `slot`,
// replacing what was kept there. Called after a run: the module and the memory (weights,
// constants, programs) are copied now, while the session surely lives; hashing, packing and
// storing happen after the run's result is delivered, and a failure only costs the next
// visit its speed.
export function keepSession(slot, session, info, tickets) {
  let module, memory, header;
  try {
    const exports = tickets[0].exports;
    if (tickets.some((t) => t.exports !== exports)) return;
    module = session.kernels_module();
    memory = new Uint8Array(exports.memory.buffer.slice(0));
    header = { format: FORMAT, info, tickets: tickets.map(plainTicket) };
  } catch (e) {
    console.warn(`edgerun: the session could not be kept for the next visit (${e?.message ?? e})`);
    return;
  }
  if (!module) return;
  setTimeout(async () => {
    try {
      [header.model, header.wheel] = await hashes(slot);
      const entry = packEntry(header, module, sparseImage(memory));
      const cache = await slot.cache;
      for (const old of (await cache.keys()).slice(0, -(MAX_KEPT - 1) || undefined)) {
        if (old.url !== slot.key.url) await cache.delete(old);
      }
      await cache.put(slot.key, new Response(entry));
      remember(await cache.keys());
    } catch (e) {
      console.warn(`edgerun: the session could not be kept for the next visit (${e?.message ?? e})`);
    }
  }, 0);
}

function plainTicket({ words, nwords, inputs, outputNames, outputs }) {
  return { words, nwords, outputs: outputNames.map((name) => outputs.get(name)),
           inputs: inputs.map((i) => i && { ...i, ints: i.ints ? Array.from(i.ints) : null }) };
}

// An entry: "ERK1", the header's length, the header (JSON), the module's length, the
// module's bytes, then the memory's sparse image (memory_image.js).
function packEntry(header, module, image) {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const entry = new Uint8Array(12 + json.length + module.length + image.length);
  const view = new DataView(entry.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, json.length, true);
  entry.set(json, 8);
  view.setUint32(8 + json.length, module.length, true);
  entry.set(module, 12 + json.length);
  entry.set(image, 12 + json.length + module.length);
  return entry;
}

function parseEntry(entry) {
  const view = new DataView(entry.buffer, entry.byteOffset, entry.byteLength);
  if (entry.length < 12 || view.getUint32(0, true) !== MAGIC) throw new Error("not a kept edgerun session");
  const length = view.getUint32(4, true);
  if (8 + length + 4 > entry.length) throw new Error("the entry is truncated");
  const header = JSON.parse(new TextDecoder().decode(entry.subarray(8, 8 + length)));
  if (header.format !== FORMAT) throw new Error(`format ${header.format}, not ${FORMAT}`);
  const moduleLength = view.getUint32(8 + length, true);
  const start = 12 + length;
  if (start + moduleLength > entry.length) throw new Error("the entry is truncated");
  return { header, module: entry.subarray(start, start + moduleLength),
           image: entry.subarray(start + moduleLength) };
}
