// Data-movement family: every layout operator is one of these index maps.
// Transpose, Slice, Split, Concat, Expand, DepthToSpace... are `strided_copy`s; Pad, Gather
// and Resize have their own index rules. T is the WGSL element type moved (f32, i32, u32):
// integers must not pass through f32, whose loads may flush their bit patterns as denormals.

//! kernel strided_copy
// out[dst_base + sum(c_d * dst_stride_d)] = x[src_base + sum(c_d * src_stride_d)] over the
// coordinates c of `dims` (rank <= 6). Source strides may be negative (reversed slices).
// params: n, rank, dims[6] @2, src_strides[6] @8 (i32), dst_strides[6] @14, src_base @20,
//         dst_base @21
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  var rest = i;
  var src = pi(20u);
  var dst = pu(21u);
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(2u + k);
    let c = rest % dim;
    rest = rest / dim;
    src += i32(c) * pi(8u + k);
    dst += c * pu(14u + k);
  }
  out[dst] = x[u32(src)];
}

//! kernel pad
// mode: 0 constant, 1 reflect, 2 edge, 3 wrap.
// params: n, rank, out_dims[6] @2, in_dims[6] @8, in_strides[6] @14, pads_begin[6] @20 (i32),
//         value @26 (the bits of a T), mode @27
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let mode = pu(27u);
  var rest = i;
  var src = 0u;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(2u + k);
    let n_in = pi(8u + k);
    var c = i32(rest % dim) - pi(20u + k);
    rest = rest / dim;
    if (c < 0 || c >= n_in) {
      if (mode == 0u) { out[i] = bitcast<{{T}}>(pu(26u)); return; }
      if (mode == 1u) {
        let period = max(2 * (n_in - 1), 1);
        c = abs(c) % period;
        if (c >= n_in) { c = period - c; }
      } else if (mode == 2u) {
        c = clamp(c, 0, n_in - 1);
      } else {
        c = ((c % n_in) + n_in) % n_in;
      }
    }
    src += u32(c) * pu(14u + k);
  }
  out[i] = x[src];
}

//! kernel gather
// out[o, j, q] = data[o, idx[j], q]; negative indices count from the end, and indices out
// of [-axis_len, axis_len) are clamped (a kernel cannot raise; host indices are checked).
// params: n, inner, nidx, axis_len
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> data: array<{{T}}>;
@group(0) @binding(3) var<storage, read> idx: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let inner = pu(1u);
  let nidx = pu(2u);
  let axis_len = pi(3u);
  let q = i % inner;
  let j = (i / inner) % nidx;
  let o = i / (inner * nidx);
  var k = idx[j];
  if (k < 0) { k += axis_len; }
  k = clamp(k, 0, axis_len - 1);
  out[i] = data[(o * u32(axis_len) + u32(k)) * inner + q];
}

//! kernel resize
// Resize of the last two dims of [..., H, W] by {{MODE}}: 0 nearest, 1 linear, 2 cubic
// (coefficient A; exclude_outside drops and renormalizes taps outside the input). Output
// coordinates map back through the coordinate transformation mode: 0 half_pixel,
// 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel, 4 tf_half_pixel_for_nn,
// 5 half_pixel_symmetric, 6 tf_crop_and_resize (roi; outside it, extrapolation_value).
// Nearest rounding: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
// params: n, H, W, OH, OW, scale_h, scale_w, coord_mode, nearest_mode, roi_h0, roi_h1,
//         roi_w0, roi_w1, extrapolation_value, A, exclude_outside
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

// roi_at: the params index of this axis' roi start (its end follows)
fn source_coord(o: u32, n_out: u32, n_in: u32, scale: f32, roi_at: u32) -> f32 {
  let mode = pu(7u);
  let fo = f32(o);
  // ONNX measures the resized length as n_in * scale, which need not be an integer
  let resized = f32(n_in) * scale;
  if (mode == 0u) { return (fo + 0.5) / scale - 0.5; }
  if (mode == 1u) { return fo / scale; }
  if (mode == 2u) {
    if (resized <= 1.0) { return 0.0; }
    return fo * f32(n_in - 1u) / (resized - 1.0);
  }
  if (mode == 3u) {
    if (n_out <= 1u) { return 0.0; }
    return (fo + 0.5) / scale - 0.5;
  }
  if (mode == 5u) {
    let offset = f32(n_in) / 2.0 * (1.0 - f32(n_out) / resized);
    return offset + (fo + 0.5) / scale - 0.5;
  }
  if (mode == 6u) {
    let r0 = pf(roi_at);
    let span = (pf(roi_at + 1u) - r0) * f32(n_in - 1u);
    if (n_out <= 1u) { return span / 2.0 + r0 * f32(n_in - 1u); }
    return fo * span / f32(n_out - 1u) + r0 * f32(n_in - 1u);
  }
  return (fo + 0.5) / scale;
}

