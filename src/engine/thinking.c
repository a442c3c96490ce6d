/*
 * thinking.c -- a reasoning model's reply as the engine follows it
 * (hearth_request.reasoning): where each sequence's text stands --
 * reasoning, answer, or between them -- so that a grammar constrains the
 * answer alone, the reasoning budget ends the reasoning on time, and the
 * reasoning's tokens are counted.
 *
 * Each sequence reads its own tokens through a reasoning split of its own
 * (src/tokenizer/reasoning.c, the one the server and the program use to
 * show the parts), fed from a text stream that shows control tokens, so
 * that the engine and the parts a client sees agree by construction.
 * Before each token the split says where the text stands:
 *
 *   answer     the grammar applies (from its first byte: it waited until
 *              now and took nothing before);
 *   reasoning  the grammar waits; the token counts toward the budget, and
 *              once the budget is spent the engine writes the marker that
 *              ends the reasoning, one token a step, instead of sampling;
 *   between    a harmony header, a tool call's arguments: the grammar
 *              waits, nothing counts;
 *   open       the answer may start here, or the reasoning (think, at the
 *              start) or a header (harmony, between messages): the grammar
 *              applies, and the tokens that open the other -- "<think>",
 *              harmony's "<|start|>" and "<|channel|>", where the
 *              vocabulary has them as single tokens -- are allowed besides.
 *              An opener taken leaves the grammar at its start; any other
 *              token is the answer's first, and the grammar applies from
 *              then on.
 *
 * The markers are text to the split, so a vocabulary may spell one in
 * several tokens, and a token may end a marker and go on with the
 * answer's first bytes, which the grammar never saw.  Such a token is
 * refused while a grammar waits: the engine draws again without it, as
 * if the grammar masked it, so the answer always starts with a token of
 * its own.  Everything here depends on the sequence's own tokens alone,
 * so a result is the same alone or batched.
 */
#include "engine_impl.h"

#include "reasoning.h"
#include "sampler.h"

/* The prompt's last tokens the split reads to know where the reply
 * starts (inside a block the template opened, in a message's body). */
#define PROMPT_END_TOKENS 32

/* The marker whose end starts the answer, for the check of tokens that
 * go past it (think's closing tag; harmony's header end, which ends
 * every header and so refuses a little more than needed). */
static const char *answer_marker(hearth_reasoning_format f)
{
    return f == HEARTH_REASONING_HARMONY ? "<|message|>" : "</think>";
}

/* The text that ends the reasoning and starts the answer. */
static const char *close_text(hearth_reasoning_format f)
{
    return f == HEARTH_REASONING_HARMONY ? "<|end|><|start|>assistant<|channel|>final<|message|>"
                                         : "</think>";
}

#define TAIL_BYTES 16 /* more than the longest answer marker */

struct thinking {
    hearth_text_stream *stream;  /* the text, control tokens shown */
    hearth_reasoning_split *split;
    enum reasoning_at at;        /* where the text stands now */
    int32_t forced;              /* the next token of req->close to write;
                                  * -1: not ending the reasoning */
    char tail[TAIL_BYTES];       /* the text's last bytes */
    int32_t n_tail;
    float *scratch;              /* logits with refused tokens, when needed */
};

/* The single token whose text is exactly text (control tokens shown), or
 * HEARTH_TOKEN_NONE. */
static hearth_token single_token(const hearth_vocab *v, const char *text, size_t len)
{
    hearth_token t = hearth_vocab_find(v, text, len);
    size_t n;
    const char *p = t == HEARTH_TOKEN_NONE ? NULL : hearth_token_piece(v, t, HEARTH_DECODE_SPECIAL, &n);
    return p && n == len && memcmp(p, text, len) == 0 ? t : HEARTH_TOKEN_NONE;
}

/* The closing marker in the vocabulary's tokens: the longest token at
 * each point.  Not the tokenizer's own encoding, which may put a
 * SentencePiece space in front: these tokens must give the marker's
 * bytes exactly, in the middle of a text. */
