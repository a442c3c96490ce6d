# tests/local.mk -- Check unit tests, end-to-end tests of the hearth
# program, and fuzz targets.
#
# Tests read the shared models and vocabularies from $HEARTH_TEST_DATA
# (default: ../shared beside the source tree).  With CI set in the
# environment, missing data fails a test instead of skipping it.  In a
# sanitizer build, LeakSanitizer passes over what the PoCL OpenCL platform
# keeps until the process exits (tests/lsan-opencl.supp), and the
# sanitizer runtime does not intercept __tls_get_addr: the runtimes of
# GCC up to 13 and LLVM up to 16 take a dynamic TLS block that happens to
# start 16 bytes into a page for a glibc 2.19 one and read a bogus range
# from before it, and LeakSanitizer's tracer then dies of SIGSEGV at exit
# (5 of 12 `hearth bench -ngl 99` runs on PoCL, whose threads have such
# blocks; 0 of 12 with the interception off).  Leaks are still reported
# with it off, and the sanitizer make check reports none that it did not
# before.  A later setting in ASAN_OPTIONS overrides this one.
#
# The test programs' OpenMP threads, and the hearth programs the tests
# run, sleep as soon as they wait for the others (OMP_WAIT_POLICY=passive)
# unless the environment chooses a wait policy.  make check runs two or
# more tests at once, each with a thread per processor, so the processors
# are always oversubscribed, and a waiting thread that spins takes its
# processor from a working one: the perplexity of a micro model over the
# GPL-3 text took 21 s with the short spin the hearth program chooses for
# itself (GOMP_SPINCOUNT=20000, src/cli/main.c) and 2.5 s passive, on two
# processors with about seven threads runnable (and 94% of test-speculate's
# time went to spinning in libgomp under the sanitizers with libgomp's own
# longer default).  The tests measure results, not speed.

AM_TESTS_ENVIRONMENT = \
	HEARTH_TEST_DATA="$${HEARTH_TEST_DATA:-$(HEARTH_DEFAULT_TEST_DATA)}"; \
	if [ -z "$${OMP_WAIT_POLICY}$${GOMP_SPINCOUNT}" ]; then OMP_WAIT_POLICY=passive; export OMP_WAIT_POLICY; fi; \
	export HEARTH_TEST_DATA; \
	HEARTH="$(abs_top_builddir)/src/hearth"; export HEARTH; \
	HEARTH_SRCDIR="$(abs_top_srcdir)"; export HEARTH_SRCDIR; \
	HEARTH_BUILDDIR="$(abs_top_builddir)"; export HEARTH_BUILDDIR; \
	CK_DEFAULT_TIMEOUT="$${CK_DEFAULT_TIMEOUT:-600}"; export CK_DEFAULT_TIMEOUT; \
	HEARTH_OPENCL_CACHE="$${HEARTH_OPENCL_CACHE:-$(abs_top_builddir)/tests/opencl-cache}"; \
	export HEARTH_OPENCL_CACHE; \
	LSAN_OPTIONS="suppressions=$(abs_top_srcdir)/tests/lsan-opencl.supp$${LSAN_OPTIONS:+:$$LSAN_OPTIONS}"; \
	export LSAN_OPTIONS; \
	ASAN_OPTIONS="intercept_tls_get_addr=0$${ASAN_OPTIONS:+:$$ASAN_OPTIONS}"; \
	export ASAN_OPTIONS;

AM_DISTCHECK_CONFIGURE_FLAGS = HEARTH_TEST_DATA="$(HEARTH_DEFAULT_TEST_DATA)"

# Each test's log ends with the time it took (tests/timed).
TEST_EXTENSIONS = .sh
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/timed
SH_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/timed $(SHELL)

noinst_HEADERS += tests/testutil.h tests/quant_bounds.h tests/grammar_match.h tests/engine_drain.h \
	tests/toolcall_incremental.h
EXTRA_DIST += tests/lib.sh tests/lsan-opencl.supp tests/timed

# Unit tests: one Check program per module.
TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
TEST_LIBS = src/libhearth-core.la $(CHECK_LIBS)

