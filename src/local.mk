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
	src/backend_cpu_rwkv.h \
	src/context.c \
	src/download.c \
	src/download.h \
	src/download_names.c \
	src/error.c \
	src/forward.h \
	src/fp16.h \
	src/internal.h \
	src/model.c \
	src/model.h \
	src/offload.c \
	src/quant.c \
	src/quant.h \
	src/quantize.c \
	src/quantize.h \
	src/rng.h \
	src/sampler.c \
	src/sampler.h \
	src/sha256.c \
	src/sha256.h \
	src/textbuf.c \
	src/textbuf.h \
	src/types.c \
	src/utf8.c \
	src/utf8.h

# The GGUF reader and writer.
src_libhearth_core_la_SOURCES += \
	src/gguf/gguf.c \
	src/gguf/gguf.h \
	src/gguf/gguf_write.c

# The tokenizers and the streaming detokenizer.
src_libhearth_core_la_SOURCES += \
	src/tokenizer/text_stream.c \
	src/tokenizer/tokenizer.c \
	src/tokenizer/tokenizer.h \
	src/tokenizer/tokenizer_bpe.c \
	src/tokenizer/tokenizer_pretok.c \
	src/tokenizer/tokenizer_rwkv.c \
	src/tokenizer/tokenizer_special.c \
	src/tokenizer/tokenizer_spm.c \
	src/tokenizer/tokenizer_vocab.c

# The grammars: GBNF, the matcher, token masks and JSON Schema.
src_libhearth_core_la_SOURCES += \
	src/grammar/gbnf.c \
	src/grammar/grammar.c \
	src/grammar/grammar.h \
	src/grammar/json_schema.c \
	src/grammar/mask.c \
	src/grammar/matcher.c

# The chat templates: the Jinja interpreter, its values and JSON.
src_libhearth_core_la_SOURCES += \
	src/template/chat_builtin.c \
	src/template/chat_builtin.h \
	src/template/chat_template.c \
	src/template/jinja.h \
	src/template/jinja_eval.c \
	src/template/jinja_filters.c \
	src/template/jinja_lexer.c \
	src/template/jinja_methods.c \
	src/template/jinja_ops.c \
	src/template/jinja_parser.c \
	src/template/jinja_tests.c \
	src/template/jinja_text.c \
	src/template/json.c \
	src/template/json.h \
	src/template/unichar.c \
	src/template/unichar.h \
	src/template/value.c \
	src/template/value.h

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
