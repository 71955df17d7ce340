// The "plain" start-up snapshot, for engines without JSPI: Pyodide's memory after installing
// the wheel and importing the engine's modules (snapshot_image.mjs), its zero pages left out,
// gzipped.
//
//   node scripts/make_snapshot.mjs WHEEL OUT_DIR
//
// writes OUT_DIR/edgerun-snapshot-plain.bin.gz and prints its description as JSON
// ({ pyodide, wheel_sha256, data, data_sha256, bytes }). scripts/build_web.py runs it, makes
// the "jspi" variant in Chromium (make_snapshot.html) and writes edgerun-snapshot.json.
// Python records at start-up what the engine offers (JSPI, the stack switching the WebGPU
// provider waits on the GPU with, and how C calls JavaScript-made functions), so a snapshot
// restores only where those match: "jspi" where WebAssembly.Suspending exists (Chromium),
// "plain" where no JSPI does (Node 20, and browsers without it), made with JSPI hidden.
// The Pyodide is node_modules/pyodide, the one the npm package pins; a snapshot holds no
// JavaScript objects, so one made in Node restores in a page or a worker alike.
import { createHash } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";

const [wheelPath, outDir] = process.argv.slice(2);
if (!wheelPath || !outDir) {
  console.error("usage: node scripts/make_snapshot.mjs WHEEL OUT_DIR");
  process.exit(2);
}
delete WebAssembly.Suspending;       // hidden, should this Node have JSPI
delete WebAssembly.Suspender;
// imported after that: Pyodide reads the globals when it loads
const { loadPyodide, version } = await import("pyodide");
const { installWheel } = await import("../web/runtime.js");
const { makeSnapshotImage, sparseImage } = await import("./snapshot_image.mjs");

const variant = "plain";
const wheel = new Uint8Array(readFileSync(wheelPath));
const { image, skipped } = await makeSnapshotImage(loadPyodide, installWheel, wheel);
const packed = gzipSync(sparseImage(image), { level: 9 });
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
const data = `edgerun-snapshot-${variant}.bin.gz`;
writeFileSync(join(outDir, `${data}.partial`), packed);
renameSync(join(outDir, `${data}.partial`), join(outDir, data));
console.error(`  start-up snapshot (${variant}): ${(image.length / 1e6).toFixed(1)} MB of memory, ` +
              `${(packed.length / 1e6).toFixed(1)} MB gzipped (Pyodide ${version}; ` +
              `${skipped} modules need numpy or a native library: not preloaded)`);
console.log(JSON.stringify({ pyodide: version, wheel_sha256: sha256(wheel), data,
                             data_sha256: sha256(packed), bytes: image.length }));
