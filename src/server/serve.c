/*
 * serve.c -- `hearth serve`: the OpenAI HTTP API over the serving engine.
 * The command line lives here: the options, the models they name (-m,
 * --models-dir) and how one is loaded with its engine (the loader the
 * model table calls), signals and the drain; the HTTP server itself,
 * the model table included, is the rest of src/server/.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"
#include "pp_options.h"
#include "prompt.h"
#include "sampling_options.h"
#include "spec_options.h"

#ifdef HEARTH_HAVE_SERVER
#include "server.h"
#endif

#define CMD "serve"
#define MAX_KEYS 64
#define MAX_ALIAS 128

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth serve (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL) [options]\n"
            "       hearth serve (--models-dir DIR | -m ALIAS=FILE ...) [options]\n"
            "\n"
            "Serve the OpenAI HTTP API (chat and text completions, responses, streaming,\n"
            "embeddings) on the model, or on several, each loaded when a request names it.\n"
            "  --host ADDR              address to listen on (default 127.0.0.1)\n"
            "  --port N                 port (default 8080; 0: any free port)\n"
            "  --alias NAME             the model's name in the API (default: the file's name)\n"
            "  --models-dir DIR         serve every *.gguf of DIR, each named by its file\n"
            "                           without .gguf (a split model by its first part)\n"
            "  -m ALIAS=FILE            serve FILE as ALIAS (repeatable, with --models-dir too)\n"
            "  --keep-alive DURATION    unload a model idle this long (5m, 30s, 1h; 0: at once;\n"
            "                           -1: never; default 5m, or -1 for the one model of -m FILE)\n"
            "  --max-memory SIZE        most weights and KV pools of the loaded models together\n"
            "                           (512M, 4G; default 0: no bound); the idle ones are\n"
            "                           unloaded, least recently used first, to make room\n"
            "  --chat-template NAME|FILE  use this template instead of the model's\n"
            "  --reasoning-format deepseek|none  a reasoning model's thinking apart, in\n"
            "                           reasoning_content (deepseek, the default), or in\n"
            "                           the content (none)\n"
            "  --reasoning-budget N     end a chat reply's thinking after N tokens (0: at\n"
            "                           once; default -1: no limit); a request's\n"
            "                           thinking_budget_tokens overrides it\n"
            "  --pooling mean|cls|last  /v1/embeddings pools so, whatever the model declares\n"
            "                           (needed for a model that declares no pooling)\n"
            "  -c, --ctx-size N         positions one sequence may hold (default: the model's,\n"
            "                           at most 4096)\n"
            "  -np, --parallel N        sequences run at once (default 4)\n"
            "  -b, --batch N            tokens of one step (default 512)\n"
            "  --prefill-share F        the part of a step that new requests' prompts take\n"
            "                           while others generate (above 0, up to 1; default\n"
            "                           0.125): higher, sooner first tokens; lower, steadier\n"
            "                           generation\n"
            "  -t, --threads N          threads (default: all processors)\n"
            "  --cache-type TYPE        KV cache type: f32, f16 (default), q8_0\n"
            CLI_SWA_FULL_HELP
            CLI_CHUNK_SIZE_HELP
            "  --kv-size N              positions of the KV pool (default: ctx-size x parallel)\n"
            "  --kv-block N             positions per KV block (default 64)\n"
            "  --no-prefix-cache        do not reuse prompt blocks across requests\n"
            "  --cache-dir DIR          keep the prefix cache's full blocks (and a recurrent\n"
            "                           model's state snapshots) in DIR too, so that they\n"
            "                           are hits again after a restart\n"
            "  --cache-disk-size SIZE   the most DIR's files take (K, M, G, T; default 1G)\n"
            "  --max-body BYTES         largest request body (default 1048576)\n"
            "  --max-tokens N           most tokens a request may generate (default: ctx-size)\n"
            "  --max-queue N            requests that may wait beyond --parallel (default 64)\n"
            "  --max-connections N      requests answered at once (default 256); a request\n"
            "                           beyond them gets 503\n"
            "  --timeout SECONDS        a request's deadline (default 600; 0: none)\n"
            "  --responses-store N      past responses kept for previous_response_id\n"
            "                           (default 256; 0: none) ...\n"
            "  --responses-store-bytes BYTES  ... in at most BYTES (default 67108864)\n"
            "  --grace SECONDS          on SIGTERM, time running requests get (default 30)\n"
            "  --idle-timeout SECONDS   close idle connections after this (default 60)\n"
            "  --request-timeout SECONDS  a request's head and body must arrive within this\n"
            "                           (default 30; 408 otherwise)\n"
            "  --api-key KEY            require 'Authorization: Bearer KEY' (repeatable)\n"
            "  --api-key-file FILE      keys, one a line ('#' comments)\n"
            "  --ssl-key-file FILE      serve HTTPS with this PEM key ...\n"
            "  --ssl-cert-file FILE     ... and this PEM certificate\n"
            "  --no-webui               no chat page at / (404 there instead)\n"
            "  -v, --verbose            report the model, engine and pool\n");
    cli_model_help(out);
    cli_sampling_help(out);
    cli_spec_help(out);
    cli_pipeline_help(out);
}

#ifndef HEARTH_HAVE_SERVER

int cmd_serve(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            printf("\nThis build has no HTTP server: configure found no jansson.\n");
            return CLI_EXIT_OK;
        }
    return cli_error(CMD, "this build has no HTTP server: configure found no jansson (install "
                     "libjansson-dev, then configure again)");
}

#else

/* Rewrite "-np" before a "--" to "--parallel". */
static void normalize_args(int argc, char **argv)
{
    static char parallel[] = "--parallel";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-np") == 0) argv[i] = parallel;
    }
}

