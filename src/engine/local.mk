# src/engine/local.mk -- the serving core: the paged KV pool with its
# prefix cache, the scheduler, the forward pass over many sequences, the
# one-sequence context of hearth_eval, and the loop of a pipeline's ranks
# other than 0 (stage.c).
# Part of the convenience library libhearth-core.la (src/local.mk).

src_libhearth_core_la_SOURCES += \
	src/engine/context.c \
	src/engine/disk_cache.c \
	src/engine/disk_cache.h \
	src/engine/draft.c \
	src/engine/embed.c \
	src/engine/engine.c \
	src/engine/engine.h \
	src/engine/engine_impl.h \
	src/engine/kv_pool.c \
	src/engine/kv_pool.h \
	src/engine/pooling.c \
	src/engine/pooling.h \
	src/engine/prefix.c \
	src/engine/requests.c \
	src/engine/runner.c \
	src/engine/runner.h \
	src/engine/sample.c \
	src/engine/schedule.c \
	src/engine/speculate.c \
	src/engine/speculate.h \
	src/engine/stage.c \
	src/engine/thinking.c
