// Memory images stored without their zero pages: Pyodide's start-up snapshot
// (scripts/make_snapshot.mjs, runtime.js) and the kernels' memory of a kept session
// (kept.js). Layout, little-endian u32s: "ERS1", image length, page size, run count,
// (first page, page count) per run of non-zero pages, then the runs' bytes in order (the
// image's last page may be short).
const MAGIC = 0x31535245;

export function sparseImage(image, pageSize = 4096) {
  const pages = Math.ceil(image.length / pageSize);
  // whole pages are compared as 32-bit words where the image is aligned for it
  const words = image.byteOffset % 4 === 0 && pageSize % 4 === 0
    ? new Uint32Array(image.buffer, image.byteOffset, Math.floor(image.length / 4)) : null;
  const isZero = (page) => {
    const start = page * pageSize;
    const end = Math.min(start + pageSize, image.length);
    if (words && end % 4 === 0) {
      for (let i = start / 4; i < end / 4; i++) if (words[i]) return false;
      return true;
    }
    for (let i = start; i < end; i++) if (image[i]) return false;
    return true;
  };
  const runs = [];
  for (let page = 0; page < pages; page++) {
    if (isZero(page)) continue;
    const last = runs[runs.length - 1];
    if (last && last[0] + last[1] === page) last[1]++;
    else runs.push([page, 1]);
  }
  const spans = runs.map(([first, count]) =>
    image.subarray(first * pageSize, Math.min((first + count) * pageSize, image.length)));
  const head = new Uint32Array([MAGIC, image.length, pageSize, runs.length, ...runs.flat()]);
  const out = new Uint8Array(head.byteLength + spans.reduce((n, s) => n + s.length, 0));
  out.set(new Uint8Array(head.buffer), 0);
  let at = head.byteLength;
  for (const span of spans) {
    out.set(span, at);
    at += span.length;
  }
  return out;
}

// The image's length, read from a sparse image's header.
export function imageLength(sparse) {
  return header(sparse).length;
}

// The whole image, in a new array or written over `into` (at least the image's length; the
// pages left out are zeroed there, unless `zeroed` says it holds zeros already: a new array).
export function expandImage(sparse, into = null, zeroed = false) {
  const { length, pageSize, runs, word } = header(sparse);
  const image = into ?? new Uint8Array(length);
  const clear = into !== null && !zeroed;
  if (image.length < length) throw new Error(`the image is ${length} bytes, its target ${image.length}`);
  let at = 16 + 8 * runs;
  let end = 0;                   // where the last run written ended
  for (let r = 0; r < runs; r++) {
    const start = word(4 + 2 * r) * pageSize;
    const size = Math.min(word(5 + 2 * r) * pageSize, length - start);
    if (start < end || size < 0 || at + size > sparse.length) throw new Error("the image is truncated");
    if (clear) image.fill(0, end, start);
    image.set(sparse.subarray(at, at + size), start);
    at += size;
    end = start + size;
  }
  if (clear) image.fill(0, end, length);
  return image;
}

function header(sparse) {
  const view = new DataView(sparse.buffer, sparse.byteOffset, sparse.byteLength);
  const word = (i) => view.getUint32(4 * i, true);
  if (sparse.length < 16 || word(0) !== MAGIC) throw new Error("not an edgerun sparse image");
  const [length, pageSize, runs] = [word(1), word(2), word(3)];
  if (sparse.length < 16 + 8 * runs) throw new Error("the image is truncated");
  return { length, pageSize, runs, word };
}