fn nearest(c: f32, n_in: u32) -> u32 {
  let mode = pu(8u);
  var r: f32;
  if (mode == 0u) {
    r = select(round(c), floor(c), fract(c) == 0.5);
  } else if (mode == 1u) {
    r = select(round(c), ceil(c), fract(c) == 0.5);
  } else if (mode == 2u) {
    r = floor(c);
  } else {
    r = ceil(c);
  }
  return u32(clamp(r, 0.0, f32(n_in - 1u)));
}

// The input indices (clamped to the edge) and weights that make coordinate c along an axis
// of n_in elements; unused taps weigh 0.
struct Taps {
  idx: array<u32, 4>,
  w: array<f32, 4>,
}

fn taps(c: f32, n_in: u32) -> Taps {
  var t: Taps;
  if ({{MODE}} == 0) {
    t.idx[0] = nearest(c, n_in);
    t.w[0] = 1.0;
    return t;
  }
  let base = floor(c);
  let last = f32(n_in - 1u);
  if ({{MODE}} == 1) {
    let f = c - base;
    t.idx[0] = u32(clamp(base, 0.0, last));
    t.idx[1] = u32(clamp(base + 1.0, 0.0, last));
    t.w[0] = 1.0 - f;
    t.w[1] = f;
    return t;
  }
  let A = pf(14u);
  let exclude = pu(15u) == 1u;
  var total = 0.0;
  for (var k = 0u; k < 4u; k++) {
    let p = base - 1.0 + f32(k);
    let s = abs(p - c);
    var w = ((A + 2.0) * s - (A + 3.0)) * s * s + 1.0;
    if (s > 1.0) { w = ((A * s - 5.0 * A) * s + 8.0 * A) * s - 4.0 * A; }
    if (s >= 2.0 || (exclude && (p < 0.0 || p > last))) { w = 0.0; }
    t.idx[k] = u32(clamp(p, 0.0, last));
    t.w[k] = w;
    total += w;
  }
  if (exclude && total != 0.0) {
    for (var k = 0u; k < 4u; k++) { t.w[k] = t.w[k] / total; }
  }
  return t;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let W = pu(2u);
  let OH = pu(3u);
  let OW = pu(4u);
  let ow = i % OW;
  let oh = (i / OW) % OH;
  let plane = (i / (OW * OH)) * H * W;
  let ch = source_coord(oh, OH, H, pf(5u), 9u);
  let cw = source_coord(ow, OW, W, pf(6u), 11u);
  if (pu(7u) == 6u && (ch < 0.0 || ch > f32(H - 1u) || cw < 0.0 || cw > f32(W - 1u))) {
    out[i] = pf(13u);
    return;
  }
  let th = taps(ch, H);
  let tw = taps(cw, W);
  var acc = 0.0;
  for (var a = 0u; a < 4u; a++) {
    if (th.w[a] == 0.0) { continue; }
    var row = 0.0;
    for (var b = 0u; b < 4u; b++) {
      if (tw.w[b] != 0.0) { row += tw.w[b] * x[plane + th.idx[a] * W + tw.idx[b]]; }
    }
    acc += th.w[a] * row;
  }
  out[i] = acc;
}


//! kernel grid_sample
// GridSample of x (N, C, D, H, W) (D = 1 for 2-D inputs) at the points of grid (N, P, R):
// R coordinates per point in [-1, 1], the innermost dim (W) first. {{MODE}} 0 nearest
// (halfway to even), 1 linear, 2 cubic (A = -0.75); padding 0 zeros, 1 border, 2 reflection;
// align_corners maps -1 and 1 to the corner pixels' centres (else to their outer edges).
// params: n (= N * C * P), C, P, R, D, H, W, padding, align_corners
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> grid: array<f32>;

struct GridTaps {
  idx: array<u32, 4>,
  w: array<f32, 4>,
}

