# models/local.mk -- one file per architecture family.

src_libhearth_core_la_SOURCES += \
	models/llama.c
