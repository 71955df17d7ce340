// A fresh Vite app using the edgerun npm package (tests/test_packages.py installs the packed
// tarball, follows the README's bundler steps, builds it and opens dist/ in Chromium).
// It runs the digits model on the rows in public/pixels.f32 (rows x 64 float32), in the page
// and in a Web Worker, and shows the labels as JSON in #out.
import { env, InferenceSession, Tensor } from "edgerun";

env.pyodide.indexURL = import.meta.env.BASE_URL + "pyodide/";

const out = document.getElementById("out");
try {
  const pixels = new Float32Array(await (await fetch("pixels.f32")).arrayBuffer());
  const input = new Tensor("float32", pixels, [pixels.length / 64, 64]);
  const result = {};
  for (const worker of [false, true]) {
    const session = await InferenceSession.create("digits_mlp.onnx", { executionProviders: ["wasm"], worker });
    const { label } = await session.run({ input });
    result[worker ? "worker" : "page"] = Array.from(label.data, Number);
    await session.release();
  }
  out.textContent = JSON.stringify(result);
} catch (e) {
  out.textContent = `error: ${e.stack ?? e}`;
}
