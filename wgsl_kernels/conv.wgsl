// Convolution family: direct convolution over NCHW (1-D convolutions run with H = 1),
// no im2col buffer. Each work item computes OCB output channels x 4 output columns in
// registers. OCB is 4 when every group's output channel count is a multiple of 4 (the
// 4 channels then share their input channels), else 1 (depthwise and odd groups).
// ACT is the fused activation, an expression over `x`, `act_alpha`, `act_beta`.

//! kernel conv2d
// T is f32, or i32 for ConvInteger (x and w centered by their zero points first, ACT x).
// params: n, N, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, Cg, Mg, ow_tiles,
//         oc_tiles, act_alpha @20, act_beta @21, bias_stride @22
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> x: array<{{T}}>;
@group(0) @binding(3) var<storage, read> w: array<{{T}}>;
@group(0) @binding(4) var<storage, read> bias: array<{{T}}>;

fn load_x(row: u32, iw: i32, width: u32) -> {{T}} {
  let inside = iw >= 0 && iw < i32(width);
  return select({{T}}(0), x[row + u32(clamp(iw, 0, i32(width) - 1))], inside);
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let C = pu(2u);
  let H = pu(3u);
  let W = pu(4u);
  let M = pu(5u);
  let OH = pu(6u);
  let OW = pu(7u);
  let KH = pu(8u);
  let KW = pu(9u);
  let sh = pu(10u);
  let sw = pu(11u);
  let dh = pu(14u);
  let dw = pu(15u);
  let Cg = pu(16u);
  let ow_tiles = pu(18u);
  let oc_tiles = pu(19u);
  let ow0 = (i % ow_tiles) * 4u;
  let oh = (i / ow_tiles) % OH;
  let rest = i / (ow_tiles * OH);
  let oc0 = (rest % oc_tiles) * {{OCB}}u;
  let nb = rest / oc_tiles;
  let ic0 = (oc0 / pu(17u)) * Cg;
  let wsize = Cg * KH * KW;
  var woff: array<u32, {{OCB}}>;
  for (var r = 0u; r < {{OCB}}u; r++) { woff[r] = min(oc0 + r, M - 1u) * wsize; }
  var acc: array<vec4<{{T}}>, {{OCB}}>;
  let iw_base = i32(ow0 * sw) - pi(13u);
  let sw_i = i32(sw);
  for (var ic = 0u; ic < Cg; ic++) {
    let xc = (nb * C + ic0 + ic) * H;
    for (var kh = 0u; kh < KH; kh++) {
      let ih = i32(oh * sh + kh * dh) - pi(12u);
      if (ih < 0 || ih >= i32(H)) { continue; }
      let xrow = (xc + u32(ih)) * W;
      let wk = (ic * KH + kh) * KW;
      for (var kw = 0u; kw < KW; kw++) {
        let iw = iw_base + i32(kw * dw);
        let xv = vec4<{{T}}>(load_x(xrow, iw, W), load_x(xrow, iw + sw_i, W),
                           load_x(xrow, iw + 2 * sw_i, W), load_x(xrow, iw + 3 * sw_i, W));
        for (var r = 0u; r < {{OCB}}u; r++) {
          acc[r] += w[woff[r] + wk + kw] * xv;
        }
      }
    }
  }
  let act_alpha = pf(20u);
  let act_beta = pf(21u);
  for (var r = 0u; r < {{OCB}}u; r++) {
    let oc = oc0 + r;
    if (oc >= M) { break; }
    let b = bias[oc * pu(22u)];
    let obase = ((nb * M + oc) * OH + oh) * OW;
    for (var c = 0u; c < 4u; c++) {
      let ow = ow0 + c;
      if (ow >= OW) { break; }
      let x = acc[r][c] + b;
      out[obase + ow] = {{ACT}};
    }
  }
}

//! kernel conv2d_oc4
// conv2d with OCB = 4 and the four accumulators and weight rows in named registers. Each
// 4x4 tile (4 channels by 4 columns) is summed by {{LANES}} work items, each taking every
// LANES-th input channel, their parts meeting in workgroup memory as matmul.wgsl's tiles
// do (n counts tiles * LANES; kernels/matmul.py's k_lanes chooses).
// params: n, N, C, H, W, M, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, Cg, Mg, ow_tiles,
//         oc_tiles, act_alpha @20, act_beta @21, bias_stride @22
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

