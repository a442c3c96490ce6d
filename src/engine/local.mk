# src/engine/local.mk -- the serving core: the paged KV pool with its
# prefix cache, the scheduler, and the forward pass over many sequences.
# Part of the convenience library libhearth-core.la (src/local.mk).

src_libhearth_core_la_SOURCES += \
	src/engine/engine.c \
	src/engine/engine.h \
	src/engine/kv_cache.c \
	src/engine/kv_cache.h \
	src/engine/kv_pool.c \
	src/engine/kv_pool.h \
	src/engine/runner.c \
	src/engine/runner.h \
	src/engine/speculate.c \
	src/engine/speculate.h

# The recurrent states of sequences (recurrent layers keep these instead
# of keys and values).
src_libhearth_core_la_SOURCES += \
	src/engine/rstate.c \
	src/engine/rstate.h
