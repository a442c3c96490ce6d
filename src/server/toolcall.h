/*
 * toolcall.h -- tool calls in chat completions: which syntax the model
 * writes them in (chosen from its chat template), reading them out of
 * the generated text as it comes (so that a stream sends each call's
 * arguments as they are generated), how much of a stream may be sent
 * before a call could begin, and the grammars that force calls.
 *
 * The formats (what the model writes; JSON objects may hold any
 * whitespace, and text may come before the first call):
 *
 *   hermes   <tool_call>{"name": N, "arguments": {...}}</tool_call>, one
 *            block per call (Hermes fine-tunes, Qwen 2.5, the fallback)
 *   llama3   {"name": N, "parameters": {...}} (or "arguments") as the whole
 *            reply, or after <|python_tag|>; several separated by ';'
 *   mistral  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]
 *   harmony  a commentary message to functions.N (gpt-oss): read by the
 *            reasoning split (hearth.h) apart from the answer, never
 *            found in the text; srv_tool_calls_add() takes its calls
 *   kimi     <|tool_calls_section_begin|>, then per call
 *            <|tool_call_begin|>functions.N:K<|tool_call_argument_begin|>
 *            {...}<|tool_call_end|>, then <|tool_calls_section_end|>
 *            (Kimi-K2); the call's id is the model's functions.N:K, which
 *            the template writes back before the call's result
 *
 * Everything here is a pure function of its arguments: no model, no
 * server.  Text that is not in the format (malformed JSON, a call
 * without a name) is not a tool call: the caller gives it to the client
 * as content (see struct srv_tool_parser for text that leaves the format
 * after a call has begun).
 */
#ifndef HEARTH_SERVER_TOOLCALL_H
#define HEARTH_SERVER_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "hearth.h"

enum srv_tool_format { SRV_TOOLS_HERMES = 0, SRV_TOOLS_LLAMA3, SRV_TOOLS_MISTRAL, SRV_TOOLS_HARMONY, SRV_TOOLS_KIMI };

/* "hermes", "llama3", "mistral", "harmony", "kimi". */
const char *srv_tool_format_name(enum srv_tool_format f);

/* The format of a chat template: builtin is the name of a built-in
 * template (or NULL), text the template's source (or NULL).  The source
 * decides by what it writes ("<|channel|>", "<|tool_calls_section_begin|>",
 * "<tool_call>", "[TOOL_CALLS]", "<|python_tag|>" or the ipython role);
 * the built-ins by family; the rest get hermes. */
enum srv_tool_format srv_tool_format_detect(const char *builtin, const char *text);

struct srv_tool_call {
    char *name;
    char *arguments;          /* JSON text (see below), NUL-terminated */
    size_t arguments_len;
    char *id;                 /* the id the model wrote (kimi), or NULL: the server makes one */
};

struct srv_tool_calls {
    char *content;            /* the text that is not calls (NULL when empty), NUL-terminated */
    size_t content_len;
    struct srv_tool_call *calls;
    size_t n;
};

/*
 * Reading calls as the text comes (a stream), and the whole text at once
 * the same way: a parser is fed the text so far, again and again, each
 * time a longer text that begins with the last (text[0..len) is all of
 * it, not the new part).  After each feed, out holds what is known:
 *
 *   out.content[0..content_final)  content that no later text changes:
 *                 the text before the first call, less a start marker
 *                 that may be coming (or a prefix of one) and the
 *                 whitespace before it; for llama3 a reply that begins
 *                 with '{' is held until it is read;
 *   out.calls[0..out.n)  the calls begun so far: a call is added once its
 *                 name is known and its arguments have begun, and from
 *                 then on only its arguments grow (by appending), until
 *                 the next call is added or the text ends.
 *
 * The arguments are the model's JSON object with the whitespace between
 * its tokens left out, the rest (strings, escapes, numbers) as written:
 * a delta of the text is a delta of the arguments.  Arguments the model
 * wrote as a JSON string holding the object are decoded and come whole,
 * when the string ends.  The text is read until it leaves the format:
 * a call not yet added is then content, from where it began (so that
 * text without calls is content, whole); a call already added stays,
 * its arguments as far as they were written (also a call cut short by
 * the end of the text), and the text from where the format was left is
 * content after the calls.  Where the text ends after a call, what was
 * begun of the next one (before its name), or of a marker, is dropped.
 * A call's JSON is checked as it comes (UTF-8, escapes, numbers, nesting
 * up to 128 deep).
 */
