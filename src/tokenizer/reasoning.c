/*
 * reasoning.c -- the reasoning split: generated text in, reasoning and
 * answer out, as the text arrives (see hearth.h, "reasoning").
 *
 * The split keeps the text it has not decided yet (pending) and reads
 * pending + each new piece from the start with a small state machine.
 * A state either decides on a prefix of that text -- emits it to a part,
 * drops a marker, moves to another state -- or waits for more, and it
 * waits only while the decision could still change: text that may be
 * the start of a marker, a header without its end.  So what comes out
 * depends on the whole text alone, never on how it was cut into pieces.
 * Every marker is ASCII and every cut falls before a marker, after one
 * or at the end of the whole characters so far, so the parts are always
 * whole characters.
 *
 * think:   [whitespace] <think> REASONING </think> [whitespace] ANSWER
 *          (only at the start of the text; a prompt that ends with
 *          <think> starts inside the reasoning, one that ends with
 *          </think> -- an empty block, thinking turned off -- in the
 *          answer)
 * harmony: messages <|start|>HEADER<|message|>BODY<|end|>, the last one
 *          ended by <|return|> or <|call|>; the header names the channel
 *          (<|channel|>analysis, final, commentary) and the recipient
 *          (to=functions.NAME); <|start|> and the role may be missing at
 *          the start of the text, since the prompt ends with them.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "reasoning.h"
#include "textbuf.h"
#include "utf8.h"

/* A harmony header longer than this is not a header: its text is read
 * as a message's body (of the answer). */
#define HEADER_MAX 512
/* Tool calls per text, and bytes of one's name and arguments. */
#define MAX_CALLS 128
#define NAME_MAX_BYTES 256
#define ARGUMENTS_MAX_BYTES ((size_t)16 << 20)

static const char THINK_OPEN[] = "<think>";
static const char THINK_CLOSE[] = "</think>";

static const char H_START[] = "<|start|>";
static const char H_CHANNEL[] = "<|channel|>";
static const char H_MESSAGE[] = "<|message|>";
/* what ends a message's body: its end markers, and the start of another
 * message when the model left the end out */
static const char *const body_ends[] = {"<|end|>", "<|return|>", "<|call|>", H_START, H_CHANNEL};
#define N_CONSUMED_ENDS 3   /* body_ends[0..3) are markers of the body's own end */

enum state {
    T_START,        /* think: nothing but whitespace yet */
    T_REASONING,    /* think: inside <think> */
    T_AFTER,        /* think: after </think>, whitespace is dropped */
    ANSWER,         /* the rest of the text is the answer */
    H_EXPECT,       /* harmony: a header may come (the start, after a message) */
    H_HEADER,       /* harmony: a header, up to <|message|> */
    H_BODY,         /* harmony: a message's body */
};

enum dest { TO_ANSWER, TO_REASONING, TO_CALL };

struct call {
    char *name;
    textbuf arguments;
};

struct hearth_reasoning_split {
    hearth_reasoning_format format;
    enum state state;
    enum dest dest;             /* H_BODY: where the body goes */
    bool finished;
    bool failed;                /* a tool call's limit was passed, or memory ran out */
    unsigned char partial[4];   /* a character the last piece cut short */
    size_t n_partial;
    textbuf pending;            /* text not decided yet */
    textbuf work;               /* pending + the new piece */
    textbuf reasoning, answer;  /* this call's parts */
    struct call *calls;
    size_t n_calls;
};

/* ---- formats ---------------------------------------------------------------------- */

static const char *const format_names[] = {"none", "think", "harmony"};

const char *hearth_reasoning_format_name(hearth_reasoning_format format)
{
    return (unsigned)format < HEARTH_ARRAY_LEN(format_names) ? format_names[format] : "unknown";
}

hearth_status hearth_reasoning_format_from_name(const char *name, hearth_reasoning_format *out)
{
    if (!name || !out) return hearth_error(HEARTH_E_INVALID, "reasoning format: NULL argument");
    for (size_t i = 0; i < HEARTH_ARRAY_LEN(format_names); i++)
        if (strcmp(name, format_names[i]) == 0) {
            *out = (hearth_reasoning_format)i;
            return HEARTH_OK;
        }
    return hearth_error(HEARTH_E_INVALID, "unknown reasoning format '%.64s' (none, think or harmony)",
                        name);
}

