# simd/local.mk -- the hot kernels, one file per instruction set, chosen at
# run time (see simd/kernels.h).  Each instruction set's file is built into
# its own convenience library with its own flags, so that nothing outside
# it can use instructions the CPU may lack.

AM_CPPFLAGS += -I$(top_srcdir)/simd

src_libhearth_core_la_SOURCES += \
	simd/cpu.c \
	simd/cpu.h \
	simd/dispatch.c \
	simd/kernels.h \
	simd/pack.c \
	simd/scalar.c

noinst_HEADERS += simd/float_tiles_impl.h simd/int_tiles_impl.h simd/tiles.h simd/x86_int.h

if KERNELS_AVX2
noinst_LTLIBRARIES += simd/libkernels-avx2.la
src_libhearth_core_la_LIBADD += simd/libkernels-avx2.la
endif
simd_libkernels_avx2_la_SOURCES = simd/avx2.c
simd_libkernels_avx2_la_CFLAGS = $(AM_CFLAGS) $(KERNELS_AVX2_CFLAGS)

if KERNELS_AVX512
noinst_LTLIBRARIES += simd/libkernels-avx512.la
src_libhearth_core_la_LIBADD += simd/libkernels-avx512.la
endif
simd_libkernels_avx512_la_SOURCES = simd/avx512.c
simd_libkernels_avx512_la_CFLAGS = $(AM_CFLAGS) $(KERNELS_AVX512_CFLAGS)

# The same source with VNNI's dot-product instructions.
if KERNELS_AVX512VNNI
noinst_LTLIBRARIES += simd/libkernels-avx512vnni.la
src_libhearth_core_la_LIBADD += simd/libkernels-avx512vnni.la
endif
simd_libkernels_avx512vnni_la_SOURCES = simd/avx512.c
simd_libkernels_avx512vnni_la_CFLAGS = $(AM_CFLAGS) $(KERNELS_AVX512VNNI_CFLAGS) -DKERNELS_VNNI

# Attention: the shared parts and the scalar twin in the library, each
# vector path's block kernel in that path's library.
src_libhearth_core_la_SOURCES += \
	simd/attention.c \
	simd/attention.h \
	simd/attention_scalar.c
noinst_HEADERS += simd/attention_vec.h
simd_libkernels_avx2_la_SOURCES += simd/attention_avx2.c

# The recurrences of linear-attention layers (RWKV-6): the body every path
# compiles, the scalar twin in the library, the AVX2 build in its library.
src_libhearth_core_la_SOURCES += simd/wkv.h simd/wkv_scalar.c
noinst_HEADERS += simd/wkv_impl.h
simd_libkernels_avx2_la_SOURCES += simd/wkv_avx2.c

# The gated delta rule (Gated DeltaNet layers): the body every path
# compiles and the scalar twin.
src_libhearth_core_la_SOURCES += simd/delta.h simd/delta_scalar.c
noinst_HEADERS += simd/delta_impl.h
simd_libkernels_avx2_la_SOURCES += simd/delta_avx2.c
simd_libkernels_avx512_la_SOURCES += simd/attention_avx512.c

# AArch64: Advanced SIMD, and the same source with the dot-product
# instructions (compiled for them alone, used only where cpu.c finds them).
# Attention has no use for dot products: both paths share the plain one's.
if KERNELS_NEON
noinst_LTLIBRARIES += simd/libkernels-neon.la
src_libhearth_core_la_LIBADD += simd/libkernels-neon.la
endif
simd_libkernels_neon_la_SOURCES = simd/neon.c simd/attention_neon.c
simd_libkernels_neon_la_CFLAGS = $(AM_CFLAGS) $(KERNELS_NEON_CFLAGS)

if KERNELS_NEON_DOTPROD
noinst_LTLIBRARIES += simd/libkernels-neon-dotprod.la
src_libhearth_core_la_LIBADD += simd/libkernels-neon-dotprod.la
endif
simd_libkernels_neon_dotprod_la_SOURCES = simd/neon.c
simd_libkernels_neon_dotprod_la_CFLAGS = $(AM_CFLAGS) $(KERNELS_NEON_DOTPROD_CFLAGS) -DKERNELS_DOTPROD
