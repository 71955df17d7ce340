// Integer matmul family: (A - a_zero_point) (B - b_zero_point) of 8-bit tensors (one i32
// word an element, packed.wgsl) over batches of A ([batch, M, K]) and one B [K, N], int32
// sums (wrapping, as ONNX allows: in any order the same). Each output element is summed by
// {{LANES}} work items, laid out as snippets.wgsl's tiles (an element where matmul.wgsl has
// a tile), each taking every LANES-th step of K, their parts meeting through lanes.wgsl
// (kernels/matmul.py's k_lanes chooses; 1 on software adapters). A's zero point is one value
// or one per row, B's one or one per column.
// params (both kernels): n (elements * LANES), M, N, K, a_per_row, b_per_col, then the
// kernel's own
@group(0) @binding(2) var<storage, read> a: array<i32>;
@group(0) @binding(3) var<storage, read> b: array<i32>;
@group(0) @binding(4) var<storage, read> a_zero_point: array<i32>;
@group(0) @binding(5) var<storage, read> b_zero_point: array<i32>;

// Element i's sum, whole in its first lane (every work item calls this).
fn centered_dot(i: u32, local: u32) -> i32 {
  let M = pu(1u);
  let N = pu(2u);
  let K = pu(3u);
  let lane = k_lane(local);
  let col = i % N;
  let first = (i / N) * K;             // the row of A this element reads
  let za = a_zero_point[((i / N) % M) * pu(4u)];
  let zb = b_zero_point[col * pu(5u)];
  var acc = 0;
  for (var k = lane; k < K; k += {{LANES}}u) {
    acc += (a[first + k] - za) * (b[k * N + col] - zb);
  }
  for (var s = {{LANES}}u / 2u; s > 0u; s = s / 2u) {
    let other = lane_i32(local, acc, select(local, local + s * TILES, lane < s));
    if (lane < s) { acc += other; }
  }
  return acc;
}

//! kernel integer
// MatMulInteger: the int32 sums.
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let i = tile_of(item);
  let dot = centered_dot(i, local);
  if (tile_writer(item, local)) { out[i] = dot; }
}

//! kernel scaled
// MatMulIntegerToFloat: f32(sum) * (a_scale * b_scale) + bias, b_scale one value or one per
// column (scale_per_col), bias one per column (zeros when absent). params: ..., scale_per_col
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read> a_scale: array<f32>;
@group(0) @binding(7) var<storage, read> b_scale: array<f32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let i = tile_of(item);
  let dot = centered_dot(i, local);
  if (!tile_writer(item, local)) { return; }
  let col = i % pu(2u);
  let scale = a_scale[0] * b_scale[col * pu(6u)];
  out[i] = f32(dot) * scale + bias[col];
}
