/*
 * dispatch.c -- choosing the kernel table once, at first use, from the
 * CPU's features or the HEARTH_CPU environment variable.
 *
 * HEARTH_CPU forces a path (for comparisons, benchmarks and working around
 * a faulty kernel).  A path that this build lacks or this CPU cannot run is
 * an error rather than a silent fallback: an operator who asked for a path
 * must not get numbers from another one without noticing.
 */
#include "internal.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cpu.h"
#include "kernels.h"

static const char *const path_names[KERNEL_PATH_COUNT] = {
    [KERNEL_PATH_SCALAR] = "scalar",
    [KERNEL_PATH_AVX2] = "avx2",
    [KERNEL_PATH_AVX512] = "avx512",
    [KERNEL_PATH_AVX512VNNI] = "avx512vnni",
    [KERNEL_PATH_NEON] = "neon",
    [KERNEL_PATH_NEON_DOTPROD] = "neon-dotprod",
};

const char *kernel_path_name(kernel_path path)
{
    return (unsigned)path < KERNEL_PATH_COUNT ? path_names[path] : NULL;
}

/* What each x86 path needs (the AVX-512 ones build on the AVX2 code). */
#define CPU_HAS_AVX2(f) ((f)->avx2 && (f)->fma && (f)->f16c)
#define CPU_HAS_AVX512(f) (CPU_HAS_AVX2(f) && (f)->avx512f && (f)->avx512bw && (f)->avx512vl)

const hearth_kernels *kernel_path_table(kernel_path path, const char **why_not)
{
    const struct cpu_features *f = cpu_features();
    const char *why = NULL;
    const hearth_kernels *k = NULL;
    switch (path) {
    case KERNEL_PATH_SCALAR:
        k = hearth_kernels_scalar();
        break;
    case KERNEL_PATH_AVX2:
#ifdef HAVE_KERNELS_AVX2
        if (CPU_HAS_AVX2(f)) k = hearth_kernels_avx2();
        else why = "this CPU (or its operating system) lacks AVX2, FMA or F16C";
#else
        why = "this build has no AVX2 kernels";
#endif
        break;
    case KERNEL_PATH_AVX512:
#ifdef HAVE_KERNELS_AVX512
        if (CPU_HAS_AVX512(f)) k = hearth_kernels_avx512();
        else why = "this CPU (or its operating system) lacks AVX-512 F, BW or VL";
#else
        why = "this build has no AVX-512 kernels";
#endif
        break;
    case KERNEL_PATH_AVX512VNNI:
#ifdef HAVE_KERNELS_AVX512VNNI
        if (CPU_HAS_AVX512(f) && f->avx512vnni) k = hearth_kernels_avx512vnni();
        else why = "this CPU (or its operating system) lacks AVX-512 F, BW, VL or VNNI";
#else
        why = "this build has no AVX-512 VNNI kernels";
#endif
        break;
    case KERNEL_PATH_NEON:
#ifdef HAVE_KERNELS_NEON
        if (f->asimd) k = hearth_kernels_neon();
        else why = "this CPU lacks Advanced SIMD (NEON)";
#else
        why = "this build has no NEON kernels";
#endif
        break;
    case KERNEL_PATH_NEON_DOTPROD:
#ifdef HAVE_KERNELS_NEON_DOTPROD
        if (f->asimd && f->asimddp) k = hearth_kernels_neon_dotprod();
        else why = "this CPU lacks the Advanced SIMD dot-product instructions (asimddp)";
#else
        why = "this build has no NEON dot-product kernels";
#endif
        break;
    default:
        why = "no such kernel path";
        break;
    }
    (void)f;
    if (why_not) *why_not = why;
    return k;
}

bool kernel_table_is_avx2_family(const hearth_kernels *k)
{
    return k && (k == kernel_path_table(KERNEL_PATH_AVX2, NULL) || k == kernel_path_table(KERNEL_PATH_AVX512, NULL) ||
                 k == kernel_path_table(KERNEL_PATH_AVX512VNNI, NULL));
}

/* The paths this CPU runs, as "scalar, avx2, ..." for error messages. */
static void runnable_paths(char *buf, size_t size)
{
    buf[0] = '\0';
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        if (!kernel_path_table((kernel_path)p, NULL)) continue;
        const size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s", len ? ", " : "", path_names[p]);
    }
}

hearth_status kernel_path_choose(const char *want, const hearth_kernels **out)
{
    if (!want || !*want || strcasecmp(want, "auto") == 0) {
        for (int p = KERNEL_PATH_COUNT - 1; p >= 0; p--) {
            const hearth_kernels *k = kernel_path_table((kernel_path)p, NULL);
            if (k) {
                *out = k;
                return HEARTH_OK;
            }
        }
        return hearth_error(HEARTH_E_INTERNAL, "no kernel path found, not even the scalar one");
    }
    char avail[128];
    runnable_paths(avail, sizeof avail);
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        if (strcasecmp(want, path_names[p]) != 0) continue;
        const char *why;
        const hearth_kernels *k = kernel_path_table((kernel_path)p, &why);
        if (!k)
            return hearth_error(HEARTH_E_UNSUPPORTED, "HEARTH_CPU=%s: %s (paths available here: %s)", want,
                                why, avail);
        *out = k;
        return HEARTH_OK;
    }
    char known[128] = "auto";
    for (int p = 0; p < KERNEL_PATH_COUNT; p++) {
        const size_t len = strlen(known);
        snprintf(known + len, sizeof known - len, ", %s", path_names[p]);
    }
    return hearth_error(HEARTH_E_UNSUPPORTED, "HEARTH_CPU=%.40s: unknown kernel path (known: %s; available here: %s)",
                        want, known, avail);
}

static _Atomic(const hearth_kernels *) chosen;

hearth_status hearth_kernels_select(const hearth_kernels **out)
{
    const hearth_kernels *k = atomic_load_explicit(&chosen, memory_order_acquire);
    if (!k) {
        /* Threads racing here make the same choice; the first one stored wins. */
        HEARTH_TRY(kernel_path_choose(getenv("HEARTH_CPU"), &k));
        const hearth_kernels *none = NULL;
        if (!atomic_compare_exchange_strong(&chosen, &none, k)) k = none;
    }
    *out = k;
    return HEARTH_OK;
}

hearth_status hearth_cpu_kernels(const char **name)
{
    const hearth_kernels *k;
    HEARTH_TRY(hearth_kernels_select(&k));
    *name = k->name;
    return HEARTH_OK;
}

const char *hearth_cpu_features(void)
{
    return cpu_features_string();
}
