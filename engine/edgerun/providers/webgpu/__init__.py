"""The WebGPU execution provider: WGSL kernels (wgsl_kernels/) on a GPU device.

Natively the device is wgpu-native through wgpu-py (Vulkan, Metal, D3D12); in a web page it
is the browser's `navigator.gpu` through Pyodide (browser_device.py). Only `device.py`'s
small interface differs between the two; kernels and scheduling are shared, and need no
numpy (host_values.py), since Pyodide may have none.
"""
