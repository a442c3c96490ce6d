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
    HEARTH_TYPE_MXFP4 = 39,   /* OCP microscaling FP4: E2M1 values, E8M0 scale */
    HEARTH_TYPE_COUNT = 40    /* one past the largest value */
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
 *
 * A model split over several files (NAME-00001-of-0000N.gguf ...
 * NAME-0000N-of-0000N.gguf, as the common gguf-split tool writes them) is
 * opened by the name of its first part: the reader opens the others by
 * their names and checks that they belong together (split.no, split.count
 * and split.tensors.count, every tensor in one part only).  The metadata
 * is the first part's; the tensors are those of every part.
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
    uint64_t offset;       /* from the start of the data section of its file */
    size_t bytes;          /* size of the data */
    const void *data;      /* the data, inside the mapping */
    uint32_t split;        /* the part of a split model that holds it (0: the
                            * first, or the only file) */
} hearth_gguf_tensor;

/* Open and validate a GGUF file (v2 or v3), or every part of a split
 * model given the first part's name.  A later part's name is refused,
 * naming the first part; a part missing, or one of another model, is
 * HEARTH_E_NOT_FOUND or HEARTH_E_FORMAT naming the file and the fault. */
hearth_status hearth_gguf_open(const char *path, hearth_gguf **out);
/* The same for a file already in memory (not copied: it must outlive the
 * handle).  name is used in error messages.  A part of a split model is
 * read alone: no other file is opened. */
hearth_status hearth_gguf_open_memory(const void *data, size_t size,
                                      const char *name, hearth_gguf **out);
void hearth_gguf_close(hearth_gguf *gguf);

uint32_t hearth_gguf_version(const hearth_gguf *gguf);
uint32_t hearth_gguf_alignment(const hearth_gguf *gguf);
uint64_t hearth_gguf_data_offset(const hearth_gguf *gguf);
/* The file's size and path; of the first part for a split model. */
uint64_t hearth_gguf_file_size(const hearth_gguf *gguf);
const char *hearth_gguf_path(const hearth_gguf *gguf);
/* The files of a split model (1 when it is not split), and the path and
 * size of file index (0 .. n_splits-1; NULL and 0 out of range). */
int32_t hearth_gguf_n_splits(const hearth_gguf *gguf);
const char *hearth_gguf_split_path(const hearth_gguf *gguf, int32_t index);
uint64_t hearth_gguf_split_size(const hearth_gguf *gguf, int32_t index);

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
    HEARTH_VOCAB_BPE = 2, /* byte-level BPE ("gpt2") */
    HEARTH_VOCAB_RWKV = 3, /* RWKV World: greedy longest match ("rwkv") */
    HEARTH_VOCAB_WPM = 4   /* WordPiece: BERT's basic tokenization, then greedy
                            * longest-match word pieces ("bert") */
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

/* Flags of hearth_tokenize() and hearth_tokenize_alloc(). */
#define HEARTH_TOKENIZE_ADD_SPECIAL 0x1u   /* BOS/EOS as the vocabulary says */
#define HEARTH_TOKENIZE_PARSE_SPECIAL 0x2u /* match control tokens' text
                                              ("<|im_start|>"); without it
                                              such text is ordinary text.
                                              User-defined tokens (added
                                              vocabulary pieces) are always
                                              matched, as the model's own
                                              tokenizer does */

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

/* hearth_tokenize() of the whole text into a buffer of its own: on
 * success *out holds the *n_out ids (a buffer even when there are none),
 * to be freed with hearth_free().  On failure *out is NULL and *n_out 0;
 * HEARTH_E_INVALID for a NULL argument or unknown flags, HEARTH_E_NOMEM
 * when memory runs out. */
hearth_status hearth_tokenize_alloc(const hearth_vocab *vocab, const char *text, size_t len,
                                    unsigned flags, hearth_token **out, size_t *n_out);

/* The flags to tokenize text[0..len) that a chat template rendered:
 * special tokens' text parsed, and the BOS token added unless the text
 * begins with the BOS token's text already (templates such as Llama 3's
 * write it themselves, and a second one would change the model's
 * answer). */
unsigned hearth_chat_tokenize_flags(const hearth_vocab *vocab, const char *text, size_t len);

/* Flags of hearth_token_piece(), hearth_detokenize(), hearth_detokenize_alloc()
 * and text streams. */
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

/* hearth_detokenize() into a buffer of its own: on success *out holds the
 * *len_out bytes and a NUL after them, to be freed with hearth_free() (the
 * bytes themselves may hold a NUL).  On failure *out is NULL and *len_out
 * 0; HEARTH_E_INVALID for a NULL argument or an id out of range,
 * HEARTH_E_NOMEM when memory runs out. */
hearth_status hearth_detokenize_alloc(const hearth_vocab *vocab, const hearth_token *tokens,
                                      size_t n_tokens, unsigned flags, char **out,
                                      size_t *len_out);

/* The length of the longest prefix of text[0..len) that is well-formed
 * UTF-8 (Unicode's definition: no overlong forms, surrogates or code
 * points past U+10FFFF; a last character cut short is not part of it):
 * len when all of it is.  0 for a NULL text. */
size_t hearth_utf8_valid_prefix(const char *text, size_t len);

/* == chat templates ===================================================== */

/* Models ship their chat template as Jinja text in the GGUF key
 * tokenizer.chat_template.  hearth renders it with its own interpreter of
 * the Jinja subset chat templates use, with the settings and extra
 * functions Hugging Face transformers gives them (trim_blocks,
 * lstrip_blocks, loop controls, tojson as json.dumps, raise_exception,
 * strftime_now).  A parsed template is immutable: it may be rendered from
 * several threads at once.
 *
 * Rendering is bounded so that hostile templates cannot crash or hang the
 * process: nesting of 100 levels when parsing and 400 when evaluating, 40
 * nested macro calls, one million loop iterations, 20 million units of
 * work (one per evaluated expression, list element built or 8 bytes of
 * text built), 64 MiB of output; reaching a limit is an error
 * (HEARTH_E_RANGE).  At those limits rendering uses up to about 200 KiB of
 * the calling thread's stack. */

typedef struct hearth_template hearth_template;

/* Parse template text of len bytes (it need not be NUL-terminated; at most
 * 4 MiB).  A syntax error or invalid UTF-8 is HEARTH_E_FORMAT with a message
 * "chat template line L, column C: ...". */
hearth_status hearth_template_parse(const char *text, size_t len, hearth_template **out);

/* One of the built-in templates, written for hearth, for models without a
 * usable template of their own: "chatml", "gemma", "llama2", "llama3",
 * "mistral", "phi3", "zephyr".  HEARTH_E_NOT_FOUND for other names. */
hearth_status hearth_template_builtin(const char *name, hearth_template **out);

/* The names hearth_template_builtin() accepts, NULL-terminated. */
const char *const *hearth_template_builtin_names(void);

/* The template a model ships in its metadata key tokenizer.chat_template.
 * HEARTH_E_NOT_FOUND when the file has none; parse errors as
 * hearth_template_parse(), prefixed with the file's name. */
hearth_status hearth_template_from_gguf(const hearth_gguf *gguf, hearth_template **out);

/* Free a template (NULL is allowed). */
void hearth_template_free(hearth_template *tmpl);

/* What a template sees besides the messages.  All-zero fields give the
 * defaults. */
typedef struct hearth_chat_options {
    /* End with the start of an assistant turn (the template's
     * add_generation_prompt). */
    bool add_generation_prompt;
    /* Text of the model's BOS and EOS tokens (bos_token, eos_token);
     * NULL means "". */
    const char *bos_token;
    const char *eos_token;
    /* JSON array of tool definitions (tools), or NULL for none: then tools
     * is undefined in the template. */
    const char *tools_json;
    /* The date templates see as date_string ("29 Nov 2026") and that
     * strftime_now() formats, given as "29 Nov 2026" or "2026-11-29"
     * (optionally followed by a time "HH:MM[:SS]"); NULL means the local
     * date and time now. */
    const char *date;
    /* JSON object of further variables ({"enable_thinking": false}), or
     * NULL.  The variables above take precedence over these. */
    const char *extra_json;
} hearth_chat_options;

/* Render a conversation given as a JSON array of message objects
 * (messages_len bytes): each object has a role, a content and whatever else
 * the template reads (tool_calls, tool_call_id, ...).  options may be NULL.
 *
 * On success *out is the text, NUL-terminated, to be freed with
 * hearth_free(), and *out_len (when out_len is not NULL) its length in
 * bytes.  Errors: HEARTH_E_FORMAT for malformed JSON (with its byte
 * offset), HEARTH_E_INVALID for messages that are not an array of objects
 * or an invalid option, HEARTH_E_TEMPLATE when the template raises an
 * exception or fails at run time (with its line and column), HEARTH_E_RANGE
 * when a limit is reached (integers beyond 64 bits included),
 * HEARTH_E_UNSUPPORTED when it uses one of the few Jinja features hearth
 * lacks (such as dict keys that are not strings). */
hearth_status hearth_template_render(const hearth_template *tmpl, const char *messages_json,
                                     size_t messages_len, const hearth_chat_options *options,
                                     char **out, size_t *out_len);

