// parse.c: see parse.h.
#include "parse.h"

#include <errno.h>
#include <stdlib.h>

int parse_int64_prefix(const char *s, int64_t *out, const char **end) {
    int saved = errno;
    errno = 0;
    char *e = NULL;
    long long x = strtoll(s, &e, 10);
    // strtoll reports overflow only through errno (ERANGE), and no digits through e == s.
    int bad = e == s || errno == ERANGE;
    errno = saved;
    if (bad) {
        return -1;
    }
    *out = (int64_t)x;
    *end = e;
    return 0;
}

int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out) {
    int64_t x;
    const char *end;
    if (parse_int64_prefix(s, &x, &end) != 0 || *end != '\0' || x < min || x > max) {
        return -1;
    }
    *out = x;
    return 0;
}
