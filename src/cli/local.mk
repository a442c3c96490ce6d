# src/cli/local.mk -- the hearth program: one file per subcommand.

bin_PROGRAMS += src/hearth

src_hearth_SOURCES = \
	src/cli/bench.c \
	src/cli/bench_parallel.c \
	src/cli/bench_parallel.h \
	src/cli/chat.c \
	src/cli/cli.h \
	src/cli/commands.def \
	src/cli/devices.c \
	src/cli/embed.c \
	src/cli/generate.c \
	src/cli/generate.h \
	src/cli/inspect.c \
	src/cli/interrupt.c \
	src/cli/main.c \
	src/cli/model_options.c \
	src/cli/model_options.h \
	src/cli/options.c \
	src/cli/perplexity.c \
	src/cli/pp_options.c \
	src/cli/pp_options.h \
	src/cli/prompt.c \
	src/cli/prompt.h \
	src/cli/pull.c \
	src/cli/quantize.c \
	src/cli/run.c \
	src/cli/run_options.c \
	src/cli/run_options.h \
	src/cli/sampling_options.c \
	src/cli/sampling_options.h \
	src/cli/spec_options.c \
	src/cli/spec_options.h \
	src/cli/template.c \
	src/cli/tokenize.c
src_hearth_LDADD = src/libhearth.la -lm
