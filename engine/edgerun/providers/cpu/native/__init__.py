"""Native kernels of the CPU provider: C (cpu_kernels/*.c) built per platform into one shared
library, loaded with ctypes where one ships (library.py), for the work numpy cannot do at
onnxruntime's speed: 8-bit integer products on the CPU's dot-product instructions
(qgemm.py) and the integer convolutions on them (qconv.py), one-pass GELU, quantization and LayerNormalization (elementwise.py), tree
ensembles in one call (forest.py), the LSTM/GRU step loops (recurrent.py), and the direct
depthwise convolution and the bias-and-activation epilogue of convolutions (conv.py). Where none
ships, or EDGERUN_NATIVE=0, every kernel keeps its numpy path."""
