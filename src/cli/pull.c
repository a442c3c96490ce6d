/*
 * pull.c -- hearth pull: download a model into the cache (or find it
 * there) and print its local path, for scripts and for fetching a model
 * ahead of time.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "model_options.h"

static void usage(FILE *out)
{
    fputs("usage: hearth pull [-q] [--timeout SECONDS] -hf OWNER/REPO[:FILE]\n"
          "       hearth pull [-q] [--timeout SECONDS] --url URL\n"
          "\n"
          "Download a model into the cache unless it is there already, and print\n"
          "its local path.\n"
          "\n"
          "  -hf OWNER/REPO[:FILE]  a file of a Hugging Face repository (without\n"
          "                         FILE: its Q4_K_M GGUF file, or its only one)\n"
          "  --url URL              any http:// or https:// URL\n"
          "  -q, --quiet            no progress display\n"
          "  --timeout SECONDS      give up when no data arrives for this long (60)\n"
          "  -h, --help             show this help\n",
          out);
}

int cmd_pull(int argc, char **argv)
{
    enum { OPT_TIMEOUT = 0x2000 };
    static const struct option longopts[] = {
        CLI_DOWNLOAD_LONG_OPTIONS,
        {"quiet", no_argument, NULL, 'q'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "pull";
    struct cli_model_source src;
    cli_model_source_init(&src);
    cli_model_normalize_args(argc, argv);
    optind = 0;
    opterr = 0;
    int opt;
    while ((opt = cli_getopt(argc, argv, "+:qh", longopts)) != -1) {
        int r = cli_model_option(cmd, &src, opt, optarg);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        switch (opt) {
        case 'q': src.quiet = true; break;
        case OPT_TIMEOUT:
            if (!cli_parse_int(cmd, "--timeout", optarg, 1, 86400, &src.stall_timeout_s))
                return CLI_EXIT_USAGE;
            break;
        case 'h': usage(stdout); return CLI_EXIT_OK;
        case ':': return cli_usage_error(cmd, "%s needs an argument", argv[optind - 1]);
        default: return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (src.path) return cli_usage_error(cmd, "-m is not an option of pull");
    if (!src.hf && !src.url)
        return cli_usage_error(cmd, "nothing to download: use -hf OWNER/REPO[:FILE] or --url URL");

    char *path;
    int rc = cli_model_resolve(cmd, &src, &path);
    if (rc != CLI_EXIT_OK) return rc;
    printf("%s\n", path);
    free(path);
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error(cmd, "cannot write to standard output");
    return CLI_EXIT_OK;
}
