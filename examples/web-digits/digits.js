// The digits demo: a drawing pad, the drawing reduced the way scikit-learn's digits were made
// (a 32x32 bitmap of the digit, size-normalized, counted in 4x4 blocks: 8x8 values 0..16),
// and edgerun's InferenceSession on WebGPU with wasm as the fallback.
import { InferenceSession, Tensor, env } from "../../web/index.js";

env.pyodide.indexURL = new URL("../../node_modules/pyodide/", location.href);
const MODEL = new URL("../digits/digits_mlp.onnx", location.href);
const BRUSH = 22;

const pad = document.getElementById("pad");
const ctx = pad.getContext("2d", { willReadFrequently: true });
const show = (id, text) => { document.getElementById(id).textContent = text; };

// What tests and curious users read: the drawing's version and what was classified last.
const state = window.digitsDemo = { ready: false, version: 0, classified: 0, input: null,
                                    label: null, probabilities: null, providers: [],
                                    fallback: null, error: null, startup: null };

function clearPad() {
  ctx.fillStyle = "#fff";
  ctx.fillRect(0, 0, pad.width, pad.height);
  state.version++;
  state.classified = state.version;        // nothing to classify on an empty pad
  show("digit", "?");
  document.getElementById("bars").replaceChildren();
  drawPreview(new Float32Array(64));
}

// ---- drawing -------------------------------------------------------------------------------
let last = null;

function point(event) {
  const box = pad.getBoundingClientRect();
  return [(event.clientX - box.left) * pad.width / box.width,
          (event.clientY - box.top) * pad.height / box.height];
}

pad.addEventListener("pointerdown", (event) => {
  pad.setPointerCapture(event.pointerId);
  last = point(event);
  ctx.fillStyle = "#000";
  ctx.beginPath();
  ctx.arc(last[0], last[1], BRUSH / 2, 0, 2 * Math.PI);
  ctx.fill();
});

pad.addEventListener("pointermove", (event) => {
  if (!last) return;
  const next = point(event);
  ctx.strokeStyle = "#000";
  ctx.lineWidth = BRUSH;
  ctx.lineCap = "round";
  ctx.beginPath();
  ctx.moveTo(...last);
  ctx.lineTo(...next);
  ctx.stroke();
  last = next;
});

for (const type of ["pointerup", "pointercancel"]) {
  pad.addEventListener(type, () => {
    if (!last) return;
    last = null;
    state.version++;
    classifySoon();
  });
}

document.getElementById("clear").addEventListener("click", clearPad);

// ---- the drawing as the model's input ------------------------------------------------------

