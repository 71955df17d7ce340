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

/* Whether the AVX-512 path is in use and the CPU has VBMI's byte permutes (Ice Lake, Zen 4;
 * Cascade Lake has VNNI without them). */
int cpu_vbmi(void);
#define TARGET_VBMI __attribute__((target("avx512f,avx512bw,avx512vbmi")))

/* The body of a kernel compiled once per instruction set, and the exported function that
 * runs the one in use. */
#define DISPATCHED(name, params, args)                                          \
    TARGET_AVX512 static void name##_avx512 params { name##_body args; }         \
    TARGET_AVX2 static void name##_avx2 params { name##_body args; }             \
    static void name##_plain params { name##_body args; }                        \
    EXPORT void er_cpu_##name params {                                           \
        int isa = cpu_isa();                                                     \
        if (isa == ISA_AVX512) name##_avx512 args;                               \
        else if (isa == ISA_AVX2) name##_avx2 args;                              \
        else name##_plain args;                                                  \
    }

/* Word i of a record (cpu_kernels/pool.c: a part's arguments as 64-bit words) as `type`. */
#define WORD(type, i) ((type)(uintptr_t)a[i])

#endif
