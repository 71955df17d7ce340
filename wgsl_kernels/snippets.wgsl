// Shared by every kernel: prepended to each one before its family prelude.
//
// Binding 0 is always `params`, this dispatch's slice of the run's parameter arena (shapes,
// strides, scalars); params[0] is always the number of work items. Binding 1 is the output,
// bindings 2.. the inputs. Work items are numbered by `flat_index` over a 2-D grid of
// workgroups, because one dimension holds at most 65535 of them.

@group(0) @binding(0) var<storage, read> params: array<u32>;

fn pu(i: u32) -> u32 { return params[i]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(params[i]); }
fn pf(i: u32) -> f32 { return bitcast<f32>(params[i]); }

fn flat_index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * {{WG}}u;
}

// erf, Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7); WGSL has no builtin.
fn erf_approx(v: f32) -> f32 {
  let x = abs(v);
  let t = 1.0 / (1.0 + 0.3275911 * x);
  let poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
              + 0.254829592) * t;
  return sign(v) * (1.0 - poly * exp(-x * x));
}

// x ** y with ONNX (C pow) semantics for negative bases and integer exponents.
fn pow_any(x: f32, y: f32) -> f32 {
  if (y == 0.0) { return 1.0; }
  let r = pow(abs(x), y);
  if (x < 0.0) {
    // NaN through a runtime value: Tint (Chrome) rejects a constant expression that is NaN
    let nan_bits = 0x7fc00000u;
    if (fract(y) != 0.0) { return bitcast<f32>(nan_bits); }
    if (fract(y * 0.5) != 0.0) { return -r; }
  }
  return r;
}

// C's x % y on i32 (the dividend's sign), through an unsigned remainder: GLSL leaves % of a
// negative operand undefined and wgpu's OpenGL backend passes WGSL's % through (Mesa's gives
// wrong values). u32(abs(x)) is |x| even for the lowest i32 (abs wraps, the bits are 2^31).
fn rem_i32(x: i32, y: i32) -> i32 {
  let r = i32(u32(abs(x)) % u32(abs(y)));
  return select(r, -r, x < 0);
}

// C fmod (the dividend's sign), with x for a finite x over an infinite y (x - y * trunc(x / y)
// alone gives NaN there). Infinities by their bits: WGSL lets compilers assume floats finite.
fn fmod_f32(x: f32, y: f32) -> f32 {
  let x_finite = (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
  if (x_finite && (bitcast<u32>(y) & 0x7fffffffu) == 0x7f800000u) { return x; }
  return x - y * trunc(x / y);
}

// The float16 bits of v, rounded to nearest even; past float16's range infinity, NaN a quiet
// NaN (pack2x16float leaves both indeterminate). Infinities and NaN by their bits: WGSL lets
// compilers assume floats finite.
fn half_bits(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  let sign = (b >> 16u) & 0x8000u;
  let magnitude = b & 0x7fffffffu;
  if (magnitude > 0x7f800000u) { return sign | 0x7e00u; }
  if (magnitude >= 0x477ff000u) { return sign | 0x7c00u; }   // 65520 and up round to inf
  return pack2x16float(vec2<f32>(v, 0.0)) & 0xffffu;
}

// v rounded to float16's precision, as f32 (a Cast to float16 kept in f32 words)
fn as_half(v: f32) -> f32 {
  return unpack2x16float(half_bits(v)).x;
}

// Outputs (4x4 tiles, or elements) each summed along K by {{LANES}} work items (1 unless a
// kernel is given more: matmul.wgsl, conv2d_oc4, integer_matmul.wgsl). A workgroup's work
// items take TILES consecutive outputs lane by lane, so neighbours read neighbouring columns;
// each lane sums every LANES-th step of K, and tile_total adds the lanes' partial tiles
// (lanes.wgsl). With one lane an output is its work item's.
const TILES = {{WG}}u / {{LANES}}u;

// The output work item `item` helps compute, unclamped.
fn tile_at(item: u32) -> u32 { return (item / {{WG}}u) * TILES + (item % {{WG}}u) % TILES; }

fn k_lane(local: u32) -> u32 { return local / TILES; }

// The output of work item `item`, clamped to the last of the pu(0) / LANES outputs.
fn tile_of(item: u32) -> u32 { return min(tile_at(item), pu(0u) / {{LANES}}u - 1u); }

// Whether work item `item` stores its output: the first lane of an output that exists.
fn tile_writer(item: u32, local: u32) -> bool {
  return k_lane(local) == 0u && tile_at(item) < pu(0u) / {{LANES}}u;
}

// The lanes' partial tiles summed, whole in the first lane (every work item calls this).
fn tile_total(local: u32, acc: array<vec4<f32>, 4>) -> array<vec4<f32>, 4> {
  var total = acc;
  let lane = k_lane(local);
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let other = lane_tile(local, total, select(local, local + s * TILES, lane < s));
    if (lane < s) {
      for (var r = 0u; r < 4u; r++) { total[r] += other[r]; }
    }
  }
  return total;
}

// tile_total of int32 tiles (integer products: exact, wrapping).
fn tile_total_i32(local: u32, acc: array<vec4<i32>, 4>) -> array<vec4<i32>, 4> {
  var total = acc;
  let lane = k_lane(local);
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let other = lane_tile_i32(local, total, select(local, local + s * TILES, lane < s));
    if (lane < s) {
      for (var r = 0u; r < 4u; r++) { total[r] += other[r]; }
    }
  }
  return total;
}
