// xalloc.h: allocation that never returns NULL (STYLE S6.2).
//
// Every apex buffer is sized from the config at start-up, so running out of memory later
// is a bug: these log the size and call site and abort. Zero-size requests return a valid
// pointer that may be freed. Aligned memory (64 bytes: a cache line, enough for AVX-512
// and what OpenBLAS likes) is released with xfree like everything else.
#ifndef APEX_XALLOC_H
#define APEX_XALLOC_H

#include <stddef.h>

#define XALLOC_ALIGN 64

void *xmalloc_at(size_t size, const char *file, int line);
void *xcalloc_at(size_t n, size_t size, const char *file, int line);
void *xrealloc_at(void *p, size_t size, const char *file, int line);
void *xaligned_alloc_at(size_t size, const char *file, int line); // zeroed, 64-byte aligned
char *xstrdup_at(const char *s, const char *file, int line);

#define xmalloc(sz) xmalloc_at((sz), __FILE__, __LINE__)
#define xcalloc(n, sz) xcalloc_at((n), (sz), __FILE__, __LINE__)
#define xrealloc(p, sz) xrealloc_at((p), (sz), __FILE__, __LINE__)
#define xaligned_alloc(sz) xaligned_alloc_at((sz), __FILE__, __LINE__)
#define xstrdup(s) xstrdup_at((s), __FILE__, __LINE__)
#define xfree(p) free(p)

#include <stdlib.h>

// Multiplies two sizes; returns 0 and leaves *out untouched on overflow.
int xalloc_mul_ok(size_t a, size_t b, size_t *out);

#endif
