// check_xalloc.c: common/xalloc's tallies, the allocation counts that train_memory_t and the
// ZeRO memory test read. Each count is checked against the sizes the test itself asked for
// (and, outside ASan, against glibc's own count, mallinfo2), nesting against the sum of the
// inner tallies, and isolation against an allocation on another thread.
#include "check_apex.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "xalloc.h"

// Every allocator counts what it was asked for, once per block; frees count nothing.
START_TEST(test_tally_counts_requests) {
    xalloc_tally_t t;
    xalloc_tally_begin(&t);
    void *a = xmalloc(1000);
    void *b = xcalloc(10, 24);
    void *c = xaligned_alloc(100); // rounded up to 128: what it allocates and zeroes
    char *d = xstrdup("tally");    // 6 bytes with the NUL
    a = xrealloc(a, 3000);         // the new size
    xfree(b);
    xalloc_tally_end(&t);
    ck_assert_uint_eq(t.blocks, 5);
    ck_assert_uint_eq(t.bytes, 1000 + 240 + 128 + 6 + 3000);
    void *e = xmalloc(77); // after the end: not counted
    ck_assert_uint_eq(t.bytes, 1000 + 240 + 128 + 6 + 3000);
    xfree(a);
    xfree(c);
    xfree(d);
    xfree(e);
}
END_TEST

// Inner tallies count their own allocations; the outer one counts everything inside it.
START_TEST(test_tally_nests) {
    xalloc_tally_t outer, inner1, inner2;
    xalloc_tally_begin(&outer);
    void *p[4];
    p[0] = xmalloc(10);
    xalloc_tally_begin(&inner1);
    p[1] = xmalloc(200);
    xalloc_tally_begin(&inner2);
    p[2] = xaligned_alloc(64);
    xalloc_tally_end(&inner2);
    xalloc_tally_end(&inner1);
    p[3] = xmalloc(3);
    xalloc_tally_end(&outer);
    ck_assert_uint_eq(inner2.bytes, 64);
    ck_assert_uint_eq(inner1.bytes, 200 + 64);
    ck_assert_uint_eq(inner1.blocks, 2);
    ck_assert_uint_eq(outer.bytes, 10 + 200 + 64 + 3);
    ck_assert_uint_eq(outer.blocks, 4);
    for (int i = 0; i < 4; i++) {
        xfree(p[i]);
    }
}
END_TEST

// Allocates 4096 bytes under a tally of its own; *arg = what that tally counted.
static void *s_alloc_elsewhere(void *arg) {
    xalloc_tally_t own;
    xalloc_tally_begin(&own); // this thread's own, unrelated to the main thread's
    void *p = xmalloc(4096);
    xalloc_tally_end(&own);
    xfree(p);
    *(size_t *)arg = own.bytes;
    return NULL;
}

// A tally sees its own thread only.
START_TEST(test_tally_is_per_thread) {
    xalloc_tally_t t;
    xalloc_tally_begin(&t);
    pthread_t th;
    size_t other = 0;
    ck_assert_int_eq(pthread_create(&th, NULL, s_alloc_elsewhere, &other), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    xalloc_tally_end(&t);
    ck_assert_uint_eq(other, 4096); // the other thread's own tally saw it
    ck_assert_uint_eq(t.bytes, 0);
    ck_assert_uint_eq(t.blocks, 0);
}
END_TEST

// What a tally counts is what the heap grows by (glibc's count, within a block's overhead
// and a page for each large block), so the two measure the same thing. Not under ASan,
// whose allocator glibc's counters do not see.
START_TEST(test_tally_agrees_with_glibc) {
    if (CHECK_ASAN) {
        fprintf(stderr, "check_xalloc: test_tally_agrees_with_glibc SKIPPED: under ASan "
                        "glibc's counters (mallinfo2) do not see the allocations\n");
        return;
    }
#if !CHECK_ASAN
    enum { N = 8 };
    void *p[N];
    struct mallinfo2 m0 = mallinfo2();
    xalloc_tally_t t;
    xalloc_tally_begin(&t);
    for (int i = 0; i < N; i++) {
        p[i] = i % 2 ? xaligned_alloc((size_t)(i + 1) << 16) : xmalloc((size_t)(i + 1) << 14);
    }
    xalloc_tally_end(&t);
    struct mallinfo2 m1 = mallinfo2();
    double heap = (double)(m1.uordblks + m1.hblkhd) - (double)(m0.uordblks + m0.hblkhd);
    ck_assert_msg(heap >= (double)t.bytes && heap <= (double)t.bytes + N * (4096 + 128),
                  "glibc's heap grew by %.0f bytes, the tally counted %zu", heap, t.bytes);
    for (int i = 0; i < N; i++) {
        xfree(p[i]);
    }
#endif
}
END_TEST

Suite *xalloc_suite(void) {
    Suite *s = suite_create("xalloc");
    TCase *tc = tcase_create("tally");
    tcase_add_test(tc, test_tally_counts_requests);
    tcase_add_test(tc, test_tally_nests);
    tcase_add_test(tc, test_tally_is_per_thread);
    tcase_add_test(tc, test_tally_agrees_with_glibc);
    suite_add_tcase(s, tc);
    return s;
}
