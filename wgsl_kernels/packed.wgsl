// Packed family: 8- and 16-bit element types (int8, uint8, int16, uint16, float16) between
// their own bytes, as the host holds them, and one 32-bit word per element, as GPU tensors
// hold them (integers as i32, float16 as f32). Uploads write the packed bytes and widen them
// here; downloads narrow here and read the packed bytes back: neither side converts element
// by element on the CPU (a page has no numpy).
// BITS is 8 or 16; KIND is 0 for a signed integer, 1 unsigned, 2 float16.

fn lane_of(word: u32, lane: u32) -> u32 {
  return (word >> (lane * {{BITS}}u)) & ((1u << {{BITS}}u) - 1u);
}

//! kernel widen
// params: n. packed: ceil(n * BITS / 32) words; out: n words (i32 for integers, f32 for float16)
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> packed: array<u32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let per_word = 32u / {{BITS}}u;
  let bits = lane_of(packed[i / per_word], i % per_word);
  out[i] = widened(bits);
}

fn widened(bits: u32) -> {{OT}} {
  if ({{KIND}} == 2) { return {{OT}}(unpack2x16float(bits).x); }
  if ({{KIND}} == 0) { return {{OT}}(bitcast<i32>(bits << (32u - {{BITS}}u)) >> (32u - {{BITS}}u)); }
  return {{OT}}(bits);
}

//! kernel narrow
// params: n (packed words), count (elements). One packed word per work item.
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let w = flat_index(gid, nwg);
  if (w >= pu(0u)) { return; }
  let per_word = 32u / {{BITS}}u;
  var word = 0u;
  for (var k = 0u; k < per_word; k++) {
    let i = w * per_word + k;
    if (i < pu(1u)) { word |= narrowed(a[i]) << (k * {{BITS}}u); }
  }
  out[w] = word;
}

fn narrowed(v: {{T}}) -> u32 {
  if ({{KIND}} == 2) { return half_bits(f32(v)); }
  return bitcast<u32>(i32(v)) & ((1u << {{BITS}}u) - 1u);
}
