/*
 * cpu.h -- what the processor and the operating system support, detected
 * once: the instruction-set extensions the kernels of simd/ are built for.
 */
#ifndef HEARTH_CPU_H
#define HEARTH_CPU_H

#include <stdbool.h>

struct cpu_features {
    /* x86-64 instruction sets, each reported only when the operating
     * system also saves the registers it uses (XCR0 via xgetbv). */
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16;
    bool avx_vnni;
};

/* The features of this processor (all false on other architectures). */
const struct cpu_features *cpu_features(void);

/* The detected features as space-separated lower-case names. */
const char *cpu_features_string(void);

#endif /* HEARTH_CPU_H */
