/*
 * cpu.c -- CPU feature detection for the kernel dispatch: cpuid for what
 * the processor implements, xgetbv for what the operating system enables.
 *
 * An instruction set is usable only when both agree: a kernel built for
 * AVX-512 faults on a processor that has it if the kernel (or hypervisor)
 * does not save the 512-bit and mask registers across context switches.
 */
#include "internal.h"

#include "cpu.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define HAVE_X86_CPUID 1
#endif

#ifdef HAVE_X86_CPUID
/* XCR0 state components (Intel SDM vol. 1, 13.1) */
#define XCR0_SSE (1u << 1)
#define XCR0_AVX (1u << 2)
#define XCR0_OPMASK (1u << 5)
#define XCR0_ZMM_HI256 (1u << 6)
#define XCR0_HI16_ZMM (1u << 7)

static uint32_t read_xcr0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return eax;
}

static void detect(struct cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = c & bit_OSXSAVE;
    const bool avx = c & bit_AVX, fma = c & bit_FMA, f16c = c & bit_F16C;
    if (!osxsave || !avx) return;
    const uint32_t xcr0 = read_xcr0();
    const bool os_avx = (xcr0 & (XCR0_SSE | XCR0_AVX)) == (XCR0_SSE | XCR0_AVX);
    const uint32_t zmm_state = XCR0_SSE | XCR0_AVX | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM;
    const bool os_avx512 = (xcr0 & zmm_state) == zmm_state;
    if (!os_avx) return;
    f->fma = fma;
    f->f16c = f16c;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned leaf7_max_sub = a;
    f->avx2 = b & bit_AVX2;
    if (os_avx512) {
        f->avx512f = b & bit_AVX512F;
        f->avx512bw = b & bit_AVX512BW;
        f->avx512vl = b & bit_AVX512VL;
        f->avx512vnni = c & (1u << 11);
    }
    if (leaf7_max_sub >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx_vnni = a & (1u << 4);
        if (os_avx512) f->avx512bf16 = a & (1u << 5);
    }
}
#else
static void detect(struct cpu_features *f)
{
    (void)f;
}
#endif

static struct cpu_features features;
static char features_text[128];
static atomic_int detect_state; /* 0: not yet, 1: under way, 2: done */

const struct cpu_features *cpu_features(void)
{
    if (atomic_load_explicit(&detect_state, memory_order_acquire) == 2) return &features;
    int expected = 0;
    if (atomic_compare_exchange_strong(&detect_state, &expected, 1)) {
        struct cpu_features f;
        memset(&f, 0, sizeof f);
        detect(&f);
        static const struct { const char *name; size_t offset; } names[] = {
            {"avx2", offsetof(struct cpu_features, avx2)},
            {"fma", offsetof(struct cpu_features, fma)},
            {"f16c", offsetof(struct cpu_features, f16c)},
            {"avx512f", offsetof(struct cpu_features, avx512f)},
            {"avx512bw", offsetof(struct cpu_features, avx512bw)},
            {"avx512vl", offsetof(struct cpu_features, avx512vl)},
            {"avx512vnni", offsetof(struct cpu_features, avx512vnni)},
            {"avx512bf16", offsetof(struct cpu_features, avx512bf16)},
            {"avxvnni", offsetof(struct cpu_features, avx_vnni)},
        };
        char *p = features_text;
        for (size_t i = 0; i < HEARTH_ARRAY_LEN(names); i++) {
            bool on;
            memcpy(&on, (const char *)&f + names[i].offset, sizeof on);
            if (!on) continue;
            const size_t len = strlen(names[i].name);
            if (p != features_text) *p++ = ' ';
            memcpy(p, names[i].name, len);
            p += len;
        }
        *p = '\0';
        features = f;
        atomic_store_explicit(&detect_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&detect_state, memory_order_acquire) != 2) {
        }
    }
    return &features;
}

const char *cpu_features_string(void)
{
    cpu_features();
    return features_text;
}