static bool contains(const char *t, size_t len, const char *s)
{
    return memmem(t, len, s, strlen(s)) != NULL;
}

hearth_reasoning_format hearth_reasoning_format_detect(const char *template_text, size_t len)
{
    if (!template_text) return HEARTH_REASONING_NONE;
    if (contains(template_text, len, H_CHANNEL)) return HEARTH_REASONING_HARMONY;
    if (contains(template_text, len, THINK_OPEN) || contains(template_text, len, THINK_CLOSE))
        return HEARTH_REASONING_THINK;
    return HEARTH_REASONING_NONE;
}

/* ---- text helpers ----------------------------------------------------------------- */

static bool is_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static bool starts_with(const char *t, size_t len, const char *s)
{
    const size_t n = strlen(s);
    return len >= n && memcmp(t, s, n) == 0;
}

/* Whether t[0..len) is a proper prefix of s (shorter than s). */
static bool begins(const char *t, size_t len, const char *s)
{
    return len < strlen(s) && memcmp(t, s, len) == 0;
}

/* The first position p in t[from..len) where one of the markers begins;
 * *which is its index.  When none does, len, and *hold the first
 * position from which the rest of the text is a proper prefix of a
 * marker (len when none is). */
static size_t find_marker(const char *t, size_t len, size_t from, const char *const *markers,
                          size_t n_markers, size_t *which, size_t *hold)
{
    *hold = len;
    for (size_t p = from; p < len; p++) {
        if (t[p] != markers[0][0]) {
            /* every marker set here shares its first byte */
            continue;
        }
        for (size_t k = 0; k < n_markers; k++) {
            if (starts_with(t + p, len - p, markers[k])) {
                *which = k;
                return p;
            }
            if (*hold == len && begins(t + p, len - p, markers[k])) *hold = p;
        }
    }
    return len;
}

/* ---- harmony headers -------------------------------------------------------------- */

/* The word of header h[0..len) after position i: up to a space (or
 * another control character), a '<' or the end. */
static size_t word_len(const char *h, size_t len, size_t i)
{
    size_t k = i;
    while (k < len && (unsigned char)h[k] > ' ' && h[k] != 0x7f && h[k] != '<') k++;
    return k - i;
}

static hearth_status add_call(hearth_reasoning_split *s, const char *name, size_t n)
{
    if (s->n_calls == MAX_CALLS)
        return hearth_error(HEARTH_E_RANGE, "reasoning split: more than %d tool calls", MAX_CALLS);
    struct call *calls = hearth_realloc(s->calls, (s->n_calls + 1) * sizeof *calls, "tool calls");
    if (!calls) return HEARTH_E_NOMEM;
    s->calls = calls;
    struct call *c = &calls[s->n_calls];
    c->name = hearth_strndup(name, n, "a tool call's name");
    if (!c->name) return HEARTH_E_NOMEM;
    textbuf_init(&c->arguments, ARGUMENTS_MAX_BYTES, "a tool call's arguments");
    s->n_calls++;
    return HEARTH_OK;
}

/* Read header h[0..len) (what came between <|start|> and <|message|>)
 * into the destination of the body that follows. */
static hearth_status read_header(hearth_reasoning_split *s, const char *h, size_t len)
{
    const char *channel = NULL, *recipient = NULL;
    size_t channel_len = 0, recipient_len = 0;
    for (size_t i = 0; i < len; i++) {
        if (!channel && starts_with(h + i, len - i, H_CHANNEL)) {
            channel = h + i + strlen(H_CHANNEL);
            channel_len = word_len(h, len, i + strlen(H_CHANNEL));
        } else if (!recipient && (i == 0 || is_space(h[i - 1]) || h[i - 1] == '>') &&
                   starts_with(h + i, len - i, "to=")) {
            recipient = h + i + 3;
            recipient_len = word_len(h, len, i + 3);
        }
    }
    static const char functions[] = "functions.";
    const size_t nf = strlen(functions);
    if (recipient_len > nf && recipient_len - nf <= NAME_MAX_BYTES &&
        memcmp(recipient, functions, nf) == 0 &&
        utf8_validate(recipient + nf, recipient_len - nf) == recipient_len - nf) {
        s->dest = TO_CALL;
        return add_call(s, recipient + nf, recipient_len - nf);
    }
    if (recipient_len > 0) {
        /* a built-in tool's call (browser, python): not the answer */
        s->dest = TO_REASONING;
    } else if (channel_len == 8 && memcmp(channel, "analysis", 8) == 0) {
        s->dest = TO_REASONING;
    } else {
        /* final, and commentary without a recipient (a preamble the
         * user is meant to see) */
        s->dest = TO_ANSWER;
    }
    return HEARTH_OK;
}

