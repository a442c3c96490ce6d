/*
 * hearth.h -- the public interface of libhearth, a CPU-first LLM inference
 * engine for GGUF models.
 *
 * This is the only installed header.  Every object is an opaque handle,
 * every name starts with hearth_, and every fallible call returns a
 * hearth_status.  When a call fails, hearth_last_error() gives a message
 * naming what was wrong (the file, the byte offset, the parameter); the
 * message belongs to the calling thread and stays valid until that thread's
 * next failing call.  The library never prints, exits or aborts.
 */
#ifndef HEARTH_H
#define HEARTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HEARTH_VERSION_MAJOR 0
#define HEARTH_VERSION_MINOR 1
#define HEARTH_VERSION_PATCH 0

/* The library's version as "MAJOR.MINOR.PATCH". */
const char *hearth_version(void);

/* ------------------------------------------------------------------------
 * Status codes and errors
 * ------------------------------------------------------------------------ */

typedef enum hearth_status {
    HEARTH_OK = 0,
    HEARTH_E_INVALID = 1,     /* an argument is out of its documented range */
    HEARTH_E_NOMEM = 2,       /* memory allocation failed */
    HEARTH_E_IO = 3,          /* reading or writing a file failed */
    HEARTH_E_FORMAT = 4,      /* malformed input: file, text, JSON, template */
    HEARTH_E_UNSUPPORTED = 5, /* valid input this build cannot handle */
    HEARTH_E_NOT_FOUND = 6,   /* a key, tensor, token or file does not exist */
    HEARTH_E_RANGE = 7,       /* a limit was reached (context full, ...) */
    HEARTH_E_TEMPLATE = 8,    /* a chat template raised an exception */
    HEARTH_E_BACKEND = 9,     /* a compute backend (OpenCL) failed */
    HEARTH_E_NETWORK = 10,    /* a download failed */
    HEARTH_E_INTERRUPTED = 11,/* the caller asked to stop */
    HEARTH_E_INTERNAL = 12    /* a bug in hearth: please report it */
} hearth_status;

/* A short, static description of a status code ("malformed input"). */
const char *hearth_strerror(hearth_status status);

/* The detailed message of the calling thread's last failure ("" if none). */
const char *hearth_last_error(void);

/* ------------------------------------------------------------------------
 * Tensor types
 *
 * The values are those of the GGUF format, so a type read from a file can be
 * used directly.  Every type known to the format is listed so that any valid
 * file can be read and inspected; hearth_type_can_compute() tells which ones
 * the engine can run.
 * ------------------------------------------------------------------------ */

typedef enum hearth_type {
    HEARTH_TYPE_F32 = 0,
    HEARTH_TYPE_F16 = 1,
    HEARTH_TYPE_Q4_0 = 2,
    HEARTH_TYPE_Q4_1 = 3,
    HEARTH_TYPE_Q5_0 = 6,
    HEARTH_TYPE_Q5_1 = 7,
    HEARTH_TYPE_Q8_0 = 8,
    HEARTH_TYPE_Q8_1 = 9,
    HEARTH_TYPE_Q2_K = 10,
    HEARTH_TYPE_Q3_K = 11,
    HEARTH_TYPE_Q4_K = 12,
    HEARTH_TYPE_Q5_K = 13,
    HEARTH_TYPE_Q6_K = 14,
    HEARTH_TYPE_Q8_K = 15,
    HEARTH_TYPE_IQ2_XXS = 16,
    HEARTH_TYPE_IQ2_XS = 17,
    HEARTH_TYPE_IQ3_XXS = 18,
    HEARTH_TYPE_IQ1_S = 19,
    HEARTH_TYPE_IQ4_NL = 20,
    HEARTH_TYPE_IQ3_S = 21,
    HEARTH_TYPE_IQ2_S = 22,
    HEARTH_TYPE_IQ4_XS = 23,
    HEARTH_TYPE_I8 = 24,
    HEARTH_TYPE_I16 = 25,
    HEARTH_TYPE_I32 = 26,
    HEARTH_TYPE_I64 = 27,
    HEARTH_TYPE_F64 = 28,
    HEARTH_TYPE_IQ1_M = 29,
    HEARTH_TYPE_BF16 = 30,
    HEARTH_TYPE_TQ1_0 = 34,
    HEARTH_TYPE_TQ2_0 = 35,
    HEARTH_TYPE_COUNT = 36    /* one past the largest value */
} hearth_type;

