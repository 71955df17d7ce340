// Elementwise family: one output element per work item.
// EXPR (a substitution) is a WGSL expression over `x` (and `y` for binary kernels) and the scalars
// `alpha`, `beta`; the provider's tables (kernels/elementwise.py) hold one per operator.
// T is the WGSL type of the inputs' elements and OT the output's (f32, i32, or u32 for bool).

//! kernel unary
// params: n, alpha, beta
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let x = a[i];
  let alpha = pf(1u);
  let beta = pf(2u);
  out[i] = {{EXPR}};
}

//! kernel binary_same
// Both inputs have the output's shape. params: n, alpha, beta
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;
@group(0) @binding(3) var<storage, read> b: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let x = a[i];
  let y = b[i];
  let alpha = pf(1u);
  let beta = pf(2u);
  out[i] = {{EXPR}};
}

//! kernel binary
// Numpy broadcasting through strides (0 on broadcast dims), rank <= 6.
// params: n, rank, dims[6] @2, a_strides[6] @8, b_strides[6] @14, alpha @20, beta @21
@group(0) @binding(1) var<storage, read_write> out: array<{{OT}}>;
@group(0) @binding(2) var<storage, read> a: array<{{T}}>;
@group(0) @binding(3) var<storage, read> b: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  var rest = i;
  var ia = 0u;
  var ib = 0u;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(2u + k);
    let c = rest % dim;
    rest = rest / dim;
    ia += c * pu(8u + k);
    ib += c * pu(14u + k);
  }
  let x = a[ia];
  let y = b[ib];
  let alpha = pf(20u);
  let beta = pf(21u);
  out[i] = {{EXPR}};
}

//! kernel where
// out = cond ? x : y with numpy broadcasting of all three (strides 0 on broadcast dims).
// params: n, rank, dims[6] @2, cond_strides[6] @8, x_strides[6] @14, y_strides[6] @20
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<storage, read> cond: array<u32>;
@group(0) @binding(3) var<storage, read> a: array<{{T}}>;
@group(0) @binding(4) var<storage, read> b: array<{{T}}>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  var rest = i;
  var ic = 0u;
  var ia = 0u;
  var ib = 0u;
  for (var d = i32(pu(1u)) - 1; d >= 0; d--) {
    let k = u32(d);
    let dim = pu(2u + k);
    let c = rest % dim;
    rest = rest / dim;
    ic += c * pu(8u + k);
    ia += c * pu(14u + k);
    ib += c * pu(20u + k);
  }
  out[i] = select(b[ib], a[ia], cond[ic] != 0u);
}

//! kernel batchnorm
// Inference BatchNormalization over [N, C, inner] as onnxruntime computes it (factor =
// 1 / sqrt(var + eps) * scale, y = x * factor + (bias - mean * factor)). params: n, C, inner,
// epsilon
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> scale: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> mean: array<f32>;
@group(0) @binding(6) var<storage, read> variance: array<f32>;

@compute @workgroup_size({{WG}})
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_index(gid, nwg);
  if (i >= pu(0u)) { return; }
  let c = (i / pu(2u)) % pu(1u);
  let factor = 1.0 / sqrt(variance[c] + pf(3u)) * scale[c];    // onnxruntime's steps
  out[i] = x[i] * factor + (bias[c] - mean[c] * factor);
}
