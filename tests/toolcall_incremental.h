/*
 * toolcall_incremental.h -- a check of hearth serve's incremental reading
 * of tool calls (struct srv_tool_parser, src/server/toolcall.h), shared
 * by tests/test-toolcall.c and the toolcall fuzz target: the text is
 * fed in pieces, as a stream gets it, and what a stream would send of
 * each state (the final content, each call's name and id once, its
 * arguments as appended deltas) must add up to what reading the whole
 * text at once gives.
 */
#ifndef HEARTH_TESTS_TOOLCALL_INCREMENTAL_H
#define HEARTH_TESTS_TOOLCALL_INCREMENTAL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "toolcall.h"

struct tc_sent {
    char *text;
    size_t len, cap;
};

static bool tc_sent_add(struct tc_sent *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        size_t cap = (s->len + n + 1) * 2;
        char *t = realloc(s->text, cap);
        if (!t) return false;
        s->text = t;
        s->cap = cap;
    }
    if (n) memcpy(s->text + s->len, p, n);
    s->len += n;
    s->text[s->len] = '\0';
    return true;
}

static char *tc_strdup(const char *s)
{
    const size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

static bool tc_same(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

/* What a stream sends of the parser's state now: the content past what
 * was sent up to content_final, each new call's name and id, the
 * arguments past what was sent.  NULL, or what went wrong. */
static const char *tc_send(const struct srv_tool_parser *p, struct tc_sent *content, size_t *content_sent,
                           struct tc_sent *args, char **names, char **ids, size_t *n_sent, size_t max)
{
    const struct srv_tool_calls *o = &p->out;
    if (p->content_final < *content_sent) return "content_final went back";
    if (p->content_final > o->content_len) return "content_final past the content";
    /* (no content yet may be a null pointer) */
    const size_t more = p->content_final - *content_sent;
    if (more > 0 && !tc_sent_add(content, o->content + *content_sent, more)) return "out of memory";
    *content_sent = p->content_final;
    if (o->n < *n_sent) return "a call went away";
    if (o->n > max) return "too many calls";
    for (size_t i = 0; i < o->n; i++) {
        const struct srv_tool_call *c = &o->calls[i];
        if (!c->name || !c->name[0] || !c->arguments) return "a call without a name or arguments";
        if (i >= *n_sent) {
            names[i] = tc_strdup(c->name);
            ids[i] = c->id ? tc_strdup(c->id) : NULL;
            if (!names[i]) return "out of memory";
            (*n_sent)++;
        } else if (strcmp(names[i], c->name) != 0 || (ids[i] == NULL) != (c->id == NULL) ||
                   (ids[i] && strcmp(ids[i], c->id) != 0)) {
            return "a call's name or id changed";
        }
        if (c->arguments_len < args[i].len || !tc_same(c->arguments, args[i].len, args[i].text, args[i].len))
            return "a call's arguments changed where they were sent";
        if (!tc_sent_add(&args[i], c->arguments + args[i].len, c->arguments_len - args[i].len)) return "out of memory";
    }
    return NULL;
}

/* Feed text[0..len) cut at cuts[0..n_cuts) (increasing, at most len),
 * then the end; compare what was sent with srv_tool_calls_parse().
 * NULL when they agree, else what differs. */
static const char *toolcall_incremental_check(enum srv_tool_format f, const char *text, size_t len,
                                              const size_t *cuts, size_t n_cuts)
{
    enum { MAX = 64 };
    struct srv_tool_parser p;
    struct tc_sent content = {0}, args[MAX];
    char *names[MAX], *ids[MAX];
    size_t content_sent = 0, n_sent = 0;
    const char *why = NULL;
    memset(args, 0, sizeof args);
    srv_tool_parser_init(&p, f);
    for (size_t k = 0; k <= n_cuts && !why; k++) {
        if (k < n_cuts) srv_tool_parser_feed(&p, text, cuts[k]);
        else srv_tool_parser_finish(&p, text, len);
        if (p.oom) why = "out of memory";
        else why = tc_send(&p, &content, &content_sent, args, names, ids, &n_sent, MAX);
    }
    struct srv_tool_calls whole;
    const bool calls = srv_tool_calls_parse(f, text, len, &whole);
    if (!why) {
        if (calls != (n_sent > 0)) why = "calls in one reading, none in the other";
        else if (!calls && !tc_same(content.text, content.len, text, len)) why = "text without calls is not all content";
        else if (calls && !tc_same(content.text, content.len, whole.content, whole.content_len))
            why = "the content differs";
        else if (calls && whole.n != n_sent) why = "the number of calls differs";
        for (size_t i = 0; calls && !why && i < n_sent; i++) {
            const struct srv_tool_call *c = &whole.calls[i];
            if (strcmp(c->name, names[i]) != 0) why = "a call's name differs";
            else if ((c->id == NULL) != (ids[i] == NULL) || (c->id && strcmp(c->id, ids[i]) != 0))
                why = "a call's id differs";
            else if (!tc_same(c->arguments, c->arguments_len, args[i].text, args[i].len) ||
                     strlen(c->arguments) != c->arguments_len)
                why = "a call's arguments differ";
        }
    }
    if (calls) srv_tool_calls_free(&whole);
    for (size_t i = 0; i < n_sent; i++) {
        free(names[i]);
        free(ids[i]);
    }
    for (size_t i = 0; i < MAX; i++) free(args[i].text);
    free(content.text);
    srv_tool_parser_free(&p);
    return why;
}

#endif /* HEARTH_TESTS_TOOLCALL_INCREMENTAL_H */