if HAVE_CHECK
check_PROGRAMS += \
	tests/test-attention \
	tests/test-chat-template \
	tests/test-cli-sampling \
	tests/test-delta \
	tests/test-disk-cache \
	tests/test-download \
	tests/test-embed \
	tests/test-engine \
	tests/test-gguf \
	tests/test-grammar \
	tests/test-jinja \
	tests/test-json \
	tests/test-kernels \
	tests/test-kv-pool \
	tests/test-mla \
	tests/test-moe \
	tests/test-offload \
	tests/test-opencl \
	tests/test-quant \
	tests/test-quantize \
	tests/test-reasoning \
	tests/test-sampler \
	tests/test-serving \
	tests/test-speculate \
	tests/test-sha256 \
	tests/test-text-stream \
	tests/test-thinking \
	tests/test-tokenizer \
	tests/test-types \
	tests/test-wkv
TESTS += \
	tests/test-attention \
	tests/test-chat-template \
	tests/test-cli-sampling \
	tests/test-delta \
	tests/test-disk-cache \
	tests/test-download \
	tests/test-embed \
	tests/test-engine \
	tests/test-gguf \
	tests/test-grammar \
	tests/test-jinja \
	tests/test-json \
	tests/test-kernels \
	tests/test-kv-pool \
	tests/test-mla \
	tests/test-moe \
	tests/test-offload \
	tests/test-opencl \
	tests/test-quant \
	tests/test-quantize \
	tests/test-reasoning \
	tests/test-sampler \
	tests/test-serving \
	tests/test-speculate \
	tests/test-sha256 \
	tests/test-text-stream \
	tests/test-thinking \
	tests/test-tokenizer \
	tests/test-types \
	tests/test-wkv
endif

# hearth serve's HTTP/1.1 request reading: plain C, built everywhere.
if HAVE_CHECK
check_PROGRAMS += tests/test-http
TESTS += tests/test-http
endif
tests_test_http_SOURCES = tests/test-http.c tests/testutil.c src/server/http_parse.c
tests_test_http_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server
tests_test_http_CFLAGS = $(TEST_CFLAGS)
tests_test_http_LDADD = $(TEST_LIBS)

# hearth serve's request parsing, where the server is built.
if HAVE_SERVER
if HAVE_CHECK
check_PROGRAMS += tests/test-request tests/test-toolcall
TESTS += tests/test-request tests/test-toolcall
endif
endif
tests_test_request_SOURCES = tests/test-request.c tests/testutil.c src/server/request.c
tests_test_request_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server $(JSON_CFLAGS)
tests_test_request_CFLAGS = $(TEST_CFLAGS)
tests_test_request_LDADD = $(TEST_LIBS) $(JSON_LIBS)
tests_test_toolcall_SOURCES = tests/test-toolcall.c tests/testutil.c src/server/toolcall.c src/server/request.c
tests_test_toolcall_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server $(JSON_CFLAGS)
tests_test_toolcall_CFLAGS = $(TEST_CFLAGS)
tests_test_toolcall_LDADD = $(TEST_LIBS) $(JSON_LIBS)

# The command-line helpers are tested by linking their sources directly.
tests_test_cli_sampling_SOURCES = tests/test-cli-sampling.c tests/testutil.c \
	src/cli/sampling_options.c src/cli/options.c
tests_test_cli_sampling_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/cli
tests_test_cli_sampling_CFLAGS = $(TEST_CFLAGS)
tests_test_cli_sampling_LDADD = $(TEST_LIBS) -lm

tests_test_download_SOURCES = tests/test-download.c tests/testutil.c
tests_test_download_CFLAGS = $(TEST_CFLAGS)
tests_test_download_LDADD = $(TEST_LIBS)

tests_test_grammar_SOURCES = tests/test-grammar.c tests/testutil.c
tests_test_grammar_CFLAGS = $(TEST_CFLAGS)
tests_test_grammar_LDADD = $(TEST_LIBS)

