// xalloc.c: see xalloc.h. Out of memory is fatal by design (STYLE S6.2).
#include "xalloc.h"

#include "apex.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

// The calling thread's innermost open tally (NULL: none). Thread-local, so that tallies on
// different threads never share state and need no lock.
static _Thread_local xalloc_tally_t *s_tally;

static void s_count(size_t bytes) {
    if (s_tally) {
        s_tally->bytes += bytes;
        s_tally->blocks++;
    }
}

static _Noreturn void s_oom(size_t size, const char *file, int line) {
    fprintf(stderr, "%s:%d: out of memory allocating %zu bytes\n", file, line, size);
    abort();
}

void *xmalloc_at(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) {
        s_oom(size, file, line);
    }
    s_count(size);
    return p;
}

void *xcalloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        s_oom(n * size, file, line);
    }
    s_count(n * size); // calloc has checked that the product does not overflow
    return p;
}

void *xrealloc_at(void *p, size_t size, const char *file, int line) {
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        s_oom(size, file, line);
    }
    s_count(size);
    return q;
}

void *xaligned_alloc_at(size_t size, const char *file, int line) {
    // aligned_alloc wants a multiple of the alignment.
    size_t rounded = (size + XALLOC_ALIGN - 1) / XALLOC_ALIGN * XALLOC_ALIGN;
    if (rounded == 0) {
        rounded = XALLOC_ALIGN;
    }
    if (rounded < size) {
        s_oom(size, file, line);
    }
    void *p = aligned_alloc(XALLOC_ALIGN, rounded);
    if (!p) {
        s_oom(size, file, line);
    }
    memset(p, 0, rounded);
    s_count(rounded);
    return p;
}

char *xstrdup_at(const char *s, const char *file, int line) {
    size_t n = strlen(s) + 1;
    char *p = xmalloc_at(n, file, line);
    memcpy(p, s, n);
    return p;
}

int xalloc_mul_ok(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) {
        return 0;
    }
    *out = a * b;
    return 1;
}

// ---------------------------------------------------------------------------------------
// tallies

void xalloc_tally_begin(xalloc_tally_t *t) {
    *t = (xalloc_tally_t){.outer = s_tally};
    s_tally = t;
}

void xalloc_tally_end(xalloc_tally_t *t) {
    APEX_ASSERT(s_tally == t); // tallies close in the reverse order of opening
    s_tally = t->outer;
    if (s_tally) {
        s_tally->bytes += t->bytes;
        s_tally->blocks += t->blocks;
    }
    t->outer = NULL;
}