/* Keys from a file: one a line, blanks and '#' lines skipped. */
static bool read_keys(const char *path, char **keys, size_t *n_keys, char **store)
{
    size_t len;
    char *text = cli_read_file(CMD, path, &len);
    if (!text) return false;
    *store = text;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        char *e = line + strlen(line);
        while (e > line && (e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
        while (*line == ' ' || *line == '\t') line++;
        if (*line && *line != '#') {
            if (*n_keys == MAX_KEYS) {
                cli_error(CMD, "%s: more than %d keys", path, MAX_KEYS);
                return false;
            }
            keys[(*n_keys)++] = line;
        }
        line = nl ? nl + 1 : NULL;
    }
    return true;
}

static char *alias_of(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".gguf") == 0) n -= 5;
    char *a = malloc(n + 1);
    if (a) {
        memcpy(a, b, n);
        a[n] = '\0';
    }
    return a;
}

/* ---- the model table's entries ---------------------------------------- */

/* A name for the API: printable, no spaces, at most MAX_ALIAS bytes. */
static bool alias_valid(const char *a)
{
    size_t n = strlen(a);
    if (n == 0 || n > MAX_ALIAS) return false;
    for (const unsigned char *p = (const unsigned char *)a; *p; p++)
        if (*p <= ' ' || *p == 127) return false;
    return true;
}

struct entry {
    char *alias, *path;
    uint64_t bytes;      /* the files' size */
};

struct entries {
    struct entry *e;
    size_t n;
};

static void entries_free(struct entries *es)
{
    for (size_t i = 0; i < es->n; i++) {
        free(es->e[i].alias);
        free(es->e[i].path);
    }
    free(es->e);
}

/* Add ALIAS for PATH (both copied), the files' size checked: false after
 * printing why (a usage error). */
static bool entries_add(struct entries *es, const char *alias, const char *path, uint64_t bytes, const char *from)
{
    if (!alias_valid(alias)) {
        cli_usage_error(CMD, "%s: '%s' cannot name a model (1 to %d printable characters, no spaces)", from, alias,
                        MAX_ALIAS);
        return false;
    }
    for (size_t i = 0; i < es->n; i++)
        if (strcmp(es->e[i].alias, alias) == 0) {
            cli_usage_error(CMD, "%s: two models are named '%s' (%s and %s)", from, alias, es->e[i].path, path);
            return false;
        }
    struct entry *p = realloc(es->e, (es->n + 1) * sizeof *p);
    if (!p) return cli_error(CMD, "out of memory"), false;
    es->e = p;
    struct entry *e = &es->e[es->n];
    e->alias = strdup(alias);
    e->path = strdup(path);
    e->bytes = bytes;
    if (!e->alias || !e->path) {
        free(e->alias);
        free(e->path);
        cli_error(CMD, "out of memory");
        return false;
    }
    es->n++;
    return true;
}

/* "-00001-of-00003.gguf" at the end of name: its part and count (five
 * digits each, as gguf-split names the parts); the prefix's length. */
static bool split_suffix(const char *name, size_t *prefix, unsigned *no, unsigned *count)
{
    const size_t n = strlen(name);
    static const size_t suffix = sizeof "-00001-of-00003.gguf" - 1;
    if (n <= suffix) return false;
    const char *s = name + n - suffix;
    for (int i = 0; i < 20; i++) {
        const char want = "-ddddd-of-ddddd.gguf"[i];
        if (want == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != want) return false;
    }
    *no = (unsigned)strtoul(s + 1, NULL, 10);
    *count = (unsigned)strtoul(s + 10, NULL, 10);
    *prefix = n - suffix;
    return *no >= 1 && *count >= 1 && *no <= *count;
}

/* The size of a regular file, or false. */
static bool file_size(const char *path, uint64_t *bytes)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    *bytes = (uint64_t)st.st_size;
    return true;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every *.gguf of dir, by name; a split model once, named by its first
 * part without the part's suffix and sized by all its parts. */
static bool scan_models_dir(const char *dir, struct entries *es)
{
    DIR *d = opendir(dir);
    if (!d) return cli_error(CMD, "--models-dir %s: %s", dir, strerror(errno)), false;
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (struct dirent *de; ok && (de = readdir(d));) {
        const size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".gguf") != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                ok = false;
                break;
            }
            names = p;
        }
        if (!(names[n] = strdup(de->d_name))) ok = false;
        else n++;
    }
    closedir(d);
    if (!ok) cli_error(CMD, "out of memory");
    if (ok && n) qsort(names, n, sizeof *names, compare_names);
    char from[64];
    snprintf(from, sizeof from, "--models-dir");
    size_t added = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const size_t plen = strlen(dir) + 1 + strlen(names[i]) + 1;
        char *path = malloc(plen);
        if (!path) {
            ok = false;
            cli_error(CMD, "out of memory");
            break;
        }
        snprintf(path, plen, "%s/%s", dir, names[i]);
        uint64_t bytes = 0;
        size_t prefix;
        unsigned no, count;
        char *alias = NULL;
        if (!file_size(path, &bytes)) {
            free(path);
            continue; /* not a regular file */
        }
        if (split_suffix(names[i], &prefix, &no, &count)) {
            if (no != 1) {
                free(path);
                continue; /* counted with its first part */
            }
            /* the other parts' sizes (a missing one fails the load, which names it) */
            for (unsigned k = 2; k <= count; k++) {
                char part[PATH_MAX];
                uint64_t b = 0;
                snprintf(part, sizeof part, "%s/%.*s-%05u-of-%05u.gguf", dir, (int)prefix, names[i], k, count);
                if (file_size(part, &b)) bytes += b;
            }
            alias = strndup(names[i], prefix);
        } else {
            alias = alias_of(names[i]);
        }
        if (!alias) {
            free(path);
            ok = false;
            cli_error(CMD, "out of memory");
            break;
        }
        ok = entries_add(es, alias, path, bytes, from);
        added += ok;
        free(alias);
        free(path);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (ok && added == 0) {
        cli_usage_error(CMD, "--models-dir %s: no *.gguf file there", dir);
        ok = false;
    }
    return ok;
}

/* -m ALIAS=FILE (or -m FILE, named by the file): a file that exists as
 * given is a FILE, whatever its name holds. */
