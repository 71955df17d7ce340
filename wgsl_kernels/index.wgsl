// Index family: operators whose output elements pick, place or rank input elements by
// computed indices (GatherElements, ScatterElements, ScatterND, Trilu, OneHot) or walk one
// axis in order (CumSum, TopK; Hardmax is reduce.wgsl's arg_extreme). T is the WGSL element type (f32, i32, u32).
// Indices are i32 (int64 is stored as int32); negative ones count from the end of their
// axis, and an index out of range reads or writes nothing a kernel could fault on (host
// indices are checked before upload, as Gather's are).

//! kernel gather_elements
// out[c] = data[c with c[axis] replaced by idx[c]] over the coordinates c of idx's shape.
// params: n, rank, axis, axis_len, dims[6] @4 (idx's), data_strides[6] @10
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> data: array<{{T}}>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let axis = pu(2u);
  let axis_len = pi(3u);
  var k = idx[i];
  if (k < 0) { k += axis_len; }
  k = clamp(k, 0, axis_len - 1);
  var rest = i;
  var src = 0u;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let a = u32(d);
    let dim = pu(4u + a);
    var c = rest % dim;
    rest = rest / dim;
    if (a == axis) { c = u32(k); }
    src += c * pu(10u + a);
  }
  out[i] = data[src];
}

//! kernel scatter_elements
// out = data with updates[u] folded into out[u with u[axis] replaced by idx[u]], in the
// order of u: each output element walks the updates along `axis` that share its other
// coordinates, so duplicate indices reduce in order, deterministically.
// {{REDUCE}} folds update `u` into `acc` ("u" for reduction none: the last one wins).
// params: n, rank, axis, axis_len, dims[6] @4 (data's), upd_dims[6] @10, upd_strides[6] @16
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> data: array<{{T}}>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;
@group(0) @binding(4) var<storage, read> upd: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let axis = pu(2u);
  let axis_len = pi(3u);
  var acc = data[i];
  var rest = i;
  var base = 0u;
  var want = 0;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let a = u32(d);
    let dim = pu(4u + a);
    let c = rest % dim;
    rest = rest / dim;
    if (a == axis) {
      want = i32(c);
    } else {
      if (c >= pu(10u + a)) { out[i] = acc; return; }   // no update reaches this element
      base += c * pu(16u + a);
    }
  }
  let step = pu(16u + axis);
  for (var j = 0u; j < pu(10u + axis); j++) {
    var k = idx[base + j * step];
    if (k < 0) { k += axis_len; }
    if (k == want) {
      let u = upd[base + j * step];
      acc = {{REDUCE}};
    }
  }
  out[i] = acc;
}

//! kernel scatter_nd
// out = data with update row m (`inner` elements) folded into the slot that index tuple m
// (idx[m * K .. m * K + K]) names in data's first K dims, rows in order (see
// scatter_elements for REDUCE). params: n, K, inner, M (update rows), dims[6] @4 (data's
// first K dims)
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> data: array<{{T}}>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;
@group(0) @binding(4) var<storage, read> upd: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let K = pu(1u);
  let inner = pu(2u);
  let slot = i / inner;
  let q = i % inner;
  var acc = data[i];
  for (var m = 0u; m < pu(3u); m++) {
    var s = 0;
    for (var d = 0u; d < K; d++) {
      let dim = pi(4u + d);
      var k = idx[m * K + d];
      if (k < 0) { k += dim; }
      s = s * dim + k;
    }
    if (s == i32(slot)) {
      let u = upd[m * inner + q];
      acc = {{REDUCE}};
    }
  }
  out[i] = acc;
}

//! kernel trilu
// The upper ({{UPPER}} 1: col - row >= k) or lower (col - row <= k) triangle of each
// matrix in the last two dims; other elements are 0. params: n, rows, cols, k (i32)
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let cols = pu(2u);
  let col = i32(i % cols);
  let row = i32((i / cols) % pu(1u));
  let diff = col - row;
  var keep = diff <= pi(3u);
  if ({{UPPER}} == 1) { keep = diff >= pi(3u); }
  out[i] = select({{T}}(0), x[i], keep);
}

