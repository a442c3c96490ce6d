/*
 * test-thinking.c -- the engine on a reasoning model's reply
 * (hearth_request.reasoning): a grammar constrains the answer alone,
 * the reasoning before it is the model's own choice; the reasoning budget
 * writes the closing marker after exactly N tokens of reasoning, which
 * the statistics count; a token that would end the marker and go on is
 * refused while a grammar waits; the same tokens and logits alone and
 * batched, with speculation and without; the refusals at submission.
 *
 * The model is stories260K with byte tokens it never writes (0x01 to
 * 0x09) renamed to the two formats' markers, so that these are single
 * tokens as in the real vocabularies: <think> and </think> (added
 * pieces), harmony's control tokens, and "</think>{" (a token that ends
 * the marker and goes on with an answer's first byte).
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "testutil.h"

enum {
    T_OPEN = 4, T_CLOSE, H_START, H_CHANNEL, H_MESSAGE, H_END, H_RETURN, H_CALL, T_CLOSE_BRACE
};
static const char *const marker_text[] = {"<think>", "</think>", "<|start|>", "<|channel|>", "<|message|>",
                                          "<|end|>", "<|return|>", "<|call|>", "</think>{"};
static const int32_t marker_type[] = {4, 4, 3, 3, 3, 3, 3, 3, 1};

/* The answer's grammar: a small JSON object, no letters but one. */
static const char grammar_text[] = "root ::= \"{\\\"n\\\": \" [0-9] [0-9]? [0-9]? \"}\"";

/* stories260K with the markers; without harmony's ends <|return|> and
 * <|call|> (so that <|end|> ends generation, as in vocabularies that are
 * not harmony's) when harmony_ends is false.  The file's path. */
static char *marked_model(bool harmony_ends)
{
    hearth_gguf *src;
    ck_assert_int_eq(hearth_gguf_open(test_data_path("models/stories260K.gguf"), &src), HEARTH_OK);
    hearth_gguf_writer *w;
    ck_assert_int_eq(hearth_gguf_writer_new(&w), HEARTH_OK);
    hearth_gguf_value tokens, types;
    ck_assert_int_eq(hearth_gguf_get_array(src, "tokenizer.ggml.tokens", &tokens), HEARTH_OK);
    ck_assert_int_eq(hearth_gguf_get_array(src, "tokenizer.ggml.token_type", &types), HEARTH_OK);
    const uint64_t n = tokens.v.arr.n;
    char **strs = test_malloc(n * sizeof *strs);
    int32_t *ty = test_malloc(n * sizeof *ty);
    for (uint64_t i = 0; i < n; i++) {
        hearth_gguf_value e;
        ck_assert_int_eq(hearth_gguf_array_get(src, &tokens, i, &e), HEARTH_OK);
        strs[i] = strndup(e.v.str.ptr, (size_t)e.v.str.len);
        ck_assert_int_eq(hearth_gguf_array_get(src, &types, i, &e), HEARTH_OK);
        ty[i] = (int32_t)e.v.i;
        const uint64_t k = i - T_OPEN;
        if (i >= T_OPEN && k < HEARTH_ARRAY_LEN(marker_text) &&
            (harmony_ends || (i != H_RETURN && i != H_CALL))) {
            free(strs[i]);
            strs[i] = strdup(marker_text[k]);
            ty[i] = marker_type[k];
        }
    }
    for (int64_t i = 0; i < hearth_gguf_n_kv(src); i++) {
        const char *key = hearth_gguf_kv_key(src, i);
        if (strcmp(key, "tokenizer.ggml.tokens") == 0)
            ck_assert_int_eq(hearth_gguf_writer_set_str_array(w, key, (const char *const *)strs, n), HEARTH_OK);
        else if (strcmp(key, "tokenizer.ggml.token_type") == 0)
            ck_assert_int_eq(hearth_gguf_writer_set_array(w, key, HEARTH_GGUF_INT32, ty, n), HEARTH_OK);
        else
            ck_assert_int_eq(hearth_gguf_writer_copy_kv(w, src, i), HEARTH_OK);
    }
    for (int64_t i = 0; i < hearth_gguf_n_tensors(src); i++) {
        const hearth_gguf_tensor *t = hearth_gguf_tensor_at(src, i);
        ck_assert_int_eq(hearth_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->bytes),
                         HEARTH_OK);
    }
    char path[] = "/tmp/hearth-thinking-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(hearth_gguf_writer_write(w, path), HEARTH_OK);
    hearth_gguf_writer_free(w);
    hearth_gguf_close(src);
    for (uint64_t i = 0; i < n; i++) free(strs[i]);
    free(strs);
    free(ty);
    return strdup(path);
}

