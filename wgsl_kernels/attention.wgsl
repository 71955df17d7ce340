// Attention family (ONNX Attention, opsets 23-24): softmax(scale * Q K^T [softcapped] + bias) V
// with grouped-query heads (query head h reads kv head h / group). Q, K, V and Y are read and
// written through (batch, head, position) strides, so 3-D (B, S, H*D) and 4-D (B, H, S, D)
// layouts take the same kernels; the last stride is 1.
// The bias of key j for query s: not attended when the boolean mask says so ({{MASK}} 1), when
// causal and j > s + offset, outside the left/right windows, or at and past nonpad_kv_seqlen[b]
// ({{NONPAD}} 1); a float mask ({{MASK}} 2) is added to the score. offset is the past length,
// or with nonpad_kv_seqlen, valid[b] - S (query positions are bottom-right aligned). Keys
// past the mask's last dim are not attended.
// params: n, Hq @1, S @2, L @3, Dqk @4, Dv @5, group @6, q strides @7-9, k strides @10-12,
//         v strides @13-15, y strides @16-18, mask strides (b, h, s, j) @19-22, mask_len @23,
//         scale @24, softcap @25 (0: none), causal @26, past_len @27, left @28, right @29
//         (i32, -1: no window), qk output mode @30

const NEG_INF_BITS = 0xff800000u;

fn key_offset(b: u32, h: u32, j: u32) -> u32 {
  return b * pu(10u) + (h / pu(6u)) * pu(11u) + j * pu(12u);
}

fn is_neg_inf(x: f32) -> bool { return bitcast<u32>(x) == NEG_INF_BITS; }

// Whether query s may attend key j, by the boolean mask, causality, windows and nonpad.
fn attended(b: u32, h: u32, s: u32, j: u32) -> bool {
  let m_at = b * pu(19u) + h * pu(20u) + s * pu(21u) + j * pu(22u);
  if ({{MASK}} != 0 && j >= pu(23u)) { return false; }
  if ({{MASK}} == 1) {
    if (mask[m_at] == 0u) { return false; }
  }
  var offset = pi(27u);
  if ({{NONPAD}} == 1) {
    let valid = nonpad[b];
    if (i32(j) >= valid) { return false; }
    offset = valid - i32(pu(2u));
  }
  let qpos = i32(s) + offset;
  let kpos = i32(j);
  if (pu(26u) == 1u && kpos > qpos) { return false; }
  if (pi(28u) >= 0 && kpos < qpos - pi(28u)) { return false; }
  if (pi(29u) >= 0 && kpos > qpos + pi(29u)) { return false; }
  return true;
}

// The float mask's addend (0 without one).
fn addend(b: u32, h: u32, s: u32, j: u32) -> f32 {
  if ({{MASK}} == 2) {
    return bitcast<f32>(mask[b * pu(19u) + h * pu(20u) + s * pu(21u) + j * pu(22u)]);
  }
  return 0.0;
}

// scale * q . k (mode 0), then softcapped (mode 1).
fn score(b: u32, h: u32, s: u32, j: u32, mode: u32) -> f32 {
  let q_at = b * pu(7u) + h * pu(8u) + s * pu(9u);
  let k_at = key_offset(b, h, j);
  var dot = 0.0;
  for (var d = 0u; d < pu(4u); d++) { dot += q[q_at + d] * k[k_at + d]; }
  var x = dot * pf(24u);
  let cap = pf(25u);
  if (mode >= 1u && cap > 0.0) { x = cap * tanh(clamp(x / cap, -20.0, 20.0)); }
  return x;
}

//! kernel attention
// One work item per (b, h, s) query row, online softmax over the attended keys (a row
// attending none outputs zeros); up to 256 values per head (the accumulator lives in
// registers).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> v: array<f32>;
@group(0) @binding(5) var<storage, read> mask: array<u32>;
@group(0) @binding(6) var<storage, read> nonpad: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let S = pu(2u);
  let Dv = pu(5u);
  let s = i % S;
  let h = (i / S) % pu(1u);
  let b = i / (S * pu(1u));
  var acc: array<f32, 256>;
  for (var d = 0u; d < Dv; d++) { acc[d] = 0.0; }
  var m = 0.0;
  var total = 0.0;
  var started = false;
  for (var j = 0u; j < pu(3u); j++) {
    if (!attended(b, h, s, j)) { continue; }
    let add = addend(b, h, s, j);
    if (is_neg_inf(add)) { continue; }
    let logit = score(b, h, s, j, 1u) + add;
    var corr = 1.0;
    if (!started) {
      m = logit;
      started = true;
    } else if (logit > m) {
      corr = exp(m - logit);
      m = logit;
    }
    let p = exp(logit - m);
    total = total * corr + p;
    let v_at = b * pu(13u) + (h / pu(6u)) * pu(14u) + j * pu(15u);
    for (var d = 0u; d < Dv; d++) { acc[d] = acc[d] * corr + p * v[v_at + d]; }
  }
  let y_at = b * pu(16u) + h * pu(17u) + s * pu(18u);
  let inv = select(0.0, 1.0 / total, started);
  for (var d = 0u; d < Dv; d++) { out[y_at + d] = acc[d] * inv; }
}

//! kernel attention_scores
// The qk_matmul_output of (b, h, s, j), one work item each, by mode: 0 the scaled scores,
// 1 softcapped, 2 plus the bias (-inf where not attended), 3 the softmax (its row is
// recomputed: this output is for inspection, not speed).
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> q: array<f32>;
@group(0) @binding(3) var<storage, read> k: array<f32>;
@group(0) @binding(4) var<storage, read> mask: array<u32>;
@group(0) @binding(5) var<storage, read> nonpad: array<i32>;

fn logit(b: u32, h: u32, s: u32, j: u32) -> f32 {
  let add = addend(b, h, s, j);
  if (!attended(b, h, s, j) || is_neg_inf(add)) {
    let bits = NEG_INF_BITS;    // a runtime value: Tint (Chrome) rejects a constant -inf
    return bitcast<f32>(bits);
  }
  return score(b, h, s, j, 1u) + add;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(3u);
  let S = pu(2u);
  let j = i % L;
  let s = (i / L) % S;
  let h = (i / (L * S)) % pu(1u);
  let b = i / (L * S * pu(1u));
  let mode = pu(30u);
  if (mode <= 1u) {
    out[i] = score(b, h, s, j, mode);
    return;
  }
  let x = logit(b, h, s, j);
  if (mode == 2u) {
    out[i] = x;
    return;
  }
  var m = 0.0;
  var started = false;
  for (var t = 0u; t < L; t++) {
    let y = logit(b, h, s, t);
    if (is_neg_inf(y)) { continue; }
    if (!started || y > m) { m = y; }
    started = true;
  }
  if (!started || is_neg_inf(x)) {
    out[i] = 0.0;
    return;
  }
  var total = 0.0;
  for (var t = 0u; t < L; t++) {
    let y = logit(b, h, s, t);
    if (!is_neg_inf(y)) { total += exp(y - m); }
  }
  out[i] = exp(x - m) / total;
}
