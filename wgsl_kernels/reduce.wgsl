// Reduction family: LRN, ArgMax/ArgMin, Einsum, DFT. One output element per work item; the
// reduced elements are walked serially (rows.wgsl shares long rows between invocations).

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
