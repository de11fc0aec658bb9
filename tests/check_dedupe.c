// check_dedupe.c: the exactly-once marks of the replay server (replay/dedupe.c) against a
// brute-force set, plus epochs, the window edge, serialisation and seqs near 2^64.
#include "check_apex.h"

#include <stdlib.h>
#include <string.h>

#include "dedupe.h"
#include "rng.h"

START_TEST(test_basic_and_epochs) {
    dedupe_t d;
    dedupe_init(&d, 2);
    ck_assert_int_eq(dedupe_seen(&d, 0, 7, 0), 0);
    dedupe_mark(&d, 0, 7, 0);
    ck_assert_int_eq(dedupe_seen(&d, 0, 7, 0), 1);
    ck_assert_int_eq(dedupe_seen(&d, 1, 7, 0), 0); // other actor
    ck_assert_int_eq(dedupe_seen(&d, 0, 8, 0), 0); // a restarted actor (new epoch)
    dedupe_mark(&d, 0, 7, 5);                      // out of order: 1..4 not yet seen
    for (uint64_t s = 1; s < 5; s++) {
        ck_assert_int_eq(dedupe_seen(&d, 0, 7, s), 0);
    }
    dedupe_mark(&d, 0, 7, 3);
    ck_assert_int_eq(dedupe_seen(&d, 0, 7, 3), 1);
    dedupe_mark(&d, 0, 8, 0); // new epoch forgets the old marks
    ck_assert_int_eq(dedupe_seen(&d, 0, 8, 0), 1);
    ck_assert_int_eq(dedupe_seen(&d, 0, 8, 5), 0);
    dedupe_fini(&d);
}
END_TEST

START_TEST(test_against_brute_force) {
    // Random marks within a sliding window: dedupe_seen must agree with an exact set for
    // every seq within the window below the high-water mark.
    enum { N = 60000 };
    uint8_t *seen = calloc(N, 1);
    dedupe_t d;
    dedupe_init(&d, 1);
    rng_t r;
    rng_init(&r, 3);
    uint64_t hwm = 0;
    for (int it = 0; it < 200000; it++) {
        // Mostly forward, sometimes re-sends up to 3000 back (as an actor's window would).
        uint64_t seq = hwm + rng_below(&r, 50);
        if (rng_below(&r, 4) == 0 && hwm > 3000) {
            seq = hwm - 1 - rng_below(&r, 3000);
        }
        if (seq >= N) {
            break;
        }
        ck_assert_int_eq(dedupe_seen(&d, 0, 1, seq), seen[seq]);
        dedupe_mark(&d, 0, 1, seq);
        seen[seq] = 1;
        if (seq + 1 > hwm) {
            hwm = seq + 1;
        }
    }
    // Everything further back than the window counts as seen (the actor cannot hold it).
    ck_assert_int_eq(dedupe_seen(&d, 0, 1, hwm - DEDUPE_WINDOW - 1), 1);
    free(seen);
    dedupe_fini(&d);
}
END_TEST

START_TEST(test_save_load) {
    dedupe_t a, b, c;
    dedupe_init(&a, 3);
    dedupe_init(&b, 3);
    dedupe_init(&c, 4);
    dedupe_mark(&a, 2, 99, 12345);
    size_t n = dedupe_bytes(&a);
    void *buf = malloc(n);
    dedupe_save(&a, buf);
    ck_assert_int_eq(dedupe_load(&b, buf, n), APEX_OK);
    ck_assert_int_eq(dedupe_seen(&b, 2, 99, 12345), 1);
    ck_assert_int_eq(dedupe_load(&c, buf, n), APEX_EINVAL); // another num_actors
    ck_assert_int_eq(dedupe_load(&b, buf, n - 1), APEX_EINVAL);
    free(buf);
    dedupe_fini(&a);
    dedupe_fini(&b);
    dedupe_fini(&c);
}
END_TEST

START_TEST(test_seq_near_max) {
    // The replay refuses seq 2^64-1; just below it the window arithmetic must not wrap or
    // loop (a hostile peer once hung the server this way).
    dedupe_t d;
    dedupe_init(&d, 1);
    dedupe_mark(&d, 0, 1, 10);
    dedupe_mark(&d, 0, 1, UINT64_MAX - 1);
    ck_assert_int_eq(dedupe_seen(&d, 0, 1, UINT64_MAX - 1), 1);
    ck_assert_int_eq(dedupe_seen(&d, 0, 1, UINT64_MAX - 2), 0);
    ck_assert_int_eq(dedupe_seen(&d, 0, 1, 10), 1); // far below the window
    dedupe_fini(&d);
}
END_TEST

Suite *dedupe_suite(void) {
    Suite *s = suite_create("dedupe");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_basic_and_epochs);
    tcase_add_test(tc, test_against_brute_force);
    tcase_add_test(tc, test_save_load);
    tcase_add_test(tc, test_seq_near_max);
    suite_add_tcase(s, tc);
    return s;
}
