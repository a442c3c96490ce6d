# tools/local.mk -- development and benchmarking tools, built but not
# installed: the benchmark-model generator, the memory-bandwidth probe, the
# per-kernel speed probe and the side-by-side benchmark script (see
# BENCHMARKS.md); the load test, soak test and side-by-side server benchmark
# of hearth serve (tools/loadtest.py, tools/soak.py, tools/bench-serve.sh).

noinst_PROGRAMS += tools/gen-model tools/membw tools/kbench tools/wkvbench tools/maskbench

tools_gen_model_SOURCES = tools/gen-model.c
tools_gen_model_LDADD = src/libhearth-core.la -lm

tools_membw_SOURCES = tools/membw.c tools/benchutil.h

# grammar token masks per token (BENCHMARKS.md)
tools_maskbench_SOURCES = tools/maskbench.c tools/benchutil.h
tools_maskbench_LDADD = src/libhearth-core.la

tools_kbench_SOURCES = tools/kbench.c tools/benchutil.h
tools_kbench_LDADD = src/libhearth-core.la -lm

tools_wkvbench_SOURCES = tools/wkvbench.c tools/benchutil.h
tools_wkvbench_LDADD = src/libhearth-core.la -lm

# hearth's float products against OpenBLAS's sgemm (DESIGN.md, "OpenBLAS"),
# where configure finds OpenBLAS
if HAVE_OPENBLAS
noinst_PROGRAMS += tools/blasbench
tools_blasbench_SOURCES = tools/blasbench.c tools/benchutil.h
tools_blasbench_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS)
tools_blasbench_LDADD = src/libhearth-core.la $(OPENBLAS_LIBS) -lm
else
EXTRA_DIST += tools/blasbench.c
endif

EXTRA_DIST += BENCHMARKS.md tools/bench-compare.sh tools/bench-mpi-net.sh tools/bench-serve.sh tools/loadtest.py \
	tools/soak.py tools/bench-disk-cache.py

# the encoders' vectors against another engine's (tools/embed-compare.sh),
# and the generator of the WordPiece tokenizer's Unicode tables
EXTRA_DIST += tools/embed-compare.sh tools/gen-wordpiece-tables.py
