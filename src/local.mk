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
	src/quantize.c \
	src/quantize.h \
	src/chat_builtin.c \
	src/chat_builtin.h \
	src/chat_template.c \
	src/jinja.h \
	src/jinja_eval.c \
	src/jinja_filters.c \
	src/jinja_lexer.c \
	src/jinja_methods.c \
	src/jinja_ops.c \
	src/jinja_parser.c \
	src/jinja_tests.c \
	src/jinja_text.c \
	src/json.c \
	src/json.h \
	src/rng.h \
	src/sampler.c \
	src/sampler.h \
	src/sha256.c \
	src/sha256.h \
	src/text_stream.c \
	src/textbuf.c \
	src/textbuf.h \
	src/tokenizer.c \
	src/tokenizer.h \
	src/tokenizer_bpe.c \
	src/tokenizer_pretok.c \
	src/tokenizer_special.c \
	src/tokenizer_spm.c \
	src/tokenizer_vocab.c \
	src/types.c \
	src/unichar.c \
	src/unichar.h \
	src/utf8.c \
	src/utf8.h \
	src/value.c \
	src/value.h

src_libhearth_core_la_LIBADD = \
	$(PCRE2_LIBS) \
	$(CURL_LIBS) \
	$(JSON_LIBS) \
	$(OPENCL_LIBS) \
	-lm
src_libhearth_core_la_CFLAGS = $(AM_CFLAGS) \
	$(PCRE2_CFLAGS) \
	$(CURL_CFLAGS) \
	$(JSON_CFLAGS) \
	$(OPENCL_CFLAGS)

# The shared library exports exactly the functions hearth.h declares: the
# list is made from the header (one declaration per line starts with its
# return type), and tests/cli-symbols.sh checks the result both ways.
src/libhearth.sym: $(top_srcdir)/src/hearth.h
	$(AM_V_GEN)$(MKDIR_P) src && \
	sed -n 's/^[A-Za-z].*[ *]\(hearth_[a-z0-9_]*\)(.*/\1/p' $(top_srcdir)/src/hearth.h | \
	LC_ALL=C sort -u > $@-t && mv $@-t $@
CLEANFILES += src/libhearth.sym

src_libhearth_la_SOURCES =
src_libhearth_la_LIBADD = src/libhearth-core.la
EXTRA_src_libhearth_la_DEPENDENCIES = src/libhearth.sym
src_libhearth_la_LDFLAGS = $(AM_LDFLAGS) -version-info $(HEARTH_LT_VERSION) \
	-export-symbols src/libhearth.sym -no-undefined
