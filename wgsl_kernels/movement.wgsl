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
// Resize of the last two dims of [..., H, W] (nearest, linear, cubic; any coordinate mode,
// antialias): each output position along an axis reads its taps, input indices and weights
// the host computed from the CPU kernel's float64 coordinates (ir/resize_rules.py), so no
// coordinate is computed in f32 here. K taps per position; {{NEAREST}} (mode nearest): one,
// whose weight (1) is not read. Otherwise out = sum over the taps of the axis resized second
// of w * (sum over the taps of the axis resized first of w * x), in tap order, as the CPU
// kernel's passes sum; w_first: the W axis is resized first. With tf_crop_and_resize,
// positions outside the roi along an axis take extrapolation_value in that axis' pass.
// taps: (index, bit-cast f32 weight) pairs: H taps (OH x KH), W taps (OW x KW), then with
// crop the outside flags (.x; OH, then OW).
// {{KA}}, {{KB}}: the tap counts of the axis resized first and second, literals where small
// (loops the compiler unrolls), else params 10 and 11 (antialias).
// params: n, H, W, OH, OW, KH, KW, w_first, crop, extrapolation_value, KA, KB
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> taps: array<vec2<i32>>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = pu(1u);
  let W = pu(2u);
  let OH = pu(3u);
  let OW = pu(4u);
  let KH = pu(5u);
  let KW = pu(6u);
  let w_first = pu(7u) == 1u;
  let fill = pf(9u);
  let ow = i % OW;
  let oh = (i / OW) % OH;
  let plane = (i / (OW * OH)) * H * W;
  let h_row = oh * KH;                 // this position's taps along H, along W
  let w_row = OH * KH + ow * KW;
  var h_out = false;
  var w_out = false;
  if (pu(8u) == 1u) {
    let flags = OH * KH + OW * KW;
    h_out = taps[flags + oh].x != 0;
    w_out = taps[flags + OH + ow].x != 0;
  }
  if ({{NEAREST}}) {
    if (h_out || w_out) {
      out[i] = fill;
    } else {
      out[i] = x[plane + u32(taps[h_row].x) * W + u32(taps[w_row].x)];
    }
    return;
  }
  // a: the axis resized first (the inner sum), b: the one resized second
  let a_row = select(h_row, w_row, w_first);
  let a_stride = select(W, 1u, w_first);
  let a_out = select(h_out, w_out, w_first);
  let b_row = select(w_row, h_row, w_first);
  let b_stride = select(1u, W, w_first);
  if (select(w_out, h_out, w_first)) {
    out[i] = fill;
    return;
  }
  var acc = 0.0;
  var ta4: array<vec2<i32>, 4>;     // the first axis' taps, read once (up to 4 of them)
  for (var a = 0u; a < min({{KA}}, 4u); a++) { ta4[a] = taps[a_row + a]; }
  for (var b = 0u; b < {{KB}}; b++) {
    let tb = taps[b_row + b];
    let b_at = plane + u32(tb.x) * b_stride;
    var inner = fill;
    if (!a_out) {
      inner = 0.0;
      for (var a = 0u; a < {{KA}}; a++) {
        var ta: vec2<i32>;
        if (a < 4u) { ta = ta4[a]; } else { ta = taps[a_row + a]; }
        let term = x[b_at + u32(ta.x) * a_stride] * bitcast<f32>(ta.y);
        inner = select(inner + term, term, a == 0u);
      }
    }
    let term = inner * bitcast<f32>(tb.y);
    acc = select(acc + term, term, b == 0u);
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
