// transformers.js's feature-extraction pipeline on a local model folder, unchanged:
//   node feature_extraction.mjs MODELS_DIR MODEL_NAME edgerun|onnxruntime "sentence" ...
// "edgerun" hands it edgerun's npm package through the hook transformers.js reads
// (globalThis[Symbol.for("onnxruntime")], set before it is imported); "onnxruntime" leaves
// it its own onnxruntime-node. Prints {embeddings, dims, seconds} as JSON.
const [modelsDir, modelName, engine, ...sentences] = process.argv.slice(2);

if (engine === "edgerun") {
  globalThis[Symbol.for("onnxruntime")] = await import("../../web/index.js");
}
const { pipeline, env } = await import("@huggingface/transformers");
env.localModelPath = modelsDir.endsWith("/") ? modelsDir : modelsDir + "/";
env.allowRemoteModels = false;

const started = performance.now();
const extract = await pipeline("feature-extraction", modelName,
                               { device: engine === "edgerun" ? "auto" : "cpu", dtype: "fp32" });
const created = performance.now();
const output = await extract(sentences, { pooling: "mean", normalize: true });
const done = performance.now();
console.log(JSON.stringify({ embeddings: Array.from(output.data), dims: output.dims,
                             create_seconds: (created - started) / 1000,
                             run_seconds: (done - created) / 1000 }));