/* A message with text content only. */
typedef struct hearth_chat_message {
    const char *role;      /* "system", "user", "assistant", ... */
    const char *content;   /* UTF-8 text */
} hearth_chat_message;

/* hearth_template_render() for n plain {role, content} messages. */
hearth_status hearth_template_render_messages(const hearth_template *tmpl,
                                              const hearth_chat_message *messages, size_t n,
                                              const hearth_chat_options *options,
                                              char **out, size_t *out_len);

/* Free a string (or other buffer) the library returned. */
void hearth_free(void *ptr);

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

/* == reasoning ========================================================== */

/*
 * Reasoning models think before they answer, in the same text: a
 * reasoning split reads the text a text stream gives (valid UTF-8) and
 * returns it as two parts, the reasoning and the
 * answer, as it arrives.  The markers that separate them never come out,
 * and text is held back only while it could still be the start of a
 * marker (or, for harmony, a message's header).  However the text is cut
 * into pieces, the parts are the same.  The formats:
 *
 *  - think: "<think>" reasoning "</think>" at the start of the text
 *    (Qwen3, Qwen3.5, DeepSeek-R1); the whitespace after "</think>" is
 *    dropped.  When the prompt ends with "<think>" (the template opened
 *    the block), the text starts inside the reasoning; when it ends with
 *    "</think>" (an empty block: thinking turned off), all of the text
 *    is the answer.
 *  - harmony: OpenAI's messages (gpt-oss):
 *    "<|channel|>analysis<|message|>...<|end|><|start|>assistant
 *    <|channel|>final<|message|>...".  The analysis channel is the
 *    reasoning, final (and commentary without a recipient) the answer;
 *    a commentary message to "functions.NAME" is a tool call, kept
 *    apart (hearth_reasoning_split_tool_call()), and one to another
 *    recipient (a built-in tool) counts as reasoning.  The markers are
 *    control tokens: the text must be decoded with HEARTH_DECODE_SPECIAL.
 *  - none: all of the text is the answer.
 *
 * A split belongs to one text; it is not thread-safe.
 */
typedef enum hearth_reasoning_format {
    HEARTH_REASONING_NONE = 0,
    HEARTH_REASONING_THINK,
    HEARTH_REASONING_HARMONY,
} hearth_reasoning_format;

/* The format a chat template's text writes: harmony when it has
 * "<|channel|>", think when it has "<think>" or "</think>", else none. */
hearth_reasoning_format hearth_reasoning_format_detect(const char *template_text, size_t len);
/* "none", "think", "harmony". */
const char *hearth_reasoning_format_name(hearth_reasoning_format format);
/* The format of one of those names; HEARTH_E_INVALID for others. */
hearth_status hearth_reasoning_format_from_name(const char *name, hearth_reasoning_format *out);

typedef struct hearth_reasoning_split hearth_reasoning_split;

/* What one call released: parts of whole UTF-8 characters, possibly
 * empty, valid until the next call on the split. */
typedef struct hearth_reasoning_text {
    const char *reasoning;
    size_t reasoning_len;
    const char *answer;
    size_t answer_len;
} hearth_reasoning_text;

/* A split of the text generated after prompt[0..prompt_len) (the
 * rendered chat, whose end says where the text starts: inside a
 * reasoning block, inside a harmony message; NULL for the start of a
 * turn).  HEARTH_E_INVALID for an unknown format. */
hearth_status hearth_reasoning_split_new(hearth_reasoning_format format, const char *prompt,
                                         size_t prompt_len, hearth_reasoning_split **out);
void hearth_reasoning_split_free(hearth_reasoning_split *split);
/* Feed a piece of text; *out receives the parts it released.  A piece
 * may end inside a character (its bytes wait for the next piece);
 * ill-formed UTF-8 is HEARTH_E_INVALID (the piece is not taken), more
 * than 128 tool calls or 16 MiB of one's arguments HEARTH_E_RANGE. */
hearth_status hearth_reasoning_split_push(hearth_reasoning_split *split, const char *text,
                                          size_t len, hearth_reasoning_text *out);
/* The end of the text: releases what was held back (a reasoning block
 * never closed stays reasoning); HEARTH_E_INVALID when the text ended
 * inside a character. */
hearth_status hearth_reasoning_split_finish(hearth_reasoning_split *split,
                                            hearth_reasoning_text *out);
/* Whether the text so far ends inside the reasoning (for counting the
 * reasoning's tokens). */
bool hearth_reasoning_split_in_reasoning(const hearth_reasoning_split *split);
/* The tool calls of a harmony text so far: their number, and call index's
 * function name and argument text (as the model wrote it, not checked to
 * be JSON; NUL-terminated), valid as long as the split. */
size_t hearth_reasoning_split_n_tool_calls(const hearth_reasoning_split *split);
hearth_status hearth_reasoning_split_tool_call(const hearth_reasoning_split *split, size_t index,
                                               const char **name, const char **arguments,
                                               size_t *arguments_len);

/* == grammars =========================================================== */

/*
 * A grammar constrains generation: compiled for a vocabulary, it gives the
 * sampler the tokens that may come next, so that the output is in the
 * grammar's language by construction.  The notation is GBNF (see
 * hearth-grammar(7)); a JSON Schema (the subset hearth-grammar(7) lists)
 * is translated to it.  A grammar is reference-counted and may be shared
 * by any number of samplers on any threads; the token-mask cache it keeps
 * is filled as states are met and serves them all.
 */
typedef struct hearth_grammar hearth_grammar;

/* Compile GBNF text (start rule "root") for vocab (which must outlive the
 * grammar).  HEARTH_E_FORMAT names the line and column of an error. */
hearth_status hearth_grammar_new(const hearth_vocab *vocab, const char *gbnf, size_t len,
                                 hearth_grammar **out);
/* Compile a JSON Schema; a keyword outside the supported subset is
 * HEARTH_E_UNSUPPORTED naming it. */
hearth_status hearth_grammar_from_json_schema(const hearth_vocab *vocab, const char *schema,
                                              size_t len, hearth_grammar **out);
/* JSON mode: any JSON object. */
hearth_status hearth_grammar_json_object(const hearth_vocab *vocab, hearth_grammar **out);
/* Check GBNF text without a vocabulary. */
hearth_status hearth_grammar_check(const char *gbnf, size_t len);

/* What a grammar's text is written in. */
typedef enum hearth_grammar_syntax {
    HEARTH_GRAMMAR_GBNF = 0,
    HEARTH_GRAMMAR_JSON_SCHEMA = 1,
    HEARTH_GRAMMAR_JSON_OBJECT = 2  /* JSON mode; the text is ignored */
} hearth_grammar_syntax;

typedef struct hearth_grammar_options {
    /* Polled every few thousand steps of compiling; nonzero stops it with
     * HEARTH_E_INTERRUPTED.  NULL: never stopped. */
    int (*cancelled)(void *arg);
    void *cancel_arg;
} hearth_grammar_options;

/* Compile text of the given syntax (options may be NULL).  Compiling
 * costs time about linear in the grammar's size and is bounded: a grammar
 * that needs more work than hearth-grammar(7) allows is HEARTH_E_RANGE. */
hearth_status hearth_grammar_compile(const hearth_vocab *vocab, hearth_grammar_syntax syntax,
                                     const char *text, size_t len,
                                     const hearth_grammar_options *options, hearth_grammar **out);
/* The GBNF text a JSON Schema translates to, for hearth_free(). */
hearth_status hearth_json_schema_to_gbnf(const char *schema, size_t len, char **gbnf_out);
/* Take one more reference (returns g); hearth_grammar_free() drops one. */
hearth_grammar *hearth_grammar_ref(hearth_grammar *g);
void hearth_grammar_free(hearth_grammar *g);

typedef struct hearth_grammar_stats {
    int32_t n_rules;          /* after expanding groups, repetitions, classes */
    int32_t n_positions;      /* grammar elements */
    double compile_ms;        /* parsing and the vocabulary's prefix tree */
    int32_t n_cached_states;  /* mask-cache entries computed so far */
    size_t cache_bytes;
} hearth_grammar_stats;

void hearth_grammar_get_stats(hearth_grammar *g, hearth_grammar_stats *out);

/* == sampling =========================================================== */