static hearth_model *load_marked(bool harmony_ends)
{
    char *path = marked_model(harmony_ends);
    hearth_model *m;
    ck_assert_msg(hearth_model_load(path, NULL, &m) == HEARTH_OK, "%s", hearth_last_error());
    unlink(path);
    free(path);
    return m;
}

/* ---- prompts ------------------------------------------------------------------------ */

struct prompt {
    int32_t t[128];
    int32_t n;
};

/* BOS and the story's start. */
static void story(const hearth_vocab *v, struct prompt *p)
{
    static const char text[] = "Once upon a time, there was a little cat";
    size_t n;
    ck_assert_int_eq(hearth_tokenize(v, text, strlen(text), HEARTH_TOKENIZE_ADD_SPECIAL, p->t, 64, &n),
                     HEARTH_OK);
    p->n = (int32_t)n;
}

static void add_token(struct prompt *p, int32_t t)
{
    ck_assert_int_lt(p->n, (int32_t)HEARTH_ARRAY_LEN(p->t));
    p->t[p->n++] = t;
}

/* Text without spaces as the longest tokens at each point (as the engine
 * writes a marker). */
static void add_spelled(const hearth_vocab *v, struct prompt *p, const char *text)
{
    for (size_t at = 0, len = strlen(text); at < len;) {
        size_t n = len - at;
        hearth_token t = HEARTH_TOKEN_NONE;
        for (; n > 0 && (t = hearth_vocab_find(v, text + at, n)) == HEARTH_TOKEN_NONE; n--) {}
        ck_assert_int_ne(t, HEARTH_TOKEN_NONE);
        add_token(p, t);
        at += n;
    }
}

/* A think prompt: opened (ends with <think>), closed (an empty block:
 * thinking off) or neither (the model may open a block). */
enum think_start { OPENED, CLOSED, MAY_OPEN };

static void think_prompt(const hearth_vocab *v, enum think_start how, struct prompt *p)
{
    story(v, p);
    if (how != MAY_OPEN) add_token(p, T_OPEN);
    if (how == CLOSED) add_token(p, T_CLOSE);
}

/* A harmony prompt: inside an analysis message, or where a header comes. */
static void harmony_prompt(const hearth_vocab *v, bool in_analysis, struct prompt *p)
{
    story(v, p);
    add_token(p, H_START);
    add_spelled(v, p, "assistant");
    if (!in_analysis) return;
    add_token(p, H_CHANNEL);
    add_spelled(v, p, "analysis");
    add_token(p, H_MESSAGE);
}

/* ---- requests ----------------------------------------------------------------------- */

#define MAX_OUT 128
struct sample_out {
    int32_t tokens[MAX_OUT];
    uint64_t logits_hash[MAX_OUT];
    int32_t n;
    char text[4096];
    size_t text_len;
    hearth_finish_reason finish;
    hearth_request_stats stats;
};

struct collector {
    struct sample_out *out;
    int32_t n;
    int32_t n_vocab;
    int finished;
};

static void on_event(void *user, const hearth_event *ev)
{
    struct collector *c = user;
    ck_assert_int_lt(ev->index, c->n);
    struct sample_out *o = &c->out[ev->index];
    ck_assert_int_eq(o->finish, HEARTH_FINISH_NONE);
    if (ev->token >= 0 && ev->finish == HEARTH_FINISH_NONE && o->n < MAX_OUT) {
        o->tokens[o->n] = ev->token;
        o->logits_hash[o->n] = ev->logits ? test_fnv1a(ev->logits, (size_t)c->n_vocab * sizeof(float)) : 0;
        o->n++;
    }
    ck_assert_uint_lt(o->text_len + ev->len, sizeof o->text);
    memcpy(o->text + o->text_len, ev->text, ev->len);
    o->text_len += ev->len;
    if (ev->finish != HEARTH_FINISH_NONE) {
        o->finish = ev->finish;
        o->stats = *ev->stats;
        c->finished++;
    }
}