/* "Q4_K", "F16", ...; NULL for a value that is not a known type. */
const char *hearth_type_name(hearth_type type);
/* The type with that name (case-insensitive), or HEARTH_E_NOT_FOUND. */
hearth_status hearth_type_from_name(const char *name, hearth_type *out);
/* Elements per block (1 for plain types, 32 or 256 for quantized ones);
 * 0 for an unknown type. */
int64_t hearth_type_block_elems(hearth_type type);
/* Bytes per block; 0 for an unknown type. */
size_t hearth_type_block_bytes(hearth_type type);
/* Bytes of a row of n elements, or 0 when n is not a multiple of the block
 * size or the type is unknown. */
size_t hearth_type_row_bytes(hearth_type type, int64_t n);
/* Whether hearth can dequantize and compute with this type. */
bool hearth_type_can_compute(hearth_type type);

/* ------------------------------------------------------------------------
 * GGUF files
 *
 * A reader maps the file read-only and checks all of it before returning:
 * afterwards every accessor is safe.  Strings inside the file are not
 * NUL-terminated; they are returned as pointer + length, except keys and the
 * values returned by hearth_gguf_get_str(), which are NUL-terminated copies.
 * ------------------------------------------------------------------------ */

typedef struct hearth_gguf hearth_gguf;

typedef enum hearth_gguf_type {
    HEARTH_GGUF_UINT8 = 0,
    HEARTH_GGUF_INT8 = 1,
    HEARTH_GGUF_UINT16 = 2,
    HEARTH_GGUF_INT16 = 3,
    HEARTH_GGUF_UINT32 = 4,
    HEARTH_GGUF_INT32 = 5,
    HEARTH_GGUF_FLOAT32 = 6,
    HEARTH_GGUF_BOOL = 7,
    HEARTH_GGUF_STRING = 8,
    HEARTH_GGUF_ARRAY = 9,
    HEARTH_GGUF_UINT64 = 10,
    HEARTH_GGUF_INT64 = 11,
    HEARTH_GGUF_FLOAT64 = 12
} hearth_gguf_type;

/* "uint32", "string", "array", ...; NULL for an unknown value. */
const char *hearth_gguf_type_name(hearth_gguf_type type);

/* One metadata value.  For numbers the field matching the type is set
 * (unsigned types in u, signed in i, floats in f, bools in b).  For arrays,
 * arr.elem_type and arr.n describe the elements, read them with
 * hearth_gguf_array_get(). */
typedef struct hearth_gguf_value {
    hearth_gguf_type type;
    union {
        uint64_t u;
        int64_t i;
        double f;
        bool b;
        struct { const char *ptr; uint64_t len; } str;
        struct { hearth_gguf_type elem_type; uint64_t n; const void *priv; } arr;
    } v;
} hearth_gguf_value;

typedef struct hearth_gguf_tensor {
    const char *name;      /* NUL-terminated */
    hearth_type type;
    uint32_t n_dims;       /* 1..4 */
    int64_t ne[4];         /* elements per dimension, ne[0] innermost; unused = 1 */
    uint64_t offset;       /* from the start of the data section */
    size_t bytes;          /* size of the data */
    const void *data;      /* the data, inside the mapping */
} hearth_gguf_tensor;

/* Open and validate a GGUF file (v2 or v3). */
hearth_status hearth_gguf_open(const char *path, hearth_gguf **out);
/* The same for a file already in memory (not copied: it must outlive the
 * handle).  name is used in error messages. */
hearth_status hearth_gguf_open_memory(const void *data, size_t size,
                                      const char *name, hearth_gguf **out);
void hearth_gguf_close(hearth_gguf *gguf);

uint32_t hearth_gguf_version(const hearth_gguf *gguf);
uint32_t hearth_gguf_alignment(const hearth_gguf *gguf);
uint64_t hearth_gguf_data_offset(const hearth_gguf *gguf);
uint64_t hearth_gguf_file_size(const hearth_gguf *gguf);
const char *hearth_gguf_path(const hearth_gguf *gguf);

