/*
 * devices.c -- `hearth devices`: the OpenCL devices layers can be
 * offloaded to, optionally with their kernels built (or loaded from the
 * cache); with -m, where a model's layers would run with the given
 * offload options.
 */
#include "config.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "hearth.h"
#include "model_options.h"

#define CMD "devices"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: hearth devices [--json] [--compile]\n"
            "       hearth devices -m MODEL [--gpu-layers N] [--device N] [--gpu-fallback]\n"
            "       hearth devices -hf OWNER/REPO:FILE | --url URL [OFFLOAD OPTIONS]\n"
            "\n"
            "List the OpenCL devices layers can be offloaded to.\n"
            "  --json                  print JSON instead of text\n"
            "  --compile               build each device's kernels (or load them from the\n"
            "                          cache) and report the time taken\n"
            "\n"
            "With a model (-m, -hf, --url), load it with the offload options and report\n"
            "where its layers run.\n");
    cli_model_help(out);
}

struct build_result {
    bool tried;
    bool ok;
    double ms;
    bool cached;
    char error[512];
};

static void print_text(const hearth_device_info *d, int32_t n, const struct build_result *b)
{
    for (int32_t i = 0; i < n; i++) {
        char mem[32], alloc[32];
        cli_format_bytes(mem, sizeof mem, (double)d[i].global_mem_bytes);
        cli_format_bytes(alloc, sizeof alloc, (double)d[i].max_alloc_bytes);
        printf("%s%d: %s\n", i ? "\n" : "", i, d[i].name);
        printf("  type           %s\n", d[i].type);
        printf("  vendor         %s\n", d[i].vendor);
        printf("  platform       %s\n", d[i].platform);
        printf("  OpenCL         %s\n", d[i].version);
        printf("  driver         %s\n", d[i].driver);
        printf("  memory         %s (largest buffer %s)\n", mem, alloc);
        printf("  compute units  %" PRIu32 "\n", d[i].compute_units);
        printf("  fp16           %s\n", d[i].fp16 ? "yes" : "no");
        if (b[i].tried) {
            if (b[i].ok)
                printf("  kernels        %s in %.0f ms\n", b[i].cached ? "loaded from the cache" : "built",
                       b[i].ms);
            else
                printf("  kernels        failed: %s\n", b[i].error);
        }
    }
}

static void json_str_field(const char *name, const char *v)
{
    printf("      \"%s\": ", name);
    cli_json_string(stdout, v, strlen(v));
    printf(",\n");
}

static void print_json(const hearth_device_info *d, int32_t n, const struct build_result *b)
{
    printf("{\n  \"devices\": [");
    for (int32_t i = 0; i < n; i++) {
        printf("%s\n    {\n      \"index\": %d,\n", i ? "," : "", i);
        json_str_field("name", d[i].name);
        json_str_field("type", d[i].type);
        json_str_field("vendor", d[i].vendor);
        json_str_field("platform", d[i].platform);
        json_str_field("opencl_version", d[i].version);
        json_str_field("driver_version", d[i].driver);
        printf("      \"global_mem_bytes\": %" PRIu64 ",\n", d[i].global_mem_bytes);
        printf("      \"max_alloc_bytes\": %" PRIu64 ",\n", d[i].max_alloc_bytes);
        printf("      \"compute_units\": %" PRIu32 ",\n", d[i].compute_units);
        printf("      \"fp16\": %s", d[i].fp16 ? "true" : "false");
        if (b[i].tried) {
            printf(",\n      \"kernels\": {\"ok\": %s", b[i].ok ? "true" : "false");
            if (b[i].ok)
                printf(", \"from_cache\": %s, \"ms\": %.1f}", b[i].cached ? "true" : "false", b[i].ms);
            else {
                printf(", \"error\": ");
                cli_json_string(stdout, b[i].error, strlen(b[i].error));
                printf("}");
            }
        }
        printf("\n    }");
    }
    printf("\n  ]\n}\n");
}

/* Load the model with the offload options and a default context, and
 * say where it runs. */
static int check_model(const char *path, const hearth_model_params *mp)
{
    hearth_model *m;
    hearth_status st = hearth_model_load(path, mp, &m);
    if (st) return cli_fail(CMD, st);
    hearth_context_params cp;
    hearth_context_default_params(&cp);
    hearth_context *ctx;
    st = hearth_context_new(m, &cp, &ctx);
    if (st) {
        int rc = cli_fail(CMD, st);
        hearth_model_free(m);
        return rc;
    }
    char line[1536];
    cli_model_format_offload(line, sizeof line, m, ctx);
    printf("%s: %s\n", path, line);
    if (hearth_context_n_gpu_layers(ctx) > 0) {
        bool cached;
        const double ms = hearth_model_gpu_build_ms(m, &cached);
        char kv[32];
        cli_format_bytes(kv, sizeof kv, (double)hearth_context_kv_device_bytes(ctx));
        printf("KV cache on the device: %s for %d positions; kernels %s in %.0f ms\n", kv,
               hearth_context_n_ctx(ctx), cached ? "loaded from the cache" : "built", ms);
    }
    hearth_context_free(ctx);
    hearth_model_free(m);
    return CLI_EXIT_OK;
}

int cmd_devices(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"compile", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        CLI_MODEL_LONG_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    bool json = false, compile = false;
    struct cli_model_source src;
    cli_model_source_init(&src);
    cli_model_normalize_args(argc, argv);
    int c;
    optind = 0;
    while ((c = cli_getopt(argc, argv, ":hm:", longopts)) != -1) {
        int r = cli_model_option(CMD, &src, c, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (c) {
        case 'j': json = true; break;
        case 'c': compile = true; break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        default: return cli_option_error(CMD, c, argv);
        }
    }
    if (optind != argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
    const bool model = src.path || src.hf || src.url;
    if (model && (json || compile))
        return cli_usage_error(CMD, "a model (-m, -hf, --url) cannot be combined with --json or --compile");
    if (src.offload_given && !model)
        return cli_usage_error(CMD, "--gpu-layers, --device and --gpu-fallback need -m MODEL");
    if (model) {
        char *path;
        int rc = cli_model_resolve(CMD, &src, &path);
        if (rc != CLI_EXIT_OK) return rc;
        rc = check_model(path, &src.params);
        free(path);
        return rc;
    }

    hearth_device_info *list;
    int32_t n;
    hearth_status st = hearth_devices(&list, &n);
    if (st) return cli_fail(CMD, st);
    struct build_result *builds = calloc((size_t)n, sizeof *builds);
    if (!builds) {
        hearth_devices_free(list);
        return cli_error(CMD, "out of memory");
    }
    int rc = CLI_EXIT_OK;
    for (int32_t i = 0; compile && i < n; i++) {
        builds[i].tried = true;
        st = hearth_device_build(i, &builds[i].ms, &builds[i].cached);
        builds[i].ok = st == HEARTH_OK;
        if (st) {
            snprintf(builds[i].error, sizeof builds[i].error, "%s", hearth_last_error());
            rc = CLI_EXIT_FAILURE;
        }
    }
    if (json) print_json(list, n, builds);
    else print_text(list, n, builds);
    free(builds);
    hearth_devices_free(list);
    return rc;
}
