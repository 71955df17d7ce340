// A fresh Node project's script (tests/test_packages.py copies it next to node_modules/edgerun):
//   node digits.mjs MODEL.onnx PIXELS.f32 ROWS
// runs the digits model on ROWS x 64 raw float32 pixels and prints {"labels": [...]}.
import { readFileSync } from "node:fs";
import { InferenceSession, Tensor } from "edgerun";

const [model, pixels, rows] = process.argv.slice(2);
const data = new Float32Array(new Uint8Array(readFileSync(pixels)).buffer);
const session = await InferenceSession.create(model, { executionProviders: ["wasm"] });
const { label } = await session.run({ input: new Tensor("float32", data, [Number(rows), 64]) });
console.log(JSON.stringify({ labels: Array.from(label.data, Number),
                             providers: [...new Set(session.explain().nodes.map((n) => n.provider))] }));
await session.release();
