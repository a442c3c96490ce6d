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

# What every part below uses: errors, UTF-8, growable text, the RNG,
# fp16, the tensor types and their quantization, SHA-256, JSON and the
# values it parses to (which the chat templates compute with), and the
# memory the host has left.
src_libhearth_core_la_SOURCES = \
	src/common/error.c \
	src/common/fp16.h \
	src/common/host_memory.c \
	src/common/host_memory.h \
	src/common/internal.h \
	src/common/json.c \
	src/common/json.h \
	src/common/quant.c \
	src/common/quant.h \
	src/common/rng.h \
	src/common/sha256.c \
	src/common/sha256.h \
	src/common/textbuf.c \
	src/common/textbuf.h \
	src/common/types.c \
	src/common/unichar.c \
	src/common/unichar.h \
	src/common/utf8.c \
	src/common/utf8.h \
	src/common/value.c \
	src/common/value.h

# Downloading model files (hearth pull, -hf, --url).
src_libhearth_core_la_SOURCES += \
	src/download/download.c \
	src/download/download.h \
	src/download/download_names.c

# A model: loading a GGUF file into weights, the layers' split between
# the CPU and an OpenCL device, and writing a quantized copy.
src_libhearth_core_la_SOURCES += \
	src/model/model.c \
	src/model/model.h \
	src/model/tp_group.h \
	src/model/offload.c \
	src/model/quantize.c \
	src/model/quantize.h

# The backends' seam and the CPU backend, with the storage both backends
# compute into (the KV cache and the recurrent states of sequences), and
# the forward pass's state that a family's layers run on (forward.h).
src_libhearth_core_la_SOURCES += \
	src/backend/backend.h \
	src/backend/backend_cpu.c \
	src/backend/backend_cpu_deltanet.c \
	src/backend/backend_cpu_rwkv.c \
	src/backend/backend_cpu_rwkv.h \
	src/backend/forward.h \
	src/backend/kv_cache.c \
	src/backend/kv_cache.h \
	src/backend/rstate.c \
	src/backend/rstate.h

# Several processes: a pipeline of ranks over MPI, each running a range
# of the layers (pipeline.h: the messages the runner sends); a build
# without MPI gets pipeline_none.c.
src_libhearth_core_la_SOURCES += src/dist/pipeline.h
if HAVE_MPI
src_libhearth_core_la_SOURCES += src/dist/pipeline_mpi.c
else
src_libhearth_core_la_SOURCES += src/dist/pipeline_none.c
endif
EXTRA_DIST += src/dist/pipeline_mpi.c src/dist/pipeline_none.c

# Sampling a token from logits (the grammars' masks below).
src_libhearth_core_la_SOURCES += \
	src/sampler/sampler.c \
	src/sampler/sampler.h

# The GGUF reader and writer.
src_libhearth_core_la_SOURCES += \
	src/gguf/gguf.c \
	src/gguf/gguf.h \
	src/gguf/gguf_write.c

# The tokenizers, the streaming detokenizer and the reasoning split.
src_libhearth_core_la_SOURCES += \
	src/tokenizer/reasoning.c \
	src/tokenizer/reasoning.h \
	src/tokenizer/text_stream.c \
	src/tokenizer/tokenizer.c \
	src/tokenizer/tokenizer.h \
	src/tokenizer/tokenizer_bpe.c \
	src/tokenizer/tokenizer_pretok.c \
	src/tokenizer/tokenizer_rwkv.c \
	src/tokenizer/tokenizer_wpm.c \
	src/tokenizer/tokenizer_wpm.h \
	src/tokenizer/tokenizer_wpm_tables.c \
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

# The chat templates: the Jinja interpreter.
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
	src/template/jinja_text.c

src_libhearth_core_la_LIBADD = \
	$(PCRE2_LIBS) \
	$(CURL_LIBS) \
	$(JSON_LIBS) \
	$(OPENCL_LIBS) \
	$(MPI_LIBS) \
	-lm
src_libhearth_core_la_CFLAGS = $(AM_CFLAGS) \
	$(PCRE2_CFLAGS) \
	$(CURL_CFLAGS) \
	$(JSON_CFLAGS) \
	$(OPENCL_CFLAGS) \
	$(MPI_CFLAGS)

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