static hearth_status close_tokens(const hearth_vocab *v, hearth_reasoning_format f, struct request *r)
{
    const char *m = close_text(f);
    const size_t len = strlen(m);
    r->close = hearth_calloc(len, sizeof *r->close, "the reasoning's closing tokens");
    if (!r->close) return HEARTH_E_NOMEM;
    for (size_t at = 0; at < len;) {
        hearth_token t = HEARTH_TOKEN_NONE;
        size_t n = len - at;
        for (; n > 0 && t == HEARTH_TOKEN_NONE; n--) t = single_token(v, m + at, n);
        if (t == HEARTH_TOKEN_NONE || hearth_vocab_is_eog(v, t))
            return hearth_error(HEARTH_E_UNSUPPORTED, "a reasoning budget ends the reasoning with \"%s\", "
                                "which this vocabulary cannot write (at \"%s\")", m, m + at);
        r->close[r->n_close++] = t;
        at += n + 1;
    }
    return HEARTH_OK;
}

hearth_status engine_thinking_request(hearth_engine *e, struct request *r)
{
    const hearth_reasoning_format f = r->params.reasoning;
    if ((unsigned)f > HEARTH_REASONING_HARMONY)
        return hearth_error(HEARTH_E_INVALID, "reasoning format %d is not one of none, think or harmony", (int)f);
    if (f == HEARTH_REASONING_NONE) return HEARTH_OK;
    if (!e->vocab) return hearth_error(HEARTH_E_INVALID, "a reasoning format needs the model's tokenizer");
    const int32_t n_end = HEARTH_MIN(r->n_prompt, PROMPT_END_TOKENS);
    HEARTH_TRY(hearth_detokenize_alloc(e->vocab, r->prompt + r->n_prompt - n_end, (size_t)n_end,
                                       HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION, &r->prompt_end,
                                       &r->prompt_end_len));
    static const char *const openers[][2] = {{"<think>", NULL}, {"<|start|>", "<|channel|>"}};
    for (int i = 0; i < 2; i++) {
        const char *o = openers[f == HEARTH_REASONING_HARMONY][i];
        hearth_token t = o ? single_token(e->vocab, o, strlen(o)) : HEARTH_TOKEN_NONE;
        if (t != HEARTH_TOKEN_NONE) r->openers[r->n_openers++] = t;
    }
    return r->params.reasoning_budget >= 0 ? close_tokens(e->vocab, f, r) : HEARTH_OK;
}

void engine_thinking_request_free(struct request *r)
{
    hearth_free(r->prompt_end);
    free(r->close);
}

void engine_thinking_seq_free(struct seq *s)
{
    struct thinking *th = s->thinking;
    if (!th) return;
    hearth_text_stream_free(th->stream);
    hearth_reasoning_split_free(th->split);
    free(th->scratch);
    free(th);
    s->thinking = NULL;
}

hearth_status engine_thinking_seq_new(hearth_engine *e, struct seq *s)
{
    const struct request *r = s->req;
    if (r->params.reasoning == HEARTH_REASONING_NONE) return HEARTH_OK;
    struct thinking *th = hearth_calloc(1, sizeof *th, "a sequence's reasoning");
    if (!th) return HEARTH_E_NOMEM;
    s->thinking = th;
    th->forced = -1;
    const hearth_text_stream_options o = {.decode_flags = HEARTH_DECODE_SPECIAL | HEARTH_DECODE_CONTINUATION};
    HEARTH_TRY(hearth_text_stream_new(e->vocab, &o, &th->stream));
    HEARTH_TRY(hearth_reasoning_split_new(r->params.reasoning, r->prompt_end, r->prompt_end_len, &th->split));
    th->at = reasoning_split_at(th->split);
    return HEARTH_OK;
}

/* Whether s's grammar waits for the answer. */
static bool grammar_waits(const struct seq *s)
{
    return s->req->params.sampling.grammar && !sampler_grammar_started(s->sampler);
}

hearth_token engine_thinking_next(struct seq *s)
{
    struct thinking *th = s->thinking;
    if (!th) return -1;
    const struct request *r = s->req;
    const int32_t budget = r->params.reasoning_budget;
    /* a grammar that has started owns the text; no marker may go in */
    if (th->forced < 0 && th->at == REASONING_AT_REASONING && budget >= 0 && s->stats.n_reasoning >= budget &&
        r->n_close > 0 && (!r->params.sampling.grammar || grammar_waits(s)))
        th->forced = 0;
    if (th->forced >= 0) {
        /* the marker's tokens pass the grammar by, wherever they lead */
        sampler_grammar_mode(s->sampler, SAMPLER_GRAMMAR_WAIT, NULL, 0);
        return r->close[th->forced];
    }
    switch (th->at) {
    case REASONING_AT_ANSWER: sampler_grammar_mode(s->sampler, SAMPLER_GRAMMAR_ON, NULL, 0); break;
    case REASONING_AT_OPEN:
        sampler_grammar_mode(s->sampler, SAMPLER_GRAMMAR_OPEN, r->openers, r->n_openers);
        break;
    default: sampler_grammar_mode(s->sampler, SAMPLER_GRAMMAR_WAIT, NULL, 0); break;
    }
    return -1;
}