/* ---- the state machine ------------------------------------------------------------ */

static hearth_status emit(hearth_reasoning_split *s, enum dest d, const char *t, size_t n)
{
    if (n == 0) return HEARTH_OK;
    switch (d) {
    case TO_REASONING: return textbuf_append(&s->reasoning, t, n);
    case TO_CALL: return textbuf_append(&s->calls[s->n_calls - 1].arguments, t, n);
    default: return textbuf_append(&s->answer, t, n);
    }
}

/* One decision on t[*i..len): it reads text (moves *i), changes the
 * state, or does neither when it must wait for more text, which it never
 * does at_end. */
static hearth_status step(hearth_reasoning_split *s, const char *t, size_t len, size_t *i,
                          bool at_end)
{
    const size_t from = *i;
    size_t which, hold, p;
    switch (s->state) {
    case T_START: {
        size_t k = from;
        while (k < len && is_space(t[k])) k++;
        if (starts_with(t + k, len - k, THINK_OPEN)) {
            *i = k + strlen(THINK_OPEN); /* the whitespace before it goes too */
            s->state = T_REASONING;
        } else if (at_end || !begins(t + k, len - k, THINK_OPEN)) {
            s->state = ANSWER;
        }
        return HEARTH_OK;
    }
    case T_REASONING: {
        static const char *const close[] = {THINK_CLOSE};
        p = find_marker(t, len, from, close, 1, &which, &hold);
        if (p < len) {
            *i = p + strlen(THINK_CLOSE);
            s->state = T_AFTER;
            return emit(s, TO_REASONING, t + from, p - from);
        }
        *i = at_end ? len : hold;
        return emit(s, TO_REASONING, t + from, *i - from);
    }
    case T_AFTER:
        while (*i < len && is_space(t[*i])) (*i)++;
        if (*i < len) s->state = ANSWER;
        return HEARTH_OK;
    case ANSWER:
        *i = len;
        return emit(s, TO_ANSWER, t + from, len - from);
    case H_EXPECT: {
        const char *rest = t + from;
        const size_t n = len - from;
        if (starts_with(rest, n, H_START)) {
            *i = from + strlen(H_START);
            s->state = H_HEADER;
        } else if (starts_with(rest, n, H_CHANNEL) || starts_with(rest, n, " to=") ||
                   starts_with(rest, n, "to=")) {
            s->state = H_HEADER; /* the prompt wrote <|start|>assistant */
        } else if (at_end || !(begins(rest, n, H_START) || begins(rest, n, H_CHANNEL) ||
                                 begins(rest, n, " to=") || begins(rest, n, "to="))) {
            /* text without a header is the answer */
            s->state = H_BODY;
            s->dest = TO_ANSWER;
        }
        return HEARTH_OK;
    }
    case H_HEADER: {
        static const char *const message[] = {H_MESSAGE};
        p = find_marker(t, len, from, message, 1, &which, &hold);
        const size_t header_len = p - from;
        if (p < len && header_len <= HEADER_MAX) {
            *i = p + strlen(H_MESSAGE);
            s->state = H_BODY;
            return read_header(s, t + from, header_len);
        }
        if (p < len || at_end || len - from >= HEADER_MAX + strlen(H_MESSAGE)) {
            /* no header after all: its text is read again as the answer,
             * without the <|channel|> it began with (so that the body
             * does not end at once where the header began) */
            if (starts_with(t + from, len - from, H_CHANNEL)) *i = from + strlen(H_CHANNEL);
            s->state = H_BODY;
            s->dest = TO_ANSWER;
        }
        return HEARTH_OK;
    }
    case H_BODY: {
        p = find_marker(t, len, from, body_ends, HEARTH_ARRAY_LEN(body_ends), &which, &hold);
        if (p < len) {
            hearth_status st = emit(s, s->dest, t + from, p - from);
            *i = which < N_CONSUMED_ENDS ? p + strlen(body_ends[which]) : p;
            s->state = H_EXPECT;
            return st;
        }
        *i = at_end ? len : hold;
        return emit(s, s->dest, t + from, *i - from);
    }
    }
    return hearth_error(HEARTH_E_INVALID, "reasoning split: bad state");
}