struct req {
    const struct prompt *prompt;
    hearth_reasoning_format format;
    int32_t budget;
    bool grammar;
    float temperature;
    uint64_t seed;
    int32_t n;
    int32_t bias_token;      /* -1: none; else bias on it */
    float bias;
    int32_t lookup;          /* speculation by prompt lookup: n-gram; 0: none */
};

static hearth_grammar *answer_grammar(const hearth_model *m)
{
    hearth_grammar *g;
    ck_assert_msg(hearth_grammar_new(hearth_model_vocab(m), grammar_text, strlen(grammar_text), &g) == HEARTH_OK,
                  "%s", hearth_last_error());
    return g;
}

static hearth_status submit(hearth_engine *e, hearth_grammar *g, const struct req *q, struct collector *c)
{
    hearth_request r;
    hearth_request_default(&r);
    r.prompt = q->prompt->t;
    r.n_prompt = (size_t)q->prompt->n;
    r.max_tokens = 64;
    r.n = q->n;
    r.sampling.temperature = q->temperature;
    r.sampling.seed = q->seed;
    r.sampling.grammar = q->grammar ? g : NULL;
    const hearth_logit_bias bias = {q->bias_token, q->bias};
    if (q->bias_token >= 0) {
        r.sampling.logit_bias = &bias;
        r.sampling.n_logit_bias = 1;
    }
    r.reasoning = q->format;
    r.reasoning_budget = q->budget;
    if (q->lookup) {
        r.speculation.draft_max = 4;
        r.speculation.lookup = q->lookup;
        r.speculation.fixed = true;
    }
    r.decode_flags = HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION;
    r.on_event = on_event;
    r.user = c;
    return hearth_engine_submit(e, &r, NULL);
}

static hearth_engine *new_engine(const hearth_model *m, int32_t n_batch)
{
    hearth_engine_params p;
    hearth_engine_default_params(&p);
    p.n_ctx = 256;
    p.n_batch = n_batch;
    p.n_threads = 2;
    p.kv_tokens = 4096;
    hearth_engine *e;
    ck_assert_msg(hearth_engine_new(m, &p, &e) == HEARTH_OK, "%s", hearth_last_error());
    return e;
}

static void run_checked(hearth_engine *e)
{
    for (int guard = 0; guard < 100000; guard++) {
        bool worked;
        hearth_status st = hearth_engine_step(e, &worked);
        ck_assert_msg(st == HEARTH_OK, "%s", hearth_last_error());
        ck_assert_msg(engine_check(e) == HEARTH_OK, "%s", hearth_last_error());
        hearth_engine_stats s;
        hearth_engine_get_stats(e, &s);
        if (!worked && s.running == 0 && s.waiting == 0) return;
    }
    ck_abort_msg("the engine did not finish");
}

/* Run one request alone on a fresh engine. */
static void run_alone(const hearth_model *m, hearth_grammar *g, const struct req *q, struct sample_out *out)
{
    memset(out, 0, (size_t)(q->n > 0 ? q->n : 1) * sizeof *out);
    hearth_engine *e = new_engine(m, 512);
    struct collector c = {out, q->n > 0 ? q->n : 1, hearth_model_n_vocab(m), 0};
    ck_assert_msg(submit(e, g, q, &c) == HEARTH_OK, "%s", hearth_last_error());
    run_checked(e);
    ck_assert_int_eq(c.finished, c.n);
    hearth_engine_free(e);
}

/* ---- checks ------------------------------------------------------------------------- */

/* The parts of a sample's text as the library's split reads them after
 * the prompt (what a client is shown). */
struct parts {
    char reasoning[4096], answer[4096];
};

static void split_text(const hearth_model *m, const struct req *q, const struct sample_out *o, struct parts *p)
{
    const hearth_vocab *v = hearth_model_vocab(m);
    char *end;
    size_t end_len;
    const int32_t n_end = q->prompt->n < 32 ? q->prompt->n : 32;
    ck_assert_int_eq(hearth_detokenize_alloc(v, q->prompt->t + q->prompt->n - n_end, (size_t)n_end,
                                             HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION, &end, &end_len),
                     HEARTH_OK);
    hearth_reasoning_split *s;
    ck_assert_int_eq(hearth_reasoning_split_new(q->format, end, end_len, &s), HEARTH_OK);
    hearth_free(end);
    hearth_reasoning_text t, f;
    ck_assert_int_eq(hearth_reasoning_split_push(s, o->text, o->text_len, &t), HEARTH_OK);
    snprintf(p->reasoning, sizeof p->reasoning, "%.*s", (int)t.reasoning_len, t.reasoning);
    snprintf(p->answer, sizeof p->answer, "%.*s", (int)t.answer_len, t.answer);
    ck_assert_int_eq(hearth_reasoning_split_finish(s, &f), HEARTH_OK);
    strncat(p->reasoning, f.reasoning, f.reasoning_len);
    strncat(p->answer, f.answer, f.answer_len);
    hearth_reasoning_split_free(s);
}

