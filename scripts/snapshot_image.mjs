// The memory image of a start-up snapshot, made the same way in Node (make_snapshot.mjs) and
// in Chromium (make_snapshot.html): Pyodide started for a snapshot, the wheel installed as
// web/runtime.js installs it, every engine module a page may import imported.
export async function makeSnapshotImage(loadPyodide, installWheel, wheel) {
  const pyodide = await loadPyodide({ _makeSnapshot: true });
  installWheel(pyodide, wheel);
  const skipped = pyodide.runPython("import edgerun.web.bridge as b; b.preload()").toJs();
  return { image: pyodide.makeMemorySnapshot(), skipped: skipped.length };
}

// The image as stored: its runs of non-zero 4 KiB pages (nearly half of Python's memory is
// zero pages), which web/runtime.js expands back (expandImage). Layout, little-endian u32s:
// "ERS1", image length, page size, run count, (first page, page count) per run, then the
// runs' bytes in order (the image's last page may be short).
export function sparseImage(image, pageSize = 4096) {
  const pages = Math.ceil(image.length / pageSize);
  const isZero = (page) => {
    const end = Math.min((page + 1) * pageSize, image.length);
    for (let i = page * pageSize; i < end; i++) if (image[i]) return false;
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
  const head = new Uint32Array([0x31535245, image.length, pageSize, runs.length, ...runs.flat()]);
  const out = new Uint8Array(head.byteLength + spans.reduce((n, s) => n + s.length, 0));
  out.set(new Uint8Array(head.buffer), 0);
  let at = head.byteLength;
  for (const span of spans) {
    out.set(span, at);
    at += span.length;
  }
  return out;
}
