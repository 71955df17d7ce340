// Row family: reductions over arbitrary axes, Softmax, LayerNormalization. Each row (the
// elements one output reduces) is shared by {{LANES}} invocations of a workgroup: a power of
// two, at most {{WG}} and at most the row's length, so each invocation folds at least one
// element, walking the row with stride LANES. The invocations' parts then meet through
// lanes.wgsl, halving log2(LANES) times. LANES 1 (what CPU adapters get) is one row per
// invocation, with no workgroup memory and no barrier.
//
// Every invocation reaches every exchange: work items past the last row compute on the last
// row and write nothing (their workgroup may hold live rows).

fn row_lane(local: u32) -> u32 { return local % {{LANES}}u; }

// The row of work item `item`, clamped to the last of `rows`.
fn row_of(item: u32, rows: u32) -> u32 { return min(item / {{LANES}}u, rows - 1u); }

// The lane that `lane` folds in at a halving step of size s: its partner, or itself.
fn partner(local: u32, s: u32) -> u32 { return select(local, local + s, row_lane(local) < s); }

// The sum (or with take_max the maximum) of `v` over the {{LANES}} lanes of invocation
// `local`'s row, returned to each of them.
fn row_total(local: u32, v: f32, take_max: bool) -> f32 {
  var total = v;
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let other = lane_f32(local, total, partner(local, s));
    if (row_lane(local) < s) { total = select(total + other, max(total, other), take_max); }
  }
  return lane_f32(local, total, local - row_lane(local));
}

//! kernel reduce
// Each output element reduces the elements at base + offset(r), r < R; the kept and the
// reduced dims are given as (dims, input strides), innermost last, at most 6 of each.
// {{MAP}} maps an element `v`, {{COMBINE}} folds `v` into `acc` (also a lane's fold into
// another's: it must be associative), {{FINAL}} turns `acc` into the result (`count` is R
// as f32).
// params: n, R, krank, kdims[6] @3, kstrides[6] @9, rrank @15, rdims[6] @16, rstrides[6] @22,
// outputs @28
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

fn mapped(v: f32) -> f32 { return {{MAP}}; }
fn combined(acc: f32, v: f32) -> f32 { return {{COMBINE}}; }
fn finished(acc: f32, count: f32) -> f32 { return {{FINAL}}; }

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let outputs = pu(28u);
  let row = row_of(item, outputs);
  let lane = row_lane(local);
  var rest = row;
  var base = 0u;
  for (var d = i32(pu(2u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(3u + k);
    base += (rest % dim) * pu(9u + k);
    rest = rest / dim;
  }
  let R = pu(1u);
  var acc = mapped(x[base + reduced_offset(lane)]);
  for (var r = lane + {{LANES}}u; r < R; r += {{LANES}}u) {
    acc = combined(acc, mapped(x[base + reduced_offset(r)]));
  }
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let other = lane_f32(local, acc, partner(local, s));
    if (lane < s) { acc = combined(acc, other); }
  }
  if (lane == 0u && item / {{LANES}}u < outputs) { out[row] = finished(acc, f32(R)); }
}

//! kernel softmax
// Rows of length L with stride `inner`. {{LOG}} is 1 for LogSoftmax.
// params: n, L, inner, rows (= outer * inner)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let rows = pu(3u);
  let row = row_of(item, rows);
  let lane = row_lane(local);
  let live = item / {{LANES}}u < rows;
  let L = pu(1u);
  let inner = pu(2u);
  let base = (row / inner) * L * inner + row % inner;
  var mx = x[base + lane * inner];
  for (var j = lane + {{LANES}}u; j < L; j += {{LANES}}u) { mx = max(mx, x[base + j * inner]); }
  mx = row_total(local, mx, true);
  var sum = 0.0;
  for (var j = lane; j < L; j += {{LANES}}u) { sum += exp(x[base + j * inner] - mx); }
  sum = row_total(local, sum, false);
  if (!live) { return; }
  if ({{LOG}} == 1) {
    let shift = mx + log(sum);
    for (var j = lane; j < L; j += {{LANES}}u) {
      out[base + j * inner] = x[base + j * inner] - shift;
    }
  } else {
    let inv = 1.0 / sum;
    for (var j = lane; j < L; j += {{LANES}}u) {
      out[base + j * inner] = exp(x[base + j * inner] - mx) * inv;
    }
  }
}

//! kernel layernorm
// LayerNormalization ({{RMS}} 0) or RMSNormalization ({{RMS}} 1) of rows of `cols` elements:
// (x - mean) * inv * scale + bias, inv = 1 / sqrt(variance + epsilon), where RMS takes mean 0
// and has no bias. scale[j * scale_stride], bias[j * bias_stride]: stride 0 reads one value
// (a zero buffer stands for an absent bias). With {{STATS}} 1 each row's mean and inv are
// written too (LayerNormalization's Mean and InvStdDev outputs).
// params: n, cols, epsilon, scale_stride, bias_stride, rows
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> mean_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> inv_out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let rows = pu(5u);
  let row = row_of(item, rows);
  let lane = row_lane(local);
  let cols = pu(1u);
  let base = row * cols;
  var mean = 0.0;
  if ({{RMS}} == 0) {
    for (var j = lane; j < cols; j += {{LANES}}u) { mean += x[base + j]; }
    mean = row_total(local, mean, false) / f32(cols);
  }
  var variance = 0.0;
  for (var j = lane; j < cols; j += {{LANES}}u) {
    let d = x[base + j] - mean;
    variance += d * d;
  }
  variance = row_total(local, variance, false);
  if (item / {{LANES}}u >= rows) { return; }
  let inv = 1.0 / sqrt(variance / f32(cols) + pf(2u));
  let ss = pu(3u);
  let bs = pu(4u);
  for (var j = lane; j < cols; j += {{LANES}}u) {
    out[base + j] = (x[base + j] - mean) * inv * scale[j * ss] + bias[j * bs];
  }
  if ({{STATS}} == 1 && lane == 0u) {
    mean_out[row] = mean;
    inv_out[row] = inv;
  }
}
