/*
 * cli.h -- what the subcommands of the hearth program share: their entry
 * points (cmd_<name>, one file each) and the option-parsing and error
 * helpers in options.c.
 *
 * Exit statuses are the same for every command: 0 success, 1 failure (bad
 * model, I/O error, ...), 2 usage error, 130 interrupted by SIGINT.
 */
#ifndef HEARTH_CLI_H
#define HEARTH_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "hearth.h"

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILURE = 1,
    CLI_EXIT_USAGE = 2,
    CLI_EXIT_INTERRUPTED = 130
};

#define HEARTH_COMMAND(name, summary) int cmd_##name(int argc, char **argv);
#include "commands.def"
#undef HEARTH_COMMAND

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLI_PRINTF(fmt, args)
#endif

/* "hearth: COMMAND: message" on stderr plus a pointer to --help; returns
 * CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* getopt_long(), except that a single-dash word is exactly one option:
 * "-hx" is not "-h" followed by "-x" (nor "-hf", to a command without
 * -hf, "-h" and "-f") but an unknown option, so that a mistyped word can
 * never turn into --help or into another option.  A short option that
 * takes an argument still takes the rest of its word ("-n16").  Its '?'
 * for such a word leaves optind past it and optopt 0, so that
 * cli_option_error() names the whole word.  Set optind to 0 before the
 * first call of a parse. */
struct option;
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);

/* After getopt_long() returned '?' or ':' (option strings start with ':'
 * so that a missing argument is told apart): name the offending option in
 * a usage error.  main() turns off getopt's own messages (opterr = 0) so
 * all errors are worded alike.  Returns CLI_EXIT_USAGE. */
int cli_option_error(const char *cmd, int getopt_result, char **argv);

/* "hearth: COMMAND: message" on stderr; returns CLI_EXIT_FAILURE. */
int cli_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Report a failed library call: the last error message, or the status text
 * when there is none.  Returns CLI_EXIT_FAILURE. */
int cli_fail(const char *cmd, hearth_status status);

/* Parse an option argument; on error print a usage error naming the option
 * and return false. */
bool cli_parse_long(const char *cmd, const char *opt, const char *arg,
                    long min, long max, long *out);
bool cli_parse_int(const char *cmd, const char *opt, const char *arg,
                   int min, int max, int *out);
bool cli_parse_u64(const char *cmd, const char *opt, const char *arg, uint64_t *out);
/* A size in bytes of at least min: a number (a fraction allowed),
 * optionally followed by K, M, G or T (powers of 1024, either case) and B
 * or iB.  Every option that takes a size reads it here. */
bool cli_parse_size(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t *out);
bool cli_parse_float(const char *cmd, const char *opt, const char *arg,
                     double min, double max, float *out);

/* A --pooling argument: mean, cls or last; false after a usage error. */
bool cli_parse_pooling(const char *cmd, const char *arg, hearth_pooling *out);

/* A --reasoning argument: show (*hide false) or hide (true); false after
 * a usage error. */
bool cli_parse_reasoning(const char *cmd, const char *arg, bool *hide);
/* A --reasoning-budget argument: tokens of reasoning, 0 to
 * CLI_MAX_REASONING_BUDGET, or -1 for no limit; false after a usage
 * error. */
#define CLI_MAX_REASONING_BUDGET (1 << 30)
bool cli_parse_reasoning_budget(const char *cmd, const char *arg, int32_t *budget);

/* The most any command reads of a file it takes whole (a prompt, a text,
 * messages, a grammar): enough for any context, and a bound for a file
 * without end (/dev/zero, a pipe that never closes) that would otherwise
 * be read until memory runs out.  hearth(1) documents it. */
#define CLI_MAX_INPUT_BYTES ((size_t)64 << 20)

/* Read a whole file (or stdin for "-") of at most CLI_MAX_INPUT_BYTES into
 * a NUL-terminated buffer.  Returns NULL after printing an error. */
char *cli_read_file(const char *cmd, const char *path, size_t *len_out);

/* Write len bytes of p as a JSON string (quoted, escaped). */
void cli_json_string(FILE *out, const char *p, size_t len);

/* "512 B", "3.40 MiB", "12.1 GiB" (binary units). */
void cli_format_bytes(char *out, size_t size, double bytes);

/* Whether the program was asked for verbose output (hearth -v ...). */
extern int cli_verbose;

/* SIGINT (interrupt.c): catch() clears the flag and makes the first ^C set
 * it (a second one kills).  release() restores what was there before the
 * first catch(). */
void cli_interrupt_catch(void);
void cli_interrupt_release(void);
bool cli_interrupted(void);
/* The flag, as a hearth_context abort callback. */
bool cli_should_abort(void *unused);

/* Seconds on the monotonic clock. */
double cli_now_s(void);

#endif /* HEARTH_CLI_H */
