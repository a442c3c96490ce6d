# models/local.mk -- one file per architecture family.

src_libhearth_core_la_SOURCES += \
	models/bert.c \
	models/deepseek2.c \
	models/family.c \
	models/family.h \
	models/gemma.c \
	models/glm4moe.c \
	models/gptoss.c \
	models/llama.c \
	models/moe.c \
	models/moe.h \
	models/phi3.c \
	models/qwen2moe.c \
	models/qwen3.c \
	models/qwen3moe.c

# RWKV-6 and QRWKV-6: recurrent layers with a fixed-size state; Qwen3.5:
# Gated DeltaNet layers with a state beside attention layers.
src_libhearth_core_la_SOURCES += \
	models/qwen35.c \
	models/rwkv6.c
