# simd/local.mk -- the hot kernels, one file per instruction set, chosen at
# run time (see simd/kernels.h).

AM_CPPFLAGS += -I$(top_srcdir)/simd

src_libhearth_core_la_SOURCES += \
	simd/dispatch.c \
	simd/kernels.h \
	simd/scalar.c