/* Metadata by index (0 .. n_kv-1) or by key. */
int64_t hearth_gguf_n_kv(const hearth_gguf *gguf);
const char *hearth_gguf_kv_key(const hearth_gguf *gguf, int64_t index);
hearth_status hearth_gguf_kv_value(const hearth_gguf *gguf, int64_t index,
                                   hearth_gguf_value *out);
/* Index of key, or -1 when missing. */
int64_t hearth_gguf_find_key(const hearth_gguf *gguf, const char *key);
/* Element j of an array value (which may itself be an array). */
hearth_status hearth_gguf_array_get(const hearth_gguf *gguf,
                                    const hearth_gguf_value *array, uint64_t j,
                                    hearth_gguf_value *out);

/* Typed accessors.  Each returns HEARTH_E_NOT_FOUND when the key is missing
 * (out untouched), HEARTH_E_FORMAT when the value has another type or does
 * not fit (any integer type is accepted when the value fits, any float type
 * for f32/f64). */
hearth_status hearth_gguf_get_u32(const hearth_gguf *gguf, const char *key, uint32_t *out);
hearth_status hearth_gguf_get_i32(const hearth_gguf *gguf, const char *key, int32_t *out);
hearth_status hearth_gguf_get_u64(const hearth_gguf *gguf, const char *key, uint64_t *out);
hearth_status hearth_gguf_get_i64(const hearth_gguf *gguf, const char *key, int64_t *out);
hearth_status hearth_gguf_get_f32(const hearth_gguf *gguf, const char *key, float *out);
hearth_status hearth_gguf_get_f64(const hearth_gguf *gguf, const char *key, double *out);
hearth_status hearth_gguf_get_bool(const hearth_gguf *gguf, const char *key, bool *out);
/* A NUL-terminated copy owned by the handle. */
hearth_status hearth_gguf_get_str(const hearth_gguf *gguf, const char *key, const char **out);
/* An array value; its elements through hearth_gguf_array_get(). */
hearth_status hearth_gguf_get_array(const hearth_gguf *gguf, const char *key,
                                    hearth_gguf_value *out);

/* Tensors by index (0 .. n_tensors-1) or name (NULL when missing). */
int64_t hearth_gguf_n_tensors(const hearth_gguf *gguf);
const hearth_gguf_tensor *hearth_gguf_tensor_at(const hearth_gguf *gguf, int64_t index);
const hearth_gguf_tensor *hearth_gguf_find_tensor(const hearth_gguf *gguf, const char *name);

/* Writer: collects metadata and tensors, then writes a GGUF v3 file.
 * Tensor data is not copied; it must stay valid until the file is written. */
typedef struct hearth_gguf_writer hearth_gguf_writer;

hearth_status hearth_gguf_writer_new(hearth_gguf_writer **out);
void hearth_gguf_writer_free(hearth_gguf_writer *writer);
/* Metadata; setting an existing key replaces its value. */
hearth_status hearth_gguf_writer_set_u8(hearth_gguf_writer *w, const char *key, uint8_t value);
hearth_status hearth_gguf_writer_set_i8(hearth_gguf_writer *w, const char *key, int8_t value);
hearth_status hearth_gguf_writer_set_u16(hearth_gguf_writer *w, const char *key, uint16_t value);
hearth_status hearth_gguf_writer_set_i16(hearth_gguf_writer *w, const char *key, int16_t value);
hearth_status hearth_gguf_writer_set_u32(hearth_gguf_writer *w, const char *key, uint32_t value);
hearth_status hearth_gguf_writer_set_i32(hearth_gguf_writer *w, const char *key, int32_t value);
hearth_status hearth_gguf_writer_set_u64(hearth_gguf_writer *w, const char *key, uint64_t value);
hearth_status hearth_gguf_writer_set_i64(hearth_gguf_writer *w, const char *key, int64_t value);
hearth_status hearth_gguf_writer_set_f32(hearth_gguf_writer *w, const char *key, float value);
hearth_status hearth_gguf_writer_set_f64(hearth_gguf_writer *w, const char *key, double value);
hearth_status hearth_gguf_writer_set_bool(hearth_gguf_writer *w, const char *key, bool value);
hearth_status hearth_gguf_writer_set_str(hearth_gguf_writer *w, const char *key, const char *value);
/* An array of n numbers or bools of elem_type, packed as in the file. */
hearth_status hearth_gguf_writer_set_array(hearth_gguf_writer *w, const char *key,
                                           hearth_gguf_type elem_type,
                                           const void *data, uint64_t n);
