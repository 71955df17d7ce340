// Integer matmul family: (A - a_zero_point) (B - b_zero_point) of 8-bit tensors (one i32
// word an element, packed.wgsl) over batches of A ([batch, M, K]) and one B [K, N], one
// output element per work item, int32 sums (wrapping, as ONNX allows). A's zero point is one
// value or one per row, B's one or one per column.
// params (both kernels): n, M, N, K, a_per_row, b_per_col, then the kernel's own
@group(0) @binding(2) var<storage, read> a: array<i32>;
@group(0) @binding(3) var<storage, read> b: array<i32>;
@group(0) @binding(4) var<storage, read> a_zero_point: array<i32>;
@group(0) @binding(5) var<storage, read> b_zero_point: array<i32>;

fn centered_dot(i: u32) -> i32 {
  let M = pu(1u);
  let N = pu(2u);
  let K = pu(3u);
  let col = i % N;
  let first = (i / N) * K;             // the row of A this element reads
  let za = a_zero_point[((i / N) % M) * pu(4u)];
  let zb = b_zero_point[col * pu(5u)];
  var acc = 0;
  for (var k = 0u; k < K; k++) {
    acc += (a[first + k] - za) * (b[k * N + col] - zb);
  }
  return acc;
}

//! kernel integer
// MatMulInteger: the int32 sums.
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  out[i] = centered_dot(i);
}

//! kernel scaled
// MatMulIntegerToFloat: f32(sum) * (a_scale * b_scale) + bias, b_scale one value or one per
// column (scale_per_col), bias one per column (zeros when absent). params: ..., scale_per_col
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read> a_scale: array<f32>;
@group(0) @binding(7) var<storage, read> b_scale: array<f32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let col = i % pu(2u);
  let scale = a_scale[0] * b_scale[col * pu(6u)];
  out[i] = f32(centered_dot(i)) * scale + bias[col];
}
