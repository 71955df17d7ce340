"""Native kernels of the CPU provider: C (cpu_kernels/*.c) built per platform into one shared
library, loaded with ctypes where one ships (library.py), for the work numpy cannot do at
onnxruntime's speed: 8-bit integer products on the CPU's dot-product instructions
(qgemm.py) and the integer convolutions on them (qconv.py), one-pass GELU, quantization,
LayerNormalization and the ai.onnx.ml row steps (elementwise.py), tree ensembles and SVM
classifiers in one call (forest.py, svm.py), linear models' rows (linear.py), the LSTM/GRU
step loops (recurrent.py), and the direct and depthwise convolutions, 8-bit max pools and the
bias-and-activation epilogue of convolutions (conv.py). parallel.py splits their work over
threads (pool.c's C workers), and products.py the large matrix products; row_buffers.py
gives batch-1 calls arrays whose addresses are known. Where no library ships, or
EDGERUN_NATIVE=0, every kernel keeps its numpy path."""
