// The memory image of a start-up snapshot, made the same way in Node (make_snapshot.mjs) and
// in Chromium (make_snapshot.html): Pyodide started for a snapshot, the wheel installed as
// web/runtime.js installs it, every engine module a page may import imported.
export async function makeSnapshotImage(loadPyodide, installWheel, wheel) {
  const pyodide = await loadPyodide({ _makeSnapshot: true });
  installWheel(pyodide, wheel);
  const skipped = pyodide.runPython("import edgerun.web.bridge as b; b.preload()").toJs();
  return { image: pyodide.makeMemorySnapshot(), skipped: skipped.length };
}

// The image as stored: its runs of non-zero pages (nearly half of Python's memory is zero
// pages), which web/runtime.js expands back.
export { sparseImage } from "../web/memory_image.js";