// Mirror c into [low, high] (PyTorch's reflection padding).
fn reflect(c: f32, low: f32, high: f32) -> f32 {
  let span = high - low;
  if (span <= 0.0) { return low; }
  if (c >= low && c <= high) { return c; }
  let distance = select(c - high, low - c, c < low);
  let folds = floor(distance / span);
  let rest = distance - folds * span;
  let even = (folds - 2.0 * floor(folds / 2.0)) == 0.0;
  if (c < low) { return select(high - rest, low + rest, even); }
  return select(low + rest, high - rest, even);
}

fn grid_taps(g: f32, size: u32) -> GridTaps {
  var t: GridTaps;
  let n = f32(size);
  let padding = pu(7u);
  var c = ((g + 1.0) * n - 1.0) / 2.0;
  var low = -0.5;
  var high = n - 0.5;
  if (pu(8u) == 1u) {
    c = (g + 1.0) / 2.0 * (n - 1.0);
    low = 0.0;
    high = n - 1.0;
  }
  if ({{MODE}} == 0) { c = round(c); }                 // WGSL rounds halfway to even
  if (padding == 1u && (c < low || c > high)) { c = clamp(c, 0.0, n - 1.0); }
  if (padding == 2u) { c = reflect(c, low, high); }
  var count = 4u;
  var base = floor(c) - 1.0;
  if ({{MODE}} == 0) {
    count = 1u;
    base = trunc(c);
  } else if ({{MODE}} == 1) {
    count = 2u;
    base = floor(c);
  }
  let tt = c - floor(c);
  for (var k = 0u; k < count; k++) {
    var p = base + f32(k);
    var w = 1.0;
    if ({{MODE}} == 1) { w = select(tt, 1.0 - tt, k == 0u); }
    if ({{MODE}} == 2) {
      let s = abs(tt - (f32(k) - 1.0));
      w = ((1.25 * s - 2.25) * s) * s + 1.0;               // A = -0.75, |s| <= 1
      if (s > 1.0) { w = ((-0.75 * s + 3.75) * s - 6.0) * s + 3.0; }
    }
    if (padding == 0u && (p < 0.0 || p > n - 1.0)) { w = 0.0; }
    if (padding == 2u) { p = trunc(reflect(p, low, high)); }
    t.idx[k] = u32(clamp(p, 0.0, n - 1.0));
    t.w[k] = w;
  }
  return t;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let C = pu(1u);
  let P = pu(2u);
  let R = pu(3u);
  let D = pu(4u);
  let H = pu(5u);
  let W = pu(6u);
  let p = i % P;
  let nc = i / P;
  let g = (nc / C * P + p) * R;
  let tw = grid_taps(grid[g], W);
  let th = grid_taps(grid[g + 1u], H);
  var td: GridTaps;
  td.w[0] = 1.0;
  if (R == 3u) { td = grid_taps(grid[g + 2u], D); }
  let plane = nc * D * H * W;
  var acc = 0.0;
  for (var a = 0u; a < 4u; a++) {
    if (td.w[a] == 0.0) { continue; }
    for (var b = 0u; b < 4u; b++) {
      if (th.w[b] == 0.0) { continue; }
      var row = 0.0;
      for (var e = 0u; e < 4u; e++) {
        if (tw.w[e] != 0.0) {
          row += tw.w[e] * x[plane + (td.idx[a] * H + th.idx[b]) * W + tw.idx[e]];
        }
      }
      acc += td.w[a] * th.w[b] * row;
    }
  }
  out[i] = acc;
}

//! kernel affine_grid
// AffineGrid: grid[n, (d,) h, w, r] = theta[n, r] . (x_w, y_h, (z_d,) 1), positions in
// GridSample's [-1, 1] convention (align_corners: the corner pixels' centres).
// params: n, R (2 or 3), D, H, W, align_corners
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> theta: array<f32>;

fn position(c: u32, size: u32) -> f32 {
  if (pu(5u) == 1u) { return select(-1.0 + 2.0 * f32(c) / f32(size - 1u), -1.0, size <= 1u); }
  return (2.0 * f32(c) + 1.0) / f32(size) - 1.0;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let R = pu(1u);
  let D = pu(2u);
  let H = pu(3u);
  let W = pu(4u);
  let r = i % R;
  let w = (i / R) % W;
  let h = (i / (R * W)) % H;
  let d = (i / (R * W * H)) % D;
  let n = i / (R * W * H * D);
  let row = (n * R + r) * (R + 1u);
  var v = theta[row] * position(w, W) + theta[row + 1u] * position(h, H) + theta[row + R];
  if (R == 3u) { v += theta[row + 2u] * position(d, D); }
  out[i] = v;
}
