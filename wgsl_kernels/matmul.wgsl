// Matrix family: batched C = act(alpha * A·B + beta * bias), register-blocked.
// Each 4x4 tile of C is computed in registers by {{LANES}} work items (snippets.wgsl's
// tiles): each sums every LANES-th step of K, and their partial tiles meet through
// lanes.wgsl. One lane (one work item per tile, no workgroup memory, no barrier) is what CPU
// adapters (lavapipe, SwiftShader) get: there barriers are expensive. A GPU with few tiles
// to run takes more lanes, so that enough work items hide its memory latency
// (kernels/matmul.py's k_lanes). No shared-memory tiling of A and B: on CPU-like adapters
// that was ~7x slower. A and B are read through strides, so transposed operands (Gemm
// transA/transB) cost nothing extra. Rows/columns past the edge are clamped on load and
// skipped on store; work items past the last tile compute on it and store nothing. ACT is
// an expression over `x`, `act_alpha`, `act_beta`.

//! kernel matmul
// params: n, M, N, K, tilesN, tilesMN, sam, sak, sbk, sbn, scm, scn, alpha, beta,
//         act_alpha, act_beta, batch_rank @16, batch_dims[4] @17, a_bstrides[4] @21,
//         b_bstrides[4] @25, c_bstrides[4] @29
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

fn epilogue(acc: f32, cidx: u32) -> f32 {
  let x = pf(12u) * acc + pf(13u) * bias[cidx];
  let act_alpha = pf(14u);
  let act_beta = pf(15u);
  return {{ACT}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let i = tile_of(item);
  let lane = k_lane(local);
  let M = pu(1u);
  let N = pu(2u);
  let K = pu(3u);
  let tiles_mn = pu(5u);
  let t = i % tiles_mn;
  let batch = i / tiles_mn;
  let m0 = (t / pu(4u)) * 4u;
  let n0 = (t % pu(4u)) * 4u;
  var rest = batch;
  var abase = 0u;
  var bbase = 0u;
  var cbase = 0u;
  for (var d = i32(pu(16u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(17u + k);
    let c = rest % dim;
    rest = rest / dim;
    abase += c * pu(21u + k);
    bbase += c * pu(25u + k);
    cbase += c * pu(29u + k);
  }
  let sam = pu(6u);
  let sak = pu(7u);
  let sbk = pu(8u);
  let sbn = pu(9u);
  let ra = vec4<u32>(min(m0, M - 1u), min(m0 + 1u, M - 1u), min(m0 + 2u, M - 1u),
                     min(m0 + 3u, M - 1u)) * sam + vec4<u32>(abase);
  let cb = vec4<u32>(min(n0, N - 1u), min(n0 + 1u, N - 1u), min(n0 + 2u, N - 1u),
                     min(n0 + 3u, N - 1u)) * sbn + vec4<u32>(bbase);
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  for (var k = lane; k < K; k += {{LANES}}u) {
    let ko = k * sbk;
    let bv = vec4<f32>(b[cb.x + ko], b[cb.y + ko], b[cb.z + ko], b[cb.w + ko]);
    let ka = k * sak;
    acc0 += a[ra.x + ka] * bv;
    acc1 += a[ra.y + ka] * bv;
    acc2 += a[ra.z + ka] * bv;
    acc3 += a[ra.w + ka] * bv;
  }
  let rows = tile_total(local, array<vec4<f32>, 4>(acc0, acc1, acc2, acc3));
  if (!tile_writer(item, local)) { return; }
  let obase = batch * M * N;
  for (var r = 0u; r < 4u; r++) {
    let m = m0 + r;
    if (m >= M) { break; }
    let row = rows[r];
    for (var c = 0u; c < 4u; c++) {
      let n = n0 + c;
      if (n >= N) { break; }
      out[obase + m * N + n] = epilogue(row[c], cbase + m * pu(10u) + n * pu(11u));
    }
  }
}

//! kernel matmul_vec4
// The contiguous case, A [M, K] and B [K, N] row-major with K and N multiples of 4: both read
// as vec4 (4 loads feed 16 multiply-adds). Same params as `matmul`; the a/b batch strides
// and the strides sam, sbk are in vec4 units.
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> b: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;

fn epilogue(acc: f32, cidx: u32) -> f32 {
  let x = pf(12u) * acc + pf(13u) * bias[cidx];
  let act_alpha = pf(14u);
  let act_beta = pf(15u);
  return {{ACT}};
}

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) local: u32) {
  let item = flat_index(gid, nwg);
  let i = tile_of(item);
  let lane = k_lane(local);
  let M = pu(1u);
  let N = pu(2u);
  let K4 = pu(3u) / 4u;
  let tiles_mn = pu(5u);
  let t = i % tiles_mn;
  let batch = i / tiles_mn;
  let m0 = (t / pu(4u)) * 4u;
  let n4 = t % pu(4u);
  var rest = batch;
  var abase = 0u;
  var bbase = 0u;
  var cbase = 0u;
  for (var d = i32(pu(16u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(17u + k);
    let c = rest % dim;
    rest = rest / dim;
    abase += c * pu(21u + k);
    bbase += c * pu(25u + k);
    cbase += c * pu(29u + k);
  }
  let sam = pu(6u);
  let sbk = pu(8u);
  let r0 = abase + min(m0, M - 1u) * sam;
  let r1 = abase + min(m0 + 1u, M - 1u) * sam;
  let r2 = abase + min(m0 + 2u, M - 1u) * sam;
  let r3 = abase + min(m0 + 3u, M - 1u) * sam;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  var bk = bbase + n4 + 4u * lane * sbk;
  for (var k = lane; k < K4; k += {{LANES}}u) {
    let b0 = b[bk];
    let b1 = b[bk + sbk];
    let b2 = b[bk + 2u * sbk];
    let b3 = b[bk + 3u * sbk];
    bk += 4u * {{LANES}}u * sbk;
    let a0 = a[r0 + k];
    let a1 = a[r1 + k];
    let a2 = a[r2 + k];
    let a3 = a[r3 + k];
    acc0 += a0.x * b0 + a0.y * b1 + a0.z * b2 + a0.w * b3;
    acc1 += a1.x * b0 + a1.y * b1 + a1.z * b2 + a1.w * b3;
    acc2 += a2.x * b0 + a2.y * b1 + a2.z * b2 + a2.w * b3;
    acc3 += a3.x * b0 + a3.y * b1 + a3.z * b2 + a3.w * b3;
  }
  let rows = tile_total(local, array<vec4<f32>, 4>(acc0, acc1, acc2, acc3));
  if (!tile_writer(item, local)) { return; }
  let obase = batch * M * N;
  let n0 = n4 * 4u;
  for (var r = 0u; r < 4u; r++) {
    let m = m0 + r;
    if (m >= M) { break; }
    let row = rows[r];
    for (var c = 0u; c < 4u; c++) {
      out[obase + m * N + n0 + c] = epilogue(row[c], cbase + m * pu(10u) + (n0 + c) * pu(11u));
    }
  }
}
