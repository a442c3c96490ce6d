/*
 * gpu_options.c -- parsing --device, --gpu-layers/-ngl and --gpu-fallback,
 * and wording the offload report the same way for every command.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gpu_options.h"

void cli_gpu_normalize_args(int argc, char **argv)
{
    static char long_ngl[] = "--ngl";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (strcmp(argv[i], "-ngl") == 0) argv[i] = long_ngl;
    }
}

int cli_gpu_option(const char *cmd, hearth_model_params *params, int opt, const char *arg)
{
    int v;
    switch (opt) {
    case CLI_OPT_DEVICE:
        if (!cli_parse_int(cmd, "--device", arg, 0, 1 << 20, &v)) return -1;
        params->device = v;
        return 1;
    case CLI_OPT_GPU_LAYERS:
        if (!cli_parse_int(cmd, "--gpu-layers", arg, 0, 1 << 20, &v)) return -1;
        params->n_gpu_layers = v;
        return 1;
    case CLI_OPT_GPU_FALLBACK:
        params->gpu_fallback = true;
        return 1;
    default:
        return 0;
    }
}

void cli_gpu_format(char *buf, size_t size, const hearth_model *m, const hearth_context *ctx)
{
    const int32_t n_layer = hearth_model_n_layer(m);
    const char *reason = hearth_model_gpu_fallback(m);
    if (!reason && ctx) reason = hearth_context_gpu_fallback(ctx);
    const int32_t n_gpu = ctx ? hearth_context_n_gpu_layers(ctx) : hearth_model_n_gpu_layers(m);
    /* the output layer is only offloaded with every layer */
    if (n_gpu == 0) {
        if (reason) snprintf(buf, size, "all %d layers on the CPU (offload failed: %s)", n_layer, reason);
        else snprintf(buf, size, "all %d layers on the CPU", n_layer);
        return;
    }
    const bool output = hearth_model_output_on_gpu(m);
    char bytes[32];
    cli_format_bytes(bytes, sizeof bytes, (double)hearth_model_gpu_bytes(m));
    int n = snprintf(buf, size, "%d of %d layers%s on OpenCL device %d (%s), %s uploaded", n_gpu,
                     n_layer, output ? " and the output layer" : "", hearth_model_device(m),
                     hearth_model_device_name(m), bytes);
    if (n < 0 || (size_t)n >= size) return;
    const int32_t n_cpu = n_layer - n_gpu;
    if (n_cpu > 0)
        snprintf(buf + n, size - (size_t)n, "; %d layer%s and the output layer on the CPU", n_cpu,
                 n_cpu == 1 ? "" : "s");
    else if (!output)
        snprintf(buf + n, size - (size_t)n, "; the output layer on the CPU");
}

void cli_gpu_report(FILE *out, const char *cmd, const hearth_model *m, const hearth_context *ctx)
{
    const bool asked = hearth_model_n_gpu_layers(m) > 0 || hearth_model_gpu_fallback(m) ||
                       (ctx && hearth_context_gpu_fallback(ctx));
    if (!asked) return;
    char line[1536];
    cli_gpu_format(line, sizeof line, m, ctx);
    fprintf(out, "hearth: %s: offload: %s\n", cmd, line);
}