/* Whether token t would end the answer's marker and go on past it (see
 * the top of the file). */
static bool goes_past_marker(const hearth_vocab *v, const struct thinking *th, hearth_reasoning_format f,
                             hearth_token t)
{
    const char *m = answer_marker(f);
    const size_t nm = strlen(m);
    size_t n;
    const char *p = hearth_token_piece(v, t, HEARTH_DECODE_SPECIAL, &n);
    if (!p || n < 2) return false;
    char text[TAIL_BYTES + 64];
    const size_t n_piece = HEARTH_MIN(n, sizeof text - (size_t)th->n_tail);
    memcpy(text, th->tail, (size_t)th->n_tail);
    memcpy(text + th->n_tail, p, n_piece);
    const size_t len = (size_t)th->n_tail + n_piece;
    /* a marker ending inside the piece, before its last byte */
    for (size_t end = (size_t)th->n_tail + 1; end < len; end++)
        if (end >= nm && memcmp(text + end - nm, m, nm) == 0) return true;
    return false;
}

hearth_status engine_thinking_sample(hearth_engine *e, struct seq *s, const float *logits, hearth_token *out)
{
    struct thinking *th = s->thinking;
    HEARTH_TRY(hearth_sampler_sample(s->sampler, logits, out));
    if (!th || !grammar_waits(s) || th->at == REASONING_AT_ANSWER || th->at == REASONING_AT_OPEN) return HEARTH_OK;
    const hearth_reasoning_format f = s->req->params.reasoning;
    const int32_t V = hearth_model_n_vocab(e->model);
    while (goes_past_marker(e->vocab, th, f, *out)) {
        if (logits != th->scratch) {
            if (!th->scratch) th->scratch = hearth_calloc((size_t)V, sizeof *th->scratch, "logits without refused tokens");
            if (!th->scratch) return HEARTH_E_NOMEM;
            memcpy(th->scratch, logits, (size_t)V * sizeof *th->scratch);
            logits = th->scratch;
        }
        th->scratch[*out] = -INFINITY;
        HEARTH_TRY(hearth_sampler_sample(s->sampler, logits, out));
    }
    return HEARTH_OK;
}

hearth_status engine_thinking_take(struct seq *s, hearth_token t)
{
    struct thinking *th = s->thinking;
    if (!th) return HEARTH_OK;
    const struct request *r = s->req;
    const bool forced = th->forced >= 0;
    if (forced && ++th->forced == r->n_close) th->forced = -1;
    const enum reasoning_at before = th->at;
    const char *text;
    size_t len;
    HEARTH_TRY(hearth_text_stream_push_token(th->stream, t, &text, &len));
    if (th->split) {
        hearth_reasoning_text parts;
        if (hearth_reasoning_split_push(th->split, text, len, &parts) == HEARTH_OK) {
            th->at = reasoning_split_at(th->split);
        } else {
            /* past the split's limits (harmony's tool calls), as for the
             * client's split: the rest is the answer */
            hearth_reasoning_split_free(th->split);
            th->split = NULL;
            th->at = REASONING_AT_ANSWER;
        }
    }
    /* the text's last bytes, for goes_past_marker() */
    if (len >= TAIL_BYTES) {
        memcpy(th->tail, text + len - TAIL_BYTES, TAIL_BYTES);
        th->n_tail = TAIL_BYTES;
    } else {
        const int32_t keep = HEARTH_MIN(th->n_tail, TAIL_BYTES - (int32_t)len);
        memmove(th->tail, th->tail + th->n_tail - keep, (size_t)keep);
        memcpy(th->tail + keep, text, len);
        th->n_tail = keep + (int32_t)len;
    }
    if (!forced && before == REASONING_AT_REASONING && th->at == REASONING_AT_REASONING) s->stats.n_reasoning++;
    return HEARTH_OK;
}
