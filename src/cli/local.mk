# src/cli/local.mk -- the hearth program: one file per subcommand.

bin_PROGRAMS += src/hearth

src_hearth_SOURCES = \
	src/cli/cli.h \
	src/cli/commands.def \
	src/cli/devices.c \
	src/cli/inspect.c \
	src/cli/main.c \
	src/cli/model_options.c \
	src/cli/model_options.h \
	src/cli/options.c \
	src/cli/pull.c \
	src/cli/sampling_options.c \
	src/cli/sampling_options.h \
	src/cli/tokenize.c
src_hearth_LDADD = src/libhearth.la -lm