/* Read pending + text[0..len) as far as it can be decided now. */
static hearth_status run(hearth_reasoning_split *s, const char *text, size_t len, bool at_end,
                         hearth_reasoning_text *out)
{
    memset(out, 0, sizeof *out);
    s->reasoning.len = 0;
    s->answer.len = 0;
    s->work.len = 0;
    hearth_status st = textbuf_append(&s->work, s->pending.data, s->pending.len);
    if (st) return st;
    /* Whole characters only: a piece may end inside one, whose bytes
     * wait for the next; anything else ill-formed is refused. */
    const size_t from = s->work.len;
    if (!st) st = textbuf_append(&s->work, (const char *)s->partial, s->n_partial);
    if (!st) st = textbuf_append(&s->work, text, len);
    if (st) return st;
    const size_t bad = from + utf8_validate(s->work.data + from, s->work.len - from);
    if (bad < s->work.len) {
        size_t n;
        utf8_scan_result r = utf8_scan((const unsigned char *)s->work.data + bad,
                                       s->work.len - bad, &n, NULL);
        if (r != UTF8_TRUNCATED || at_end) {
            s->work.len = from;
            return hearth_error(HEARTH_E_INVALID, "reasoning split: the text is not valid UTF-8 "
                                "(%s at byte %zu of the text pushed)",
                                r == UTF8_TRUNCATED ? "a character cut short" : "an ill-formed "
                                "sequence", bad - from);
        }
        memcpy(s->partial, s->work.data + bad, s->work.len - bad); /* at most 3 bytes */
        s->n_partial = s->work.len - bad;
        s->work.len = bad;
    } else {
        s->n_partial = 0;
    }
    const char *t = s->work.data;
    const size_t n = s->work.len;
    size_t i = 0;
    for (;;) {
        const enum state before = s->state;
        const size_t at = i;
        if ((st = step(s, t, n, &i, at_end))) {
            s->failed = true; /* the parts are lost: nothing more comes */
            return st;
        }
        /* a state that neither read text nor changed waits for more */
        if (i == at && s->state == before) break;
    }
    s->pending.len = 0;
    if ((st = textbuf_append(&s->pending, t + i, n - i))) return st;
    out->reasoning = s->reasoning.data ? s->reasoning.data : "";
    out->reasoning_len = s->reasoning.len;
    out->answer = s->answer.data ? s->answer.data : "";
    out->answer_len = s->answer.len;
    return HEARTH_OK;
}

/* ---- the interface ---------------------------------------------------------------- */

void hearth_reasoning_split_free(hearth_reasoning_split *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_calls; i++) {
        free(s->calls[i].name);
        textbuf_free(&s->calls[i].arguments);
    }
    free(s->calls);
    textbuf_free(&s->pending);
    textbuf_free(&s->work);
    textbuf_free(&s->reasoning);
    textbuf_free(&s->answer);
    free(s);
}

/* Where the text of a prompt's continuation starts. */
static hearth_status start_after_prompt(hearth_reasoning_split *s, const char *prompt, size_t len)
{
    while (len > 0 && is_space(prompt[len - 1])) len--;
    if (s->format == HEARTH_REASONING_NONE) return HEARTH_OK;
    if (s->format == HEARTH_REASONING_THINK) {
        const size_t n = strlen(THINK_OPEN), nc = strlen(THINK_CLOSE);
        if (len >= n && memcmp(prompt + len - n, THINK_OPEN, n) == 0) s->state = T_REASONING;
        else if (len >= nc && memcmp(prompt + len - nc, THINK_CLOSE, nc) == 0) s->state = ANSWER;
        return HEARTH_OK;
    }
    /* harmony: a prompt that ends with a header and <|message|> has the
     * model write that message's body */
    const size_t nm = strlen(H_MESSAGE);
    if (len < nm || memcmp(prompt + len - nm, H_MESSAGE, nm) != 0) return HEARTH_OK;
    size_t h = len - nm, from = h > HEADER_MAX ? h - HEADER_MAX : 0;
    size_t k = h;
    const size_t ns = strlen(H_START);
    while (k > from && !(k >= ns && memcmp(prompt + k - ns, H_START, ns) == 0)) k--;
    s->state = H_BODY;
    return read_header(s, prompt + k, h - k);
}

