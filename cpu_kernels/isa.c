/* Which instruction set the kernels run on: the best the CPU and its OS allow (CPUID, and
 * XGETBV for the saved register state), read once, or one forced no higher (tests). */
#include <cpuid.h>
#include "isa.h"

static int best = -1;
static int used = -1;
static int vbmi = 0;

static int detect(void) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !((ecx >> 27) & 1)) return ISA_NONE;  /* OSXSAVE */
    int fma = (ecx >> 12) & 1;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    int ymm = (lo & 0x6) == 0x6, zmm = (lo & 0xE6) == 0xE6;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return ISA_NONE;
    int avx2 = (ebx >> 5) & 1, avx512f = (ebx >> 16) & 1, avx512bw = (ebx >> 30) & 1;
    int avx512vl = (ebx >> 31) & 1, vnni = (ecx >> 11) & 1;
    if (zmm && avx512f && avx512bw && avx512vl && vnni && avx2 && fma) {
        vbmi = (ecx >> 1) & 1;
        return ISA_AVX512;
    }
    if (ymm && avx2 && fma) return ISA_AVX2;
    return ISA_NONE;
}

int cpu_isa(void) {
    if (used < 0) {
        best = detect();          /* CPUID is slow (a VM exit under a hypervisor): once */
        used = best;
    }
    return used;
}

int cpu_vbmi(void) {
    return cpu_isa() == ISA_AVX512 && vbmi;
}

/* The path in use: `force` < 0 keeps it, else forces one no higher than the best (tests).
 * Returns the path now in use. */
EXPORT int er_cpu_isa(int force) {
    cpu_isa();
    if (force >= 0) used = force < best ? force : best;
    return used;
}