tests_test_attention_SOURCES = tests/test-attention.c tests/testutil.c
tests_test_attention_CFLAGS = $(TEST_CFLAGS)
tests_test_attention_LDADD = $(TEST_LIBS) -lm

tests_test_delta_SOURCES = tests/test-delta.c tests/testutil.c
tests_test_delta_CFLAGS = $(TEST_CFLAGS)
tests_test_delta_LDADD = $(TEST_LIBS) -lm
tests_test_wkv_SOURCES = tests/test-wkv.c tests/testutil.c
tests_test_wkv_CFLAGS = $(TEST_CFLAGS)
tests_test_wkv_LDADD = $(TEST_LIBS) -lm

tests_test_engine_SOURCES = tests/test-engine.c tests/testutil.c
tests_test_engine_CFLAGS = $(TEST_CFLAGS)
tests_test_engine_LDADD = $(TEST_LIBS)

tests_test_embed_SOURCES = tests/test-embed.c tests/testutil.c
tests_test_embed_CFLAGS = $(TEST_CFLAGS)
tests_test_embed_LDADD = $(TEST_LIBS)
tests_test_serving_SOURCES = tests/test-serving.c tests/testutil.c
tests_test_serving_CFLAGS = $(TEST_CFLAGS)
tests_test_serving_LDADD = $(TEST_LIBS)

tests_test_thinking_SOURCES = tests/test-thinking.c tests/testutil.c
tests_test_thinking_CFLAGS = $(TEST_CFLAGS)
tests_test_thinking_LDADD = $(TEST_LIBS)

tests_test_speculate_SOURCES = tests/test-speculate.c tests/testutil.c
tests_test_speculate_CFLAGS = $(TEST_CFLAGS)
tests_test_speculate_LDADD = $(TEST_LIBS) -lm

tests_test_gguf_SOURCES = tests/test-gguf.c tests/testutil.c
tests_test_gguf_CFLAGS = $(TEST_CFLAGS)
tests_test_gguf_LDADD = $(TEST_LIBS)

tests_test_kernels_SOURCES = tests/test-kernels.c tests/testutil.c
tests_test_kernels_CFLAGS = $(TEST_CFLAGS)
tests_test_kernels_LDADD = $(TEST_LIBS)

tests_test_disk_cache_SOURCES = tests/test-disk-cache.c tests/testutil.c
tests_test_disk_cache_CFLAGS = $(TEST_CFLAGS)
tests_test_disk_cache_LDADD = $(TEST_LIBS)

tests_test_kv_pool_SOURCES = tests/test-kv-pool.c tests/testutil.c
tests_test_kv_pool_CFLAGS = $(TEST_CFLAGS)
tests_test_kv_pool_LDADD = $(TEST_LIBS)

tests_test_mla_SOURCES = tests/test-mla.c tests/testutil.c
tests_test_mla_CFLAGS = $(TEST_CFLAGS)
tests_test_mla_LDADD = $(TEST_LIBS) -lm

tests_test_moe_SOURCES = tests/test-moe.c tests/testutil.c
tests_test_moe_CFLAGS = $(TEST_CFLAGS)
tests_test_moe_LDADD = $(TEST_LIBS) -lm

tests_test_offload_SOURCES = tests/test-offload.c tests/testutil.c
tests_test_offload_CFLAGS = $(TEST_CFLAGS)
tests_test_offload_LDADD = $(TEST_LIBS)

# OpenCL tests reach into opencl/; they skip (77) without a device.
tests_test_opencl_SOURCES = tests/test-opencl.c tests/testutil.c
tests_test_opencl_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/opencl
tests_test_opencl_CFLAGS = $(TEST_CFLAGS) $(OPENCL_CFLAGS)
tests_test_opencl_LDADD = $(TEST_LIBS) $(OPENCL_LIBS)

clean-local: clean-opencl-cache
clean-opencl-cache:
	-rm -rf tests/opencl-cache

tests_test_quant_SOURCES = tests/test-quant.c tests/testutil.c
tests_test_quant_CFLAGS = $(TEST_CFLAGS)
tests_test_quant_LDADD = $(TEST_LIBS)