/* Whether text is a sentence of grammar_text: {"n": D[D[D]]}. */
static bool in_language(const char *text)
{
    static const char head[] = "{\"n\": ";
    if (strncmp(text, head, strlen(head)) != 0) return false;
    const char *p = text + strlen(head);
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    return digits >= 1 && digits <= 3 && strcmp(p, "}") == 0;
}

static bool has_letter(const char *text)
{
    for (; *text; text++)
        if ((*text >= 'a' && *text <= 'z') || (*text >= 'A' && *text <= 'Z')) return true;
    return false;
}

static void text_of(const hearth_vocab *v, const int32_t *tokens, int32_t n, char *out, size_t size)
{
    size_t len;
    ck_assert_int_eq(hearth_detokenize(v, tokens, (size_t)n, HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION,
                                       out, size - 1, &len), HEARTH_OK);
    out[len] = '\0';
}

/* The sample's parts as a client is shown them: the reasoning
 * want_reasoning (NULL: any), and an answer in the grammar's language. */
static void expect_parts(const hearth_model *m, const struct req *q, const struct sample_out *o,
                         const char *want_reasoning)
{
    struct parts p;
    split_text(m, q, o, &p);
    if (want_reasoning) ck_assert_str_eq(p.reasoning, want_reasoning);
    ck_assert_msg(in_language(p.answer), "the answer \"%s\" (reasoning \"%s\")", p.answer, p.reasoning);
}

static void expect_same(const struct sample_out *a, const struct sample_out *b, const char *what)
{
    ck_assert_msg(a->n == b->n, "%s: %d tokens, alone %d", what, a->n, b->n);
    for (int32_t i = 0; i < a->n; i++) {
        ck_assert_msg(a->tokens[i] == b->tokens[i], "%s: token %d is %d, alone %d", what, i, a->tokens[i],
                      b->tokens[i]);
        ck_assert_msg(a->logits_hash[i] == b->logits_hash[i], "%s: the logits of token %d differ", what, i);
    }
    ck_assert_int_eq(a->stats.n_reasoning, b->stats.n_reasoning);
    ck_assert_int_eq(a->finish, b->finish);
}

/* ---- tests -------------------------------------------------------------------------- */

/* The template opened the block: the budget's tokens are the model's own
 * (those it writes without a grammar), then </think>, then an answer in
 * the grammar's language; the statistics count exactly the budget. */
START_TEST(test_budget_think)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    hearth_grammar *g = answer_grammar(m);
    struct prompt p;
    think_prompt(v, OPENED, &p);
    struct sample_out free_run, o;
    const struct req unbounded = {&p, HEARTH_REASONING_THINK, -1, false, 0.0f, 1, 1, -1, 0.0f, 0};
    run_alone(m, g, &unbounded, &free_run);
    ck_assert_int_eq(free_run.n, 64); /* stories never closes the block */
    ck_assert_int_eq(free_run.stats.n_reasoning, 64);
    for (int32_t budget = 0; budget <= 9; budget += 3) {
        const struct req q = {&p, HEARTH_REASONING_THINK, budget, true, 0.0f, 1, 1, -1, 0.0f, 0};
        run_alone(m, g, &q, &o);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_STOP); /* the grammar is complete */
        ck_assert_int_eq(o.stats.n_reasoning, budget);
        ck_assert_int_gt(o.n, budget + 1);
        for (int32_t i = 0; i < budget; i++)
            ck_assert_msg(o.tokens[i] == free_run.tokens[i], "budget %d: token %d is %d, without a grammar %d",
                          budget, i, o.tokens[i], free_run.tokens[i]);
        ck_assert_int_eq(o.tokens[budget], T_CLOSE);
        char want[1024];
        text_of(v, o.tokens, budget, want, sizeof want);
        expect_parts(m, &q, &o, want);
        /* the reasoning is not the grammar's: it is free */
        if (budget > 0) ck_assert_msg(has_letter(want), "\"%s\"", want);
    }
    /* the same without a grammar: the marker, then the model's own text */
    const struct req q = {&p, HEARTH_REASONING_THINK, 3, false, 0.0f, 1, 1, -1, 0.0f, 0};
    run_alone(m, g, &q, &o);
    ck_assert_int_eq(o.stats.n_reasoning, 3);
    ck_assert_int_eq(o.tokens[3], T_CLOSE);
    ck_assert_int_eq(o.finish, HEARTH_FINISH_LENGTH);
    /* a closed block in the prompt: the grammar applies at once */
    struct prompt closed;
    think_prompt(v, CLOSED, &closed);
    const struct req qc = {&closed, HEARTH_REASONING_THINK, 2, true, 0.0f, 1, 1, -1, 0.0f, 0};
    run_alone(m, g, &qc, &o);
    ck_assert_int_eq(o.stats.n_reasoning, 0);
    expect_parts(m, &qc, &o, "");
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

