// Recurrent family: one time step of an LSTM, GRU or RNN, every direction at once.
// The input projection X·Wᵀ + Wb + Rb of every step is one matmul beforehand (matmul.wgsl);
// a step adds H·Rᵀ and applies the gates. Work item (d, b, j) computes hidden unit j of batch
// row b in direction d, reading the previous state (h_in, c_in) and writing the new one
// (h_out, c_out: other buffers, as every item reads all of h_in).

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

// Work item i of a step (params: n, H, B, T, t, D, reverse): hidden unit j of batch row b in
// direction d, at time T - 1 - t for a backward direction (else t); its state row starts at
// `state` in [D, B, H] buffers, its input projection row is `row` of xp [D, T, B, gates * H],
// and its output goes to y[y_at] ([T, D, B, H]).
struct Unit {
  j: u32,
  d: u32,
  state: u32,
  row: u32,
  y_at: u32,
}

fn unit_of(i: u32) -> Unit {
  let H = pu(1u);
  let B = pu(2u);
  let d = i / (H * B);
  let b = (i / H) % B;
  let time = select(pu(4u), pu(3u) - 1u - pu(4u), d + pu(6u) == 1u);
  return Unit(i % H, d, (d * B + b) * H, (d * pu(3u) + time) * B + b,
              ((time * pu(5u) + d) * B + b) * H + i % H);
}


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

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let u = unit_of(i);
  let j = u.j;
  let d = u.d;
  let state = u.state;
  let x_row = u.row * 4u * H;
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
  y[u.y_at] = h;
}

//! kernel rnn_step
// One step of a simple RNN: h = {{ACT}} over v = xp + R h_in (xp holds X W^T + Wb + Rb).
// Layouts and params as lstm_step, with one gate: xp [D, T, B, H], r [D, H, H].
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> xp: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read> h_in: array<f32>;
@group(0) @binding(5) var<storage, read_write> h_out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let u = unit_of(i);
  let j = u.j;
  let d = u.d;
  let state = u.state;
  var v = xp[u.row * H + j];
  for (var k = 0u; k < H; k++) { v += r[(d * H + j) * H + k] * h_in[state + k]; }
  let h = {{ACT}};
  h_out[state + j] = h;
  y[u.y_at] = h;
}

//! kernel gru_reset
// GRU, first half of a step: rh = r * h_in per unit, the reset gate
// r = sigmoid(xp_r + R_r h_in + Rb_r), for the candidate's (r * h) R_h^T (linear_before_reset
// 0). Layouts: xp [D, T, B, 3H] (X W^T + Wb; gates z, r, h), r [D, 3H, H], rb [D, 3H].
// params as lstm_step.
@group(0) @binding(1) var<storage, read_write> rh: array<f32>;
@group(0) @binding(2) var<storage, read> xp: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read> rb: array<f32>;
@group(0) @binding(5) var<storage, read> h_in: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let u = unit_of(i);
  let j = u.j;
  let d = u.d;
  let state = u.state;
  var g = xp[u.row * 3u * H + H + j] + rb[d * 3u * H + H + j];
  for (var k = 0u; k < H; k++) { g += r[(d * 3u * H + H + j) * H + k] * h_in[state + k]; }
  rh[state + j] = sigmoid(g) * h_in[state + j];
}

