// Reduction family: reductions over arbitrary axes, Softmax, LayerNormalization, LRN.
// One output row per work item; the reduced elements are walked serially (no shared memory).

//! kernel reduce
// Each output element reduces the elements at base + offset(r), r < R; the kept and the
// reduced dims are given as (dims, input strides), innermost last, at most 6 of each.
// {{MAP}} maps an element `v`, {{COMBINE}} folds `v` into `acc`, {{FINAL}} turns `acc`
// into the result (`count` is R as f32).
// params: n, R, krank, kdims[6] @3, kstrides[6] @9, rrank @15, rdims[6] @16, rstrides[6] @22
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

fn reduced_offset(r: u32) -> u32 {
  var rest = r;
  var off = 0u;
  for (var d = i32(pu(15u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(16u + k);
    off += (rest % dim) * pu(22u + k);
    rest = rest / dim;
  }
  return off;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  var rest = i;
  var base = 0u;
  for (var d = i32(pu(2u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(3u + k);
    base += (rest % dim) * pu(9u + k);
    rest = rest / dim;
  }
  let R = pu(1u);
  let count = f32(R);
  var v = x[base];
  var acc = {{MAP}};
  for (var r = 1u; r < R; r++) {
    v = x[base + reduced_offset(r)];
    v = {{MAP}};
    acc = {{COMBINE}};
  }
  out[i] = {{FINAL}};
}

//! kernel softmax
// Rows of length L with stride `inner`. {{LOG}} is 1 for LogSoftmax.
// params: n (= outer * inner), L, inner
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(1u);
  let inner = pu(2u);
  let base = (i / inner) * L * inner + i % inner;
  var mx = x[base];
  for (var j = 1u; j < L; j++) { mx = max(mx, x[base + j * inner]); }
  var sum = 0.0;
  for (var j = 0u; j < L; j++) { sum += exp(x[base + j * inner] - mx); }
  if ({{LOG}} == 1) {
    let shift = mx + log(sum);
    for (var j = 0u; j < L; j++) { out[base + j * inner] = x[base + j * inner] - shift; }
  } else {
    let inv = 1.0 / sum;
    for (var j = 0u; j < L; j++) { out[base + j * inner] = exp(x[base + j * inner] - mx) * inv; }
  }
}

//! kernel layernorm
// LayerNormalization ({{RMS}} 0) or RMSNormalization ({{RMS}} 1) of rows of `cols` elements:
// (x - mean) * inv * scale + bias, inv = 1 / sqrt(variance + epsilon), where RMS takes mean 0
// and has no bias. scale[j * scale_stride], bias[j * bias_stride]: stride 0 reads one value
// (a zero buffer stands for an absent bias). With {{STATS}} 1 each row's mean and inv are
// written too (LayerNormalization's Mean and InvStdDev outputs).
// params: n (rows), cols, epsilon, scale_stride, bias_stride
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> inv_out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let cols = pu(1u);
  let base = i * cols;
  var mean = 0.0;
  if ({{RMS}} == 0) {
    for (var j = 0u; j < cols; j++) { mean += x[base + j]; }
    mean = mean / f32(cols);
  }
  var variance = 0.0;
  for (var j = 0u; j < cols; j++) {
    let d = x[base + j] - mean;
    variance += d * d;
  }
  let inv = 1.0 / sqrt(variance / f32(cols) + pf(2u));
  let ss = pu(3u);
  let bs = pu(4u);
  for (var j = 0u; j < cols; j++) {
    out[base + j] = (x[base + j] - mean) * inv * scale[j * ss] + bias[j * bs];
  }
  if ({{STATS}} == 1) {
    mean_out[i] = mean;
    inv_out[i] = inv;
  }
}

//! kernel lrn
// Local response normalization across channels of [N, C, inner].
// params: n, C, inner, size, alpha, beta, bias
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let C = i32(pu(1u));
  let inner = pu(2u);
  let size = i32(pu(3u));
  let c = i32((i / inner) % u32(C));
  let first = max(c - (size - 1) / 2, 0);
  let last = min(c + size / 2, C - 1);
  let base = i - u32(c) * inner;
  var sq = 0.0;
  for (var k = first; k <= last; k++) {
    let v = x[base + u32(k) * inner];
    sq += v * v;
  }
  out[i] = x[i] / pow(pf(6u) + pf(4u) / f32(size) * sq, pf(5u));
}

//! kernel arg_extreme
// ArgMax/ArgMin along one axis: rows of length L with stride `inner`. {{BETTER}} is the test
// that moves the pick to a new element `v` (`v > best` keeps the first of equal maxima,
// `v >= best` the last). {{WRITE}} stores the pick: ArgMax's index per row (out[i]), or
// Hardmax's row of 0s with a 1 at the pick. OT is the output's WGSL type.
// params: n (= outer * inner), L, inner
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(1u);
  let inner = pu(2u);
  let base = (i / inner) * L * inner + i % inner;
  var best = x[base];
  var pick = 0u;
  for (var j = 1u; j < L; j++) {
    let v = x[base + j * inner];
    if ({{BETTER}}) {
      best = v;
      pick = j;
    }
  }
  {{WRITE}}
}