static bool model_arg(const char *arg, struct entries *es)
{
    uint64_t bytes;
    if (file_size(arg, &bytes)) {
        char *alias = alias_of(arg);
        if (!alias) return cli_error(CMD, "out of memory"), false;
        bool ok = entries_add(es, alias, arg, bytes, "-m");
        free(alias);
        return ok;
    }
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        cli_usage_error(CMD, "-m %s: no such file", arg);
        return false;
    }
    if (!file_size(eq + 1, &bytes)) {
        cli_usage_error(CMD, "-m %s: %s: %s", arg, eq + 1, access(eq + 1, F_OK) == 0 ? "not a regular file"
                                                                                : "no such file");
        return false;
    }
    char *alias = strndup(arg, (size_t)(eq - arg));
    if (!alias) return cli_error(CMD, "out of memory"), false;
    bool ok = entries_add(es, alias, eq + 1, bytes, "-m");
    free(alias);
    return ok;
}

/* --keep-alive: seconds, with s, m or h; negative: never. */
static bool parse_duration(const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || errno || !isfinite(v)) goto bad;
    if (strcmp(end, "h") == 0) v *= 3600;
    else if (strcmp(end, "m") == 0) v *= 60;
    else if (strcmp(end, "ms") == 0) v /= 1000;
    else if (*end && strcmp(end, "s") != 0) goto bad;
    if (v > 1e9) goto bad;
    *out = v < 0 ? -1 : v;
    return true;
bad:
    cli_usage_error(CMD, "--keep-alive: '%s' is not a duration (5m, 30s, 1h, 0, -1)", arg);
    return false;
}

/* ---- loading a model ---------------------------------------------------- */

/* What every load uses: the flags. */
struct loader {
    const struct cli_model_source *src;
    const struct cli_spec *spec;
    const struct cli_context_opts *copts;
    const char *template_spec;
    bool split_reasoning;
    int32_t parallel;
    long kv_size;
    int kv_block, max_tokens;
    bool no_prefix_cache;
    float prefill_share;        /* --prefill-share; 0: the engine's default */
    const char *cache_dir;      /* --cache-dir, or NULL */
    bool cache_per_model;       /* a table of models: each in cache_dir/ALIAS */
    uint64_t cache_disk_bytes;  /* --cache-disk-size (each model's, in a table) */
    hearth_pipeline *pipe;      /* --pp: rank 0 of the pipeline, or NULL */
    const struct cli_pipeline_opts *pp;
    bool usage_error;    /* the last load failed for the flags (the one model of -m FILE) */
};

/* What one load made. */
struct instance {
    hearth_model *model, *draft;
    hearth_engine *engine;
    struct chat_prompt cp;
    struct cli_spec spec;
    bool mtp;
    hearth_pipeline *pipe; /* the model's layers run over a pipeline's ranks */
    char cache_dir[4096];  /* the engine's disk tier, where it has one */
};

static void instance_free(struct instance *in)
{
    if (!in) return;
    hearth_engine_free(in->engine);
    chat_prompt_free(&in->cp);
    hearth_model_free(in->model);
    hearth_model_free(in->draft);
    free(in);
}

/* The other ranks of the pipeline (struct srv_loaded's check), on the
 * engine's thread: gone when a message to them was lost; with wait, a
 * message through all of them and back. */
static bool pipeline_check(void *owner, bool wait, char *why, size_t why_size)
{
    const struct instance *in = owner;
    if (hearth_pipeline_check(in->pipe, wait) == HEARTH_OK) return true;
    snprintf(why, why_size, "%s", hearth_last_error());
    return false;
}

static void unload_model(void *user, struct srv_loaded *l)
{
    (void)user;
    instance_free(l->owner);
}