hearth_status hearth_gguf_writer_set_str_array(hearth_gguf_writer *w, const char *key,
                                               const char *const *strs, uint64_t n);
/* Copy one metadata entry (any type, nested arrays included) from a reader. */
hearth_status hearth_gguf_writer_copy_kv(hearth_gguf_writer *w, const hearth_gguf *src,
                                         int64_t index);
hearth_status hearth_gguf_writer_set_alignment(hearth_gguf_writer *w, uint32_t alignment);
/* ne[0] is the innermost dimension; bytes must equal the size implied by
 * type and shape. */
hearth_status hearth_gguf_writer_add_tensor(hearth_gguf_writer *w, const char *name,
                                            hearth_type type, uint32_t n_dims,
                                            const int64_t *ne, const void *data,
                                            size_t bytes);
hearth_status hearth_gguf_writer_write(hearth_gguf_writer *w, const char *path);

/* == tokenizer ========================================================== */

/*
 * A vocabulary is read from the tokenizer.ggml.* metadata of an open GGUF
 * file (a whole model or a vocabulary-only file).  It copies what it needs,
 * so the GGUF handle may be closed afterwards, and it never changes once
 * loaded: every function of this section may be called on one vocabulary
 * from any number of threads at once.  Two kinds are supported:
 *
 *  - tokenizer.ggml.model "llama": SentencePiece BPE, where adjacent pieces
 *    are merged by descending score, spaces are written U+2581, a space is
 *    put in front of the text (tokenizer.ggml.add_space_prefix, default
 *    true) and characters without a piece become byte tokens <0xXX>;
 *  - tokenizer.ggml.model "gpt2": byte-level BPE, where the text is first
 *    cut into words by the pre-tokenizer that tokenizer.ggml.pre names,
 *    each byte is written as a printable character, and adjacent symbols
 *    are merged in the order of tokenizer.ggml.merges.
 *
 * Token ids are int32_t; HEARTH_TOKEN_NONE stands for "no such token".
 */
typedef struct hearth_vocab hearth_vocab;

typedef int32_t hearth_token;
#define HEARTH_TOKEN_NONE ((hearth_token)-1)

typedef enum hearth_vocab_kind {
    HEARTH_VOCAB_SPM = 1, /* SentencePiece BPE ("llama") */
    HEARTH_VOCAB_BPE = 2  /* byte-level BPE ("gpt2") */
} hearth_vocab_kind;

/* Token types, with the values tokenizer.ggml.token_type stores. */
typedef enum hearth_token_type {
    HEARTH_TOKEN_UNDEFINED = 0,
    HEARTH_TOKEN_NORMAL = 1,
    HEARTH_TOKEN_UNKNOWN = 2,      /* the <unk> token */
    HEARTH_TOKEN_CONTROL = 3,      /* <s>, <|im_start|>, ...: hidden in output */
    HEARTH_TOKEN_USER_DEFINED = 4, /* added pieces, shown as their text */
    HEARTH_TOKEN_UNUSED = 5,
    HEARTH_TOKEN_BYTE = 6          /* <0xXX> byte-fallback tokens */
} hearth_token_type;

/* The tokens a vocabulary may designate (hearth_vocab_special()). */
typedef enum hearth_special_token {
    HEARTH_SPECIAL_BOS = 0, /* beginning of sequence */
    HEARTH_SPECIAL_EOS,     /* end of sequence */
    HEARTH_SPECIAL_EOT,     /* end of turn (<|eot_id|>, <|im_end|>, ...) */
    HEARTH_SPECIAL_EOM,     /* end of message (<|eom_id|>) */
    HEARTH_SPECIAL_UNK,     /* unknown */
    HEARTH_SPECIAL_PAD,     /* padding */
    HEARTH_SPECIAL_SEP,     /* separator */
    HEARTH_SPECIAL_COUNT
} hearth_special_token;

typedef struct hearth_vocab_options {
    /* When tokenizer.ggml.pre names a pre-tokenizer this build does not
     * know, use the default one (GPT-2's) instead of failing.  Tokens may
     * then differ from the model's own tokenizer. */
    bool force_default_pretokenizer;
} hearth_vocab_options;

