/*
 * fuzz-reasoning.c -- fuzz target for the reasoning split
 * (src/tokenizer/reasoning.c).  The first byte picks the format (its
 * value modulo 3) and whether the input's first line is the prompt (bit
 * 2); the second seeds where the rest, the generated text, is cut into
 * pieces.  The text is split whole and in pieces: both must succeed
 * exactly when the text is valid UTF-8 (and within the tool calls'
 * limits), give the same parts and tool calls, and give parts of valid
 * UTF-8.  Nothing may crash, hang or leak.
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded
 * from tests/fuzz/corpus-reasoning:
 *   tests/fuzz/fuzz-reasoning -max_len=65536 corpus
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct result {
    hearth_status status;
    char *reasoning, *answer;
    size_t n_reasoning, n_answer;
    hearth_reasoning_split *split;
};

static void append(char **buf, size_t *n, const char *p, size_t len)
{
    if (hearth_utf8_valid_prefix(p, len) != len) abort();
    char *b = realloc(*buf, *n + len + 1);
    if (!b) abort();
    memcpy(b + *n, p, len);
    *buf = b;
    *n += len;
}

static void add(struct result *r, const hearth_reasoning_text *t)
{
    append(&r->reasoning, &r->n_reasoning, t->reasoning, t->reasoning_len);
    append(&r->answer, &r->n_answer, t->answer, t->answer_len);
}

/* Split text[0..len) after prompt, in pieces of 1 + (a random number
 * below max_piece) bytes, or whole when max_piece is 0. */
static void run(hearth_reasoning_format f, const char *prompt, size_t prompt_len, const char *text,
                size_t len, uint32_t seed, size_t max_piece, struct result *r)
{
    memset(r, 0, sizeof *r);
    if (hearth_reasoning_split_new(f, prompt, prompt_len, &r->split)) abort();
    hearth_reasoning_text t;
    for (size_t at = 0; at < len && !r->status;) {
        size_t n = len - at;
        if (max_piece) {
            seed = seed * 1103515245u + 12345u;
            n = 1 + (seed >> 16) % max_piece;
            if (n > len - at) n = len - at;
        }
        r->status = hearth_reasoning_split_push(r->split, text + at, n, &t);
        if (!r->status) add(r, &t);
        at += n;
    }
    if (!r->status) {
        r->status = hearth_reasoning_split_finish(r->split, &t);
        if (!r->status) add(r, &t);
    }
    if (r->status && !hearth_last_error()[0]) abort();
}

static void done(struct result *r)
{
    free(r->reasoning);
    free(r->answer);
    hearth_reasoning_split_free(r->split);
}

static bool same(const char *a, size_t na, const char *b, size_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 65536) return 0;
    const hearth_reasoning_format f = (hearth_reasoning_format)(data[0] % 3);
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    const char *prompt = NULL;
    size_t prompt_len = 0;
    if (data[0] & 4) {
        const char *nl = memchr(text, '\n', len);
        if (nl) {
            prompt = text;
            prompt_len = (size_t)(nl - text);
            len -= prompt_len + 1;
            text = nl + 1;
        }
    }
    struct result whole, cut;
    run(f, prompt, prompt_len, text, len, 0, 0, &whole);
    run(f, prompt, prompt_len, text, len, data[1], 1 + data[1] % 16, &cut);
    /* the limits of tool calls fail the same way whole or cut; ill-formed
     * UTF-8 always fails */
    if ((whole.status == HEARTH_OK) != (cut.status == HEARTH_OK)) abort();
    if (hearth_utf8_valid_prefix(text, len) != len && whole.status != HEARTH_E_INVALID) abort();
    if (!whole.status) {
        if (!same(whole.reasoning, whole.n_reasoning, cut.reasoning, cut.n_reasoning) ||
            !same(whole.answer, whole.n_answer, cut.answer, cut.n_answer))
            abort();
        size_t n = hearth_reasoning_split_n_tool_calls(whole.split);
        if (n != hearth_reasoning_split_n_tool_calls(cut.split)) abort();
        if (f != HEARTH_REASONING_HARMONY && n) abort();
        for (size_t i = 0; i < n; i++) {
            const char *n1, *a1, *n2, *a2;
            size_t l1, l2;
            if (hearth_reasoning_split_tool_call(whole.split, i, &n1, &a1, &l1) ||
                hearth_reasoning_split_tool_call(cut.split, i, &n2, &a2, &l2))
                abort();
            if (!n1[0] || strcmp(n1, n2) != 0 || !same(a1, l1, a2, l2)) abort();
        }
        /* nothing is made up: the parts are no longer than the text */
        if (whole.n_reasoning + whole.n_answer > len) abort();
    }
    done(&whole);
    done(&cut);
    return 0;
}
