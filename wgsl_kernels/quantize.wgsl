// Quantize family: linear (de)quantization and DynamicQuantizeLinear. 8/16-bit tensors are
// one i32 word an element (packed.wgsl); scales are f32. Parameters per tensor or per axis
// (one per index of the axis: element i has index (i / inner) % len). ROUND is as_half(v) for
// a float16 result (f32 words rounded to float16), else v.

// round(q) + zero_point saturated to [low, high], half to even; NaN gives low, as onnxruntime
// (clamping by comparisons keeps a NaN, found by its bits: WGSL lets compilers assume floats
// finite)
fn quantized(q: f32, zero_point: f32, low: f32, high: f32) -> i32 {
  var v = round(q) + zero_point;
  if (v < low) { v = low; }
  if (v > high) { v = high; }
  if ((bitcast<u32>(v) & 0x7fffffffu) > 0x7f800000u) { return i32(low); }   // NaN
  return i32(v);
}

//! kernel dequantize
// out = (x - zero_point) * scale. params: n, inner, len
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<i32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> zero_point: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let c = (i / pu(1u)) % pu(2u);
  let v = f32(x[i] - zero_point[c]) * scale[c];
  out[i] = {{ROUND}};
}

//! kernel center
// out = x - zero_point as i32 (ConvInteger's operands). params: n, inner, len
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<i32>;
@group(0) @binding(3) var<storage, read> zero_point: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  out[i] = x[i] - zero_point[(i / pu(1u)) % pu(2u)];
}

//! kernel quantize
// out = quantized(x / scale, zero_point): QuantizeLinear's 8/16-bit words (OT i32, READ_BACK
// false), or read back as f32 (OT f32, READ_BACK true: com.edgerun QuantizeDequantize, the
// pair in one pass, no 8-bit tensor between). params: n, inner, len, low, high
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> zero_point: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let c = (i / pu(1u)) % pu(2u);
  let z = zero_point[c];
  let q = quantized(x[i] / scale[c], f32(z), f32(pi(3u)), f32(pi(4u)));
  if ({{READ_BACK}}) {
    out[i] = {{OT}}(f32(q - z) * scale[c]);
  } else {
    out[i] = {{OT}}(q);
  }
}

//! kernel range_partials
// DynamicQuantizeLinear's range, first step: work item t folds x[t], x[t + n], ... into
// out[2t] (min) and out[2t + 1] (max). params: n (work items), count
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let t = flat_index(gid, nwg);
  let step = pu(0u);
  if (t >= step) { return; }
  var low = 0.0;
  var high = 0.0;
  for (var i = t; i < pu(1u); i += step) {
    low = min(low, x[i]);
    high = max(high, x[i]);
  }
  out[2u * t] = low;
  out[2u * t + 1u] = high;
}

//! kernel dynamic_scale
// The partials folded into scale = (high - low) / 255 (1 for a range of 0, as onnxruntime)
// into out[0], and zero_point = round(0 - low / scale) saturated to [0, 255] into zero[0] (an
// i32 word of a uint8 tensor; written, though bound among the inputs). One workgroup: each
// of its first {{LANES}} invocations folds every LANES-th partial, and their folds meet
// through lanes.wgsl, halving. params: n ({{LANES}}), partials
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> partials: array<f32>;
@group(0) @binding(3) var<storage, read_write> zero: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(local_invocation_index) local: u32) {
  var low = 0.0;
  var high = 0.0;
  if (local < {{LANES}}u) {
    for (var t = local; t < pu(1u); t += {{LANES}}u) {
      low = min(low, partials[2u * t]);
      high = max(high, partials[2u * t + 1u]);
    }
  }
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let source = select(local, local + s, local < s);
    let other_low = lane_f32(local, low, source);
    let other_high = lane_f32(local, high, source);
    if (local < s) {
      low = min(low, other_low);
      high = max(high, other_high);
    }
  }
  if (local != 0u) { return; }
  var scale = 1.0;
  if (high != low) { scale = (high - low) / 255.0; }
  out[0] = scale;
  zero[0] = i32(clamp(round(0.0 - low / scale), 0.0, 255.0));
}

//! kernel dynamic_quantize
// uint8 x by the scale and zero point dynamic_scale made. params: n
@group(0) @binding(1) var<storage, read_write> out: array<i32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> zero: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  out[i] = quantized(x[i] / scale[0], f32(zero[0]), 0.0, 255.0);
}