//! kernel gru_step
// GRU, second half: z, r and the candidate n = tanh(xp_h + (r * h) R_h^T + Rb_h) (rh from
// gru_reset; with {{LBR}} 1, linear_before_reset: r * (h R_h^T + Rb_h)), then
// h = (1 - z) n + z h_in. params as lstm_step.
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<storage, read> xp: array<f32>;
@group(0) @binding(3) var<storage, read> r: array<f32>;
@group(0) @binding(4) var<storage, read> rb: array<f32>;
@group(0) @binding(5) var<storage, read> h_in: array<f32>;
@group(0) @binding(6) var<storage, read> rh: array<f32>;
@group(0) @binding(7) var<storage, read_write> h_out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let u = unit_of(i);
  let j = u.j;
  let d = u.d;
  let state = u.state;
  let x_row = u.row * 3u * H;
  let bias = d * 3u * H;
  let rows = d * 3u * H;
  var z = xp[x_row + j] + rb[bias + j];
  var reset = xp[x_row + H + j] + rb[bias + H + j];
  var hr = 0.0;                       // h R_h^T (lbr 1) or (r * h) R_h^T (lbr 0)
  for (var k = 0u; k < H; k++) {
    let hk = h_in[state + k];
    z += r[(rows + j) * H + k] * hk;
    reset += r[(rows + H + j) * H + k] * hk;
    hr += r[(rows + 2u * H + j) * H + k] * select(rh[state + k], hk, {{LBR}} == 1);
  }
  z = sigmoid(z);
  reset = sigmoid(reset);
  var n = xp[x_row + 2u * H + j];
  if ({{LBR}} == 1) {
    n += reset * (hr + rb[bias + 2u * H + j]);
  } else {
    n += hr + rb[bias + 2u * H + j];
  }
  n = tanh(clamp(n, -20.0, 20.0));
  let h = (1.0 - z) * n + z * h_in[state + j];
  h_out[state + j] = h;
  y[u.y_at] = h;
}

//! kernel linear_attention
// LinearAttention's recurrence: work item (b, h, j) carries column j of kv head h's state
// S (d_k x d_v, in registers: d_k <= 256) through the T steps: S *= exp(decay) (gated),
// v_t = beta * (v_t - S^T k_t) (delta), S += k_t v_t^T, and each of the `group` query heads
// of h reads o_t = scale * q_t^T S. Layouts: q (B, T, Hq * dk), k (B, T, Hkv * dk),
// v (B, T, Hkv * dv), out (B, T, Hq * dv), state (B, Hkv, dk, dv); decay's last dim is
// Hkv * dk (decay_mode 1), Hkv (2) or 1 (3); beta's Hkv (beta_mode 1) or 1 (2); 0: absent.
// params: n (= B * Hkv * dv), T, Hkv, dk, dv, group, decay_mode, beta_mode, scale, has_past
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> past: array<f32>;
@group(0) @binding(6) var<storage, read> decay: array<f32>;
@group(0) @binding(7) var<storage, read> beta: array<f32>;
@group(0) @binding(8) var<storage, read_write> state: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let T = pu(1u);
  let Hkv = pu(2u);
  let dk = pu(3u);
  let dv = pu(4u);
  let group = pu(5u);
  let Hq = Hkv * group;
  let j = i % dv;
  let h = (i / dv) % Hkv;
  let b = i / (dv * Hkv);
  var S: array<f32, 256>;
  let s_at = (b * Hkv + h) * dk * dv + j;
  for (var d = 0u; d < dk; d++) {
    S[d] = select(0.0, past[s_at + d * dv], pu(9u) == 1u);
  }
  for (var t = 0u; t < T; t++) {
    let k_at = (b * T + t) * Hkv * dk + h * dk;
    let decay_mode = pu(6u);
    if (decay_mode == 1u) {
      for (var d = 0u; d < dk; d++) { S[d] *= exp(decay[k_at + d]); }
    } else if (decay_mode != 0u) {
      let g = exp(decay[(b * T + t) * select(1u, Hkv, decay_mode == 2u) + select(0u, h, decay_mode == 2u)]);
      for (var d = 0u; d < dk; d++) { S[d] *= g; }
    }
    var vt = v[(b * T + t) * Hkv * dv + h * dv + j];
    let beta_mode = pu(7u);
    if (beta_mode != 0u) {
      var retrieved = 0.0;
      for (var d = 0u; d < dk; d++) { retrieved += S[d] * k[k_at + d]; }
      let rate = beta[(b * T + t) * select(1u, Hkv, beta_mode == 1u) + select(0u, h, beta_mode == 1u)];
      vt = rate * (vt - retrieved);
    }
    for (var d = 0u; d < dk; d++) { S[d] += k[k_at + d] * vt; }
    for (var g = 0u; g < group; g++) {
      let hq = h * group + g;
      let q_at = (b * T + t) * Hq * dk + hq * dk;
      var o = 0.0;
      for (var d = 0u; d < dk; d++) { o += q[q_at + d] * S[d]; }
      out[(b * T + t) * Hq * dv + hq * dv + j] = o * pf(8u);
    }
  }
  for (var d = 0u; d < dk; d++) { state[s_at + d * dv] = S[d]; }
}
