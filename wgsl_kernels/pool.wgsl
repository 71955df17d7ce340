// Pooling family: windowed max / average / Lp norm over the last two dims of [..., H, W]
// (1-D pools run with H = 1). One output element per work item.

//! kernel maxpool
// The window's max ({{LP}} 0), or with {{LP}} 1 its Lp norm (sum |v|^p)^(1/p) (LpPool:
// padding adds nothing). With {{IDX}} 1 the max's flat input index goes to `indices` too
// (MaxPool's Indices: the first max; column-major within the plane with storage_order 1).
// params: n, H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, p, storage_order
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> indices: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = i32(pu(1u));
  let W = i32(pu(2u));
  let OW = pu(4u);
  let OH = pu(3u);
  let ow = i % OW;
  let oh = (i / OW) % OH;
  let plane = (i / (OW * OH)) * u32(H * W);
  let h0 = i32(oh * pu(7u)) - pi(9u);
  let w0 = i32(ow * pu(8u)) - pi(10u);
  // the max of the window's input values (an input's -inf stays -inf); a window of padding
  // only gives the lowest float, as onnxruntime and the CPU provider
  var best = 0.0;
  var seen = false;
  var at = 0u;
  for (var kh = 0; kh < pi(5u); kh++) {
    let ih = h0 + kh * pi(11u);
    if (ih < 0 || ih >= H) { continue; }
    for (var kw = 0; kw < pi(6u); kw++) {
      let iw = w0 + kw * pi(12u);
      if (iw < 0 || iw >= W) { continue; }
      let v = x[plane + u32(ih * W + iw)];
      if ({{LP}} == 1) {
        best += pow(abs(v), pf(13u));
      } else if (!seen || v > best) {
        best = v;
        at = select(u32(ih * W + iw), u32(iw * H + ih), pu(14u) == 1u);
      }
      seen = true;
    }
  }
  if ({{LP}} == 1) {
    out[i] = pow(best, 1.0 / pf(13u));
    return;
  }
  out[i] = select(bitcast<f32>(0xff7fffffu), best, seen);   // -FLT_MAX
  // a window of padding only: the plane's offset - 1, as onnxruntime and the CPU provider
  if ({{IDX}} == 1) { indices[i] = select(i32(plane) - 1, i32(plane + at), seen); }
}

//! kernel avgpool
// params: n, H, W, OH, OW, KH, KW, sh, sw, ph, pw, ph_end, pw_end, count_include_pad
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let H = i32(pu(1u));
  let W = i32(pu(2u));
  let OW = pu(4u);
  let OH = pu(3u);
  let ow = i % OW;
  let oh = (i / OW) % OH;
  let plane = (i / (OW * OH)) * u32(H * W);
  let h0 = i32(oh * pu(7u)) - pi(9u);
  let w0 = i32(ow * pu(8u)) - pi(10u);
  let h1 = min(h0 + pi(5u), H + pi(11u));
  let w1 = min(w0 + pi(6u), W + pi(12u));
  var sum = 0.0;
  var count = 0;
  for (var ih = max(h0, 0); ih < min(h1, H); ih++) {
    for (var iw = max(w0, 0); iw < min(w1, W); iw++) {
      sum += x[plane + u32(ih * W + iw)];
      count++;
    }
  }
  if (pu(13u) != 0u) { count = (h1 - h0) * (w1 - w0); }
  out[i] = sum / f32(max(count, 1));
}
