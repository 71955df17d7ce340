// Integer matmul family on 4x4 tiles: integer_matmul.wgsl's products where K and N are
// multiples of 4, each work item (or LANES of them, sharing K) summing a tile of 4 rows of A
// by 4 columns of B read as vec4 words (8-bit values are one i32 word each, packed.wgsl): 4
// loads feed 16 multiply-adds, as matmul.wgsl's matmul_vec4 does for floats. A is its rows
// [R, K] (batches flattened), B one [K, N]; sums int32, wrapping as ONNX allows. A's zero
// point is one value or one per row of a batch (M rows), B's one or one per column.
// params (both kernels): n (tiles * LANES), M, N, K, a_per_row, b_per_col, rows R, then the
// kernel's own
@group(0) @binding(2) var<storage, read> a: array<vec4<i32>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<i32>>;
@group(0) @binding(4) var<storage, read> a_zero_point: array<i32>;
@group(0) @binding(5) var<storage, read> b_zero_point: array<i32>;

// The tile's rows, its first column and its sums, whole in the first lane.
struct Tile { m0: u32, n0: u32, sums: array<vec4<i32>, 4> }

fn centered_tile(item: u32, local: u32) -> Tile {
  let M = pu(1u);
  let N = pu(2u);
  let K4 = pu(3u) / 4u;
  let R = pu(6u);
  let t = tile_of(item);
  let m0 = (t / (N / 4u)) * 4u;
  let n4 = t % (N / 4u);
  let lane = k_lane(local);
  var rows: array<u32, 4>;
  var za: array<i32, 4>;
  for (var r = 0u; r < 4u; r++) {
    let m = min(m0 + r, R - 1u);
    rows[r] = m * K4;
    za[r] = a_zero_point[(m % M) * pu(4u)];
  }
  let zb = vec4<i32>(b_zero_point[(4u * n4) * pu(5u)], b_zero_point[(4u * n4 + 1u) * pu(5u)],
                     b_zero_point[(4u * n4 + 2u) * pu(5u)], b_zero_point[(4u * n4 + 3u) * pu(5u)]);
  var acc: array<vec4<i32>, 4>;
  let n4s = N / 4u;
  for (var k = lane; k < K4; k += {{LANES}}u) {
    let bk = 4u * k * n4s + n4;
    let b0 = b[bk] - zb;
    let b1 = b[bk + n4s] - zb;
    let b2 = b[bk + 2u * n4s] - zb;
    let b3 = b[bk + 3u * n4s] - zb;
    for (var r = 0u; r < 4u; r++) {
      let av = a[rows[r] + k] - vec4<i32>(za[r]);
      acc[r] += av.x * b0 + av.y * b1 + av.z * b2 + av.w * b3;
    }
  }
  return Tile(m0, 4u * n4, tile_total_i32(local, acc));
}

// Each kernel's `store(index, column, sum)` writes one element of a tile.
@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let tile = centered_tile(item, local);
  if (!tile_writer(item, local)) { return; }
  let N = pu(2u);
  for (var r = 0u; r < 4u; r++) {
    let m = tile.m0 + r;
    if (m >= pu(6u)) { break; }
    for (var c = 0u; c < 4u; c++) { store(m * N + tile.n0 + c, tile.n0 + c, tile.sums[r][c]); }
  }
}

//! kernel integer
// MatMulInteger: the int32 sums.
@group(0) @binding(1) var<storage, read_write> out: array<i32>;

fn store(index: u32, column: u32, sum: i32) { out[index] = sum; }

//! kernel scaled
// MatMulIntegerToFloat: f32(sum) * (a_scale * b_scale) + bias, b_scale one value or one per
// column (scale_per_col), bias one per column. params: ..., scale_per_col
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read> a_scale: array<f32>;
@group(0) @binding(7) var<storage, read> b_scale: array<f32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

fn store(index: u32, column: u32, sum: i32) {
  out[index] = f32(sum) * (a_scale[0] * b_scale[column * pu(7u)]) + bias[column];
}
