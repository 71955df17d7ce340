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
// Nearest or bilinear resize of the last two dims of [..., H, W]; {{LINEAR}} picks which.
// Output coordinates map back through the coordinate transformation mode:
// 0 half_pixel, 1 asymmetric, 2 align_corners, 3 pytorch_half_pixel, 4 tf_half_pixel_for_nn.
// Nearest rounding: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
// params: n, H, W, OH, OW, scale_h, scale_w, coord_mode, nearest_mode
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

fn source_coord(o: u32, n_out: u32, n_in: u32, scale: f32) -> f32 {
  let mode = pu(7u);
  let fo = f32(o);
  if (mode == 0u) { return (fo + 0.5) / scale - 0.5; }
  if (mode == 1u) { return fo / scale; }
  if (mode == 2u) {
    // ONNX measures the resized length as n_in * scale, which need not be an integer
    let resized = f32(n_in) * scale;
    if (resized <= 1.0) { return 0.0; }
    return fo * f32(n_in - 1u) / (resized - 1.0);
  }
  if (mode == 3u) {
    if (n_out <= 1u) { return 0.0; }
    return (fo + 0.5) / scale - 0.5;
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
  let ch = source_coord(oh, OH, H, pf(5u));
  let cw = source_coord(ow, OW, W, pf(6u));
  if ({{LINEAR}} == 0) {
    out[i] = x[plane + nearest(ch, H) * W + nearest(cw, W)];
    return;
  }
  let yh = clamp(ch, 0.0, f32(H - 1u));
  let yw = clamp(cw, 0.0, f32(W - 1u));
  let h0 = u32(floor(yh));
  let w0 = u32(floor(yw));
  let h1 = min(h0 + 1u, H - 1u);
  let w1 = min(w0 + 1u, W - 1u);
  let fh = yh - f32(h0);
  let fw = yw - f32(w0);
  let top = mix(x[plane + h0 * W + w0], x[plane + h0 * W + w1], fw);
  let bottom = mix(x[plane + h1 * W + w0], x[plane + h1 * W + w1], fw);
  out[i] = mix(top, bottom, fh);
}