tests_test_quantize_SOURCES = tests/test-quantize.c tests/testutil.c
tests_test_quantize_CFLAGS = $(TEST_CFLAGS)
tests_test_quantize_LDADD = $(TEST_LIBS)

tests_test_sampler_SOURCES = tests/test-sampler.c tests/testutil.c
tests_test_sampler_CFLAGS = $(TEST_CFLAGS)
tests_test_sampler_LDADD = $(TEST_LIBS)

tests_test_sha256_SOURCES = tests/test-sha256.c tests/testutil.c
tests_test_sha256_CFLAGS = $(TEST_CFLAGS)
tests_test_sha256_LDADD = $(TEST_LIBS)

tests_test_reasoning_SOURCES = tests/test-reasoning.c tests/testutil.c
tests_test_reasoning_CFLAGS = $(TEST_CFLAGS)
tests_test_reasoning_LDADD = $(TEST_LIBS)

tests_test_text_stream_SOURCES = tests/test-text-stream.c tests/testutil.c
tests_test_text_stream_CFLAGS = $(TEST_CFLAGS)
tests_test_text_stream_LDADD = $(TEST_LIBS)

tests_test_tokenizer_SOURCES = tests/test-tokenizer.c tests/testutil.c
tests_test_tokenizer_CFLAGS = $(TEST_CFLAGS)
tests_test_tokenizer_LDADD = $(TEST_LIBS)

tests_test_types_SOURCES = tests/test-types.c tests/testutil.c
tests_test_types_CFLAGS = $(TEST_CFLAGS)
tests_test_types_LDADD = $(TEST_LIBS)

tests_test_json_SOURCES = tests/test-json.c tests/testutil.c
tests_test_json_CFLAGS = $(TEST_CFLAGS)
tests_test_json_LDADD = $(TEST_LIBS)

tests_test_jinja_SOURCES = tests/test-jinja.c tests/testutil.c
tests_test_jinja_CFLAGS = $(TEST_CFLAGS)
tests_test_jinja_LDADD = $(TEST_LIBS)

tests_test_chat_template_SOURCES = tests/test-chat-template.c tests/testutil.c
tests_test_chat_template_CFLAGS = $(TEST_CFLAGS)
tests_test_chat_template_LDADD = $(TEST_LIBS)

# The architecture oracle: dump-logits writes hearth's logits for
# tests/oracle-forward.py (NumPy) to compare.
check_PROGRAMS += tests/dump-logits
tests_dump_logits_SOURCES = tests/dump-logits.c
tests_dump_logits_LDADD = src/libhearth-core.la

# gguf-edit copies a GGUF file with keys or tensors left out or a number
# changed, for the tests of how broken files are refused.
check_PROGRAMS += tests/gguf-edit
tests_gguf_edit_SOURCES = tests/gguf-edit.c
tests_gguf_edit_LDADD = src/libhearth-core.la

# tokenize-cases gives the ids of every case of a tokenizer-tests.inp-style
# file, for tests/tokenizer-o200k.sh to compare with a reference tokenizer's,
# or the words a pre-tokenizer cuts them into, for tests/tokenizer-kimi.sh.
check_PROGRAMS += tests/tokenize-cases
tests_tokenize_cases_SOURCES = tests/tokenize-cases.c
tests_tokenize_cases_LDADD = src/libhearth-core.la