/*
 * A sampler turns one row of logits (n_vocab floats) into the next token.
 * The chain runs in this order:
 *
 *   0. grammar (when the parameters name one): every token the grammar
 *      does not allow next gets -INFINITY, so the distribution is the
 *      model's renormalised over the allowed tokens; end-of-generation
 *      tokens are allowed exactly where the grammar may end
 *   1. penalties over the last repeat_last_n accepted tokens: for each
 *      distinct token t among them, occurring c times,
 *        repetition: l = l / repeat_penalty if l > 0, else l * repeat_penalty
 *        frequency and presence: l = l - c * frequency_penalty - presence_penalty
 *   2. logit bias: l = l + bias (-INFINITY bans the token)
 *   3. temperature: p = softmax(l / temperature); temperature 0 is greedy:
 *      the token with the largest l after steps 1-2 (the lowest id on ties),
 *      and steps 4-7 are skipped
 *   4. top-k: keep the k tokens with the largest l (0: keep all)
 *   5. top-p: keep the smallest prefix of the tokens sorted by decreasing p
 *      whose mass reaches top_p (at least one token; 1: keep all)
 *   6. min-p: keep the tokens with p >= min_p * p_max (0: keep all)
 *   7. draw: with u uniform in [0, 1) and the kept tokens taken in increasing
 *      id order, the first token whose cumulative weight exceeds u * total.
 *
 * Every sort orders by decreasing logit and then by increasing token id, so
 * ties are broken the same way everywhere.  u comes from xoshiro256**
 * seeded by splitmix64 from the 64-bit seed (top 53 bits of each output),
 * and the probabilities are computed in IEEE double precision with hearth's
 * own exponential, so the same logits, parameters and seed give the same
 * tokens on every platform.
 *
 * A sampler is used by one thread at a time; it allocates its working
 * buffers when created, not per call.
 */
typedef struct hearth_sampler hearth_sampler;

/* An additive bias on one token's logit. */
typedef struct hearth_logit_bias {
    int32_t token;
    float bias;            /* finite and within +-1000, or -INFINITY */
} hearth_logit_bias;

/* The sampling parameters; hearth_sampler_params_default() fills the
 * defaults shown.  Out-of-range values are refused with HEARTH_E_INVALID. */
typedef struct hearth_sampler_params {
    float temperature;         /* 0.8; 0 (greedy) .. 100 */
    int32_t top_k;             /* 40; 0 (off) or more */
    float top_p;               /* 0.95; 0 .. 1 (off) */
    float min_p;               /* 0.05; 0 (off) .. 1 */
    float repeat_penalty;      /* 1 (off); above 0 .. 100 */
    int32_t repeat_last_n;     /* 64; 0 (no penalties) .. 1048576 tokens */
    float presence_penalty;    /* 0 (off); -100 .. 100 */
    float frequency_penalty;   /* 0 (off); -100 .. 100 */
    uint64_t seed;             /* 0; any value (the program and the server take 0 .. HEARTH_SEED_MAX) */
    const hearth_logit_bias *logit_bias; /* NULL; entries for one token add up */
    size_t n_logit_bias;       /* 0 */
    hearth_grammar *grammar;   /* NULL; when set, step 0 of the chain: every
                                * token the grammar does not allow next is
                                * impossible (the sampler holds a reference) */
} hearth_sampler_params;

/* Fill params with the defaults above. */
void hearth_sampler_params_default(hearth_sampler_params *params);

/* Check every parameter; HEARTH_E_INVALID names the first one out of range
 * and its value.  Token ids of the logit bias are checked against the
 * vocabulary only by hearth_sampler_new(). */
hearth_status hearth_sampler_params_check(const hearth_sampler_params *params);

/* The same check, for a caller that must name what it refuses (a field
 * of a request): NULL when hearth_sampler_params_check() accepts params,
 * else the name of the first parameter it refuses, as spelled in
 * hearth_sampler_params ("temperature", "top_k", "logit_bias", ...;
 * "sampler" for a NULL params), with the reason in hearth_last_error(). */
const char *hearth_sampler_params_invalid(const hearth_sampler_params *params);

/* The largest seed the hearth program and hearth serve take: the largest
 * integer a JSON request carries exactly through the server's parser, so
 * that every seed can be given to both.  Seeds they draw themselves are
 * below 2^53, which every JSON client reads back exactly. */
#define HEARTH_SEED_MAX INT64_MAX

/* The seed of the k-th generation (k from 0) of a session whose own seed
 * is session_seed, for the generations that do not choose one (the turns
 * of hearth chat, the requests of hearth serve without a seed): each
 * needs fresh randomness, yet a session started with the same seed must
 * be repeatable as a whole.  The k-th output of splitmix64 started from
 * session_seed: it looks random from one k to the next and is the same
 * for the same pair.  Below 2^53, so that a JSON client reads one back
 * exactly and can send it again. */
uint64_t hearth_seed_derive(uint64_t session_seed, uint64_t k);

/* Format the sampling tuple -- every parameter and the seed -- as one line
 * without a newline, e.g. "temp=0.8 top_k=40 top_p=0.95 min_p=0.05
 * repeat_penalty=1 repeat_last_n=64 presence_penalty=0 frequency_penalty=0
 * seed=42 logit_bias=none".  Numbers are printed with the fewest digits that
 * read back to the same float.  Like snprintf: writes at most size bytes
 * (NUL included) and returns the length the whole line needs. */
size_t hearth_sampler_params_format(const hearth_sampler_params *params,
                                    char *buf, size_t size);

/* Create a sampler for a vocabulary of n_vocab tokens (1 .. 2^30).  The
 * parameters and the logit-bias list are copied. */
hearth_status hearth_sampler_new(const hearth_sampler_params *params, int32_t n_vocab,
                                 hearth_sampler **out);
void hearth_sampler_free(hearth_sampler *sampler);

/* The sampler's parameters (its own copy, logit_bias included). */
const hearth_sampler_params *hearth_sampler_get_params(const hearth_sampler *sampler);
int32_t hearth_sampler_n_vocab(const hearth_sampler *sampler);

/* Choose the next token from n_vocab logits (not modified).  A NaN or
 * +infinite logit is HEARTH_E_INVALID; -INFINITY marks an impossible token.
 * HEARTH_E_INVALID too when every token is impossible.  The token is not
 * recorded: pass it to hearth_sampler_accept(). */
hearth_status hearth_sampler_sample(hearth_sampler *sampler, const float *logits,
                                    int32_t *token_out);

/* The distribution the next hearth_sampler_sample() call draws from, for the
 * same logits: probs_out[i] for each of the n_vocab tokens, 0 for the tokens
 * the chain removed (with temperature 0: 1 for the greedy token).  Does not
 * advance the random generator. */
hearth_status hearth_sampler_probs(hearth_sampler *sampler, const float *logits,
                                   float *probs_out);

/* Record a token of the sequence (a prompt token or a sampled one) for the
 * penalties; only the last repeat_last_n count.  With a grammar, a
 * generated token also advances it (HEARTH_E_INVALID if the grammar does
 * not allow it): give prompt tokens to hearth_sampler_accept_prompt(). */
hearth_status hearth_sampler_accept(hearth_sampler *sampler, int32_t token);
/* Record a prompt token for the penalties only. */
hearth_status hearth_sampler_accept_prompt(hearth_sampler *sampler, int32_t token);
/* With a grammar: whether it is complete and nothing may follow (the
 * sequence is then over); false without one. */
bool hearth_sampler_grammar_done(const hearth_sampler *sampler);

/* Forget the accepted tokens and restart the random generator from the
 * seed: the sampler then behaves exactly like a new one. */
void hearth_sampler_reset(hearth_sampler *sampler);

/* == model and inference context ========================================= */

typedef struct hearth_model hearth_model;
typedef struct hearth_context hearth_context;

typedef struct hearth_model_params {
    int32_t n_gpu_layers;   /* transformer layers to offload to an OpenCL
                             * device, counted from the last; more than the
                             * model has also offloads the output layer;
                             * 0 (default): none */
    int32_t device;         /* index in the list hearth_devices() gives */
    bool gpu_fallback;      /* when offload fails, run on the CPU instead of
                             * failing (the reason is kept in
                             * hearth_last_error()) */
    bool default_pretokenizer; /* tokenize with the default pre-tokenizer
                             * when the model names one hearth does not
                             * know (see hearth_vocab_options) */
    struct hearth_pipeline *pipeline; /* a rank of a pipeline
                             * (hearth_pipeline_open): load only the layers
                             * this rank runs; NULL (default): all */
} hearth_model_params;

void hearth_model_default_params(hearth_model_params *params);

/* Load a model from a GGUF file (or the first part of a split model, see
 * hearth_gguf_open); params may be NULL for the defaults.  The file is
 * memory-mapped and its weights are used in place, and no page is read
 * before it is needed, except that the matrices the CPU kernels read
 * faster in a row-interleaved layout (Q4_0, Q8_0, MXFP4 and the K-quants,
 * on most kernel paths) are copied once into it, in place of their mapped
 * pages: those are given back to the file, so the weights are resident
 * once (hearth_model_resident_bytes).  Unsupported architectures, missing
 * tensors and malformed hyperparameters are reported with the file and the
 * key or tensor at fault. */
hearth_status hearth_model_load(const char *path, const hearth_model_params *params,
                                hearth_model **out);
void hearth_model_free(hearth_model *model);

const char *hearth_model_arch(const hearth_model *model);      /* "llama" */
const char *hearth_model_desc(const hearth_model *model);      /* "llama 1.1B Q4_0" */
int32_t hearth_model_n_vocab(const hearth_model *model);
int32_t hearth_model_n_ctx_train(const hearth_model *model);
int32_t hearth_model_n_layer(const hearth_model *model);
int32_t hearth_model_n_embd(const hearth_model *model);
uint64_t hearth_model_n_params(const hearth_model *model);
uint64_t hearth_model_size_bytes(const hearth_model *model);   /* bytes of tensor data */
/* Bytes of memory the weights take once every one of them has been read:
 * the packed copies and the tensors read in place from the mapping --
 * the file's tensor data (hearth_model_size_bytes), less the layers
 * offloaded to a device; more only where the file could not be mapped
 * and was read into memory (the packed copies then come on top). */
