# src/local.mk -- libhearth.
#
# All library code is built once into the convenience library
# libhearth-core.la.  The installed libhearth.la wraps it and exports only
# the hearth_ names of hearth.h; the unit tests link the convenience
# library so they can reach internal functions.

noinst_LTLIBRARIES += src/libhearth-core.la
lib_LTLIBRARIES += src/libhearth.la
include_HEADERS += src/hearth.h
EXTRA_DIST += src/hearth.pc.in

src_libhearth_core_la_SOURCES = \
	src/backend.h \
	src/backend_cpu.c \
	src/context.c \
	src/download.c \
	src/download.h \
	src/download_names.c \
	src/error.c \
	src/forward.h \
	src/gguf.c \
	src/gguf.h \
	src/gguf_write.c \
	src/fp16.h \
	src/internal.h \
	src/kv_cache.c \
	src/kv_cache.h \
	src/model.c \
	src/model.h \
	src/offload.c \
	src/quant.c \
	src/quant.h \
	src/rng.h \
	src/sampler.c \
	src/sampler.h \
	src/sha256.c \
	src/sha256.h \
	src/text_stream.c \
	src/tokenizer.c \
	src/tokenizer.h \
	src/tokenizer_bpe.c \
	src/tokenizer_pretok.c \
	src/tokenizer_special.c \
	src/tokenizer_spm.c \
	src/tokenizer_vocab.c \
	src/types.c \
	src/utf8.c \
	src/utf8.h

src_libhearth_core_la_LIBADD = \
	$(OPENBLAS_LIBS) \
	$(PCRE2_LIBS) \
	$(CURL_LIBS) \
	$(JSON_LIBS) \
	$(OPENCL_LIBS) \
	-lm
src_libhearth_core_la_CFLAGS = $(AM_CFLAGS) \
	$(OPENBLAS_CFLAGS) \
	$(PCRE2_CFLAGS) \
	$(CURL_CFLAGS) \
	$(JSON_CFLAGS) \
	$(OPENCL_CFLAGS)

src_libhearth_la_SOURCES =
src_libhearth_la_LIBADD = src/libhearth-core.la
src_libhearth_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(HEARTH_LT_VERSION) \
	-export-symbols-regex '^hearth_' -no-undefined