# End-to-end tests of the hearth program (the longest first, so that a
# parallel make check starts it early).
TESTS += \
	tests/cli-perplexity.sh \
	tests/archs-oracle.sh \
	tests/cli-kernel-paths.sh \
	tests/cli-serve.sh \
	tests/cli-moe.sh \
	tests/cli-hybrid.sh \
	tests/cli-glm4moe.sh \
	tests/cli-basics.sh \
	tests/cli-bench.sh \
	tests/cli-chat.sh \
	tests/cli-devices.sh \
	tests/cli-embed.sh \
	tests/cli-embed-bert.sh \
	tests/cli-inspect.sh \
	tests/cli-mpi.sh \
	tests/cli-mpi-tp.sh \
	tests/cli-offload-errors.sh \
	tests/cli-pull.sh \
	tests/cli-quantize.sh \
	tests/cli-replicas.sh \
	tests/cli-run.sh \
	tests/cli-speculate.sh \
	tests/cli-split.sh \
	tests/cli-symbols.sh \
	tests/cli-template.sh \
	tests/cli-tokenize.sh \
	tests/grammar-validity.sh \
	tests/layout.sh \
	tests/server-chatpage.sh \
	tests/server-disk-cache.sh \
	tests/server-embeddings.sh \
	tests/server-models.sh \
	tests/server-mpi.sh \
	tests/server-openai.sh \
	tests/template-models.sh \
	tests/tokenizer-kimi.sh \
	tests/tokenizer-o200k.sh \
	tests/tokenizer-wordpiece.sh
EXTRA_DIST += \
	tests/cli-moe.sh \
	tests/cli-hybrid.sh \
	tests/cli-glm4moe.sh \
	tests/archs-oracle.sh \
	tests/oracle-forward.py \
	tests/cli-symbols.sh \
	tests/cli-basics.sh \
	tests/cli-bench.sh \
	tests/cli-chat.sh \
	tests/cli-devices.sh \
	tests/cli-embed.sh \
	tests/cli-embed-bert.sh \
	tests/cli-inspect.sh \
	tests/cli-kernel-paths.sh \
	tests/cli-mpi.sh \
	tests/cli-mpi-tp.sh \
	tests/cli-offload-errors.sh \
	tests/cli-perplexity.sh \
	tests/cli-pull.sh \
	tests/cli-quantize.sh \
	tests/cli-replicas.sh \
	tests/replicas.py \
	tests/cli-run.sh \
	tests/cli-speculate.sh \
	tests/cli-serve.sh \
	tests/cli-split.sh \
	tests/cli-template.sh \
	tests/cli-tokenize.sh \
	tests/grammar-validity.py \
	tests/grammar-validity.sh \
	tests/http-server.py \
	tests/layout.py \
	tests/layout.sh \
	tests/openai-checks.mjs \
	tests/server-api.py \
	tests/server-chatpage.py \
	tests/server-chatpage.sh \
	tests/server-disk-cache.sh \
	tests/server-embeddings.mjs \
	tests/server-embeddings.sh \
	tests/server-models.mjs \
	tests/server-models.py \
	tests/server-models.sh \
	tests/server-mpi.py \
	tests/server-mpi.sh \
	tests/server-openai.mjs \
	tests/server-openai.sh \
	tests/server-responses.mjs \
	tests/template-models.mjs \
	tests/template-models.sh \
	tests/tokenize-cases.mjs \
	tests/tokenizer-kimi.mjs \
	tests/tokenizer-kimi.sh \
	tests/tokenizer-o200k.mjs \
	tests/tokenizer-o200k.sh \
	tests/tokenizer-wordpiece.mjs \
	tests/tokenizer-wordpiece.sh

# tests/server-chatpage.sh's screenshot of the chat page.
CLEANFILES += tests/server-chatpage.png

# Fuzz targets.  With --enable-fuzzing (clang) each is a libFuzzer program,
# tests/fuzz/fuzz-<target>; every build also links it with a replay driver,
# tests/fuzz/replay-<target>, that make check runs over the seed inputs and
# the crash reproducers in tests/fuzz/regressions-<target>/.
FUZZ_TARGETS = gguf template tokenizer grammar schema reasoning diskcache
EXTRA_DIST += tests/fuzz-replay.sh tests/fuzz/regressions-gguf/.keep \
	tests/fuzz/regressions-template tests/fuzz/regressions-tokenizer \
	tests/fuzz/regressions-request tests/fuzz/fuzz-request.c \
	tests/fuzz/regressions-toolcall tests/fuzz/fuzz-toolcall.c \
	tests/fuzz/regressions-grammar tests/fuzz/regressions-schema \
	tests/fuzz/regressions-cli \
	tests/fuzz/regressions-http tests/fuzz/corpus-request tests/fuzz/corpus-toolcall \
	tests/fuzz/corpus-grammar tests/fuzz/corpus-schema tests/fuzz/corpus-http tests/fuzz/corpus-cli \
	tests/fuzz/regressions-reasoning tests/fuzz/corpus-reasoning tests/fuzz/corpus-tokenizer \
	tests/fuzz/corpus-diskcache
