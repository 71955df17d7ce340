"""The adapter wgpu opens (name, backend, type), its features and the limits kernels use."""
import json

import wgpu

from edgerun.providers.webgpu.provider import shared_context

adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
print("adapter:", json.dumps(dict(adapter.info)))
print("features:", " ".join(sorted(adapter.features)))
print("limits:", {k: adapter.limits[k] for k in ("max-compute-workgroup-storage-size",
                                                  "max-compute-invocations-per-workgroup",
                                                  "max-storage-buffer-binding-size")})
gpu = shared_context()
print("edgerun context:", gpu.device.backend, gpu.device.adapter_type, gpu.device.description)
