# opencl/local.mk -- the OpenCL backend: device list, program build and
# cache, weight upload, and the layer operations on a device.  The kernels
# (opencl/kernels/*.cl) are embedded into the library as string literals
# by opencl/embed-cl.sh; a build without OpenCL gets opencl/none.c.

OPENCL_KERNELS = \
	opencl/kernels/common.cl \
	opencl/kernels/dequant.cl \
	opencl/kernels/activations.cl \
	opencl/kernels/matmul.cl \
	opencl/kernels/matmul_exact.cl \
	opencl/kernels/norm.cl \
	opencl/kernels/rope.cl \
	opencl/kernels/attention.cl \
	opencl/kernels/elementwise.cl

EXTRA_DIST += $(OPENCL_KERNELS) opencl/embed-cl.sh

if HAVE_OPENCL
src_libhearth_core_la_SOURCES += \
	opencl/backend_opencl.c \
	opencl/device_memory.c \
	opencl/ocl.h \
	opencl/offload.c \
	opencl/program_cache.c \
	opencl/runtime.c
nodist_src_libhearth_core_la_SOURCES = opencl/program_source.c
CLEANFILES += opencl/program_source.c

opencl/program_source.c: $(OPENCL_KERNELS) $(srcdir)/opencl/embed-cl.sh
	$(AM_V_GEN)$(MKDIR_P) opencl && \
	$(SHELL) $(srcdir)/opencl/embed-cl.sh $(srcdir) $(OPENCL_KERNELS) > $@-t && \
	mv $@-t $@
else
src_libhearth_core_la_SOURCES += opencl/none.c
endif