//! kernel cumulative
// Running sums (CumSum: {{OP}} +, {{FIRST}} 0) or products (CumProd: *, 1) along one axis:
// lines of length L with stride `inner`, one line per work item.
// params: n (= outer * inner), L, inner, exclusive, reverse
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(1u);
  let inner = pu(2u);
  let exclusive = pu(3u) == 1u;
  let reverse = pu(4u) == 1u;
  let base = (i / inner) * L * inner + i % inner;
  var acc = {{T}}({{FIRST}});
  for (var j = 0u; j < L; j++) {
    var p = j;
    if (reverse) { p = L - 1u - j; }
    let at = base + p * inner;
    let v = x[at];
    if (exclusive) {
      out[at] = acc;
      acc = acc {{OP}} v;
    } else {
      acc = acc {{OP}} v;
      out[at] = acc;
    }
  }
}

//! kernel topk
// The K first elements of each line (length L, stride `inner`) in the order {{BEFORE}}
// defines over (a, ia) and (b, ib) (value, index): pick t is the first element that comes
// after pick t - 1, found by one pass per pick (K * L reads, no scratch memory).
// Values go to `out`, indices to `indices`, both lines of length K with stride `inner`.
// params: n (= outer * inner), L, inner, K
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;

fn before(a: {{T}}, ia: u32, b: {{T}}, ib: u32) -> bool {
  return {{BEFORE}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(1u);
  let inner = pu(2u);
  let K = pu(3u);
  let base = (i / inner) * L * inner + i % inner;
  let out_base = (i / inner) * K * inner + i % inner;
  var prev = x[base];
  var prev_i = 0u;
  for (var t = 0u; t < K; t++) {
    var found = false;
    var best = x[base];
    var best_i = 0u;
    for (var j = 0u; j < L; j++) {
      let v = x[base + j * inner];
      if (t > 0u && !before(prev, prev_i, v, j)) { continue; }
      if (!found || before(v, j, best, best_i)) {
        best = v;
        best_i = j;
        found = true;
      }
    }
    out[out_base + t * inner] = best;
    indices[out_base + t * inner] = i32(best_i);
    prev = best;
    prev_i = best_i;
  }
}

//! kernel onehot
// out[o, d, q] = values[1] where idx[o, q] (negatives count back from depth) is d, else
// values[0]. params: n, depth, inner
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> idx: array<i32>;
@group(0) @binding(3) var<storage, read> values: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let depth = pu(1u);
  let inner = pu(2u);
  let q = i % inner;
  let d = (i / inner) % depth;
  let o = i / (inner * depth);
  var k = idx[o * inner + q];
  if (k < 0) { k += i32(depth); }
  out[i] = values[select(0u, 1u, k == i32(d))];
}

//! kernel nll
// NegativeLogLikelihoodLoss per target element: loss[n, q] = -x[n, t, q] * w and the weight
// w (weight[t], or 1 with has_weight 0; 0 where t is ignore_index and has_ignore 1), for the
// mean reduction's denominator. params: n (= N * inner), C, inner, has_weight, has_ignore,
// ignore_index (i32)
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> labels: array<i32>;
@group(0) @binding(4) var<storage, read> weight: array<f32>;
@group(0) @binding(5) var<storage, read_write> weights_out: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let C = pu(1u);
  let inner = pu(2u);
  let t = labels[i];
  if (pu(4u) == 1u && t == pi(5u)) {
    out[i] = 0.0;
    weights_out[i] = 0.0;
    return;
  }
  let c = u32(clamp(t, 0, i32(C) - 1));
  let w = select(1.0, weight[c], pu(3u) == 1u);
  out[i] = -x[((i / inner) * C + c) * inner + i % inner] * w;
  weights_out[i] = w;
}