TESTS += tests/fuzz-replay.sh
# the HTTP target is plain C: built everywhere
check_PROGRAMS += tests/fuzz/replay-http
tests_fuzz_replay_http_SOURCES = tests/fuzz/fuzz-http.c tests/fuzz/replay.c src/server/http_parse.c
tests_fuzz_replay_http_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz-http
tests_fuzz_fuzz_http_SOURCES = tests/fuzz/fuzz-http.c src/server/http_parse.c
tests_fuzz_fuzz_http_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server
tests_fuzz_fuzz_http_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
endif
check_PROGRAMS += tests/fuzz/replay-gguf tests/fuzz/replay-template tests/fuzz/replay-tokenizer
check_PROGRAMS += tests/fuzz/replay-grammar tests/fuzz/replay-schema tests/fuzz/replay-reasoning
check_PROGRAMS += tests/fuzz/replay-diskcache
tests_fuzz_replay_diskcache_SOURCES = tests/fuzz/fuzz-diskcache.c tests/fuzz/replay.c
tests_fuzz_replay_diskcache_LDADD = src/libhearth-core.la
tests_fuzz_replay_reasoning_SOURCES = tests/fuzz/fuzz-reasoning.c tests/fuzz/replay.c
tests_fuzz_replay_reasoning_LDADD = src/libhearth-core.la
tests_fuzz_replay_grammar_SOURCES = tests/fuzz/fuzz-grammar.c tests/fuzz/replay.c
tests_fuzz_replay_grammar_LDADD = src/libhearth-core.la
tests_fuzz_replay_schema_SOURCES = tests/fuzz/fuzz-schema.c tests/fuzz/replay.c
tests_fuzz_replay_schema_LDADD = src/libhearth-core.la
tests_fuzz_replay_gguf_SOURCES = tests/fuzz/fuzz-gguf.c tests/fuzz/replay.c
tests_fuzz_replay_gguf_LDADD = src/libhearth-core.la
tests_fuzz_replay_template_SOURCES = tests/fuzz/fuzz-template.c tests/fuzz/replay.c
tests_fuzz_replay_template_LDADD = src/libhearth-core.la

# The tokenizer target reads the shared vocabularies from $HEARTH_TEST_DATA,
# or else from the test data directory configure chose.
FUZZ_DATA_CPPFLAGS = $(AM_CPPFLAGS) -DHEARTH_FUZZ_DATA='"$(HEARTH_DEFAULT_TEST_DATA)"'
tests_fuzz_replay_tokenizer_SOURCES = tests/fuzz/fuzz-tokenizer.c tests/fuzz/replay.c
tests_fuzz_replay_tokenizer_CPPFLAGS = $(FUZZ_DATA_CPPFLAGS)
tests_fuzz_replay_tokenizer_LDADD = src/libhearth-core.la

# The cli target is the hearth program's option parsing: hearth run's table
# and loop with the shared option handlers of src/cli, without the command
# behind them.
CLI_FUZZ_SOURCES = tests/fuzz/fuzz-cli.c src/cli/run_options.c src/cli/options.c src/cli/model_options.c \
	src/cli/sampling_options.c src/cli/spec_options.c src/cli/prompt.c src/cli/interrupt.c src/cli/pp_options.c
CLI_FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/cli
check_PROGRAMS += tests/fuzz/replay-cli
tests_fuzz_replay_cli_SOURCES = $(CLI_FUZZ_SOURCES) tests/fuzz/replay.c
tests_fuzz_replay_cli_CPPFLAGS = $(CLI_FUZZ_CPPFLAGS)
tests_fuzz_replay_cli_LDADD = src/libhearth-core.la
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz-cli
tests_fuzz_fuzz_cli_SOURCES = $(CLI_FUZZ_SOURCES)
tests_fuzz_fuzz_cli_CPPFLAGS = $(CLI_FUZZ_CPPFLAGS)
tests_fuzz_fuzz_cli_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_cli_LDADD = src/libhearth-core.la
endif

