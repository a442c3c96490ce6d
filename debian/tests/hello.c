/* hello.c -- a program built against libhearth with pkg-config: the
 * library's version, and a GGUF file's tensor count when given one. */
#include <hearth.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    hearth_gguf *g;
    printf("libhearth %s\n", hearth_version());
    if (argc < 2) return 0;
    if (hearth_gguf_open(argv[1], &g) != HEARTH_OK) return fprintf(stderr, "%s\n", hearth_last_error()), 1;
    printf("%lld tensors\n", (long long)hearth_gguf_n_tensors(g));
    hearth_gguf_close(g);
    return 0;
}
