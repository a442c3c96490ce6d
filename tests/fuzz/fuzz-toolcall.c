/*
 * fuzz-toolcall.c -- fuzz target for hearth serve's tool calls
 * (src/server/toolcall.c).  The first byte picks the format (kimi when
 * bit 4 is set, else its low two bits: hermes, llama3, mistral, harmony)
 * and what the rest is: model output (bit 2 clear), read for
 * calls and for how much of it a stream may send, or a tools array (bit
 * 2 set) to build the forcing grammar from (of one call or more when
 * bit 5 is set).  Calls read back must have a
 * name and arguments without whitespace outside their strings (and an
 * id the model wrote, if any, that is UTF-8 text), the content must be
 * no longer than the text, a stream's sendable length must never shrink
 * as text comes and never reach into a call, and a grammar that is built
 * must compile.  The text is also read incrementally
 * (tests/toolcall_incremental.h), a byte at a time and cut where a
 * generator seeded by the input says: what a stream would send of it
 * must add up to the reading of the whole text.  Nothing may crash, hang
 * or leak.
 *
 * Run (see configure --enable-fuzzing) with a corpus directory seeded
 * from tests/fuzz/regressions-toolcall:
 *   tests/fuzz/fuzz-toolcall -max_len=65536 corpus
 */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hearth.h"
#include "toolcall.h"
#include "../toolcall_incremental.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const enum srv_tool_format f = (data[0] & 16) ? SRV_TOOLS_KIMI : (enum srv_tool_format)(data[0] & 3);
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    if (data[0] & 4) {
        char *s = malloc(len + 1), *gbnf = NULL, why[256];
        if (!s) return 0;
        memcpy(s, text, len);
        s[len] = '\0';
        /* the first tool's name when the text asks for it (bit 3) */
        /* one call, or one or more (bit 5) */
        if (srv_tool_calls_grammar_n(f, s, (data[0] & 8) ? "f" : NULL, (data[0] & 32) != 0, &gbnf, why, sizeof why)) {
            if (hearth_grammar_check(gbnf, strlen(gbnf)) != HEARTH_OK) abort();
            free(gbnf);
        } else if (gbnf || !why[0]) {
            abort();
        }
        free(s);
        return 0;
    }
    struct srv_tool_calls c;
    const bool calls = srv_tool_calls_parse(f, text, len, &c);
    if (calls) {
        if (c.n == 0 || c.content_len > len) abort();
        for (size_t i = 0; i < c.n; i++) {
            if (!c.calls[i].name[0]) abort();
            if (c.calls[i].id) {
                json_t *id = json_string(c.calls[i].id);
                if (!id || !c.calls[i].id[0]) abort();
                json_decref(id);
            }
            const char *a = c.calls[i].arguments;
            if (strlen(a) != c.calls[i].arguments_len || a[0] != '{') abort();
            /* no whitespace outside strings */
            bool in_string = false, escaped = false;
            for (size_t k = 0; a[k]; k++) {
                if (escaped) escaped = false;
                else if (in_string && a[k] == '\\') escaped = true;
                else if (a[k] == '"') in_string = !in_string;
                else if (!in_string && strchr(" \t\r\n", a[k])) abort();
            }
        }
    } else if (c.calls || c.n) {
        abort();
    }
    /* every prefix's sendable length, which only grows */
    size_t last = 0;
    for (size_t n = len > 256 ? len - 256 : 0; n <= len; n++) {
        size_t safe = srv_tool_calls_safe_len(f, text, n);
        if (safe > n || (n > (len > 256 ? len - 256 : 0) && safe < last)) abort();
        last = safe;
    }
    if (calls && last > c.content_len) abort();
    if (calls) srv_tool_calls_free(&c);

    /* the incremental reading: a byte at a time (short texts), and cut
     * at random */
    size_t *cuts = malloc((len + 1) * sizeof *cuts);
    if (!cuts) return 0;
    if (len <= 4096) {
        for (size_t k = 0; k < len; k++) cuts[k] = k + 1;
        if (toolcall_incremental_check(f, text, len, cuts, len)) abort();
    }
    uint32_t rng = 2166136261u;
    for (size_t k = 0; k < size; k++) rng = (rng ^ data[k]) * 16777619u;
    for (int round = 0; round < 4; round++) {
        size_t n = 0, at = 0;
        while (at < len) {
            rng = rng * 1103515245u + 12345u;
            at += 1 + (rng >> 16) % (round == 0 ? 4 : round == 1 ? 16 : 64 << round);
            cuts[n++] = at < len ? at : len;
        }
        if (toolcall_incremental_check(f, text, len, cuts, n)) abort();
    }
    free(cuts);
    return 0;
}
