// check_nprandom.c: nprandom_t against values printed by numpy's RandomState
// (tests/fixtures/gen_nprandom.py) and a few published ones.
#include "check_apex.h"

#include "apex.h"
#include "nprandom.h"

#include <signal.h>
#include <string.h>

#include "fixtures/nprandom_values.h"

START_TEST(test_known_values) {
    // Independent of the fixture: the MT19937 reference's first word for its default seed
    // 5489, and values quoted for numpy (docs, countless tutorials).
    nprandom_t r;
    nprandom_seed(&r, 5489);
    ck_assert_uint_eq(nprandom_next_u32(&r), 3499211612u);
    nprandom_seed(&r, 0);
    ck_assert(nprandom_rand(&r) == 0.5488135039273248);
    ck_assert(nprandom_rand(&r) == 0.7151893663724195);
    ck_assert(nprandom_rand(&r) == 0.6027633760716439);
    nprandom_seed(&r, 42);
    ck_assert(nprandom_rand(&r) == 0.3745401188473625);
    // RandomState(0).randint(2) ten times.
    static const int64_t bits[10] = {0, 1, 1, 0, 1, 1, 1, 1, 1, 1};
    nprandom_seed(&r, 0);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(nprandom_randint(&r, 0, 2), bits[i]);
    }
}
END_TEST

// FNV-1a 64 over the little-endian bytes of each word, as the generator computes it.
static uint64_t s_fnv_words(nprandom_t *r, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        uint32_t w = nprandom_next_u32(r);
        for (int k = 0; k < 4; k++) {
            h ^= (w >> (8 * k)) & 0xffu;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

START_TEST(test_raw_words_and_rand_per_seed) {
    for (size_t s = 0; s < APEX_ARRAY_LEN(NP_FIX_SEEDS); s++) {
        const np_fix_seed_t *f = &NP_FIX_SEEDS[s];
        nprandom_t r;
        nprandom_seed(&r, f->seed);
        for (int i = 0; i < 8; i++) {
            ck_assert_msg(nprandom_next_u32(&r) == f->raw[i], "seed %u word %d", f->seed, i);
        }
        nprandom_seed(&r, f->seed);
        ck_assert_msg(s_fnv_words(&r, NP_FIX_RAW_SUM_N) == f->raw_fnv,
                      "seed %u: checksum of %d words", f->seed, NP_FIX_RAW_SUM_N);
        nprandom_seed(&r, f->seed);
        for (int i = 0; i < 6; i++) {
            double u = nprandom_rand(&r);
            ck_assert_msg(u == f->rand[i], "seed %u rand %d: %a != %a", f->seed, i, u, f->rand[i]);
        }
    }
}
END_TEST

START_TEST(test_randint_many_ranges) {
    // One stream through every range in turn: a draw consumed too many or too few (the
    // no-draw case of a one-value range, the 32/64-bit switch, rejection) shifts everything
    // after it.
    nprandom_t r;
    nprandom_seed(&r, NP_FIX_RANDINT_SEED);
    for (size_t i = 0; i < APEX_ARRAY_LEN(NP_FIX_RANDINT); i++) {
        const np_fix_randint_t *f = &NP_FIX_RANDINT[i];
        int64_t v = nprandom_randint(&r, f->low, f->high);
        ck_assert_msg(v == f->value, "draw %zu randint(%lld, %lld) = %lld, numpy %lld", i,
                      (long long)f->low, (long long)f->high, (long long)v, (long long)f->value);
    }
    ck_assert_uint_eq(nprandom_next_u32(&r), NP_FIX_RANDINT_NEXT_RAW);
}
END_TEST

START_TEST(test_single_value_range_draws_nothing) {
    nprandom_t a, b;
    nprandom_seed(&a, 9);
    nprandom_seed(&b, 9);
    ck_assert_int_eq(nprandom_randint(&a, 0, 1), 0);
    ck_assert_int_eq(nprandom_randint(&a, -7, -6), -7);
    ck_assert_uint_eq(nprandom_next_u32(&a), nprandom_next_u32(&b));
}
END_TEST

START_TEST(test_rand_below_is_rand_lt) {
    // nprandom_rand_below(r, p) == (nprandom_rand(r) < p) with the same words consumed, for
    // thresholds that a decides alone and for the ones that need b (t - 1 < a < t, which
    // random p hit with probability 2^-27: built here from the next word), from even and odd
    // positions (a draw that straddles a regeneration) and for p = 0, 1 and 0.1.
    nprandom_t x, y;
    nprandom_seed(&x, 12345);
    int slow = 0;
    for (int k = 0; k < 20000; k++) {
        if (k % 7 == 0) {
            (void)nprandom_next_u32(&x); // shift the parity of the position
        }
        y = x;
        nprandom_t peek = x;
        double a = (double)(nprandom_next_u32(&peek) >> 5);
        double b = (double)(nprandom_next_u32(&peek) >> 6);
        const double ps[] = {0.0,
                             1.0,
                             0.1,
                             (double)(k % 1000) / 1000.0,
                             a / 134217728.0,
                             (a + 1.0) / 134217728.0,
                             (a + 0.5) / 134217728.0,
                             (a + b / 67108864.0) / 134217728.0,
                             (a + (b + 1.0) / 67108864.0) / 134217728.0};
        const double p = ps[k % 9];
        slow += k % 9 >= 6;
        int want = nprandom_rand(&x) < p;
        int got = nprandom_rand_below(&y, p);
        ck_assert_msg(got == want, "draw %d, p %.17g: %d, rand() < p is %d", k, p, got, want);
        ck_assert(memcmp(&x, &y, sizeof x) == 0);
    }
    ck_assert_int_gt(slow, 6000);
}
END_TEST

START_TEST(test_empty_range_asserts) {
    nprandom_t r;
    nprandom_seed(&r, 1);
    nprandom_randint(&r, 3, 3);
}
END_TEST

Suite *nprandom_suite(void) {
    Suite *s = suite_create("nprandom");
    TCase *tc = tcase_create("numpy");
    tcase_add_test(tc, test_known_values);
    tcase_add_test(tc, test_raw_words_and_rand_per_seed);
    tcase_add_test(tc, test_randint_many_ranges);
    tcase_add_test(tc, test_single_value_range_draws_nothing);
    tcase_add_test(tc, test_rand_below_is_rand_lt);
    tcase_add_test_raise_signal(tc, test_empty_range_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
