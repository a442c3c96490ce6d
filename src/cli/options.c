/*
 * options.c -- option-argument parsing and error reporting shared by every
 * subcommand, so that all of them word their errors the same way.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void vreport(const char *cmd, const char *fmt, va_list ap) CLI_PRINTF(2, 0);

static void vreport(const char *cmd, const char *fmt, va_list ap)
{
    fprintf(stderr, "hearth: %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try 'hearth %s --help' for more information.\n", cmd);
    return CLI_EXIT_USAGE;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
    const int before = optind;
    int longindex = -1;
    int c = getopt_long(argc, argv, shortopts, longopts, &longindex);
    if (c == -1 || c == '?' || c == ':' || longindex >= 0) return c;
    const char *spec = strchr(shortopts, c);
    if (spec && spec[1] == ':') return c; /* it took the rest of its word, or the next */
    /* A flag that ended its word has moved optind past a word that is
     * exactly "-c"; one inside a longer word leaves optind on that word
     * (getopt_long keeps its place within a word to itself). */
    const char word[3] = {'-', (char)c, '\0'};
    if (optind > before && strcmp(argv[optind - 1], word) == 0) return c;
    optind++;
    optopt = 0;
    return '?';
}

int cli_option_error(const char *cmd, int getopt_result, char **argv)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (getopt_result == ':')
        return cli_usage_error(cmd, "option '%s' needs an argument", arg);
    if (optopt && !(arg[0] == '-' && arg[1] == '-'))
        return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    return cli_usage_error(cmd, "unknown option '%s'", arg);
}

int cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, fmt, ap);
    va_end(ap);
    return CLI_EXIT_FAILURE;
}

int cli_fail(const char *cmd, hearth_status status)
{
    const char *msg = hearth_last_error();
    if (!msg || !*msg) msg = hearth_strerror(status);
    return cli_error(cmd, "%s", msg);
}

bool cli_parse_long(const char *cmd, const char *opt, const char *arg,
                    long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end != '\0') {
        cli_usage_error(cmd, "%s: expected an integer, got '%s'", opt, arg);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_usage_error(cmd, "%s: %s is out of range (%ld..%ld)", opt, arg, min, max);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_reasoning(const char *cmd, const char *arg, bool *hide)
{
    if (strcmp(arg, "show") != 0 && strcmp(arg, "hide") != 0) {
        cli_usage_error(cmd, "--reasoning: '%s' is not show or hide", arg);
        return false;
    }
    *hide = strcmp(arg, "hide") == 0;
    return true;
}

bool cli_parse_reasoning_budget(const char *cmd, const char *arg, int32_t *budget)
{
    long v;
    if (!cli_parse_long(cmd, "--reasoning-budget", arg, -1, CLI_MAX_REASONING_BUDGET, &v)) return false;
    *budget = (int32_t)v;
    return true;
}

bool cli_parse_pooling(const char *cmd, const char *arg, hearth_pooling *out)
{
    static const hearth_pooling kinds[] = {HEARTH_POOLING_MEAN, HEARTH_POOLING_CLS, HEARTH_POOLING_LAST};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(arg, hearth_pooling_name(kinds[i])) == 0) {
            *out = kinds[i];
            return true;
        }
    cli_usage_error(cmd, "--pooling '%s': mean, cls or last", arg);
    return false;
}

bool cli_parse_int(const char *cmd, const char *opt, const char *arg,
                   int min, int max, int *out)
{
    long v;
    if (!cli_parse_long(cmd, opt, arg, min, max, &v)) return false;
    *out = (int)v;
    return true;
}

