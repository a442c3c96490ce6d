/*
 * chat_builtin.c -- the built-in chat templates, in Jinja, for models that
 * ship none (or a broken one).  Each one follows the published prompt
 * format of its model family; a message whose content is not text (null,
 * or a list of parts) contributes no text.
 */
#include "internal.h"

#include <string.h>

#include "chat_builtin.h"

/* The text of a message's content, "" when it is not a string. */
#define CONTENT "(message.content if message.content is string else '')"

/* Splits off a leading system message: system (or none) and turns. */
#define SPLIT_SYSTEM \
    "{%- if messages and messages[0].role == 'system' -%}" \
    "{%- set system = messages[0].content -%}" \
    "{%- set turns = messages[1:] -%}" \
    "{%- else -%}" \
    "{%- set system = none -%}" \
    "{%- set turns = messages -%}" \
    "{%- endif -%}\n"

/* <|im_start|>role\ncontent<|im_end|>\n (Qwen, many fine-tunes) */
static const char chatml[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' ~ message.role ~ '\\n' ~ " CONTENT " ~ '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

/* Gemma: user and model turns; a system message is put at the start of
 * the first turn, as Gemma has no system role. */
static const char gemma[] =
    "{{- bos_token -}}\n"
    SPLIT_SYSTEM
    "{%- for message in turns -%}\n"
    "{%- set role = 'model' if message.role == 'assistant' else message.role -%}\n"
    "{%- set text = " CONTENT " -%}\n"
    "{%- if loop.first and system is not none -%}{%- set text = system ~ '\\n\\n' ~ text -%}{%- endif -%}\n"
    "{{- '<start_of_turn>' ~ role ~ '\\n' ~ text | trim ~ '<end_of_turn>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<start_of_turn>model\\n' -}}\n"
    "{%- endif -%}\n";

/* Llama 2 chat: [INST] <<SYS>> ... <</SYS>> user [/INST] assistant </s> */
static const char llama2[] =
    SPLIT_SYSTEM
    "{%- for message in turns -%}\n"
    "{%- set text = " CONTENT " -%}\n"
    "{%- if message.role == 'user' -%}\n"
    "{%- if loop.first and system is not none -%}\n"
    "{%- set text = '<<SYS>>\\n' ~ system ~ '\\n<</SYS>>\\n\\n' ~ text -%}\n"
    "{%- endif -%}\n"
    "{{- bos_token ~ '[INST] ' ~ text | trim ~ ' [/INST]' -}}\n"
    "{%- elif message.role == 'assistant' -%}\n"
    "{{- ' ' ~ text | trim ~ ' ' ~ eos_token -}}\n"
    "{%- else -%}\n"
    "{{- raise_exception('the llama2 template takes user and assistant messages after an optional system message') -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n";

/* Llama 3: <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> */
static const char llama3[] =
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{{- '<|start_header_id|>' ~ message.role ~ '<|end_header_id|>\\n\\n' -}}\n"
    "{{- " CONTENT " | trim ~ '<|eot_id|>' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
    "{%- endif -%}\n";

/* Mistral (instruct v1): [INST] user [/INST] assistant</s>; a system
 * message is put before the first user message. */
static const char mistral[] =
    SPLIT_SYSTEM
    "{{- bos_token -}}\n"
    "{%- for message in turns -%}\n"
    "{%- set text = " CONTENT " -%}\n"
    "{%- if message.role == 'user' -%}\n"
    "{%- if loop.first and system is not none -%}{%- set text = system ~ '\\n\\n' ~ text -%}{%- endif -%}\n"
    "{{- '[INST] ' ~ text ~ ' [/INST]' -}}\n"
    "{%- elif message.role == 'assistant' -%}\n"
    "{{- ' ' ~ text ~ eos_token -}}\n"
    "{%- else -%}\n"
    "{{- raise_exception('the mistral template takes user and assistant messages after an optional system message') -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n";

/* Phi-3: <|role|>\ncontent<|end|>\n */
static const char phi3[] =
    "{%- for message in messages -%}\n"
    "{{- '<|' ~ message.role ~ '|>\\n' ~ " CONTENT " ~ '<|end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|assistant|>\\n' -}}\n"
    "{%- else -%}\n"
    "{{- eos_token -}}\n"
    "{%- endif -%}\n";

/* Zephyr: <|role|>\ncontent</s>\n */
static const char zephyr[] =
    "{%- for message in messages -%}\n"
    "{{- '<|' ~ message.role ~ '|>\\n' ~ " CONTENT " ~ eos_token ~ '\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|assistant|>\\n' -}}\n"
    "{%- endif -%}\n";

/* RWKV World: "User: text\n\nAssistant: text\n\n", contents trimmed,
 * "Assistant:" (no space: the model writes it) to prompt a reply.  The
 * turns end with "\n\n", which these vocabularies have as EOT. */
static const char rwkv_world[] =
    "{%- for message in messages -%}\n"
    "{%- set role = {'system': 'System', 'user': 'User', 'assistant': 'Assistant'}[message.role] -%}\n"
    "{%- if role is not defined -%}\n"
    "{{- raise_exception('the rwkv-world template takes system, user and assistant messages') -}}\n"
    "{%- endif -%}\n"
    "{{- role ~ ': ' ~ " CONTENT " | trim ~ '\\n\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- 'Assistant:' -}}\n"
    "{%- endif -%}\n";

static const struct {
    const char *name;
    const char *text;
} builtins[] = {
    {"chatml", chatml}, {"gemma", gemma}, {"llama2", llama2}, {"llama3", llama3},
    {"mistral", mistral}, {"phi3", phi3}, {"rwkv-world", rwkv_world}, {"zephyr", zephyr},
};

static const char *const builtin_names[] = {
    "chatml", "gemma", "llama2", "llama3", "mistral", "phi3", "rwkv-world", "zephyr", NULL,
};

const char *chat_builtin_text(const char *name)
{
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(builtins); i++)
        if (strcmp(builtins[i].name, name) == 0) return builtins[i].text;
    return NULL;
}

const char *const *hearth_template_builtin_names(void)
{
    return builtin_names;
}