struct srv_tool_parser {
    enum srv_tool_format f;
    struct srv_tool_calls out;
    size_t content_final;
    bool oom;                 /* memory ran out: nothing more is read */
    /* private */
    size_t pos, content_cap, args_cap, args_len, mark, call_at, group_at, lit_at, key_at, value_at, id_at;
    char *args, *name, *id;   /* the call being read, until it is added */
    int state, next, co, key, args_mode, lits;
    bool in_call, added;      /* a call is being read; it has been added */
    struct srv_json_scan {
        int st, sub, depth;
        bool in_key;
        unsigned char stack[128];
    } js;
};

void srv_tool_parser_init(struct srv_tool_parser *p, enum srv_tool_format f);
/* Read text[pos..len) where text[0..len) is all the text so far. */
void srv_tool_parser_feed(struct srv_tool_parser *p, const char *text, size_t len);
/* The end of the text: a call begun but not added is content. */
void srv_tool_parser_finish(struct srv_tool_parser *p, const char *text, size_t len);
void srv_tool_parser_free(struct srv_tool_parser *p);

/* The tool calls in text[0..len), read as a parser reads the whole text:
 * true with *out filled (free it with srv_tool_calls_free()) when the
 * text holds one call or more, false (nothing to free) when it is plain
 * content (or memory ran out). */
bool srv_tool_calls_parse(enum srv_tool_format f, const char *text, size_t len,
                          struct srv_tool_calls *out);
void srv_tool_calls_free(struct srv_tool_calls *c);

/* Add a call read elsewhere (harmony's): arguments[0..len) as the model
 * wrote them, compacted when they are a JSON object (or a string holding
 * one), else kept as they are, since a client reads them as text.  false
 * when memory ran out or the calls are too many. */
bool srv_tool_calls_add(struct srv_tool_calls *c, const char *name, const char *arguments, size_t len);

/* Streaming: how many bytes of text[0..len) may be sent as content now.
 * What follows may still become (the start of) a tool call: a start
 * marker or a prefix of one, the whitespace before it, and for llama3 a
 * reply that begins with '{'.  Later text never lowers the answer below
 * what it was for a prefix of the text. */
size_t srv_tool_calls_safe_len(enum srv_tool_format f, const char *text, size_t len);

/* GBNF that lets the output be exactly one tool call in format f: of the
 * tool named `name`, or of any tool in tools_json (a JSON array of
 * {"type": "function", "function": {"name", "parameters"?}}, as checked
 * by the request) when name is NULL; the arguments follow the tool's
 * parameters schema.  Harmony forces one tool only (named, or the only
 * one).  *out is for free().  false with the reason in
 * why[0..why_len) when a schema cannot be translated (or memory ran
 * out). */
bool srv_tool_calls_grammar(enum srv_tool_format f, const char *tools_json, const char *name,
                            char **out, char *why, size_t why_len);
/* The same, of one call or more when several (parallel_tool_calls): the
 * calls one after another as the format writes several -- hermes' blocks
 * on lines of their own, llama3's separated by "; ", mistral's in one
 * list, kimi's in one section (their indices a digit or two).  Harmony
 * writes one call per message: its grammar is of one call either way. */
bool srv_tool_calls_grammar_n(enum srv_tool_format f, const char *tools_json, const char *name, bool several,
                              char **out, char *why, size_t why_len);

#endif /* HEARTH_SERVER_TOOLCALL_H */