bool cli_parse_u64(const char *cmd, const char *opt, const char *arg, uint64_t *out)
{
    char *end;
    errno = 0;
    if (arg[0] == '-') {
        cli_usage_error(cmd, "%s: expected a non-negative integer, got '%s'", opt, arg);
        return false;
    }
    unsigned long long v = strtoull(arg, &end, 10);
    if (end == arg || *end != '\0' || errno == ERANGE) {
        cli_usage_error(cmd, "%s: expected a non-negative integer, got '%s'", opt, arg);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

bool cli_parse_size(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t *out)
{
    /* digits, an optional fraction, an optional unit (K, M, G, T in either
     * case, powers of 1024) and an optional B or iB after it */
    const char *p = arg;
    uint64_t whole = 0;
    bool digits = false, over = false;
    for (; *p >= '0' && *p <= '9'; p++, digits = true) {
        if (whole > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) over = true;
        else whole = whole * 10 + (uint64_t)(*p - '0');
    }
    double frac = 0, scale = 1;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits = true)
            if (scale < 1e18) frac += (*p - '0') / (scale *= 10);
    }
    int shift = 0;
    static const char units[] = "KMGT";
    const char *u = *p ? strchr(units, toupper((unsigned char)*p)) : NULL;
    if (u) {
        shift = 10 * (int)(u - units + 1);
        p++;
        if (p[0] == 'i' && p[1] == 'B') p++;
    }
    if (*p == 'B') p++;
    /* the bytes: the whole part shifted (checked against overflow), the
     * fraction's bytes rounded down */
    uint64_t v = 0;
    bool ok = digits && !over && *p == '\0' && (shift == 0 || whole <= (UINT64_MAX >> shift));
    if (ok) {
        v = whole << shift;
        uint64_t extra = (uint64_t)(frac * (double)((uint64_t)1 << shift));
        ok = extra <= UINT64_MAX - v;
        v += ok ? extra : 0;
    }
    if (!ok || v < min) {
        cli_usage_error(cmd, "%s: expected a size in bytes, or with K, M, G or T (512M, 1.5G)%s, got '%s'", opt,
                        min == 0 ? "; 0 for no bound" : "", arg);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_float(const char *cmd, const char *opt, const char *arg,
                     double min, double max, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (end == arg || *end != '\0' || isnan(v)) {
        cli_usage_error(cmd, "%s: expected a number, got '%s'", opt, arg);
        return false;
    }
    if (errno == ERANGE || v < min || v > max) {
        cli_usage_error(cmd, "%s: %s is out of range (%g..%g)", opt, arg, min, max);
        return false;
    }
    *out = (float)v;
    return true;
}

char *cli_read_file(const char *cmd, const char *path, size_t *len_out)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        cli_error(cmd, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    /* the buffer grows to two bytes past the limit, to see a longer file */
    const size_t limit = CLI_MAX_INPUT_BYTES;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    const char *failure = buf ? NULL : "out of memory";
    while (!failure) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (len > limit) {
            failure = "too large";
        } else if (len + 1 < cap) {
            if (ferror(f)) failure = strerror(errno);
            break;
        } else {
            size_t bigger_cap = cap * 2 > limit + 2 ? limit + 2 : cap * 2;
            char *bigger = realloc(buf, bigger_cap);
            if (bigger) {
                buf = bigger;
                cap = bigger_cap;
            } else {
                failure = "out of memory";
            }
        }
    }
    if (f != stdin) fclose(f);
    if (failure) {
        free(buf);
        if (len > limit)
            cli_error(cmd, "'%s' is larger than the %zu MiB a command reads", path, limit >> 20);
        else
            cli_error(cmd, "cannot read '%s': %s", path, failure);
        return NULL;
    }
    buf[len] = '\0';
    if (len_out) *len_out = len;
    return buf;
}

void cli_json_string(FILE *out, const char *p, size_t len)
{
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)p[i];
        switch (c) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        case '\b': fputs("\\b", out); break;
        case '\f': fputs("\\f", out); break;
        default:
            if (c < 0x20) fprintf(out, "\\u%04x", c);
            else fputc(c, out);
        }
    }
    fputc('"', out);
}

void cli_format_bytes(char *out, size_t size, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) {
        bytes /= 1024;
        u++;
    }
    if (u == 0) snprintf(out, size, "%.0f B", bytes);
    else snprintf(out, size, bytes < 10 ? "%.2f %s" : "%.1f %s", bytes, units[u]);
}