//! kernel einsum
// Einsum of one or two operands ({{TWO}} 1): each output element sums, over every value of
// the summed labels, the product of the operands' elements those labels and its own pick.
// An operand reads label l at stride s[l] (0 where it lacks l; repeated labels add up, so
// "ii" walks the diagonal). params: n, out_rank, out_dims[6] @2, sum_rank @8,
// sum_dims[6] @9, a_out[6] @15, a_sum[6] @21, b_out[6] @27, b_sum[6] @33, R (sum count) @39
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  var rest = i;
  var a0 = 0u;
  var b0 = 0u;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let c = rest % pu(2u + k);
    rest = rest / pu(2u + k);
    a0 += c * pu(15u + k);
    b0 += c * pu(27u + k);
  }
  var acc = 0.0;
  for (var r = 0u; r < pu(39u); r++) {
    var left = r;
    var ai = a0;
    var bi = b0;
    for (var d = i32(pu(8u)) - 1; d >= 0; d--) {
      let k = u32(d);
      let c = left % pu(9u + k);
      left = left / pu(9u + k);
      ai += c * pu(21u + k);
      bi += c * pu(33u + k);
    }
    var term = a[ai];
    if ({{TWO}} == 1) { term *= b[bi]; }
    acc += term;
  }
  out[i] = acc;
}

//! kernel dft
// A direct DFT along one axis of x viewed as [outer, N, inner, C] (C = 1 real or 2 complex),
// one output element (outer, k, inner, part) per work item: mode 0 forward
// X[k] = sum_n x[n] e^{-2 pi i k n / L} over the first min(N, L) samples (the rest are
// zeros), 1 inverse (e^{+...} / L), 2 inverse of a one-sided spectrum (N bins, Hermitian
// symmetry, a real output of L samples: C_out = 1). The twiddles come from a table made on
// the host in double precision (cos 2 pi m / L, then sin, m < L), indexed by (k n mod L):
// WGSL's sin and cos need only be within 2^-11, too coarse for long sums (SwiftShader).
// params: n, N, inner, C, L, K (output length), C_out, mode
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> twiddle: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let N = pu(1u);
  let inner = pu(2u);
  let C = pu(3u);
  let L = pu(4u);
  let K = pu(5u);
  let c_out = pu(6u);
  let mode = pu(7u);
  let part = i % c_out;
  let q = (i / c_out) % inner;
  let k = (i / (c_out * inner)) % K;
  let o = i / (c_out * inner * K);
  let base = o * N * inner * C + q * C;
  let step = inner * C;
  var re = 0.0;
  var im = 0.0;
  if (mode == 2u) {
    for (var t = 0u; t < L; t++) {        // Y[t] from the bins, conjugated past L / 2
      var bin = t;
      var sign = 1.0;
      if (2u * t > L) {
        bin = L - t;
        sign = -1.0;
      }
      if (bin >= N) { continue; }
      let yr = x[base + bin * step];
      var yi = select(0.0, sign * x[base + bin * step + 1u], C == 2u);
      if (bin == 0u || 2u * bin == L) { yi = 0.0; }
      let m = (t * k) % L;
      re += yr * twiddle[m] - yi * twiddle[L + m];
    }
    out[i] = re / f32(L);
    return;
  }
  let sign = select(-1.0, 1.0, mode == 1u);
  for (var t = 0u; t < min(N, L); t++) {
    let xr = x[base + t * step];
    let xi = select(0.0, x[base + t * step + 1u], C == 2u);
    let m = (t * k) % L;
    let cs = twiddle[m];
    let sn = sign * twiddle[L + m];
    re += xr * cs - xi * sn;
    im += xr * sn + xi * cs;
  }
  if (mode == 1u) {
    re /= f32(L);
    im /= f32(L);
  }
  out[i] = select(re, im, part == 1u);
}
