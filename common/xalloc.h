// xalloc.h: allocation that never returns NULL (STYLE S6.2).
//
// Every apex buffer is sized from the config at start-up, so running out of memory later
// is a bug: these log the size and call site and abort. Zero-size requests return a valid
// pointer that may be freed. Aligned memory (64 bytes: a cache line, enough for AVX-512
// and what OpenBLAS likes) is released with xfree like everything else.
//
// Tallies (below) measure what a piece of code allocates through these functions, so that
// a memory figure is read off the allocator rather than recomputed from a formula (the
// trainer's train_memory_t; tests/check_group.c's ZeRO memory test). They are not a heap
// gauge: frees are not counted, and neither is what libc, libzmq or OpenBLAS allocate
// directly.
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

// ---- tallies -----------------------------------------------------------------------------
// A tally counts the blocks and bytes the x* allocators are asked for on one thread while it
// is open: the size requested (xcalloc: n x size; xaligned_alloc: its size rounded up to
// XALLOC_ALIGN, which is what it allocates and zeroes; xrealloc: the new size; xstrdup: the
// string with its NUL), whatever libc or a sanitizer's allocator does underneath, so the
// counts are the same under ASan. Tallies nest: closing one adds its counts to the tally it
// was opened inside, so a caller's tally includes its callees'. Each thread has its own
// stack of open tallies; allocations on other threads are not seen.
// Cost: one thread-local load and a branch per allocation while none is open (and
// allocations happen at start-up only, STYLE S8); nothing is counted then.
typedef struct xalloc_tally {
    size_t bytes;               // bytes requested while open
    size_t blocks;              // allocations while open
    struct xalloc_tally *outer; // private: the tally this one was opened inside, or NULL
} xalloc_tally_t;

// Zeroes *t's counts and opens it on the calling thread; t (borrowed) must stay valid until
// xalloc_tally_end(t) on the same thread.
void xalloc_tally_begin(xalloc_tally_t *t);
// Closes t, which must be the calling thread's innermost open tally (asserted), and adds its
// counts to the tally it was opened inside. Its counts stay readable.
void xalloc_tally_end(xalloc_tally_t *t);

#endif