static bool load_model(void *user, const char *alias, const char *path, struct srv_loaded *out, char *why,
                       size_t why_size)
{
    struct loader *L = user;
    L->usage_error = false;
    struct instance *in = calloc(1, sizeof *in);
    if (!in) return snprintf(why, why_size, "out of memory"), false;
    in->spec = *L->spec;
    hearth_status st = hearth_model_load(path, &L->src->params, &in->model);
    if (st) {
        snprintf(why, why_size, "%s", hearth_last_error());
        goto fail;
    }
    if (L->pipe) {
        /* rank 0: the start-up check with the other ranks, which have
         * loaded their layers of the same file */
        bool served;
        if (cli_pipeline_start(CMD, L->pipe, L->pp, L->copts, in->model, &served) != CLI_EXIT_OK) {
            snprintf(why, why_size, "the pipeline's start-up check failed (the log says why)");
            goto fail;
        }
        in->pipe = L->pipe;
    }
    const hearth_vocab *vocab = hearth_model_vocab(in->model);
    if (!vocab) {
        snprintf(why, why_size, "%s has no tokenizer", path);
        goto fail;
    }
    const char *tmpl_text;
    if (L->template_spec || hearth_gguf_get_str(hearth_model_gguf(in->model), "tokenizer.chat_template",
                                                &tmpl_text) == HEARTH_OK) {
        if (chat_prompt_load(CMD, L->template_spec, hearth_model_gguf(in->model), vocab, &in->cp) != CLI_EXIT_OK) {
            snprintf(why, why_size, "%s: its chat template cannot be used (the server's log says why)", path);
            goto fail;
        }
    } else {
        fprintf(stderr, "hearth: %s: warning: the model %s has no chat template, so /v1/chat/completions "
                "refuses its requests; give one with --chat-template NAME|FILE\n", CMD, alias);
    }
    hearth_engine_params ep;
    hearth_engine_default_params(&ep);
    cli_engine_apply(L->copts, &ep);
    int32_t n_ctx = L->copts->n_ctx;
    if (n_ctx == 0) {
        n_ctx = hearth_model_n_ctx_train(in->model);
        if (n_ctx <= 0 || n_ctx > 4096) n_ctx = 4096;
    }
    ep.n_ctx = n_ctx;
    ep.n_seq_max = L->parallel;
    ep.block_tokens = L->kv_block;
    ep.kv_tokens = L->kv_size ? L->kv_size : (int64_t)n_ctx * L->parallel;
    ep.no_prefix_cache = L->no_prefix_cache;
    ep.prefill_share = L->prefill_share;
    if (L->cache_dir) {
        /* the models of a table keep their blocks apart, each directory
         * locked by its own engine */
        const int n = L->cache_per_model
                          ? snprintf(in->cache_dir, sizeof in->cache_dir, "%s/%s", L->cache_dir, alias)
                          : snprintf(in->cache_dir, sizeof in->cache_dir, "%s", L->cache_dir);
        if (n < 0 || (size_t)n >= sizeof in->cache_dir) {
            snprintf(why, why_size, "--cache-dir %s: the path is too long", L->cache_dir);
            goto fail;
        }
        ep.cache_dir = in->cache_dir;
        ep.cache_disk_bytes = L->cache_disk_bytes;
    }
    /* the model's own prediction layer drafts unless told otherwise */
    if (cli_spec_use_mtp(CMD, &in->spec, in->model, !L->pipe, &in->mtp) != CLI_EXIT_OK) {
        snprintf(why, why_size, "%s: the speculation flags do not fit the model (the server's log says why)", path);
        L->usage_error = true;
        goto fail;
    }
    if (cli_spec_load_draft(CMD, &in->spec, &L->src->params, &in->draft) != CLI_EXIT_OK) {
        snprintf(why, why_size, "the draft model could not be loaded (the server's log says why)");
        goto fail;
    }
    ep.draft_model = in->draft;
    ep.mtp = in->mtp;
    st = hearth_engine_new(in->model, &ep, &in->engine);
    if (st) {
        snprintf(why, why_size, "%s%s", hearth_last_error(),
                 st == HEARTH_E_NOMEM ? "; a smaller pool needs less: --kv-size, -c or --parallel" : "");
        goto fail;
    }
    cli_model_report_engine_offload(stderr, CMD, in->model, in->engine);
    hearth_engine_get_params(in->engine, &ep);
    hearth_engine_stats es;
    hearth_engine_get_stats(in->engine, &es);
    if (es.max_full_sequences == 0) {
        /* a lone request would be cut short by the pool, not the context */
        snprintf(why, why_size, "--kv-size %ld holds less than one sequence of the full context (%d positions); "
                 "give at least %d, or a smaller -c", L->kv_size, ep.n_ctx, ep.n_ctx);
        L->usage_error = true;
        goto fail;
    }
    const struct chat_prompt *cp = &in->cp;
    out->model = in->model;
    out->engine = in->engine;
    out->tmpl = cp->tmpl;
    out->tool_format = srv_tool_format_detect(cp->text ? NULL : cp->source, cp->text);
    /* the markers of the reasoning, from the template's text */
    out->reasoning = L->split_reasoning && cp->text ? hearth_reasoning_format_detect(cp->text, strlen(cp->text))
                                                    : HEARTH_REASONING_NONE;
    out->bos_text = cp->bos_text ? cp->bos_text : "";
    out->eos_text = cp->eos_text ? cp->eos_text : "";
    out->max_tokens_cap = L->max_tokens ? L->max_tokens : ep.n_ctx;
    out->speculation = in->spec.speculation;
    if (in->pipe) {
        /* a rank that stops answering fails the server, idle or not */
        out->check = pipeline_check;
        out->check_interval_s = 1;
        out->check_code = "pipeline_failed";
    }
    out->owner = in;
    return true;
fail:
    instance_free(in);
    return false;
}

/* A rank other than 0 of a pipeline: its layers of the model, for rank
 * 0's engine, until rank 0 closes the pipeline.  A CLI exit status. */
static int serve_rank(const struct cli_model_source *src, const struct cli_pipeline_opts *pp,
                      const struct cli_context_opts *copts, hearth_pipeline *pipe)
{
    char *path = NULL;
    hearth_model *model = NULL;
    int rc = cli_model_resolve(CMD, src, &path);
    if (rc == CLI_EXIT_OK && hearth_model_load(path, &src->params, &model) != HEARTH_OK)
        rc = cli_error(CMD, "rank %d: %s", hearth_pipeline_rank(pipe), hearth_last_error());
    bool served;
    if (rc == CLI_EXIT_OK) rc = cli_pipeline_start(CMD, pipe, pp, copts, model, &served);
    hearth_model_free(model);
    free(path);
    return rc;
}