fn load_x(row: u32, iw: i32, width: u32) -> f32 {
  let inside = iw >= 0 && iw < i32(width);
  return select(0.0, x[row + u32(clamp(iw, 0, i32(width) - 1))], inside);
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let i = tile_of(item);
  let lane = k_lane(local);
  let C = pu(2u);
  let H = pu(3u);
  let W = pu(4u);
  let M = pu(5u);
  let OH = pu(6u);
  let OW = pu(7u);
  let KH = pu(8u);
  let KW = pu(9u);
  let sh = pu(10u);
  let sw = pu(11u);
  let dh = pu(14u);
  let dw = pu(15u);
  let Cg = pu(16u);
  let ow_tiles = pu(18u);
  let oc_tiles = pu(19u);
  let ow0 = (i % ow_tiles) * 4u;
  let oh = (i / ow_tiles) % OH;
  let rest = i / (ow_tiles * OH);
  let oc0 = (rest % oc_tiles) * 4u;
  let nb = rest / oc_tiles;
  let ic0 = (oc0 / pu(17u)) * Cg;
  let wsize = Cg * KH * KW;
  let w0 = min(oc0, M - 1u) * wsize;
  let w1 = min(oc0 + 1u, M - 1u) * wsize;
  let w2 = min(oc0 + 2u, M - 1u) * wsize;
  let w3 = min(oc0 + 3u, M - 1u) * wsize;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  let iw_base = i32(ow0 * sw) - pi(13u);
  let sw_i = i32(sw);
  for (var ic = lane; ic < Cg; ic += {{LANES}}u) {
    let xc = (nb * C + ic0 + ic) * H;
    for (var kh = 0u; kh < KH; kh++) {
      let ih = i32(oh * sh + kh * dh) - pi(12u);
      if (ih < 0 || ih >= i32(H)) { continue; }
      let xrow = (xc + u32(ih)) * W;
      let wk = (ic * KH + kh) * KW;
      for (var kw = 0u; kw < KW; kw++) {
        let iw = iw_base + i32(kw * dw);
        let xv = vec4<f32>(load_x(xrow, iw, W), load_x(xrow, iw + sw_i, W),
                           load_x(xrow, iw + 2 * sw_i, W), load_x(xrow, iw + 3 * sw_i, W));
        let wi = wk + kw;
        acc0 += w[w0 + wi] * xv;
        acc1 += w[w1 + wi] * xv;
        acc2 += w[w2 + wi] * xv;
        acc3 += w[w3 + wi] * xv;
      }
    }
  }
  let acc = tile_total(local, array<vec4<f32>, 4>(acc0, acc1, acc2, acc3));
  if (!tile_writer(item, local)) { return; }
  let act_alpha = pf(20u);
  let act_beta = pf(21u);
  for (var r = 0u; r < 4u; r++) {
    let oc = oc0 + r;
    if (oc >= M) { break; }
    let b = bias[oc * pu(22u)];
    let obase = ((nb * M + oc) * OH + oh) * OW;
    for (var c = 0u; c < 4u; c++) {
      let ow = ow0 + c;
      if (ow >= OW) { break; }
      let x = acc[r][c] + b;
      out[obase + ow] = {{ACT}};
    }
  }
}

//! kernel conv_transpose
// Transposed convolution, direct: each work item gathers one output element of
// (N, M, OD, OH, OW) from the inputs (N, C, D, H, W) whose kernel taps land on it:
// o + pad - k * dilation = i * stride. 1-D and 2-D run with D (and H) = 1.
// w is (C, Mg, KD, KH, KW); Cg input and Mg output channels per group.
// params: n, C, D, H, W, M, OD, OH, OW, KD, KH, KW, strides[3] @12, pads[3] @15,
//         dilations[3] @18, Cg @21, Mg @22, bias_stride @23
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

// The input position that kernel tap k feeds output position o from, or -1.
fn source(o: u32, k: u32, axis: u32, size: u32) -> i32 {
  let t = i32(o) + pi(15u + axis) - i32(k) * pi(18u + axis);
  let s = pi(12u + axis);
  if (t < 0 || t % s != 0 || t / s >= i32(size)) { return -1; }
  return t / s;
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let D = pu(2u);
  let H = pu(3u);
  let W = pu(4u);
  let M = pu(5u);
  let OD = pu(6u);
  let OH = pu(7u);
  let OW = pu(8u);
  let KD = pu(9u);
  let KH = pu(10u);
  let KW = pu(11u);
  let Cg = pu(21u);
  let Mg = pu(22u);
  let ow = i % OW;
  let oh = (i / OW) % OH;
  let od = (i / (OW * OH)) % OD;
  let m = (i / (OW * OH * OD)) % M;
  let n = i / (OW * OH * OD * M);
  let g = m / Mg;
  let mg = m % Mg;
  var acc = bias[m * pu(23u)];
  for (var kd = 0u; kd < KD; kd++) {
    let id = source(od, kd, 0u, D);
    if (id < 0) { continue; }
    for (var kh = 0u; kh < KH; kh++) {
      let ih = source(oh, kh, 1u, H);
      if (ih < 0) { continue; }
      for (var kw = 0u; kw < KW; kw++) {
        let iw = source(ow, kw, 2u, W);
        if (iw < 0) { continue; }
        let at = (u32(id) * H + u32(ih)) * W + u32(iw);
        let tap = (kd * KH + kh) * KW + kw;
        for (var cg = 0u; cg < Cg; cg++) {
          let c = g * Cg + cg;
          acc += x[(n * pu(1u) + c) * D * H * W + at] * w[((c * Mg + mg) * KD * KH * KW) + tap];
        }
      }
    }
  }
  out[i] = acc;
}

//! kernel causal_conv
// CausalConvWithState: y[b, c, t] = bias[c] + sum_j h[b, c, t + j] * w[c, j] over the history
// h = past_state (K - 1 steps; zeros with has_past 0) followed by x (L steps); {{SILU}} 1
// applies y * sigmoid(y). params: n (= B * C * L), C, L, K, has_past, bias_stride
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> past: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let L = pu(2u);
  let K = pu(3u);
  let t = i % L;
  let row = i / L;                     // b * C + c
  let c = row % pu(1u);
  var acc = bias[c * pu(5u)];
  for (var j = 0u; j < K; j++) {
    let p = t + j;                     // position in the history
    var h = 0.0;
    if (p + 1u >= K) {
      h = x[row * L + p + 1u - K];
    } else if (pu(4u) == 1u) {
      h = past[row * (K - 1u) + p];
    }
    acc += h * w[c * K + j];
  }
  if ({{SILU}} == 1) { acc = acc / (1.0 + exp(-acc)); }
  out[i] = acc;
}