hearth_status hearth_reasoning_split_new(hearth_reasoning_format format, const char *prompt,
                                         size_t prompt_len, hearth_reasoning_split **out)
{
    if (!out) return hearth_error(HEARTH_E_INVALID, "hearth_reasoning_split_new: out is NULL");
    *out = NULL;
    if ((unsigned)format >= HEARTH_ARRAY_LEN(format_names))
        return hearth_error(HEARTH_E_INVALID, "reasoning split: unknown format %d", (int)format);
    if (!prompt && prompt_len)
        return hearth_error(HEARTH_E_INVALID, "reasoning split: prompt is NULL");
    hearth_reasoning_split *s = hearth_calloc(1, sizeof *s, "a reasoning split");
    if (!s) return HEARTH_E_NOMEM;
    s->format = format;
    textbuf_init(&s->pending, SIZE_MAX, "held-back text");
    textbuf_init(&s->work, SIZE_MAX, "reasoning split input");
    textbuf_init(&s->reasoning, SIZE_MAX, "reasoning text");
    textbuf_init(&s->answer, SIZE_MAX, "answer text");
    s->state = format == HEARTH_REASONING_THINK     ? T_START
               : format == HEARTH_REASONING_HARMONY ? H_EXPECT
                                                    : ANSWER;
    hearth_status st = prompt ? start_after_prompt(s, prompt, prompt_len) : HEARTH_OK;
    if (st) {
        hearth_reasoning_split_free(s);
        return st;
    }
    *out = s;
    return HEARTH_OK;
}

static hearth_status check_open(const hearth_reasoning_split *s, const hearth_reasoning_text *out)
{
    if (!s || !out) return hearth_error(HEARTH_E_INVALID, "reasoning split: NULL argument");
    if (s->failed)
        return hearth_error(HEARTH_E_INVALID, "reasoning split: ended by an earlier error");
    if (s->finished)
        return hearth_error(HEARTH_E_INVALID, "reasoning split: already finished");
    return HEARTH_OK;
}

hearth_status hearth_reasoning_split_push(hearth_reasoning_split *s, const char *text, size_t len,
                                          hearth_reasoning_text *out)
{
    hearth_status st = check_open(s, out);
    if (st) return st;
    memset(out, 0, sizeof *out);
    out->reasoning = out->answer = "";
    if (!text && len) return hearth_error(HEARTH_E_INVALID, "reasoning split: text is NULL");
    return run(s, text, len, false, out);
}

hearth_status hearth_reasoning_split_finish(hearth_reasoning_split *s, hearth_reasoning_text *out)
{
    hearth_status st = check_open(s, out);
    if (st) return st;
    s->finished = true;
    return run(s, "", 0, true, out);
}

bool hearth_reasoning_split_in_reasoning(const hearth_reasoning_split *s)
{
    return s && (s->state == T_REASONING || (s->state == H_BODY && s->dest == TO_REASONING));
}

enum reasoning_at reasoning_split_at(const hearth_reasoning_split *s)
{
    switch (s->state) {
    case T_START:
    case H_EXPECT: return REASONING_AT_OPEN;
    case T_REASONING: return REASONING_AT_REASONING;
    case T_AFTER:
    case ANSWER: return REASONING_AT_ANSWER;
    case H_HEADER: return REASONING_AT_OTHER;
    case H_BODY: break;
    }
    return s->dest == TO_REASONING ? REASONING_AT_REASONING
           : s->dest == TO_ANSWER  ? REASONING_AT_ANSWER
                                   : REASONING_AT_OTHER;
}

size_t hearth_reasoning_split_n_tool_calls(const hearth_reasoning_split *s)
{
    return s ? s->n_calls : 0;
}

hearth_status hearth_reasoning_split_tool_call(const hearth_reasoning_split *s, size_t index,
                                               const char **name, const char **arguments,
                                               size_t *arguments_len)
{
    if (!s || !name || !arguments || !arguments_len)
        return hearth_error(HEARTH_E_INVALID, "reasoning split: NULL argument");
    if (index >= s->n_calls)
        return hearth_error(HEARTH_E_RANGE, "reasoning split: tool call %zu of %zu", index,
                            s->n_calls);
    const struct call *c = &s->calls[index];
    *name = c->name;
    *arguments = c->arguments.data ? c->arguments.data : "";
    *arguments_len = c->arguments.len;
    return HEARTH_OK;
}