uint64_t hearth_model_resident_bytes(const hearth_model *model);
/* The model's GGUF file, for metadata the model API does not cover. */
const hearth_gguf *hearth_model_gguf(const hearth_model *model);
/* The model's tokenizer, or NULL when the file has none. */
const hearth_vocab *hearth_model_vocab(const hearth_model *model);
/* Whether the model's layers are recurrent (rwkv6, rwkv6qwen2): a
 * fixed-size state per sequence instead of a KV cache. */
bool hearth_model_is_recurrent(const hearth_model *model);
/* Multi-token-prediction layers hearth can draft with (0 or 1: the first
 * of the file's prediction layers; hearth_engine_params.mtp). */
int32_t hearth_model_mtp_layers(const hearth_model *model);

/* How an embedding is pooled from the output-normed final hidden states
 * of a sequence's positions: the values of the GGUF key
 * ARCH.pooling_type, as the common converters write it. */
typedef enum hearth_pooling {
    HEARTH_POOLING_NONE = 0,  /* none: a generative model, not an embedder */
    HEARTH_POOLING_MEAN = 1,  /* the mean over every position */
    HEARTH_POOLING_CLS = 2,   /* the first position's */
    HEARTH_POOLING_LAST = 3,  /* the last position's (Qwen3-Embedding) */
    HEARTH_POOLING_RANK = 4   /* a reranker's classification head: not supported */
} hearth_pooling;

/* The pooling the model's file declares (HEARTH_POOLING_NONE when it
 * declares none): an embedding model is one that declares MEAN, CLS or
 * LAST. */
hearth_pooling hearth_model_pooling(const hearth_model *model);
/* Whether the model computes embeddings only: an encoder (bert,
 * nomic-bert) has no output layer, so no logits and nothing to generate
 * (contexts and requests without a pooling are refused). */
bool hearth_model_is_embedding_only(const hearth_model *model);
/* "none", "mean", "cls", "last" or "rank" (NULL for other values). */
const char *hearth_pooling_name(hearth_pooling pooling);
/* Scale v (n floats) to unit Euclidean length, the norm summed in double
 * precision in index order; a vector of zeros stays zeros. */
void hearth_embedding_normalize(float *v, size_t n);

typedef struct hearth_context_params {
    int32_t n_ctx;          /* positions of context; 0: the model's training
                             * context, at most 4096 */
    int32_t n_batch;        /* most tokens per forward pass; 0: 512 */
    int32_t n_threads;      /* 0: one per available processor */
    hearth_type cache_type; /* KV cache: HEARTH_TYPE_F32, F16 (default) or Q8_0 */
    int32_t chunk_size;     /* recurrent models (RWKV-6): tokens per chunk of
                             * the chunk-parallel prefill; 0: 1 (token by
                             * token, the fastest on the CPU).  Changes
                             * results only by float rounding. */
} hearth_context_params;

void hearth_context_default_params(hearth_context_params *params);

/* A context holds one sequence: its KV cache and working buffers.  It
 * keeps a pointer to the model, which must outlive it.  A context is used
 * by one thread at a time; it runs its own work on n_threads threads.
 * HEARTH_E_NOMEM when the resident weights and the KV cache together do
 * not fit in the memory available (as for hearth_engine_new). */
hearth_status hearth_context_new(const hearth_model *model, const hearth_context_params *params,
                                 hearth_context **out);
void hearth_context_free(hearth_context *ctx);

int32_t hearth_context_n_ctx(const hearth_context *ctx);
int32_t hearth_context_n_batch(const hearth_context *ctx);
int32_t hearth_context_n_threads(const hearth_context *ctx);
hearth_type hearth_context_cache_type(const hearth_context *ctx);
/* Bytes of KV cache allocated for all n_ctx positions; for a recurrent
 * model (hearth_model_is_recurrent), the bytes of its fixed-size state. */
size_t hearth_context_kv_bytes(const hearth_context *ctx);
/* Tokens the sequence holds so far (the next token's position). */
int32_t hearth_context_n_past(const hearth_context *ctx);
/* Forget every position from n_past on (0 empties the sequence).  A
 * recurrent model's state summarizes all positions and cannot be cut: it
 * rewinds only to 0, to n_past itself, or to the position of the snapshot
 * saved by hearth_context_snapshot(); any other position fails with
 * HEARTH_E_UNSUPPORTED, changing nothing. */
hearth_status hearth_context_rewind(hearth_context *ctx, int32_t n_past);
/* Recurrent models: save the state at the current position as the one
 * snapshot a later hearth_context_rewind() can return to (replacing an
 * earlier snapshot).  Attention models need none (HEARTH_OK, nothing done). */
hearth_status hearth_context_snapshot(hearth_context *ctx);

/* Append n_tokens tokens to the sequence and run them through the model,
 * in batches of at most n_batch.  Logits are computed for the last
 * n_logits of these tokens (0 .. n_tokens) and read with
 * hearth_context_logits().  Fails with HEARTH_E_RANGE, changing nothing,
 * when the tokens do not fit in the context. */
hearth_status hearth_eval(hearth_context *ctx, const int32_t *tokens, int32_t n_tokens,
                          int32_t n_logits);

/* Logits (n_vocab floats) of the i-th of the n_logits tokens of the last
 * hearth_eval(); NULL when i is out of range. */
const float *hearth_context_logits(const hearth_context *ctx, int32_t i);

/* A function polled between layers; when it returns true, hearth_eval()
 * stops with HEARTH_E_INTERRUPTED (positions evaluated so far are kept). */
void hearth_context_set_abort(hearth_context *ctx, bool (*should_abort)(void *data), void *data);

/* == serving engine ====================================================== */

/*
 * An engine runs many generation requests at once over one model:
 * iteration-level (continuous) batching, each step one forward pass over
 * the decode tokens of every running sequence and chunks of the prompts
 * still being prefilled, within a token budget.  Keys and values live in
 * one pool of fixed-size blocks; a sequence holds the blocks its positions
 * need and no more, and frees them the moment it ends.  Full blocks stay
 * in a prefix cache after their sequence ends, so a later request whose
 * prompt starts with the same tokens reuses them instead of computing
 * them again (evicted least recently used, only when the pool needs room).
 * When the pool runs out mid-decode, the most recently admitted sequence
 * is preempted: its blocks are freed and it is recomputed later, with the
 * same results.
 *
 * Batch invariance: a sequence's logits, and so its tokens for a given
 * seed, are bit for bit the same whether it runs alone or beside any
 * other requests, however its prompt is split into chunks, and whether or
 * not its prompt came from the prefix cache.  (Layers offloaded to an
 * OpenCL device keep this for quantized weights; float weights there go
 * through CLBlast in steps of more than 4 rows, which agrees only within
 * rounding, unless HEARTH_OPENCL_GEMM=gemv.)
 *
 * Threading: one thread runs hearth_engine_step() (or
 * hearth_engine_run()); events are delivered on that thread, from inside
 * the step.  hearth_engine_submit(), hearth_engine_cancel() and
 * hearth_engine_get_stats() may be called from any thread at any time,
 * also from inside an event callback.  hearth_engine_free() must not race
 * with any other call.
 */
typedef struct hearth_engine hearth_engine;