/* harmony: inside an analysis message, the budget writes the end of the
 * message and a final header; the answer is the final message's body.
 * Where a header may come, the grammar applies from the first token
 * (text without a header is the answer) beside the header's openers. */
START_TEST(test_budget_harmony)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    hearth_grammar *g = answer_grammar(m);
    struct prompt p;
    harmony_prompt(v, true, &p);
    struct prompt closing;
    closing.n = 0;
    add_token(&closing, H_END);
    add_token(&closing, H_START);
    add_spelled(v, &closing, "assistant");
    add_token(&closing, H_CHANNEL);
    add_spelled(v, &closing, "final");
    add_token(&closing, H_MESSAGE);
    struct sample_out o;
    for (int32_t budget = 0; budget <= 4; budget += 4) {
        const struct req q = {&p, HEARTH_REASONING_HARMONY, budget, true, 0.0f, 2, 1, -1, 0.0f, 0};
        run_alone(m, g, &q, &o);
        ck_assert_int_eq(o.stats.n_reasoning, budget);
        ck_assert_int_eq(o.finish, HEARTH_FINISH_STOP);
        ck_assert_int_gt(o.n, budget + closing.n);
        for (int32_t i = 0; i < closing.n; i++) ck_assert_int_eq(o.tokens[budget + i], closing.t[i]);
        char want[1024];
        text_of(v, o.tokens, budget, want, sizeof want);
        expect_parts(m, &q, &o, want);
    }
    struct prompt header;
    harmony_prompt(v, false, &header);
    const struct req q = {&header, HEARTH_REASONING_HARMONY, 4, true, 0.0f, 2, 1, -1, 0.0f, 0};
    run_alone(m, g, &q, &o);
    ck_assert_int_eq(o.stats.n_reasoning, 0);
    expect_parts(m, &q, &o, "");
    /* a vocabulary where <|end|> ends generation cannot keep a budget */
    hearth_model *plain = load_marked(false);
    hearth_engine *e = new_engine(plain, 512);
    memset(&o, 0, sizeof o);
    struct collector c = {&o, 1, hearth_model_n_vocab(plain), 0};
    const struct req qb = {&p, HEARTH_REASONING_HARMONY, 4, false, 0.0f, 2, 1, -1, 0.0f, 0};
    ck_assert_int_eq(submit(e, NULL, &qb, &c), HEARTH_E_UNSUPPORTED);
    ck_assert_msg(strstr(hearth_last_error(), "<|end|>"), "%s", hearth_last_error());
    const struct req qn = {&p, HEARTH_REASONING_HARMONY, -1, false, 0.0f, 2, 1, -1, 0.0f, 0};
    ck_assert_int_eq(submit(e, NULL, &qn, &c), HEARTH_OK);
    run_checked(e);
    hearth_engine_free(e);
    hearth_model_free(plain);
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

/* A prompt that leaves the block to the model: the grammar applies from
 * the first token, and <think> is allowed besides; taken, it opens a
 * reasoning the grammar waits out. */
