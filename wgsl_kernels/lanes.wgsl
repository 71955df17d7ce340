// Lanes: the one primitive by which work items sharing an output (a row's reduction, a tile's
// or an integer element's sum along K) meet. Every kernel's source gets one of the two
// sections below after snippets.wgsl, chosen by its {{LANES}} (shaders.py):
//   one_lane     (LANES 1) no workgroup memory and no barrier: each work item owns its
//                output. CPU adapters (lavapipe, SwiftShader) always get this text: their
//                barriers are expensive, and SwiftShader runs barrier-holding shaders as
//                coroutines (a Chromium renderer crashed in CI on such kernels).
//   shared_lanes (LANES > 1) the exchange through workgroup memory, two barriers each.
// lane_*(local, v, source): every work item of the workgroup offers v and gets the value
// offered by work item `source` (its own where there is one lane). Every work item must call
// it at the same point (uniform control flow), so none returns before its last call.

//! kernel one_lane
fn lane_f32(local: u32, v: f32, source: u32) -> f32 { return v; }
fn lane_i32(local: u32, v: i32, source: u32) -> i32 { return v; }
fn lane_tile(local: u32, v: array<vec4<f32>, 4>, source: u32) -> array<vec4<f32>, 4> { return v; }
fn lane_tile_i32(local: u32, v: array<vec4<i32>, 4>, source: u32) -> array<vec4<i32>, 4> { return v; }

//! kernel shared_lanes
var<workgroup> offered_f32: array<f32, {{WG}}>;
var<workgroup> offered_i32: array<i32, {{WG}}>;
var<workgroup> offered_tiles: array<array<vec4<f32>, 4>, {{WG}}>;
var<workgroup> offered_tiles_i32: array<array<vec4<i32>, 4>, {{WG}}>;

fn lane_f32(local: u32, v: f32, source: u32) -> f32 {
  workgroupBarrier();              // the last exchange's reads are done
  offered_f32[local] = v;
  workgroupBarrier();
  return offered_f32[source];
}

fn lane_i32(local: u32, v: i32, source: u32) -> i32 {
  workgroupBarrier();
  offered_i32[local] = v;
  workgroupBarrier();
  return offered_i32[source];
}

fn lane_tile(local: u32, v: array<vec4<f32>, 4>, source: u32) -> array<vec4<f32>, 4> {
  workgroupBarrier();
  offered_tiles[local] = v;
  workgroupBarrier();
  return offered_tiles[source];
}

fn lane_tile_i32(local: u32, v: array<vec4<i32>, 4>, source: u32) -> array<vec4<i32>, 4> {
  workgroupBarrier();
  offered_tiles_i32[local] = v;
  workgroupBarrier();
  return offered_tiles_i32[source];
}