typedef struct hearth_engine_params {
    int32_t n_ctx;          /* most positions one sequence may hold; 0: the
                             * model's training context, at most 4096 */
    int32_t n_batch;        /* tokens of one step (decode tokens and prompt
                             * chunks together); 0: 512; more than
                             * n_ctx x n_seq_max is cut to that */
    int32_t n_seq_max;      /* most sequences running at once; 0: 64 */
    int32_t block_tokens;   /* positions per KV block, a power of two from
                             * 16 to 1024; 0: 64 */
    int64_t kv_tokens;      /* positions of the pool (rounded up to whole
                             * blocks); 0: from kv_bytes */
    uint64_t kv_bytes;      /* the pool's memory budget when kv_tokens is 0;
                             * 0 too: room for one sequence of n_ctx */
    int32_t n_threads;      /* 0: one per available processor */
    hearth_type cache_type; /* F32, F16 (default) or Q8_0 */
    bool no_prefix_cache;   /* never reuse blocks across sequences (recurrent
                             * models resume from state snapshots kept at
                             * block boundaries: 2 x n_seq_max of them,
                             * counted in the pool's memory) */
    int32_t chunk_size;     /* recurrent models: as in hearth_context_params */
    const hearth_model *draft_model; /* NULL, or a smaller model with the
                             * same vocabulary that drafts tokens for the
                             * requests asking for speculation (its own KV
                             * pool of as many positions; it must outlive
                             * the engine) */
    bool mtp;               /* draft with the model's own multi-token-
                             * prediction layer instead
                             * (hearth_model_mtp_layers() > 0; not with
                             * draft_model): it runs after the trunk in
                             * every step, its keys and values in the same
                             * blocks, and drafts from the trunk's last
                             * hidden state */
    bool swa_full;          /* a model mixing sliding-window and full
                             * layers: keep the sliding layers' keys and
                             * values for the whole context, as the
                             * others'.  false (default): they have a pool
                             * of their own, sized for the windows of
                             * n_seq_max sequences and a step, and a
                             * sequence gives their blocks back as they
                             * fall out of the window (always false when
                             * layers are offloaded) */
    const char *cache_dir;  /* NULL, or a directory where the prefix cache
                             * keeps its full blocks across restarts (the
                             * disk tier): written behind by a thread of
                             * the engine as blocks fill, read back when a
                             * prompt's block is not in the pool; and for
                             * a recurrent or hybrid model the state
                             * snapshots a prompt resumes from, the same
                             * way.  Created when missing (one level);
                             * locked, so that one engine at a time uses
                             * it.  Every layer on the host, no window
                             * space, and a prediction layer only on a
                             * recurrent model (its input goes with the
                             * snapshots); HEARTH_E_UNSUPPORTED otherwise,
                             * HEARTH_E_IO when the directory cannot be
                             * created, written or locked.  The string
                             * must outlive hearth_engine_new() only */
    uint64_t cache_disk_bytes; /* the most the disk tier's files take;
                             * the least recently written or read go first.
                             * 0: 1 GiB */
    float prefill_share;    /* the part of a step's budget (n_batch) that
                             * prompts take while sequences are decoding,
                             * from 0 (exclusive) to 1: prompt chunks
                             * (running prefills and new admissions) get
                             * up to that many rows, at least one, kept
                             * from the decode rows while prompts wait,
                             * and no more while any sequence decodes;
                             * what they leave goes to the decode rows.
                             * Higher favours a new request's first
                             * token, lower the pace of the running
                             * ones.  A step where nothing decodes gives
                             * prompts the whole budget.  0: 0.125 */
} hearth_engine_params;

void hearth_engine_default_params(hearth_engine_params *params);

typedef enum hearth_finish_reason {
    HEARTH_FINISH_NONE = 0,   /* still generating */
    HEARTH_FINISH_STOP,       /* a stop string was completed */
    HEARTH_FINISH_EOS,        /* an end-of-generation token */
    HEARTH_FINISH_LENGTH,     /* max_tokens were generated */
    HEARTH_FINISH_CONTEXT,    /* the sequence filled n_ctx, its last token
                               * sampled from the logits of position
                               * n_ctx - 1 (or it filled the whole pool) */
    HEARTH_FINISH_CANCELLED,  /* hearth_engine_cancel() */
    HEARTH_FINISH_ERROR       /* the step failed; see the event's status */
} hearth_finish_reason;

/* "stop", "eos", "length", "context", "cancelled", "error" or "none". */
const char *hearth_finish_reason_name(hearth_finish_reason reason);

/* What one sample of a request cost; times in milliseconds from the
 * submission. */
typedef struct hearth_request_stats {
    int32_t n_prompt;        /* prompt tokens */
    int32_t n_cached;        /* of those, taken from the prefix cache */
    int32_t n_cached_disk;   /* of those, read from its disk tier
                              * (hearth_engine_params.cache_dir) */
    int32_t n_generated;     /* tokens sampled (an end-of-generation one too) */
    int32_t n_preempted;     /* times the sequence was preempted */
    double queue_ms;         /* until it was first admitted */
    double ttft_ms;          /* until its first token */
    double tpot_ms;          /* mean time per output token after the first */
    double total_ms;         /* until it finished */
    int stop_index;          /* the stop string, for HEARTH_FINISH_STOP; else -1 */
    int32_t n_steps;         /* target forward passes that yielded tokens
                              * (n_generated / n_steps: tokens per step) */
    int32_t n_drafted;       /* tokens drafted and verified (speculation) */
    int32_t n_accepted;      /* of those, accepted (alpha = n_accepted / n_drafted) */
    int32_t n_reasoning;     /* with a reasoning format (hearth_request.reasoning):
                              * of n_generated, the tokens the model wrote
                              * inside the reasoning -- not the markers that
                              * open and close it, not harmony's headers,
                              * not the tokens the reasoning budget forced */
} hearth_request_stats;

typedef struct hearth_event {
    uint64_t request;        /* the id hearth_engine_submit() gave */
    int32_t index;           /* which sample of the request, 0 .. n-1 */
    hearth_token token;      /* the token sampled, or -1 (a final event
                              * after a stop string, cancellation, ...) */
    const float *logits;     /* the n_vocab logits token was drawn from, or
                              * NULL; valid during the callback only */
    const char *text;        /* text this event releases (valid UTF-8, never
                              * part of a stop string); valid during the
                              * callback only */
    size_t len;
    const float *embedding;  /* the final event of an embedding request
                              * (hearth_request.pooling) that ended with
                              * HEARTH_FINISH_LENGTH: its vector,
                              * hearth_model_n_embd() floats; valid during
                              * the callback only.  NULL otherwise */
    hearth_finish_reason finish;        /* NONE while the sample goes on */
    const hearth_request_stats *stats;  /* with a finish reason */
    hearth_status status;    /* the failure, with HEARTH_FINISH_ERROR;
                              * hearth_last_error() says why during the
                              * callback */
} hearth_event;

/* Called on the stepping thread for every generated token (finish NONE)
 * and once more per sample at its end (finish set; an end-of-generation
 * token is reported here, not as a text event). */
typedef void (*hearth_event_fn)(void *user, const hearth_event *event);

/* Speculative decoding for a request: tokens drafted cheaply -- by the
 * engine's draft model or by prompt lookup (the tokens that followed an
 * earlier occurrence of the text's last n-gram, in the prompt or the text
 * generated) -- are scored by the model in one forward pass with the
 * sequence's own next token.  Greedy requests keep the longest drafted
 * prefix that matches the model's own choices, then the model's next
 * token; sampled ones keep a drafted token x with probability
 * min(1, p(x)/q(x)) (p the model's and q the draft's distribution, both
 * through the request's whole sampling chain) and otherwise draw from the
 * normalised max(0, p - q), so the output is distributed exactly as
 * without speculation (greedy output is the same tokens).  Rejected
 * tokens' keys and values are dropped.  The draft length adapts to the
 * measured acceptance rate and costs, and drafting stops where it would
 * not pay (a full batch, a draft that is seldom right). */
typedef struct hearth_speculation {
    int32_t draft_max;       /* most tokens drafted per step; 0: none (default) */
    int32_t draft_min;       /* a shorter draft is not verified; 0 */
    float draft_p_min;       /* draft model: stop drafting at a token whose
                              * probability under the draft is below this
                              * (0 .. 1; 0: never); negative (-1 from
                              * hearth_request_default()): each sequence
                              * learns from the tokens verified how often
                              * tokens of each confidence are kept, and
                              * stops where the next one's expected saving
                              * is below what its verification costs */
    int32_t lookup;          /* > 0: draft by prompt lookup with n-grams of
                              * up to this many tokens (at most 64); 0: by
                              * the engine's draft model */
    bool fixed;              /* always draft draft_max tokens (where the
                              * context and max_tokens leave room): no
                              * adaptation, for measurements */
} hearth_speculation;

typedef struct hearth_request {
    const hearth_token *prompt;  /* the prompt's tokens (copied) ... */
    size_t n_prompt;
    const char *prompt_text;     /* ... or, when prompt is NULL, its text */
    size_t prompt_text_len;
    unsigned tokenize_flags;     /* HEARTH_TOKENIZE_* for prompt_text */
    hearth_sampler_params sampling; /* copied; sample i uses seed + i */
    const char *const *stop;     /* stop strings (copied) */
    size_t n_stop;
    int32_t max_tokens;          /* most tokens per sample; < 0: no limit; 0:
                                  * the prompt is computed (and cached), and
                                  * nothing is sampled */
    int32_t n;                   /* samples of the prompt, sharing its KV
                                  * blocks; 0 means 1 */
    bool ignore_eos;             /* keep going past end-of-generation tokens */
    unsigned decode_flags;       /* HEARTH_DECODE_* for the events' text */
    hearth_event_fn on_event;
    void *user;
    hearth_speculation speculation; /* none by default */
    hearth_reasoning_format reasoning; /* how the reply keeps its reasoning
                                  * apart (see "reasoning"; the chat
                                  * template's format), starting where the
                                  * prompt's last tokens say; NONE (the
                                  * default): all of it is the answer.
                                  * With a format, a grammar in sampling
                                  * constrains the answer alone, from its
                                  * first byte (after "</think>", in the
                                  * body of a final message), and the
                                  * reasoning is free; a token that would
                                  * end the reasoning's marker and go on
                                  * with the answer is refused while the
                                  * grammar waits (drawn again without
                                  * it).  Where the answer may start as
                                  * well as a reasoning block or a harmony
                                  * header, the grammar applies and the
                                  * single tokens "<think>", "<|start|>"
                                  * and "<|channel|>" are allowed besides */
    int32_t reasoning_budget;    /* with a format: the most tokens of
                                  * reasoning (stats.n_reasoning); when the
                                  * reasoning reaches them, the engine
                                  * writes the marker that ends it as the
                                  * next tokens, from the model's
                                  * vocabulary ("</think>"; harmony:
                                  * "<|end|><|start|>assistant<|channel|>
                                  * final<|message|>"), and the reply goes
                                  * on with the answer; 0: the reasoning
                                  * ends as soon as it begins; < 0 (the
                                  * default): no limit.  Ignored without a
                                  * format */
    hearth_pooling pooling;      /* NONE (the default): generate.  MEAN,
                                  * CLS or LAST: an embedding request
                                  * (whatever the model declares, which
                                  * hearth_model_pooling() says): the prompt
                                  * is computed with causal attention and
                                  * nothing is sampled; the final event
                                  * (HEARTH_FINISH_LENGTH) carries the
                                  * output-normed hidden states of its
                                  * positions pooled so.  n must be 1;
                                  * sampling, stop strings, max_tokens,
                                  * speculation and reasoning are not used.
                                  * The vector is bit for bit the same
                                  * whatever else runs in the step (batch
                                  * invariance).  RANK is refused
                                  * (HEARTH_E_UNSUPPORTED) */
    bool no_normalize;           /* embedding requests: the pooled vector as
                                  * it is; false (the default): scaled to
                                  * unit length (hearth_embedding_normalize) */
} hearth_request;