START_TEST(test_open)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    hearth_grammar *g = answer_grammar(m);
    struct prompt p;
    think_prompt(v, MAY_OPEN, &p);
    struct sample_out o;
    /* (stories260K would rather open the block than write "{") */
    const struct req answer = {&p, HEARTH_REASONING_THINK, -1, true, 0.0f, 1, 1, T_OPEN, -INFINITY, 0};
    run_alone(m, g, &answer, &o);
    ck_assert_int_eq(o.stats.n_reasoning, 0);
    expect_parts(m, &answer, &o, "");
    /* <think> made likely: it opens the block, which the model fills with
     * <think> text (the bias holds) until the budget closes it */
    const struct req opened = {&p, HEARTH_REASONING_THINK, 2, true, 0.0f, 1, 1, T_OPEN, 100.0f, 0};
    run_alone(m, g, &opened, &o);
    ck_assert_int_eq(o.tokens[0], T_OPEN);
    ck_assert_int_eq(o.tokens[1], T_OPEN);
    ck_assert_int_eq(o.tokens[2], T_OPEN);
    ck_assert_int_eq(o.tokens[3], T_CLOSE);
    ck_assert_int_eq(o.stats.n_reasoning, 2);
    expect_parts(m, &opened, &o, "<think><think>");
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

/* "</think>{" ends the marker and goes on with the answer's first byte,
 * which the grammar would never see: while a grammar waits it is refused
 * (the model's next choice is taken); without a grammar it is a token
 * like any other. */
START_TEST(test_past_the_marker)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    hearth_grammar *g = answer_grammar(m);
    struct prompt p;
    think_prompt(v, OPENED, &p);
    struct sample_out o, free_run;
    const struct req unbounded = {&p, HEARTH_REASONING_THINK, -1, false, 0.0f, 1, 1, -1, 0.0f, 0};
    run_alone(m, g, &unbounded, &free_run);
    const struct req q = {&p, HEARTH_REASONING_THINK, 3, true, 0.0f, 1, 1, T_CLOSE_BRACE, 100.0f, 0};
    run_alone(m, g, &q, &o);
    for (int32_t i = 0; i < o.n; i++) ck_assert_int_ne(o.tokens[i], T_CLOSE_BRACE);
    for (int32_t i = 0; i < 3; i++) ck_assert_int_eq(o.tokens[i], free_run.tokens[i]);
    ck_assert_int_eq(o.tokens[3], T_CLOSE);
    ck_assert_int_eq(o.stats.n_reasoning, 3);
    expect_parts(m, &q, &o, NULL);
    const struct req nog = {&p, HEARTH_REASONING_THINK, 3, false, 0.0f, 1, 1, T_CLOSE_BRACE, 100.0f, 0};
    run_alone(m, g, &nog, &o);
    ck_assert_int_eq(o.tokens[0], T_CLOSE_BRACE);
    ck_assert_int_eq(o.stats.n_reasoning, 0);
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

/* Reasoning requests alone, then all at once under small step budgets
 * (prompts chunked, mixed with decode rows and with a plain request),
 * then again with the prefix cache warm: the same tokens, logits and
 * counts, bit for bit. */
START_TEST(test_batch_invariance)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    const int32_t V = hearth_model_n_vocab(m);
    hearth_grammar *g = answer_grammar(m);
    struct prompt opened, may_open, analysis, header;
    think_prompt(v, OPENED, &opened);
    think_prompt(v, MAY_OPEN, &may_open);
    harmony_prompt(v, true, &analysis);
    harmony_prompt(v, false, &header);
    const struct req reqs[] = {
        {&opened, HEARTH_REASONING_THINK, 5, true, 0.8f, 3, 2, -1, 0.0f, 0},
        {&analysis, HEARTH_REASONING_HARMONY, 3, true, 0.0f, 4, 1, -1, 0.0f, 0},
        {&may_open, HEARTH_REASONING_THINK, 2, true, 0.9f, 5, 1, T_OPEN, 100.0f, 0},
        {&opened, HEARTH_REASONING_THINK, 7, false, 0.7f, 6, 1, T_CLOSE_BRACE, 100.0f, 0},
        {&opened, HEARTH_REASONING_THINK, 6, true, 0.7f, 9, 1, T_CLOSE_BRACE, 100.0f, 0},
        {&header, HEARTH_REASONING_HARMONY, -1, true, 1.0f, 7, 1, -1, 0.0f, 0},
        {&opened, HEARTH_REASONING_NONE, -1, false, 0.8f, 8, 1, -1, 0.0f, 0},
    };
    enum { N = HEARTH_ARRAY_LEN(reqs) };
    static struct sample_out alone[N][2], together[N][2];
    for (int i = 0; i < N; i++) run_alone(m, g, &reqs[i], alone[i]);
    ck_assert_int_eq(alone[0][0].stats.n_reasoning, 5);
    ck_assert_int_eq(alone[0][1].stats.n_reasoning, 5);
    ck_assert_int_eq(alone[4][0].stats.n_reasoning, 6);
    ck_assert_int_eq(alone[6][0].stats.n_reasoning, 0);
    const int32_t budgets[] = {7, 64};
    for (size_t b = 0; b < HEARTH_ARRAY_LEN(budgets); b++) {
        hearth_engine *e = new_engine(m, budgets[b]);
        for (int round = 0; round < 2; round++) {
            memset(together, 0, sizeof together);
            struct collector c[N];
            for (int i = 0; i < N; i++) {
                c[i] = (struct collector){together[i], reqs[i].n, V, 0};
                ck_assert_msg(submit(e, g, &reqs[i], &c[i]) == HEARTH_OK, "%s", hearth_last_error());
                if (i % 2) { /* later requests join while the first ones run */
                    bool w;
                    ck_assert_int_eq(hearth_engine_step(e, &w), HEARTH_OK);
                }
            }
            run_checked(e);
            for (int i = 0; i < N; i++)
                for (int k = 0; k < reqs[i].n; k++) {
                    char what[64];
                    snprintf(what, sizeof what, "request %d sample %d, step budget %d", i, k, budgets[b]);
                    expect_same(&together[i][k], &alone[i][k], what);
                }
        }
        hearth_engine_free(e);
    }
    hearth_grammar_free(g);
    hearth_model_free(m);
}
END_TEST