# The request and toolcall targets are hearth serve's parsers, built where
# the server is.
if HAVE_SERVER
REQUEST_FUZZ_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/src/server $(JSON_CFLAGS)
check_PROGRAMS += tests/fuzz/replay-request tests/fuzz/replay-toolcall
tests_fuzz_replay_request_SOURCES = tests/fuzz/fuzz-request.c tests/fuzz/replay.c src/server/request.c
tests_fuzz_replay_request_CPPFLAGS = $(REQUEST_FUZZ_CPPFLAGS)
tests_fuzz_replay_request_LDADD = src/libhearth-core.la $(JSON_LIBS)
tests_fuzz_replay_toolcall_SOURCES = tests/fuzz/fuzz-toolcall.c tests/fuzz/replay.c src/server/toolcall.c
tests_fuzz_replay_toolcall_CPPFLAGS = $(REQUEST_FUZZ_CPPFLAGS)
tests_fuzz_replay_toolcall_LDADD = src/libhearth-core.la $(JSON_LIBS)
if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz-request tests/fuzz/fuzz-toolcall
tests_fuzz_fuzz_request_SOURCES = tests/fuzz/fuzz-request.c src/server/request.c
tests_fuzz_fuzz_request_CPPFLAGS = $(REQUEST_FUZZ_CPPFLAGS)
tests_fuzz_fuzz_request_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_request_LDADD = src/libhearth-core.la $(JSON_LIBS)
tests_fuzz_fuzz_toolcall_SOURCES = tests/fuzz/fuzz-toolcall.c src/server/toolcall.c
tests_fuzz_fuzz_toolcall_CPPFLAGS = $(REQUEST_FUZZ_CPPFLAGS)
tests_fuzz_fuzz_toolcall_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_toolcall_LDADD = src/libhearth-core.la $(JSON_LIBS)
endif
endif

if ENABLE_FUZZING
noinst_PROGRAMS += tests/fuzz/fuzz-gguf tests/fuzz/fuzz-template
tests_fuzz_fuzz_gguf_SOURCES = tests/fuzz/fuzz-gguf.c
tests_fuzz_fuzz_gguf_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_gguf_LDADD = src/libhearth-core.la
tests_fuzz_fuzz_template_SOURCES = tests/fuzz/fuzz-template.c
tests_fuzz_fuzz_template_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_template_LDADD = src/libhearth-core.la
noinst_PROGRAMS += tests/fuzz/fuzz-tokenizer tests/fuzz/fuzz-grammar tests/fuzz/fuzz-schema
tests_fuzz_fuzz_grammar_SOURCES = tests/fuzz/fuzz-grammar.c
tests_fuzz_fuzz_grammar_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_grammar_LDADD = src/libhearth-core.la
noinst_PROGRAMS += tests/fuzz/fuzz-reasoning tests/fuzz/fuzz-diskcache
tests_fuzz_fuzz_diskcache_SOURCES = tests/fuzz/fuzz-diskcache.c
tests_fuzz_fuzz_diskcache_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_diskcache_LDADD = src/libhearth-core.la
tests_fuzz_fuzz_reasoning_SOURCES = tests/fuzz/fuzz-reasoning.c
tests_fuzz_fuzz_reasoning_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_reasoning_LDADD = src/libhearth-core.la
tests_fuzz_fuzz_schema_SOURCES = tests/fuzz/fuzz-schema.c
tests_fuzz_fuzz_schema_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_schema_LDADD = src/libhearth-core.la
tests_fuzz_fuzz_tokenizer_SOURCES = tests/fuzz/fuzz-tokenizer.c
tests_fuzz_fuzz_tokenizer_CPPFLAGS = $(FUZZ_DATA_CPPFLAGS)
tests_fuzz_fuzz_tokenizer_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
tests_fuzz_fuzz_tokenizer_LDADD = src/libhearth-core.la
endif
