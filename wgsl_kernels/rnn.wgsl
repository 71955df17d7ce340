// Recurrent family: one time step of an LSTM, every direction at once.
// The input projection X·Wᵀ + Wb + Rb of every step is one matmul beforehand (matmul.wgsl);
// a step adds H·Rᵀ and applies the gates. Work item (d, b, j) computes hidden unit j of batch
// row b in direction d, reading the previous state (h_in, c_in) and writing the new one
// (h_out, c_out: other buffers, as every item reads all of h_in).

//! kernel lstm_step
// Gate order i, o, f, c (ONNX); default activations sigmoid, tanh, tanh.
// Layouts: y [T, D, B, H]; xp [D, T, B, 4H]; r [D, 4H, H]; states [D, B, H].
// params: n (= D * B * H), H, B, T, t (the step), D, reverse (1 for direction="reverse");
//         a backward direction (the second of two, or the only one when reverse) reads time
//         T - 1 - t, a forward one time t.
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> xp: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read> h_in: array<f32>;
@group(0) @binding(5) var<storage, read> c_in: array<f32>;
@group(0) @binding(6) var<storage, read_write> h_out: array<f32>;
@group(0) @binding(7) var<storage, read_write> c_out: array<f32>;

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let B = pu(2u);
  let T = pu(3u);
  let j = i % H;
  let b = (i / H) % B;
  let d = i / (H * B);
  let time = select(pu(4u), T - 1u - pu(4u), d + pu(6u) == 1u);
  let state = (d * B + b) * H;
  let x_row = ((d * T + time) * B + b) * 4u * H;
  let r_dir = d * 4u * H * H;
  var g = array<f32, 4>(xp[x_row + j], xp[x_row + H + j], xp[x_row + 2u * H + j],
                        xp[x_row + 3u * H + j]);
  for (var k = 0u; k < H; k++) {
    let hk = h_in[state + k];
    g[0] += r[r_dir + j * H + k] * hk;
    g[1] += r[r_dir + (H + j) * H + k] * hk;
    g[2] += r[r_dir + (2u * H + j) * H + k] * hk;
    g[3] += r[r_dir + (3u * H + j) * H + k] * hk;
  }
  let c = sigmoid(g[2]) * c_in[state + j] + sigmoid(g[0]) * tanh(clamp(g[3], -20.0, 20.0));
  let h = sigmoid(g[1]) * tanh(clamp(c, -20.0, 20.0));
  c_out[state + j] = c;
  h_out[state + j] = h;
  y[((time * pu(5u) + d) * B + b) * H + j] = h;
}