/* Load the vocabulary of gguf; options may be NULL for the defaults.
 * Fails with HEARTH_E_NOT_FOUND when the file has no tokenizer, with
 * HEARTH_E_FORMAT when its metadata is inconsistent (naming the key and
 * the index), and with HEARTH_E_UNSUPPORTED for an unknown tokenizer model
 * or pre-tokenizer (the message lists the supported ones) or for a
 * byte-level BPE vocabulary in a build without PCRE2. */
hearth_status hearth_vocab_load(const hearth_gguf *gguf, const hearth_vocab_options *options,
                                hearth_vocab **out);
void hearth_vocab_free(hearth_vocab *vocab);

hearth_vocab_kind hearth_vocab_get_kind(const hearth_vocab *vocab);
/* The pre-tokenizer in use ("gpt-2", "llama-bpe", "qwen2", ...); "" for
 * SentencePiece vocabularies. */
const char *hearth_vocab_pretokenizer(const hearth_vocab *vocab);
/* The pre-tokenizer names this build accepts, comma-separated (static). */
const char *hearth_vocab_supported_pretokenizers(void);

int32_t hearth_vocab_n_tokens(const hearth_vocab *vocab);
/* The id of a designated token, or HEARTH_TOKEN_NONE. */
hearth_token hearth_vocab_special(const hearth_vocab *vocab, hearth_special_token which);
/* Whether tokenizing with HEARTH_TOKENIZE_ADD_SPECIAL puts BOS in front
 * and EOS at the end (tokenizer.ggml.add_bos_token / add_eos_token, or
 * the vocabulary kind's default). */
bool hearth_vocab_adds_bos(const hearth_vocab *vocab);
bool hearth_vocab_adds_eos(const hearth_vocab *vocab);
/* Whether generating this token ends the generation: EOS, EOT, EOM and
 * the end-of-turn markers models are known to use. */
bool hearth_vocab_is_eog(const hearth_vocab *vocab, hearth_token token);
/* The type of a token; HEARTH_TOKEN_UNDEFINED for an id out of range. */
hearth_token_type hearth_vocab_token_type(const hearth_vocab *vocab, hearth_token token);
/* The token's text as the vocabulary stores it (U+2581 for spaces in
 * SentencePiece, byte-level characters in BPE), not NUL-terminated;
 * NULL for an id out of range.  Valid as long as the vocabulary. */
const char *hearth_vocab_token_text(const hearth_vocab *vocab, hearth_token token, size_t *len);
/* The token whose stored text is exactly text[0..len), or HEARTH_TOKEN_NONE. */
hearth_token hearth_vocab_find(const hearth_vocab *vocab, const char *text, size_t len);

/* Flags of hearth_tokenize(). */
#define HEARTH_TOKENIZE_ADD_SPECIAL 0x1u   /* BOS/EOS as the vocabulary says */
#define HEARTH_TOKENIZE_PARSE_SPECIAL 0x2u /* match control and user-defined
                                              tokens' text ("<|im_start|>");
                                              without it such text is
                                              ordinary text */

/* Tokenize text[0..len) (any bytes; invalid UTF-8 is encoded byte by byte
 * where the vocabulary can).  Up to capacity ids go to tokens and the
 * number the whole text needs to *n_tokens.  When that is more than
 * capacity, the call returns HEARTH_E_RANGE and the caller may retry with
 * a buffer of *n_tokens ids (a capacity of len + 8 almost always
 * suffices).  tokens may be NULL when capacity is 0.  With
 * HEARTH_TOKENIZE_PARSE_SPECIAL the longest special token starting at a
 * position wins, and SentencePiece puts its space in front of the text
 * after each special token as at the start. */
hearth_status hearth_tokenize(const hearth_vocab *vocab, const char *text, size_t len,
                              unsigned flags, hearth_token *tokens, size_t capacity,
                              size_t *n_tokens);

/* Flags of hearth_token_piece(), hearth_detokenize() and text streams. */
#define HEARTH_DECODE_SPECIAL 0x1u      /* show control and unknown tokens'
                                           text instead of hiding them */
#define HEARTH_DECODE_CONTINUATION 0x2u /* the tokens continue earlier text:
                                           keep the leading space of the first
                                           piece (SentencePiece removes the
                                           space it put in front of a text) */

