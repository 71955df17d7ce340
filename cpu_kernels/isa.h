/* The instruction sets the native kernels are written for, and the one in use. */
#ifndef EDGERUN_CPU_ISA_H
#define EDGERUN_CPU_ISA_H

#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

/* In order: each includes the one before. ISA_AVX512 is Ice Lake's and later (F, BW, VL,
 * VNNI); a CPU with an older AVX-512 runs the AVX2 paths. */
enum { ISA_NONE = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 };

#define TARGET_AVX2 __attribute__((target("avx2,fma")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))

/* The path in use (see isa.c). */
int cpu_isa(void);

#endif