int cmd_serve(int argc, char **argv)
{
    enum {
        OPT_HOST = 0x2000, OPT_PORT, OPT_ALIAS, OPT_CHAT_TEMPLATE, OPT_PARALLEL,
        OPT_KV_SIZE, OPT_KV_BLOCK, OPT_NO_PREFIX_CACHE, OPT_MAX_BODY, OPT_MAX_TOKENS, OPT_MAX_QUEUE,
        OPT_MAX_CONN, OPT_TIMEOUT, OPT_GRACE, OPT_IDLE, OPT_API_KEY, OPT_API_KEY_FILE, OPT_SSL_KEY,
        OPT_SSL_CERT, OPT_REQUEST_TIMEOUT, OPT_REASONING_FORMAT, OPT_REASONING_BUDGET, OPT_NO_WEBUI,
        OPT_RESPONSES_STORE, OPT_RESPONSES_STORE_BYTES, OPT_POOLING, OPT_MODELS_DIR, OPT_KEEP_ALIVE,
        OPT_MAX_MEMORY, OPT_CACHE_DIR, OPT_CACHE_DISK_SIZE, OPT_PREFILL_SHARE
    };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"alias", required_argument, NULL, OPT_ALIAS},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"reasoning-format", required_argument, NULL, OPT_REASONING_FORMAT},
        {"reasoning-budget", required_argument, NULL, OPT_REASONING_BUDGET},
        {"pooling", required_argument, NULL, OPT_POOLING},
        {"models-dir", required_argument, NULL, OPT_MODELS_DIR},
        {"keep-alive", required_argument, NULL, OPT_KEEP_ALIVE},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        CLI_CONTEXT_LONG_OPTIONS,
        {"parallel", required_argument, NULL, OPT_PARALLEL},
        {"prefill-share", required_argument, NULL, OPT_PREFILL_SHARE},
        {"kv-size", required_argument, NULL, OPT_KV_SIZE},
        {"kv-block", required_argument, NULL, OPT_KV_BLOCK},
        {"no-prefix-cache", no_argument, NULL, OPT_NO_PREFIX_CACHE},
        {"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
        {"cache-disk-size", required_argument, NULL, OPT_CACHE_DISK_SIZE},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"max-tokens", required_argument, NULL, OPT_MAX_TOKENS},
        {"max-queue", required_argument, NULL, OPT_MAX_QUEUE},
        {"max-connections", required_argument, NULL, OPT_MAX_CONN},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"responses-store", required_argument, NULL, OPT_RESPONSES_STORE},
        {"responses-store-bytes", required_argument, NULL, OPT_RESPONSES_STORE_BYTES},
        {"idle-timeout", required_argument, NULL, OPT_IDLE},
        {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
        {"api-key", required_argument, NULL, OPT_API_KEY},
        {"api-key-file", required_argument, NULL, OPT_API_KEY_FILE},
        {"ssl-key-file", required_argument, NULL, OPT_SSL_KEY},
        {"ssl-cert-file", required_argument, NULL, OPT_SSL_CERT},
        {"no-webui", no_argument, NULL, OPT_NO_WEBUI},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        CLI_SAMPLING_LONG_OPTIONS,
        CLI_SPEC_LONG_OPTIONS,
        CLI_PIPELINE_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    struct cli_sampling sampling;
    struct cli_spec spec;
    cli_spec_init(&spec);
    cli_model_source_init(&src);
    cli_sampling_init(&sampling);
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
    struct cli_pipeline_opts pp = {0};
    hearth_pipeline *pipe = NULL;
    struct srv_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.host = "127.0.0.1";
    cfg.port = 8080;
    cfg.parallel = 4;
    cfg.max_queue = 64;
    cfg.max_connections = 256;
    cfg.max_body = 1 << 20;
    cfg.timeout_s = 600;
    cfg.idle_timeout_s = 60;
    cfg.reasoning_budget = -1;
    cfg.responses_store = 256;
    cfg.responses_store_bytes = 64 << 20;
    float grace = 30, timeout = 600, request_timeout = 30, prefill_share = 0;
    int kv_block = 0, max_tokens = 0, idle = 60;
    long kv_size = 0, max_body = 1 << 20;
    bool no_prefix_cache = false, verbose = cli_verbose > 0, split_reasoning = true;
    const char *template_spec = NULL, *alias = NULL, *ssl_key = NULL, *ssl_cert = NULL, *cache_dir = NULL;
    uint64_t cache_disk_size = 0;
    char *keys[MAX_KEYS];
    char *key_files[8];
    size_t n_keys = 0, n_key_files = 0;
    char *key_store[8] = {0};
    int rc = CLI_EXIT_USAGE;
    /* the model table: -m arguments (FILE or ALIAS=FILE) and --models-dir */
    const char **model_args = calloc((size_t)argc + 1, sizeof *model_args);
    size_t n_model_args = 0;
    const char *models_dir = NULL;
    bool keep_alive_given = false;
    struct entries entries = {0};
    if (!model_args) return cli_error(CMD, "out of memory");

    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:c:b:t:vh", longopts)) != -1) {
        if (c == 'm') {
            model_args[n_model_args++] = optarg;
            continue;
        }
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r == 0) r = cli_sampling_option(CMD, &sampling, c, optarg);
        if (r == 0) r = cli_spec_option(CMD, &spec, c, optarg);
        if (r == 0) r = cli_context_option(CMD, &copts, c, optarg);
        if (r == 0) r = cli_pipeline_option(CMD, &pp, c, optarg);
        if (r < 0) goto done;
        if (r > 0) continue;
        bool ok = true;
        switch (c) {
        case OPT_HOST: cfg.host = optarg; break;
        case OPT_PORT: ok = cli_parse_int(CMD, "--port", optarg, 0, 65535, &cfg.port); break;
        case OPT_ALIAS:
            if (!*optarg) {
                cli_usage_error(CMD, "--alias: the name is empty");
                goto done;
            }
            alias = optarg;
            break;
        case OPT_CHAT_TEMPLATE: template_spec = optarg; break;
        case OPT_REASONING_FORMAT:
            if (strcmp(optarg, "deepseek") != 0 && strcmp(optarg, "none") != 0) {
                cli_usage_error(CMD, "--reasoning-format: '%s' is not deepseek or none", optarg);
                goto done;
            }
            split_reasoning = strcmp(optarg, "deepseek") == 0;
            break;
        case OPT_REASONING_BUDGET: ok = cli_parse_reasoning_budget(CMD, optarg, &cfg.reasoning_budget); break;
        case OPT_POOLING: ok = cli_parse_pooling(CMD, optarg, &cfg.pooling); break;
        case OPT_MODELS_DIR:
            if (models_dir) {
                cli_usage_error(CMD, "--models-dir: give it once");
                goto done;
            }
            models_dir = optarg;
            break;
        case OPT_KEEP_ALIVE:
            ok = parse_duration(optarg, &cfg.keep_alive_s);
            keep_alive_given = true;
            break;
        case OPT_MAX_MEMORY: ok = cli_parse_size(CMD, "--max-memory", optarg, 0, &cfg.max_memory); break;
        case OPT_PARALLEL: ok = cli_parse_int(CMD, "--parallel", optarg, 1, 4096, &cfg.parallel); break;
        case OPT_PREFILL_SHARE:
            ok = cli_parse_float(CMD, "--prefill-share", optarg, 0, 1, &prefill_share);
            if (ok && prefill_share == 0) {
                cli_usage_error(CMD, "--prefill-share: %s is not above 0 (a share of the step, up to 1)", optarg);
                ok = false;
            }
            break;
        case OPT_KV_SIZE: ok = cli_parse_long(CMD, "--kv-size", optarg, 16, 1L << 30, &kv_size); break;
        case OPT_KV_BLOCK:
            ok = cli_parse_int(CMD, "--kv-block", optarg, 16, 1024, &kv_block);
            /* the engine refuses it too, but only after the port is bound */
            if (ok && (kv_block & (kv_block - 1))) {
                cli_usage_error(CMD, "--kv-block: %d is not a power of two", kv_block);
                ok = false;
            }
            break;
        case OPT_NO_PREFIX_CACHE: no_prefix_cache = true; break;
        case OPT_CACHE_DIR:
            cache_dir = optarg;
            if (!*cache_dir) {
                cli_usage_error(CMD, "--cache-dir: the directory's name is empty");
                ok = false;
            }
            break;
        case OPT_CACHE_DISK_SIZE: ok = cli_parse_size(CMD, "--cache-disk-size", optarg, 1, &cache_disk_size); break;
        case OPT_MAX_BODY: ok = cli_parse_long(CMD, "--max-body", optarg, 64, 1L << 30, &max_body); break;
        case OPT_MAX_TOKENS: ok = cli_parse_int(CMD, "--max-tokens", optarg, 1, 1 << 24, &max_tokens); break;
        case OPT_MAX_QUEUE: ok = cli_parse_int(CMD, "--max-queue", optarg, 0, 1 << 20, &cfg.max_queue); break;
        case OPT_MAX_CONN:
            ok = cli_parse_int(CMD, "--max-connections", optarg, 1, 65536, &cfg.max_connections);
            break;
        case OPT_TIMEOUT: ok = cli_parse_float(CMD, "--timeout", optarg, 0, 1e7, &timeout); break;
        case OPT_GRACE: ok = cli_parse_float(CMD, "--grace", optarg, 0, 1e6, &grace); break;
        case OPT_RESPONSES_STORE: {
            int n = 0;
            ok = cli_parse_int(CMD, "--responses-store", optarg, 0, 1 << 20, &n);
            cfg.responses_store = (size_t)n;
            break;
        }
        case OPT_RESPONSES_STORE_BYTES: {
            long n = 0;
            ok = cli_parse_long(CMD, "--responses-store-bytes", optarg, 0, 1L << 40, &n);
            cfg.responses_store_bytes = (size_t)n;
            break;
        }
        case OPT_IDLE: ok = cli_parse_int(CMD, "--idle-timeout", optarg, 1, 1 << 20, &idle); break;
        case OPT_REQUEST_TIMEOUT:
            ok = cli_parse_float(CMD, "--request-timeout", optarg, 0.1f, 1e6, &request_timeout);
            break;
        case OPT_API_KEY:
            if (!*optarg) {
                cli_usage_error(CMD, "--api-key: the key is empty");
                goto done;
            }
            if (n_keys == MAX_KEYS) {
                cli_usage_error(CMD, "--api-key: at most %d keys", MAX_KEYS);
                goto done;
            }
            keys[n_keys++] = optarg;
            break;
        case OPT_API_KEY_FILE:
            if (n_key_files == 8) {
                cli_usage_error(CMD, "--api-key-file: at most 8 files");
                goto done;
            }
            key_files[n_key_files++] = optarg;
            break;
        case OPT_SSL_KEY: ssl_key = optarg; break;
        case OPT_SSL_CERT: ssl_cert = optarg; break;
        case OPT_NO_WEBUI: cfg.no_webui = true; break;
        case 'v': verbose = true; break;
        case 'h':
            usage(stdout);
            rc = CLI_EXIT_OK;
            goto done;
        default:
            rc = cli_option_error(CMD, c, argv);
            goto done;
        }
        if (!ok) goto done;
    }
    if (optind < argc) {
        cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
        goto done;
    }
    /* one model (-m FILE, -hf, --url: loaded before the server is
     * ready, as before the table), or a table of them */
    const bool table = models_dir || n_model_args > 1 ||
                       (n_model_args == 1 && strchr(model_args[0], '=') && !file_size(model_args[0], &(uint64_t){0}));
    if (table) {
        if (src.hf || src.url) {
            cli_usage_error(CMD, "-hf and --url name the one model served; with --models-dir or -m ALIAS=FILE, "
                            "name files (hearth pull fetches them)");
            goto done;
        }
        if (alias) {
            cli_usage_error(CMD, "--alias names the one model of -m FILE; with --models-dir or -m ALIAS=FILE, the "
                            "names are the files' or the ALIASes");
            goto done;
        }
        if (spec.draft_path) {
            cli_usage_error(CMD, "--model-draft drafts for one model; serve several without it");
            goto done;
        }
        for (size_t i = 0; i < n_model_args; i++)
            if (!model_arg(model_args[i], &entries)) goto done;
        if (models_dir && !scan_models_dir(models_dir, &entries)) goto done;
        if (!keep_alive_given) cfg.keep_alive_s = 300;
    } else {
        if (n_model_args == 1) src.path = model_args[0];
        if (n_model_args == 1 && (src.hf || src.url)) {
            cli_usage_error(CMD, "give one model source: -m, -hf or --url");
            goto done;
        }
        if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) goto done;
        if (!keep_alive_given) cfg.keep_alive_s = -1;
    }
    if (pp.pp > 1 || pp.tp > 1) {
        /* what a pipeline does not run (yet) */
        const char *no = table ? "--models-dir and -m ALIAS=FILE (it serves the one model of -m FILE, -hf or --url)"
                         : spec.draft_path ? "--model-draft"
                         : src.offload_given ? "offloading to a device (-ngl, --device, --gpu-fallback)"
                         : cache_dir ? "--cache-dir (each rank holds its own layers' keys and values)"
                         : keep_alive_given && cfg.keep_alive_s >= 0 ? "--keep-alive (the model stays loaded)"
                         : NULL;
        if (no) {
            if (pp.tp <= 1) cli_usage_error(CMD, "--pp %d: not with %s", pp.pp, no);
            else if (pp.pp <= 1) cli_usage_error(CMD, "--tp %d: not with %s", pp.tp, no);
            else cli_usage_error(CMD, "--pp %d --tp %d: not with %s", pp.pp, pp.tp, no);
            goto done;
        }
    }
    if (cache_disk_size && !cache_dir) {
        cli_usage_error(CMD, "--cache-disk-size needs --cache-dir");
        goto done;
    }
    if (cache_dir && no_prefix_cache) {
        cli_usage_error(CMD, "--cache-dir keeps the prefix cache's blocks: not with --no-prefix-cache");
        goto done;
    }
    cfg.disk_cache = cache_dir != NULL;
    if (!ssl_key != !ssl_cert) {
        cli_usage_error(CMD, "HTTPS needs both --ssl-key-file and --ssl-cert-file");
        goto done;
    }
    cli_sampling_finish(&sampling);
    if (cli_spec_finish(CMD, &spec) != CLI_EXIT_OK) goto done;
    rc = CLI_EXIT_FAILURE;
    /* a table's models keep their blocks in directories of their own
     * under the one given, which must be there for them */
    if (table && cache_dir && mkdir(cache_dir, 0777) != 0 && errno != EEXIST) {
        cli_error(CMD, "--cache-dir %s: %s", cache_dir, strerror(errno));
        goto done;
    }
    for (size_t i = 0; i < n_key_files; i++)
        if (!read_keys(key_files[i], keys, &n_keys, &key_store[i])) goto done;
    if (n_key_files > 0 && n_keys == 0) {
        cli_error(CMD, "the API key files hold no key");
        goto done;
    }
    cfg.api_keys = (const char *const *)keys;
    cfg.n_api_keys = n_keys;
    cfg.max_body = (size_t)max_body;
    cfg.timeout_s = timeout;
    cfg.idle_timeout_s = idle;
    cfg.request_timeout_s = request_timeout;
    cfg.sampling = sampling.params;
    char *tls_key = NULL, *tls_cert = NULL;
    if (ssl_key) {
        size_t n;
        tls_key = cli_read_file(CMD, ssl_key, &n);
        tls_cert = tls_key ? cli_read_file(CMD, ssl_cert, &n) : NULL;
        if (!tls_cert) {
            free(tls_key);
            goto done;
        }
        cfg.tls_key_pem = tls_key;
        cfg.tls_cert_pem = tls_cert;
    }

    /* SIGINT and SIGTERM are taken with sigwait() below; every thread
     * started from here on has them blocked.  SIGPIPE is not wanted at
     * all: a client that hangs up is an error on the socket. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    /* --pp: join the MPI job (its threads start with the signals
     * blocked); the other ranks load their layers and run them for
     * rank 0, which serves */
    if (cli_pipeline_open(CMD, &pp, &src, &pipe) != CLI_EXIT_OK) goto done;
    if (pipe && hearth_pipeline_rank(pipe) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
        rc = serve_rank(&src, &pp, &copts, pipe);
        goto done;
    }

    char *model_path = NULL, *alias_buf = NULL;
    struct srv_server *server = NULL;
    const char *scheme = tls_key ? "https" : "http";
    int port = 0;
    struct loader loader = {
        .src = &src,
        .spec = &spec,
        .copts = &copts,
        .template_spec = template_spec,
        .split_reasoning = split_reasoning,
        .parallel = cfg.parallel,
        .kv_size = kv_size,
        .kv_block = kv_block,
        .max_tokens = max_tokens,
        .no_prefix_cache = no_prefix_cache,
        .prefill_share = prefill_share,
        .cache_dir = cache_dir,
        .cache_per_model = table,
        .cache_disk_bytes = cache_disk_size,
        .pipe = pipe,
        .pp = &pp,
    };
    const struct srv_model_loader callbacks = {load_model, unload_model, &loader};

    /* listen first: /health says "loading" while the model loads */
    if (!srv_server_start(&cfg, &callbacks, &server, &port)) goto cleanup;
    fprintf(stderr, "hearth: %s: listening on %s://%s%s%s:%d\n", CMD, scheme,
            strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "", port);

    if (table) {
        for (size_t i = 0; i < entries.n; i++)
            if (!srv_server_add_model(server, entries.e[i].alias, entries.e[i].path, entries.e[i].bytes)) goto cleanup;
        if (!srv_server_ready(server)) goto cleanup;
        char keep[48] = "never";
        if (cfg.keep_alive_s >= 0) snprintf(keep, sizeof keep, "%g s", cfg.keep_alive_s);
        char mem[32] = "no bound";
        if (cfg.max_memory) cli_format_bytes(mem, sizeof mem, (double)cfg.max_memory);
        fprintf(stderr, "hearth: %s: ready: %zu models, each loaded when a request names it; idle ones "
                "unloaded after %s; memory: %s%s\n", CMD, entries.n, keep, mem, n_keys ? "; API keys required" : "");
        if (cache_dir)
            fprintf(stderr, "hearth: %s: prefix cache on disk: each model's blocks in %s/ALIAS\n", CMD, cache_dir);
        for (size_t i = 0; i < entries.n; i++) {
            char size[32];
            cli_format_bytes(size, sizeof size, (double)entries.e[i].bytes);
            fprintf(stderr, "hearth: %s: model %s: %s (%s)\n", CMD, entries.e[i].alias, entries.e[i].path, size);
        }
        if (!cfg.no_webui)
            fprintf(stderr, "hearth: %s: the chat page: %s://%s%s%s:%d/\n", CMD, scheme,
                    strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "", port);
    } else {
        rc = cli_model_resolve(CMD, &src, &model_path);
        if (rc != CLI_EXIT_OK) goto cleanup;
        rc = CLI_EXIT_FAILURE;
        const char *name = alias;
        if (!name) {
            alias_buf = alias_of(model_path);
            if (!alias_buf) goto cleanup;
            name = alias_buf;
        }
        uint64_t bytes = 0;
        file_size(model_path, &bytes);
        if (!srv_server_add_model(server, name, model_path, bytes)) goto cleanup;
        const struct srv_loaded *l = NULL;
        char why[600];
        if (!srv_server_preload(server, name, &l, why, sizeof why)) {
            if (loader.usage_error) rc = cli_usage_error(CMD, "%s", why);
            else cli_error(CMD, "%s", why);
            goto cleanup;
        }
        if (!srv_server_ready(server)) goto cleanup;
        const struct instance *in = l->owner;
        hearth_engine_params ep;
        hearth_engine_get_params(l->engine, &ep);
        hearth_engine_stats es;
        hearth_engine_get_stats(l->engine, &es);
        const char *source = in->cp.tmpl ? in->cp.source : "none";
        char pool[32], window[96] = "";
        cli_format_bytes(pool, sizeof pool, (double)es.kv_bytes);
        if (es.window > 0)
            snprintf(window, sizeof window, ", the sliding layers' %d blocks for windows of %d", es.window_blocks,
                     es.window);
        char budget[48] = "";
        if (l->reasoning != HEARTH_REASONING_NONE && cfg.reasoning_budget >= 0)
            snprintf(budget, sizeof budget, " (budget %d tokens)", (int)cfg.reasoning_budget);
        fprintf(stderr, "hearth: %s: ready: model %s (%s), context %d, %d sequences at once, batch %d, "
                "%d threads; KV pool %d blocks of %d positions%s (%s), %d sequences of the full context at "
                "once; chat template: %s, tool calls: %s, reasoning: %s%s%s\n", CMD, name,
                hearth_model_desc(l->model), ep.n_ctx, ep.n_seq_max, ep.n_batch, ep.n_threads, es.n_blocks,
                es.block_tokens, window, pool, es.max_full_sequences, source, srv_tool_format_name(l->tool_format),
                hearth_reasoning_format_name(l->reasoning), budget, n_keys ? "; API keys required" : "");
        cli_model_report_memory(stderr, CMD, l->model, l->engine);
        if (ep.cache_dir) {
            char held[32], bound[32];
            cli_format_bytes(held, sizeof held, (double)es.disk_bytes);
            cli_format_bytes(bound, sizeof bound, (double)ep.cache_disk_bytes);
            fprintf(stderr, "hearth: %s: prefix cache on disk: %s, %llu files (%s) of at most %s\n", CMD,
                    ep.cache_dir, (unsigned long long)es.disk_files, held, bound);
        }
        if (!cfg.no_webui)
            fprintf(stderr, "hearth: %s: the chat page: %s://%s%s%s:%d/\n", CMD, scheme,
                    strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "", port);
        cli_pipeline_report(stderr, CMD, pipe, l->model);
        if (l->reasoning == HEARTH_REASONING_NONE && cfg.reasoning_budget >= 0)
            fprintf(stderr, "hearth: %s: --reasoning-budget does nothing: the replies have no reasoning apart "
                    "(chat template: %s%s)\n", CMD, source, split_reasoning ? "" : "; --reasoning-format none");
        if (in->mtp)
            fprintf(stderr, "hearth: %s: speculation: the model's multi-token-prediction layer drafts up to %d "
                    "tokens a step (--no-mtp: none)\n", CMD, l->speculation.draft_max);
        if (cfg.keep_alive_s >= 0)
            fprintf(stderr, "hearth: %s: the model is unloaded after %g s without requests (--keep-alive) and "
                    "loaded again by the next\n", CMD, cfg.keep_alive_s);
        if (verbose)
            fprintf(stderr, "hearth: %s: model %s: %.2f MiB of weights, %llu bytes of KV a position\n", CMD,
                    model_path, hearth_model_size_bytes(l->model) / 1048576.0,
                    (unsigned long long)es.bytes_per_token);
    }

    /* a signal, or the server's failure (a pipeline's rank gone) */
    int sig = 0;
    const char *failure = NULL;
    while (sig <= 0 && !(failure = srv_server_failure(server))) {
        const struct timespec tick = {0, 100 * 1000 * 1000};
        sig = sigtimedwait(&sigs, NULL, &tick);
    }
    if (failure) {
        /* the running requests end with the failure; the server answers
         * 503 saying why until the grace is over (or a signal comes) */
        fprintf(stderr, "hearth: %s: ending in %g s (--grace; at once on SIGTERM): the running requests fail, "
                "/health and new requests get 503\n", CMD, grace);
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        const double end = (double)t.tv_sec + (double)t.tv_nsec * 1e-9 + grace;
        srv_server_drain(server, grace);
        for (;;) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)t.tv_sec + (double)t.tv_nsec * 1e-9 >= end) break;
            const struct timespec tick = {0, 100 * 1000 * 1000};
            if (sigtimedwait(&sigs, NULL, &tick) > 0) break;
        }
        fprintf(stderr, "hearth: %s: stopped: %s\n", CMD, failure);
        goto cleanup;
    }
    fprintf(stderr, "hearth: %s: %s: draining (up to %g s for the running requests)\n", CMD,
            sig == SIGTERM ? "SIGTERM" : "SIGINT", grace);
    int ended = srv_server_drain(server, grace);
    if (ended > 0)
        fprintf(stderr, "hearth: %s: the grace period ran out; %d requests were ended\n", CMD, ended);
    fprintf(stderr, "hearth: %s: stopped\n", CMD);
    rc = CLI_EXIT_OK;

cleanup:
    srv_server_free(server);
    /* a drained pipeline: the other ranks are told to stop, if they are
     * all still there */
    if (pipe && rc == CLI_EXIT_OK && hearth_pipeline_check(pipe, true) != HEARTH_OK) {
        cli_error(CMD, "%s", hearth_last_error());
        rc = CLI_EXIT_FAILURE;
    }
    free(model_path);
    free(alias_buf);
    free(tls_key);
    free(tls_cert);
done:
    for (size_t i = 0; i < 8; i++) free(key_store[i]);
    entries_free(&entries);
    free(model_args);
    cli_sampling_free(&sampling);
    /* a failure ends every rank (and this process) */
    cli_pipeline_close(pipe, rc);
    return rc;
}

#endif /* HEARTH_HAVE_SERVER */
