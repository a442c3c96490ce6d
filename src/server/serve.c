/*
 * serve.c -- `hearth serve`: the OpenAI HTTP API over the serving engine.
 * The options, the model and engine, signals and the drain live here; the
 * HTTP server itself is the rest of src/server/.
 */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"
#include "prompt.h"
#include "sampling_options.h"
#include "spec_options.h"

#ifdef HEARTH_HAVE_SERVER
#include "server.h"
#endif

#define CMD "serve"
#define MAX_KEYS 64

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth serve (-m MODEL | -hf OWNER/REPO[:FILE] | --url URL) [options]\n"
            "\n"
            "Serve the OpenAI HTTP API (chat and text completions, responses, streaming,\n"
            "embeddings) on the model.\n"
            "  --host ADDR              address to listen on (default 127.0.0.1)\n"
            "  --port N                 port (default 8080; 0: any free port)\n"
            "  --alias NAME             the model's name in the API (default: the file's name)\n"
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
            "  -t, --threads N          threads (default: all processors)\n"
            "  --cache-type TYPE        KV cache type: f32, f16 (default), q8_0\n"
            CLI_SWA_FULL_HELP
            CLI_CHUNK_SIZE_HELP
            "  --kv-size N              positions of the KV pool (default: ctx-size x parallel)\n"
            "  --kv-block N             positions per KV block (default 64)\n"
            "  --no-prefix-cache        do not reuse prompt blocks across requests\n"
            "  --cache-dir DIR          keep the prefix cache's full blocks in DIR too, so\n"
            "                           that they are hits again after a restart\n"
            "  --cache-disk-size SIZE   the most DIR's block files take (K, M, G, T;\n"
            "                           default 1G)\n"
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