/* Defaults: sampling defaults, max_tokens -1, n 1, no stop strings,
 * decode_flags HEARTH_DECODE_CONTINUATION (the text continues the
 * prompt's; without it SentencePiece's leading space of the first piece
 * is dropped, as for a reply that starts a text of its own), no
 * reasoning format, reasoning_budget -1. */
void hearth_request_default(hearth_request *request);

/* An engine over model (which must outlive it).  It reports the pool it
 * allocated through hearth_engine_get_stats().  Before anything is put in
 * it, the resident weights (hearth_model_resident_bytes, of the draft
 * model too) and the KV pool are checked against the memory this process
 * may use: the environment's HEARTH_MEMORY_LIMIT (bytes, or with K, M, G
 * or T), else what the system has available (Linux: MemAvailable, or the
 * room under the control group's limit when less) and the packed weights
 * already in memory.  When they do not fit, HEARTH_E_NOMEM names both
 * sizes and what is available: a smaller pool (kv_tokens, or n_ctx x
 * n_seq_max) is then needed. */
hearth_status hearth_engine_new(const hearth_model *model, const hearth_engine_params *params,
                                hearth_engine **out);
void hearth_engine_free(hearth_engine *engine);

/* The parameters in effect: those given with every default resolved. */
void hearth_engine_get_params(const hearth_engine *engine, hearth_engine_params *out);

/* The layers the engine runs on the device: those of its model, or 0 when
 * the engine could not set up the device (its KV pool, buffers) and
 * gpu_fallback let it run on the CPU; hearth_engine_gpu_fallback() then
 * says why (NULL otherwise). */
int32_t hearth_engine_n_gpu_layers(const hearth_engine *engine);
const char *hearth_engine_gpu_fallback(const hearth_engine *engine);

/* Queue a request; its id goes to *id (may be NULL).  A request that can
 * never run as asked is refused here with HEARTH_E_RANGE (a prompt longer
 * than the context or the pool; a prompt and max_tokens that need more
 * positions than the pool holds, counting at most the context),
 * HEARTH_E_INVALID (bad parameters) or HEARTH_E_UNSUPPORTED (a reasoning
 * budget whose closing marker the vocabulary cannot write), naming the
 * limit. */
hearth_status hearth_engine_submit(hearth_engine *engine, const hearth_request *request,
                                   uint64_t *id);
/* Cancel a request wherever it is (waiting, in prefill, decoding): its
 * blocks are freed at the next step, which reports
 * HEARTH_FINISH_CANCELLED for each unfinished sample.  Cancelling a
 * request that has finished does nothing; HEARTH_E_NOT_FOUND for an id
 * never given out. */
hearth_status hearth_engine_cancel(hearth_engine *engine, uint64_t id);

/* Run one step: admit, schedule, one forward pass, sample, deliver
 * events.  *did_work (may be NULL) is false when there was nothing to do.
 * A failed forward pass ends the requests of that step with
 * HEARTH_FINISH_ERROR and returns the failure; the engine stays usable.
 * On rank 0 of a pipeline of stages, with several sequences running, a
 * call either hands a group's step to the pipeline or takes the results
 * of the oldest step in flight (hearth-mpi(7), STEPS IN FLIGHT); the
 * tokens are the same.  Cancelling a request whose step is in flight
 * takes effect then, its results dropped. */
hearth_status hearth_engine_step(hearth_engine *engine, bool *did_work);
/* Step until no request is left (or a step fails). */
hearth_status hearth_engine_run(hearth_engine *engine);

typedef struct hearth_engine_stats {
    int32_t n_ctx;             /* positions per sequence */
    int32_t block_tokens;
    int32_t n_blocks;          /* of the pool */
    uint64_t kv_bytes;         /* bytes allocated for the pool (host and device);
                                * recurrent models: for the states of n_seq_max
                                * sequences */
    uint64_t bytes_per_token;  /* 2 x layers x kv heads x row bytes of a head;
                                * layers x row bytes of the latent row for
                                * multi-head latent attention (deepseek2:
                                * no values apart); 0 for recurrent models */
    int32_t max_full_sequences;/* sequences of n_ctx that fit at once */
    int32_t blocks_used;       /* held by sequences */
    int32_t blocks_cached;     /* kept for the prefix cache, free to evict */
    int32_t running;           /* sequences admitted */
    int32_t waiting;           /* sequences queued (preempted ones too) */
    uint64_t prefix_queries;   /* block lookups */
    uint64_t prefix_hits;      /* blocks found */
    uint64_t evictions;        /* cached blocks reused */
    uint64_t preemptions;
    uint64_t steps;
    uint64_t prompt_tokens;    /* computed in prefill */
    uint64_t generated_tokens;
    uint64_t draft_steps;      /* forward passes of the draft model */
    uint64_t drafted_tokens;   /* drafted tokens verified */
    uint64_t accepted_tokens;  /* of those, accepted */
    uint64_t verify_steps;     /* sample verifications (a sequence's drafted
                                * tokens scored in a step) */
    uint64_t state_bytes_per_seq; /* recurrent models: the fixed-size state one
                                   * sequence keeps (0 for attention models) */
    /* A model mixing sliding-window and full layers, unless swa_full:
     * the sliding layers' own pool (n_blocks, bytes_per_token and the
     * counts above are the other layers'; kv_bytes is both) */
    int32_t window;            /* the window (positions); 0: no such pool */
    int32_t window_blocks;     /* blocks of the sliding layers' pool */
    int32_t window_blocks_used;
    int32_t window_blocks_cached;
    uint64_t window_bytes_per_token; /* of the sliding layers */
    uint64_t weights_bytes;    /* the resident weights of the model and the
                                * draft model (hearth_model_resident_bytes) */
    uint64_t memory_available; /* what they and the pool's host memory were
                                * checked against (see hearth_engine_new);
                                * 0: not known, not checked */
    /* The prefix cache's disk tier (hearth_engine_params.cache_dir), all 0
     * without one: blocks read back (also counted in prefix_hits),
     * blocks written, files found invalid and removed, files (blocks or
     * snapshots) not written because the writer's queue was full, writes
     * that failed, files removed for the size bound, what the directory
     * holds (block and snapshot files), and a recurrent model's state
     * snapshots read back and written */
    uint64_t disk_hits;
    uint64_t disk_writes;
    uint64_t disk_rejected;
    uint64_t disk_dropped;
    uint64_t disk_write_errors;
    uint64_t disk_evictions;
    uint64_t disk_bytes;
    uint64_t disk_files;
    uint64_t disk_snapshot_hits;
    uint64_t disk_snapshot_writes;
} hearth_engine_stats;

void hearth_engine_get_stats(hearth_engine *engine, hearth_engine_stats *out);

/* == quantization ======================================================= */

