# tools/local.mk -- development and benchmarking tools, built but not
# installed: the benchmark-model generator, the memory-bandwidth probe, the
# per-kernel speed probe and the side-by-side benchmark script (see
# BENCHMARKS.md).

noinst_PROGRAMS += tools/gen-model tools/membw tools/kbench

tools_gen_model_SOURCES = tools/gen-model.c
tools_gen_model_LDADD = src/libhearth-core.la -lm

tools_membw_SOURCES = tools/membw.c

tools_kbench_SOURCES = tools/kbench.c
tools_kbench_LDADD = src/libhearth-core.la -lm

EXTRA_DIST += BENCHMARKS.md tools/bench-compare.sh