//! kernel rotary
// RotaryEmbedding, one work item per element of x (B, H, S, D) or (B, S, H*D): the first
// rot_dim elements of each head rotate pairwise (halves, or neighbours with interleaved 1)
// by the angle of cache row pos[b, s] (has_pos 1) or b * S + s; the rest are copied.
// The position of element i: d = i % D, s = (i / s_div) % S, b = i / b_div.
// params: n, D, S, s_div, b_div, rot_dim, interleaved, has_pos
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> cos_cache: array<f32>;
@group(0) @binding(4) var<storage, read> sin_cache: array<f32>;
@group(0) @binding(5) var<storage, read> pos: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let d = i % pu(1u);
  let rot = pu(5u);
  if (d >= rot) {
    out[i] = x[i];
    return;
  }
  let S = pu(2u);
  let s = (i / pu(3u)) % S;
  let b = i / pu(4u);
  var row = b * S + s;
  if (pu(7u) == 1u) { row = u32(pos[row]); }
  let half = rot / 2u;
  var j = d % half;             // the angle's index
  var first = d < half;         // the pair's first element (real part)
  var mate = select(i - half, i + half, first);
  if (pu(6u) == 1u) {
    j = d / 2u;
    first = d % 2u == 0u;
    mate = select(i - 1u, i + 1u, first);
  }
  let c = cos_cache[row * half + j];
  let sn = sin_cache[row * half + j];
  out[i] = select(sn * x[mate] + c * x[i], c * x[i] - sn * x[mate], first);
}

//! kernel gather_nd
// GatherND: output row r (`inner` elements) copies the slice of data that index tuple r
// (idx[r * K .. r * K + K]) names in the K dims after the batch dims; rows_per_batch rows
// share a batch entry of batch_stride data elements. params: n, K, inner, rows_per_batch,
// batch_stride, dims[6] @5 (the K indexed dims)
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> data: array<{{T}}>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let K = pu(1u);
  let inner = pu(2u);
  let r = i / inner;
  var s = 0;
  for (var d = 0u; d < K; d++) {
    let dim = pi(5u + d);
    var k = idx[r * K + d];
    if (k < 0) { k += dim; }
    s = s * dim + clamp(k, 0, dim - 1);
  }
  out[i] = data[(r / pu(3u)) * pu(4u) + u32(s) * inner + i % inner];
}

//! kernel eye
// EyeLike: 1 where col - row == k, else 0, over (rows, cols). params: n, cols, k (i32)
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let cols = pu(1u);
  let on = i32(i % cols) - i32(i / cols) == pi(2u);
  out[i] = select({{T}}(0), {{T}}(1), on);
}

//! kernel reverse_sequence
// ReverseSequence: along the time axis, batch entry b's first lens[b] steps are reversed.
// params: n, T, time_stride, B, batch_stride
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> lens: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let t = (i / pu(2u)) % pu(1u);
  let b = (i / pu(4u)) % pu(3u);
  let n = u32(clamp(lens[b], 0, i32(pu(1u))));
  var src = i;
  if (t < n) { src = i - t * pu(2u) + (n - 1u - t) * pu(2u); }
  out[i] = x[src];
}

//! kernel tensor_scatter
// TensorScatter: the cache with batch entry b's update rows written at positions
// write_indices[b] + j along `axis` (mod the cache length with circular 1).
// params: n, S (cache length), axis_stride, S_new, batch_stride (cache), circular
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> cache: array<{{T}}>;
@group(0) @binding(3) var<storage, read> update: array<{{T}}>;
@group(0) @binding(4) var<storage, read> starts: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let S = i32(pu(1u));
  let stride = pu(2u);
  let s_new = i32(pu(3u));
  let b = i / pu(4u);
  let p = i32((i / stride) % u32(S));
  var j = p - starts[b];
  if (pu(5u) == 1u) { j = (rem_i32(j, S) + S) % S; }
  if (j < 0 || j >= s_new) {
    out[i] = cache[i];
    return;
  }
  // the same element of the update: its axis is s_new long instead of S
  let outer = i / (stride * u32(S));
  out[i] = update[(outer * u32(s_new) + u32(j)) * stride + i % stride];
}