/* Speculation by prompt lookup with a budget: the marker's tokens are the
 * only ones a verification keeps there; greedy output is the same tokens
 * as without speculation. */
START_TEST(test_speculation)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    struct prompt p;
    think_prompt(v, OPENED, &p);
    for (int32_t budget = 1; budget <= 13; budget += 4) {
        struct sample_out plain, spec;
        const struct req q = {&p, HEARTH_REASONING_THINK, budget, false, 0.0f, 1, 1, -1, 0.0f, 0};
        const struct req qs = {&p, HEARTH_REASONING_THINK, budget, false, 0.0f, 1, 1, -1, 0.0f, 2};
        run_alone(m, NULL, &q, &plain);
        run_alone(m, NULL, &qs, &spec);
        ck_assert_int_gt(spec.stats.n_drafted, 0);
        ck_assert_int_eq(spec.n, plain.n);
        for (int32_t i = 0; i < plain.n; i++) ck_assert_int_eq(spec.tokens[i], plain.tokens[i]);
        ck_assert_int_eq(spec.stats.n_reasoning, budget);
        ck_assert_int_eq(plain.tokens[budget], T_CLOSE);
    }
    hearth_model_free(m);
}
END_TEST

START_TEST(test_refusals)
{
    if (!test_require_data()) return;
    hearth_model *m = load_marked(true);
    const hearth_vocab *v = hearth_model_vocab(m);
    struct prompt p;
    think_prompt(v, OPENED, &p);
    hearth_engine *e = new_engine(m, 512);
    struct sample_out o;
    memset(&o, 0, sizeof o);
    struct collector c = {&o, 1, hearth_model_n_vocab(m), 0};
    const struct req bad = {&p, (hearth_reasoning_format)7, -1, false, 0.0f, 1, 1, -1, 0.0f, 0};
    ck_assert_int_eq(submit(e, NULL, &bad, &c), HEARTH_E_INVALID);
    ck_assert_msg(strstr(hearth_last_error(), "reasoning format 7"), "%s", hearth_last_error());
    /* without a format the budget is ignored and nothing is counted */
    const struct req none = {&p, HEARTH_REASONING_NONE, 0, false, 0.0f, 1, 1, -1, 0.0f, 0};
    ck_assert_int_eq(submit(e, NULL, &none, &c), HEARTH_OK);
    run_checked(e);
    ck_assert_int_eq(o.n, 64);
    ck_assert_int_eq(o.stats.n_reasoning, 0);
    for (int32_t i = 0; i < o.n; i++) ck_assert_int_ne(o.tokens[i], T_CLOSE);
    hearth_engine_free(e);
    hearth_model_free(m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("thinking");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_budget_think);
    tcase_add_test(tc, test_budget_harmony);
    tcase_add_test(tc, test_open);
    tcase_add_test(tc, test_past_the_marker);
    tcase_add_test(tc, test_batch_invariance);
    tcase_add_test(tc, test_speculation);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