int cmd_serve(int argc, char **argv)
{
    enum {
        OPT_HOST = 0x2000, OPT_PORT, OPT_ALIAS, OPT_CHAT_TEMPLATE, OPT_PARALLEL,
        OPT_KV_SIZE, OPT_KV_BLOCK, OPT_NO_PREFIX_CACHE, OPT_MAX_BODY, OPT_MAX_TOKENS, OPT_MAX_QUEUE,
        OPT_MAX_CONN, OPT_TIMEOUT, OPT_GRACE, OPT_IDLE, OPT_API_KEY, OPT_API_KEY_FILE, OPT_SSL_KEY,
        OPT_SSL_CERT, OPT_REQUEST_TIMEOUT, OPT_REASONING_FORMAT, OPT_REASONING_BUDGET, OPT_NO_WEBUI,
        OPT_RESPONSES_STORE, OPT_RESPONSES_STORE_BYTES, OPT_POOLING, OPT_CACHE_DIR, OPT_CACHE_DISK_SIZE
    };
    static const struct option longopts[] = {
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"alias", required_argument, NULL, OPT_ALIAS},
        {"chat-template", required_argument, NULL, OPT_CHAT_TEMPLATE},
        {"reasoning-format", required_argument, NULL, OPT_REASONING_FORMAT},
        {"reasoning-budget", required_argument, NULL, OPT_REASONING_BUDGET},
        {"pooling", required_argument, NULL, OPT_POOLING},
        CLI_CONTEXT_LONG_OPTIONS,
        {"parallel", required_argument, NULL, OPT_PARALLEL},
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
        {NULL, 0, NULL, 0},
    };
    struct cli_model_source src;
    struct cli_sampling sampling;
    struct cli_spec spec;
    cli_spec_init(&spec);
    cli_model_source_init(&src);
    cli_sampling_init(&sampling);
    struct cli_context_opts copts = CLI_CONTEXT_OPTS_INIT;
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
    float grace = 30, timeout = 600, request_timeout = 30;
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

    cli_model_normalize_args(argc, argv);
    cli_spec_normalize_args(argc, argv);
    normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":m:c:b:t:vh", longopts)) != -1) {
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r == 0) r = cli_sampling_option(CMD, &sampling, c, optarg);
        if (r == 0) r = cli_spec_option(CMD, &spec, c, optarg);
        if (r == 0) r = cli_context_option(CMD, &copts, c, optarg);
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
        case OPT_PARALLEL: ok = cli_parse_int(CMD, "--parallel", optarg, 1, 4096, &cfg.parallel); break;
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
        case OPT_CACHE_DISK_SIZE: ok = cli_parse_size(CMD, "--cache-disk-size", optarg, &cache_disk_size); break;
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
    if (cli_model_check(CMD, &src, true) != CLI_EXIT_OK) goto done;
    if (cache_disk_size && !cache_dir) {
        cli_usage_error(CMD, "--cache-disk-size needs --cache-dir");
        goto done;
    }
    if (cache_dir && no_prefix_cache) {
        cli_usage_error(CMD, "--cache-dir keeps the prefix cache's blocks: not with --no-prefix-cache");
        goto done;
    }
    if (!ssl_key != !ssl_cert) {
        cli_usage_error(CMD, "HTTPS needs both --ssl-key-file and --ssl-cert-file");
        goto done;
    }
    cli_sampling_finish(&sampling);
    if (cli_spec_finish(CMD, &spec) != CLI_EXIT_OK) goto done;
    rc = CLI_EXIT_FAILURE;
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
    cfg.speculation = spec.speculation;
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

    char *model_path = NULL, *alias_buf = NULL;
    hearth_model *model = NULL, *draft = NULL;
    hearth_engine *engine = NULL;
    struct chat_prompt cp = {0};
    struct srv_server *server = NULL;
    const char *scheme = tls_key ? "https" : "http";
    int port = 0;

    /* listen first: /health says "loading" while the model loads */
    cfg.alias = alias ? alias : "hearth";
    if (!srv_server_start(&cfg, &server, &port)) goto cleanup;
    fprintf(stderr, "hearth: %s: listening on %s://%s%s%s:%d\n", CMD, scheme,
            strchr(cfg.host, ':') ? "[" : "", cfg.host, strchr(cfg.host, ':') ? "]" : "", port);

    if (cli_model_load(CMD, &src, &model_path, &model) != CLI_EXIT_OK) goto cleanup;
    const hearth_vocab *vocab = hearth_model_vocab(model);
    if (!vocab) {
        cli_error(CMD, "%s has no tokenizer", model_path);
        goto cleanup;
    }
    if (!alias) {
        alias_buf = alias_of(model_path);
        if (!alias_buf) goto cleanup;
        /* the server keeps a pointer to the configuration's alias */
        cfg.alias = alias_buf;
    }
    const char *tmpl_text;
    if (template_spec || hearth_gguf_get_str(hearth_model_gguf(model), "tokenizer.chat_template",
                                             &tmpl_text) == HEARTH_OK) {
        if (chat_prompt_load(CMD, template_spec, hearth_model_gguf(model), vocab, &cp) != CLI_EXIT_OK)
            goto cleanup;
    } else {
        fprintf(stderr, "hearth: %s: warning: the model has no chat template, so /v1/chat/completions "
                "refuses requests; give one with --chat-template NAME|FILE\n", CMD);
    }

    hearth_engine_params ep;
    hearth_engine_default_params(&ep);
    cli_engine_apply(&copts, &ep);
    int32_t n_ctx = copts.n_ctx;
    if (n_ctx == 0) {
        n_ctx = hearth_model_n_ctx_train(model);
        if (n_ctx <= 0 || n_ctx > 4096) n_ctx = 4096;
    }
    ep.n_ctx = n_ctx;
    ep.n_seq_max = cfg.parallel;
    ep.block_tokens = kv_block;
    ep.kv_tokens = kv_size ? kv_size : (int64_t)n_ctx * cfg.parallel;
    ep.no_prefix_cache = no_prefix_cache;
    ep.cache_dir = cache_dir;
    ep.cache_disk_bytes = cache_disk_size;
    /* the model's own prediction layer drafts unless told otherwise */
    bool mtp;
    rc = cli_spec_use_mtp(CMD, &spec, model, true, &mtp);
    if (rc != CLI_EXIT_OK) goto cleanup;
    rc = CLI_EXIT_FAILURE;
    cfg.speculation = spec.speculation;
    if (cli_spec_load_draft(CMD, &spec, &src.params, &draft) != CLI_EXIT_OK) goto cleanup;
    ep.draft_model = draft;
    ep.mtp = mtp;
    hearth_status st = hearth_engine_new(model, &ep, &engine);
    if (st) {
        cli_fail(CMD, st);
        if (st == HEARTH_E_NOMEM)
            fprintf(stderr, "hearth: %s: a smaller pool needs less: --kv-size, -c or --parallel\n", CMD);
        goto cleanup;
    }
    cli_model_report_engine_offload(stderr, CMD, model, engine);
    hearth_engine_get_params(engine, &ep);
    cfg.max_tokens_cap = max_tokens ? max_tokens : ep.n_ctx;
    hearth_engine_stats es;
    hearth_engine_get_stats(engine, &es);
    if (es.max_full_sequences == 0) {
        /* a lone request would be cut short by the pool, not the context */
        cli_usage_error(CMD, "--kv-size %ld holds less than one sequence of the full context (%d "
                        "positions); give at least %d, or a smaller -c", kv_size, ep.n_ctx, ep.n_ctx);
        rc = CLI_EXIT_USAGE;
        goto cleanup;
    }
    const enum srv_tool_format tool_format = srv_tool_format_detect(cp.text ? NULL : cp.source, cp.text);
    /* the markers of the reasoning, from the template's text */
    const hearth_reasoning_format reasoning =
        split_reasoning && cp.text ? hearth_reasoning_format_detect(cp.text, strlen(cp.text))
                                   : HEARTH_REASONING_NONE;
    srv_server_set_reasoning(server, reasoning);
    if (!srv_server_set_limits(server, cfg.alias, cfg.max_tokens_cap, &cfg.speculation) ||
        !srv_server_ready(server, model, engine, cp.tmpl, tool_format, cp.bos_text, cp.eos_text))
        goto cleanup;
    char pool[32], window[96] = "";
    cli_format_bytes(pool, sizeof pool, (double)es.kv_bytes);
    if (es.window > 0)
        snprintf(window, sizeof window, ", the sliding layers' %d blocks for windows of %d", es.window_blocks,
                 es.window);
    char budget[48] = "";
    if (reasoning != HEARTH_REASONING_NONE && cfg.reasoning_budget >= 0)
        snprintf(budget, sizeof budget, " (budget %d tokens)", (int)cfg.reasoning_budget);
    fprintf(stderr, "hearth: %s: ready: model %s (%s), context %d, %d sequences at once, batch %d, "
            "%d threads; KV pool %d blocks of %d positions%s (%s), %d sequences of the full context at "
            "once; chat template: %s, tool calls: %s, reasoning: %s%s%s\n", CMD, cfg.alias, hearth_model_desc(model), ep.n_ctx,
            ep.n_seq_max, ep.n_batch, ep.n_threads, es.n_blocks, es.block_tokens, window, pool,
            es.max_full_sequences, cp.tmpl ? cp.source : "none", srv_tool_format_name(tool_format),
            hearth_reasoning_format_name(reasoning), budget, n_keys ? "; API keys required" : "");
    cli_model_report_memory(stderr, CMD, model, engine);
    if (ep.cache_dir) {
        char held[32], bound[32];
        cli_format_bytes(held, sizeof held, (double)es.disk_bytes);
        cli_format_bytes(bound, sizeof bound, (double)ep.cache_disk_bytes);
        fprintf(stderr, "hearth: %s: prefix cache on disk: %s, %llu blocks (%s) of at most %s\n", CMD,
                ep.cache_dir, (unsigned long long)es.disk_files, held, bound);
    }
    if (!cfg.no_webui)
        fprintf(stderr, "hearth: %s: the chat page: %s://%s%s%s:%d/\n", CMD, scheme, strchr(cfg.host, ':') ? "[" : "",
                cfg.host, strchr(cfg.host, ':') ? "]" : "", port);
    if (reasoning == HEARTH_REASONING_NONE && cfg.reasoning_budget >= 0)
        fprintf(stderr, "hearth: %s: --reasoning-budget does nothing: the replies have no reasoning apart "
                "(chat template: %s%s)\n", CMD, cp.tmpl ? cp.source : "none",
                split_reasoning ? "" : "; --reasoning-format none");
    if (mtp)
        fprintf(stderr, "hearth: %s: speculation: the model's multi-token-prediction layer drafts up to %d "
                "tokens a step (--no-mtp: none)\n", CMD, cfg.speculation.draft_max);
    if (verbose)
        fprintf(stderr, "hearth: %s: model %s: %.2f MiB of weights, %llu bytes of KV a position\n", CMD,
                model_path, hearth_model_size_bytes(model) / 1048576.0,
                (unsigned long long)es.bytes_per_token);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "hearth: %s: %s: draining (up to %g s for the running requests)\n", CMD,
            sig == SIGTERM ? "SIGTERM" : "SIGINT", grace);
    int ended = srv_server_drain(server, grace);
    if (ended > 0)
        fprintf(stderr, "hearth: %s: the grace period ran out; %d requests were ended\n", CMD, ended);
    fprintf(stderr, "hearth: %s: stopped\n", CMD);
    rc = CLI_EXIT_OK;

cleanup:
    srv_server_free(server);
    hearth_engine_free(engine);
    chat_prompt_free(&cp);
    hearth_model_free(model);
    hearth_model_free(draft);
    free(model_path);
    free(alias_buf);
    free(tls_key);
    free(tls_cert);
done:
    for (size_t i = 0; i < 8; i++) free(key_store[i]);
    cli_sampling_free(&sampling);
    return rc;
}

#endif /* HEARTH_HAVE_SERVER */