/*
 * hearth_quantize_model() converts a model file to another weight type: it
 * copies the metadata, gives every weight matrix the type a recipe chooses
 * (below), converts the tensors one at a time with the reference
 * quantizers (rows in parallel) and writes a GGUF file the common GGUF
 * tools load.  Recipes are named, and numbered in general.file_type, as
 * those tools do.
 *
 * The recipe's type goes to every matrix (a tensor of two or more
 * dimensions whose name ends in ".weight", norms excepted).  Vectors
 * (norms, biases, RoPE factors) become F32.  For the block recipes (all
 * but F32, F16 and BF16) some matrices get a different type:
 *
 *  - the output layer (or token_embd.weight when it doubles as the output
 *    layer) becomes Q6_K, or stays Q8_0 for Q8_0, or becomes Q8_0 when its
 *    rows do not fit the recipe's blocks;
 *  - Q2_K: attn_v Q4_K when 4 or more query heads share a KV head, Q3_K
 *    otherwise; ffn_down and attn_output Q3_K;
 *  - Q3_K_M: attn_v Q5_K in layers 0 and 1, Q4_K after; ffn_down Q5_K in
 *    the first sixteenth of the layers, Q4_K after; attn_output Q4_K;
 *  - Q4_K_S: attn_v Q5_K in layers 0 to 3; ffn_down Q5_K in the first
 *    eighth of the layers;
 *  - Q4_K_M and Q5_K_M: attn_v and ffn_down Q6_K in the "more bits"
 *    layers -- with n layers, layer i qualifies when i < n/8, i >= 7n/8 or
 *    (i - n/8) mod 3 = 2 (integer divisions);
 *  - models of 80 layers: attn_v Q5_K where the rules above give Q3_K or
 *    Q4_K;
 *  - MXFP4_MOE: the 3-D expert tensors MXFP4, every other matrix (the
 *    output layer too) Q8_0.
 *
 * A matrix whose rows are not a whole number of its type's blocks gets a
 * type with 32-element blocks of at least as many bits -- Q2_K and Q3_K
 * become Q4_0, Q4_K Q5_0, Q5_K Q5_1, Q6_K Q8_0 -- or F16 when even those
 * do not fit.  A tensor already of its chosen type is copied unchanged;
 * one of another quantized type is dequantized and quantized again (which
 * adds the second type's error to the first's).
 */

/* The recipes, with the values general.file_type stores. */
typedef enum hearth_ftype {
    HEARTH_FTYPE_F32 = 0,
    HEARTH_FTYPE_F16 = 1,
    HEARTH_FTYPE_Q4_0 = 2,
    HEARTH_FTYPE_Q4_1 = 3,
    HEARTH_FTYPE_Q8_0 = 7,
    HEARTH_FTYPE_Q5_0 = 8,
    HEARTH_FTYPE_Q5_1 = 9,
    HEARTH_FTYPE_Q2_K = 10,
    HEARTH_FTYPE_Q3_K_S = 11,
    HEARTH_FTYPE_Q3_K_M = 12,
    HEARTH_FTYPE_Q4_K_S = 14,
    HEARTH_FTYPE_Q4_K_M = 15,
    HEARTH_FTYPE_Q5_K_S = 16,
    HEARTH_FTYPE_Q5_K_M = 17,
    HEARTH_FTYPE_Q6_K = 18,
    HEARTH_FTYPE_BF16 = 32,
    HEARTH_FTYPE_MXFP4_MOE = 38 /* experts MXFP4, other matrices Q8_0 */
} hearth_ftype;

/* "Q4_K_M", "F16", ...; NULL for a value that is not a recipe above. */
const char *hearth_ftype_name(hearth_ftype ftype);
/* The recipe with that name (case-insensitive), or HEARTH_E_NOT_FOUND with
 * a message listing the names. */
hearth_status hearth_ftype_from_name(const char *name, hearth_ftype *out);
/* The recipe's main weight type (Q4_K for Q4_K_M); HEARTH_TYPE_COUNT for
 * an unknown value. */
hearth_type hearth_ftype_type(hearth_ftype ftype);

/* What happens to one tensor, passed to the progress function. */
typedef struct hearth_quantize_tensor {
    int64_t index;           /* 0 .. n_tensors-1, in file order */
    int64_t n_tensors;
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    hearth_type type_in;     /* in the input file */
    hearth_type type_chosen; /* what the recipe asked for */
    hearth_type type_out;    /* what was written: differs from type_chosen
                                when the rows did not fit its blocks */
    uint64_t bytes_in, bytes_out;
} hearth_quantize_tensor;

/* Called for each tensor once it is converted (or, with dry_run, once
 * its type is chosen); returning false stops the conversion with
 * HEARTH_E_INTERRUPTED and no output file. */
typedef bool (*hearth_quantize_fn)(void *user, const hearth_quantize_tensor *tensor);

typedef struct hearth_quantize_params {
    hearth_ftype ftype;       /* the recipe; default Q8_0 */
    int32_t n_threads;        /* 0: one per available processor */
    bool dry_run;             /* choose the types and report them, write
                                 nothing (out may be NULL) */
    hearth_quantize_fn progress; /* NULL: none */
    void *progress_user;
} hearth_quantize_params;

void hearth_quantize_default_params(hearth_quantize_params *params);

/* Convert the model in_path into out_path (replaced if it exists; written
 * under a temporary name and renamed when complete).  Input tensors may be
 * F32, F16, BF16 or any type hearth computes with.  Fails with
 * HEARTH_E_UNSUPPORTED naming the tensor when one cannot be converted. */
hearth_status hearth_quantize_model(const char *in_path, const char *out_path,
                                    const hearth_quantize_params *params);

/* == downloads ========================================================== */

/*
 * Model files are fetched over HTTP(S) into a cache and reused from there.
 * The cache directory is $XDG_CACHE_HOME/hearth, or ~/.cache/hearth when
 * XDG_CACHE_HOME is unset; files land at
 *
 *   CACHE/hf/OWNER/REPO/FILE    for a file of a Hugging Face repository
 *   CACHE/url/HASH/NAME         for a URL: HASH is the first 16 hex digits
 *                               of the URL's SHA-256, NAME its last segment
 *
 * A file already at its place is used without any network access.  A
 * download is written to PLACE.part, resumed from there with an HTTP Range
 * request after an interruption (a server that ignores the range sends the
 * whole file again, which replaces the partial one), checked against the
 * SHA-256 the server announces when it announces one, and renamed to its
 * place only when complete and correct.  The digest is taken from an
 * X-Linked-ETag header, a Repr-Digest or Digest header with a sha-256
 * value, or, for repository files, an ETag of exactly 64 hex digits.
 *
 * The library prints nothing: progress is reported through a callback.
 * Builds without libcurl return HEARTH_E_UNSUPPORTED from every download
 * call.  Paths returned are allocated with malloc(); release them with
 * free().
 */

/* Progress of a download: bytes_done of bytes_total (0 when the server did
 * not tell), resumed bytes included.  Called about once a second and after
 * data arrives.  Returning false cancels the download with
 * HEARTH_E_INTERRUPTED; the partial file is kept for a later resume. */
typedef bool (*hearth_progress_fn)(void *user, uint64_t bytes_done, uint64_t bytes_total);

/* Before each part of a split model is fetched (part from 1 of n_parts;
 * file: its name in the repository), so that the progress can name it. */
typedef void (*hearth_part_fn)(void *user, const char *file, int part, int n_parts);

typedef struct hearth_download_options {
    const char *cache_dir;           /* NULL: the default above */
    const char *hf_endpoint;         /* NULL: $HEARTH_HF_ENDPOINT, or
                                        https://huggingface.co */
    hearth_progress_fn progress;     /* NULL: none */
    void *progress_user;             /* given to progress and part */
    hearth_part_fn part;             /* NULL: none */
    int connect_timeout_s;           /* 0: 30 seconds */
    int stall_timeout_s;             /* give up when no data arrives for
                                        this long; 0: 60 seconds */
} hearth_download_options;

/* Fill opts with the defaults (every field 0 or NULL). */
void hearth_download_options_default(hearth_download_options *opts);

/* Whether this build can download (it was built with libcurl). */
bool hearth_download_supported(void);

/* The cache directory that opts (NULL: the defaults) select; not created. */
hearth_status hearth_cache_dir(const hearth_download_options *opts, char **dir_out);

/* Fetch FILE of the Hugging Face repository OWNER/REPO, spec being
 * "OWNER/REPO:FILE", from {endpoint}/{OWNER}/{REPO}/resolve/main/{FILE},
 * unless it is in the cache already.  FILE may name a file in a folder of
 * the repository ("q4/model.gguf").  A spec without ":FILE" takes the
 * repository's GGUF file whose name has Q4_K_M, or its only GGUF file
 * (HEARTH_E_INVALID listing them when that does not choose one).  FILE
 * naming a part of a split model (NAME-00002-of-00009.gguf) fetches every
 * part, and *path_out is the first part's.  Names are
 * checked so that nothing can be written outside the cache:
 * HEARTH_E_INVALID names the offending part.  HTTP errors name the status
 * and the URL (HEARTH_E_NOT_FOUND for 404, HEARTH_E_NETWORK otherwise).
 * *path_out: the local file. */
hearth_status hearth_download_hf(const char *spec, const hearth_download_options *opts,
                                 char **path_out);

/* The same for any http:// or https:// URL. */
hearth_status hearth_download_url(const char *url, const hearth_download_options *opts,
                                  char **path_out);
/* == CPU kernels ========================================================== */

/* The CPU kernel path the engine computes with: "scalar", "avx2",
 * "avx512" or "avx512vnni".  It is chosen on first use -- the best one this
 * processor and operating system run -- unless the environment variable
 * HEARTH_CPU names one (or is "auto").  Fails with HEARTH_E_UNSUPPORTED
 * when HEARTH_CPU names a path that is unknown or that this build or this
 * processor cannot run; the message lists the paths available.  Contexts
 * fail to be created for the same reason. */
hearth_status hearth_cpu_kernels(const char **name);

/* The instruction-set extensions detected on this processor that the
 * kernels can use, space-separated ("avx2 fma f16c avx512f ..."; "" when
 * there are none). */
const char *hearth_cpu_features(void);

/* == compute devices ==================================================== */

