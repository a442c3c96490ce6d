/*
 * interrupt.c -- SIGINT for the commands that run long (generation,
 * benchmarks, perplexity, downloads): the first ^C sets a flag that the
 * work polls through cli_should_abort() and stops cleanly on; a second ^C
 * kills the program the usual way.  The handler is installed even where
 * SIGINT was ignored, as it is for a shell's background jobs: kill -INT is
 * how scripts stop a generation and still get its statistics.  Also the
 * monotonic clock they share.
 */
#include "config.h"

#include "cli.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t sigint_seen;
static struct sigaction previous;
static bool caught;

static void on_sigint(int sig)
{
    sigint_seen = 1;
    signal(sig, SIG_DFL);
}

void cli_interrupt_catch(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigint_seen = 0;
    if (sigaction(SIGINT, &sa, &old) != 0) return;
    if (!caught) previous = old;
    caught = true;
}

void cli_interrupt_release(void)
{
    if (!caught) return;
    sigaction(SIGINT, &previous, NULL);
    caught = false;
}

bool cli_interrupted(void)
{
    return sigint_seen != 0;
}

bool cli_should_abort(void *unused)
{
    (void)unused;
    return sigint_seen != 0;
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