/* The bytes one token stands for (a space for U+2581, the byte of a byte
 * token or of a byte-level character), not NUL-terminated and not always
 * whole UTF-8 characters; empty for a hidden control token.  Only the
 * HEARTH_DECODE_SPECIAL flag matters here.  NULL for an id out of range.
 * Valid as long as the vocabulary. */
const char *hearth_token_piece(const hearth_vocab *vocab, hearth_token token, unsigned flags,
                               size_t *len);

/* The bytes of a token sequence: its pieces concatenated, without the
 * space SentencePiece puts in front of a text unless
 * HEARTH_DECODE_CONTINUATION is given.  Up to capacity bytes go to text
 * (not NUL-terminated) and the total to *len; HEARTH_E_RANGE when it did
 * not fit, HEARTH_E_INVALID for an id out of range.  The result is the
 * text's bytes, which need not be valid UTF-8; a hearth_text_stream gives
 * displayable text. */
hearth_status hearth_detokenize(const hearth_vocab *vocab, const hearth_token *tokens,
                                size_t n_tokens, unsigned flags, char *text, size_t capacity,
                                size_t *len);

/* == chat templates ===================================================== */

/* == streaming text ===================================================== */

/*
 * A text stream turns generated tokens (or raw bytes) into text a client
 * can be shown as it arrives:
 *
 *  - only whole, valid UTF-8 comes out: a character whose bytes are spread
 *    over several tokens is held until it is complete, and ill-formed
 *    bytes become U+FFFD, one per maximal subpart as the Unicode Standard
 *    (chapter 3, "U+FFFD substitution of maximal subparts") recommends;
 *  - stop strings: text that could be the start of a stop string is held
 *    back until it is known not to be one; when a stop string is
 *    completed, the text before it is returned, the stop string itself and
 *    anything after it never are, and the stream reports which one it was.
 *    The stream ends at the first stop string to be completed; of several
 *    completed by the same byte, the longest (earliest-starting) one wins.
 *
 * A stream belongs to one sequence and is not thread-safe; it may be used
 * from different threads one call at a time.  The vocabulary must outlive
 * it.  Text returned by a call stays valid until the next call on the
 * stream.
 */
typedef struct hearth_text_stream hearth_text_stream;

typedef struct hearth_text_stream_options {
    unsigned decode_flags;    /* HEARTH_DECODE_* for tokens pushed; a stream
                                 of generated tokens after a prompt wants
                                 HEARTH_DECODE_CONTINUATION */
    const char *const *stop;  /* stop strings: non-empty, valid UTF-8,
                                 NUL-terminated; copied */
    size_t n_stop;
} hearth_text_stream_options;

/* A stream decoding tokens of vocab; vocab may be NULL for a stream fed
 * only with hearth_text_stream_push_bytes().  options may be NULL (no stop
 * strings, flags 0).  HEARTH_E_INVALID for an empty or ill-formed stop
 * string. */
hearth_status hearth_text_stream_new(const hearth_vocab *vocab,
                                     const hearth_text_stream_options *options,
                                     hearth_text_stream **out);
void hearth_text_stream_free(hearth_text_stream *stream);
/* Forget everything pushed, to start a new text with the same options. */
void hearth_text_stream_reset(hearth_text_stream *stream);

/* Feed one token; *text and *len receive the text that became ready
 * (possibly none).  After a stop string was found, nothing more comes out.
 * HEARTH_E_INVALID for an id out of range or a stream without vocabulary. */
hearth_status hearth_text_stream_push_token(hearth_text_stream *stream, hearth_token token,
                                            const char **text, size_t *len);
/* The same for bytes of text. */
hearth_status hearth_text_stream_push_bytes(hearth_text_stream *stream, const char *bytes,
                                            size_t n, const char **text, size_t *len);
/* The end of the text: releases what was held back (an unfinished UTF-8
 * sequence becomes U+FFFD; a partial stop string is plain text after
 * all). */
hearth_status hearth_text_stream_finish(hearth_text_stream *stream, const char **text,
                                        size_t *len);
/* The index in options.stop of the stop string that ended the stream, or
 * -1 while none has. */
int hearth_text_stream_stop_index(const hearth_text_stream *stream);

/* == sampling =========================================================== */

/* == model and inference context ========================================= */

/* == downloads ========================================================== */

/* == compute devices ==================================================== */

#ifdef __cplusplus
}
#endif

#endif /* HEARTH_H */