// Ink (0 white .. 1 black) of each pixel; the bounding box of the ink.
function inkOf(image) {
  const { width, height, data } = image;
  const ink = new Float32Array(width * height);
  let x0 = width, y0 = height, x1 = -1, y1 = -1;
  for (let i = 0; i < ink.length; i++) {
    ink[i] = 1 - (data[4 * i] + data[4 * i + 1] + data[4 * i + 2]) / (3 * 255);
    if (ink[i] > 0.1) {
      const x = i % width, y = (i - x) / width;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
  }
  return { ink, width, box: x1 < 0 ? null : [x0, y0, x1 + 1, y1 + 1] };
}

// The 8x8 input: the ink's bounding box scaled (aspect kept) to fill a centred 32x32 bitmap
// (pixels on where more than half inked), then on-pixels counted in 4x4 blocks (0..16).
export function digitsInput(image) {
  const { ink, width, box } = inkOf(image);
  const input = new Float32Array(64);
  if (!box) return input;
  const [x0, y0, x1, y1] = box;
  const scale = 32 / Math.max(x1 - x0, y1 - y0);
  const ox = (32 - (x1 - x0) * scale) / 2, oy = (32 - (y1 - y0) * scale) / 2;
  const sum = new Float32Array(32 * 32), count = new Float32Array(32 * 32);
  for (let y = y0; y < y1; y++) {
    const ty = Math.min(31, Math.floor(oy + (y - y0 + 0.5) * scale));
    for (let x = x0; x < x1; x++) {
      const tx = Math.min(31, Math.floor(ox + (x - x0 + 0.5) * scale));
      sum[ty * 32 + tx] += ink[y * width + x];
      count[ty * 32 + tx] += 1;
    }
  }
  for (let t = 0; t < 32 * 32; t++) {
    if (count[t] && sum[t] / count[t] > 0.5) input[((t >> 7) << 3) + ((t & 31) >> 2)] += 1;
  }
  return input;
}

function drawPreview(input) {
  const preview = document.getElementById("preview").getContext("2d");
  const image = preview.createImageData(8, 8);
  input.forEach((v, i) => {
    const level = 255 - Math.round(v * 255 / 16);
    image.data.set([level, level, level, 255], 4 * i);
  });
  preview.putImageData(image, 0, 0);
}

function drawBars(probabilities) {
  const items = Array.from(probabilities, (p, digit) => {
    const li = document.createElement("li");
    li.innerHTML = `<b>${digit}</b><span class="bar" style="width:${(p * 12).toFixed(2)}rem"></span>${(100 * p).toFixed(1)}%`;
    return li;
  });
  document.getElementById("bars").replaceChildren(...items);
}

// ---- the model -----------------------------------------------------------------------------
let session = null;
let running = false;

async function start(providers = ["webgpu", "wasm"]) {
  const started = performance.now();
  session = await InferenceSession.create(MODEL, {
    executionProviders: providers,
    onProgress: ({ phase, progress, snapshot, why }) => {
      show("status", `loading ${phase}… ${Math.round(progress * 100)}%`);
      if (phase === "pyodide" && progress === 1) state.startup = { snapshot, why };   // how Python started
    },
  });
  const counts = {};
  for (const node of session.explain().nodes) counts[node.provider] = (counts[node.provider] ?? 0) + 1;
  show("provider", Object.entries(counts).map(([p, n]) => `${p} (${n} nodes)`).join(", "));
  show("status", `ready in ${Math.round(performance.now() - started)} ms: draw a digit`);
  state.providers = Object.keys(counts);
  state.ready = true;
}

// WebGPU may be missing (then the session is on wasm already) or fail while running (a lost
// device, an operand type its kernels lack): then the demo goes on with wasm alone.
async function fallBackToWasm(error) {
  state.fallback = String(error.message ?? error);
  console.warn(`webgpu failed, going on with wasm: ${state.fallback}`);
  await session.release();
  session = null;
  await start(["wasm"]);
  show("fallback", `webgpu failed, so wasm runs the model: ${state.fallback}`);
  document.getElementById("fallback").hidden = false;
}

// One run at a time; when it ends, the newest drawing is classified if it changed meanwhile.
async function classifySoon() {
  if (!session || running || state.classified === state.version) return;
  running = true;
  const version = state.version;
  try {
    const input = digitsInput(ctx.getImageData(0, 0, pad.width, pad.height));
    drawPreview(input);
    if (!input.some((v) => v > 0)) {          // an empty pad
      show("digit", "?");
      state.classified = version;
      return;
    }
    const feeds = { input: new Tensor("float32", input, [1, 64]) };
    let started = performance.now();
    let outputs;
    try {
      outputs = await session.run(feeds);
    } catch (e) {
      if (!state.providers.includes("webgpu")) throw e;
      await fallBackToWasm(e);
      started = performance.now();
      outputs = await session.run(feeds);
    }
    const ms = performance.now() - started;
    const { label, probabilities } = outputs;
    Object.assign(state, { input: Array.from(input), label: Number(label.data[0]),
                           probabilities: Array.from(probabilities.data), ms });
    show("digit", String(state.label));
    show("latency", `${ms.toFixed(1)} ms`);
    drawBars(probabilities.data);
    state.classified = version;
  } catch (e) {
    state.error = String(e.message ?? e);
    show("status", `error: ${state.error}`);
    state.classified = version;
  } finally {
    running = false;
  }
  classifySoon();
}

clearPad();
start().then(classifySoon).catch((e) => {
  state.error = String(e.message ?? e);
  show("status", `could not start: ${state.error}`);
});