/* OpenCL devices that layers can be offloaded to (hearth_model_params).
 * Builds without OpenCL support list none.  A process with no OpenCL
 * platform installed works as before; offload is then unavailable. */

typedef struct hearth_device_info {
    char name[256];
    char vendor[256];
    char platform[256];       /* the OpenCL platform's name */
    char version[128];        /* the device's OpenCL version string */
    char driver[128];         /* driver version */
    char type[16];            /* "GPU", "CPU", "accelerator" or "other" */
    uint64_t global_mem_bytes;
    uint64_t max_alloc_bytes; /* largest single buffer */
    uint32_t compute_units;
    bool fp16;                /* half-precision arithmetic (cl_khr_fp16) */
} hearth_device_info;

/* The devices, GPUs first, then accelerators, other devices and CPUs; an
 * index into this list is what hearth_model_params.device names.  *out
 * (free with hearth_devices_free()) holds *n_out entries.  Fails with
 * HEARTH_E_UNSUPPORTED when the build has no OpenCL support and with
 * HEARTH_E_NOT_FOUND when no platform or no device is installed (the
 * message names the OpenCL error). */
hearth_status hearth_devices(hearth_device_info **out, int32_t *n_out);
void hearth_devices_free(hearth_device_info *list);

/* Build the kernels for a device, or load them from the program cache
 * ($HEARTH_OPENCL_CACHE, else $XDG_CACHE_HOME/hearth/opencl), so that a
 * later model load finds them there.  Reports the time taken and whether
 * the cache had them (either pointer may be NULL).  A failed build is
 * HEARTH_E_BACKEND with the start of the build log. */
hearth_status hearth_device_build(int32_t device, double *build_ms, bool *from_cache);

/* Where a loaded model runs.  Offloaded layers are the last
 * hearth_model_n_gpu_layers() of the model; when every layer is
 * offloaded the final norm and output layer may be too. */
int32_t hearth_model_n_gpu_layers(const hearth_model *model);
bool hearth_model_output_on_gpu(const hearth_model *model);
/* The device's index, or -1 when nothing is offloaded. */
int32_t hearth_model_device(const hearth_model *model);
/* The device's name, or NULL when nothing is offloaded. */
const char *hearth_model_device_name(const hearth_model *model);
/* Bytes of weights copied to the device (kept in their file formats). */
uint64_t hearth_model_gpu_bytes(const hearth_model *model);
/* When offload was requested and failed but gpu_fallback allowed running
 * on the CPU: why it failed (with the OpenCL error name).  NULL otherwise. */
const char *hearth_model_gpu_fallback(const hearth_model *model);
/* Milliseconds spent building (or loading from the cache) the kernels,
 * and whether they came from the cache; 0 and false without offload. */
double hearth_model_gpu_build_ms(const hearth_model *model, bool *from_cache);

/* The layers a context runs on the device: those of its model, or 0 when
 * the context could not set up the device (its KV cache, buffers) and
 * gpu_fallback let it run on the CPU; hearth_context_gpu_fallback() then
 * says why (NULL otherwise). */
int32_t hearth_context_n_gpu_layers(const hearth_context *ctx);
const char *hearth_context_gpu_fallback(const hearth_context *ctx);
/* Bytes of KV cache held in device memory. */
size_t hearth_context_kv_device_bytes(const hearth_context *ctx);

/* ---- Pipeline parallelism over MPI (hearth-mpi(7)) ----------------------
 *
 * One model over the n ranks of an MPI job: each rank holds a contiguous
 * range of the layers (rank 0 the first; the ranges differ by at most one
 * layer, the earlier ranks taking the extra ones).  Rank 0 alone
 * tokenizes, schedules and samples: its engine's every step goes through
 * the ranks in turn -- the step's rows, positions and block tables with
 * the hidden state of its rows, point to point -- and the last rank sends
 * the logits back.  Each rank keeps the keys and values of its own layers
 * only, in blocks numbered as rank 0's pool numbers them.  The logits are
 * the same, bit for bit, as one process's: every layer runs the same
 * code on the same rows.  Recurrent models, multi-token prediction and
 * OpenCL offload are not run in a pipeline yet.
 *
 * A build without MPI has these functions too: hearth_pipeline_open()
 * fails with HEARTH_E_UNSUPPORTED. */
typedef struct hearth_pipeline hearth_pipeline;

/* Join the MPI job this process was started in (by mpirun) as one of
 * n_ranks ranks: HEARTH_E_INVALID unless the job has exactly n_ranks
 * (at least 2).  timeout_ms: the longest rank 0 waits for the other ranks
 * to answer a step before failing it (0: 120 s). */
hearth_status hearth_pipeline_open(int32_t n_ranks, int32_t timeout_ms, hearth_pipeline **out);
/* The same for a job of n_stages x n_tp ranks: n_stages stages of the
 * layers as above (ranks s * n_tp .. s * n_tp + n_tp - 1 run stage s),
 * each run by n_tp ranks in tensor parallel -- every matrix of the
 * stage's layers and the output layer split by output rows among them,
 * each rank computing its rows, which the stage's ranks then gather, so
 * that every output is the one dot product one process computes: the
 * logits stay those of one process, bit for bit, for any n_tp.  The
 * stage's first rank takes part in the chain; the others run each step
 * alongside it.  Matrices whose rows are not a whole number of groups of
 * 8 are not split (every rank computes them whole).  The attention of the
 * families with keys and values per head is split by key/value heads
 * instead: each rank runs whole heads, keeps only their keys and values,
 * and the stage gathers the heads' outputs before the output projection
 * (hearth_model_kv_heads()), and the routed experts of a mixture by
 * whole experts, their results gathered (hearth_model_experts()).
 * HEARTH_E_INVALID unless the job has exactly n_stages x n_tp ranks, at
 * least 2. */
hearth_status hearth_pipeline_open_tp(int32_t n_stages, int32_t n_tp, int32_t timeout_ms, hearth_pipeline **out);
int32_t hearth_pipeline_rank(const hearth_pipeline *p);
int32_t hearth_pipeline_size(const hearth_pipeline *p);
/* n_stages and n_tp of hearth_pipeline_open_tp (n_ranks and 1 of
 * hearth_pipeline_open). */
int32_t hearth_pipeline_stages(const hearth_pipeline *p);
int32_t hearth_pipeline_tp(const hearth_pipeline *p);
/* The attention heads a model loaded on this rank runs and keeps the keys
 * and values of: key/value heads *first .. *first + *n - 1 of *total.
 * Every head, but on a rank of a tensor-parallel stage that splits the
 * attention by heads (a contiguous share of whole heads, the earlier
 * ranks taking the extra ones); *whole is "" then, and outside a
 * tensor-parallel stage, and where a stage leaves the attention whole it
 * says why in a few words ("latent attention", "2 key/value heads for 3
 * ranks").  Outputs may be NULL. */
void hearth_model_kv_heads(const hearth_model *model, int32_t *first, int32_t *n, int32_t *total,
                           const char **whole);
/* The routed experts of each mixture-of-experts layer a model loaded on
 * this rank runs: experts *first .. *first + *n - 1 of *total (0 for a
 * dense model).  Every expert, but on a rank of a tensor-parallel stage
 * of at most as many ranks as experts, which runs its share of them,
 * whole, as the heads are shared out.  Outputs may be NULL. */
void hearth_model_experts(const hearth_model *model, int32_t *first, int32_t *n, int32_t *total);
/* The layers [*first, *end) the rank runs of a model of n_layer. */
void hearth_pipeline_layers(const hearth_pipeline *p, int32_t n_layer, int32_t *first, int32_t *end);
/* The start-up check, on every rank after loading the model: all ranks
 * run the same hearth version, the same model (a digest of its tensor
 * directory and hyperparameters) and the same options (text the caller
 * makes of the options that shape the computation).  On a mismatch every
 * rank fails naming the rank and what differs. */
hearth_status hearth_pipeline_handshake(hearth_pipeline *p, const hearth_model *model, const char *options);
/* A rank other than 0: run this rank's layers for rank 0's engines (each
 * one's steps, on n_threads threads; 0: one per processor) until rank 0
 * closes the pipeline. */
hearth_status hearth_pipeline_serve(hearth_pipeline *p, const hearth_model *model, int32_t n_threads);
/* Rank 0: whether the other ranks are still there.  A message that was
 * lost (a rank died, or did not answer within the timeout) breaks the
 * pipeline: this and every later step fail at once with its error, and
 * the job can only be ended (hearth_pipeline_close() with failed).  With
 * ping, also sends a message through every rank and waits for it to come
 * back, at most the timeout (a server does so while it is idle).  Call it
 * between steps, from the thread that runs them. */
hearth_status hearth_pipeline_check(hearth_pipeline *p, bool ping);
/* Leave the job.  On rank 0 the other ranks are told to stop first.
 * failed, or the pipeline broken: this rank failed, and the whole job is
 * ended now (the other ranks may be waiting for it); the process exits
 * with status 1. */
void hearth_pipeline_close(hearth_pipeline *p, bool failed);

#ifdef __cplusplus
}
#endif

#endif /* HEARTH_H */
