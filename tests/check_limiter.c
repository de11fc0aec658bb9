// check_limiter.c: the samples-per-insert limiter (common/limiter.h): the ratio it holds,
// the lag it forgives, and the bounds a restored credit is kept within in both directions.
#include "check_apex.h"

#include <math.h>

#include "limiter.h"

// Samples batches of n while allowed; returns how many rows were sampled.
static uint64_t s_drain(limiter_t *l, uint64_t n) {
    uint64_t got = 0;
    while (limiter_can_sample(l, n)) {
        limiter_sampled(l, n);
        got += n;
    }
    return got;
}

START_TEST(test_ratio_held) {
    limiter_t l;
    limiter_init(&l, 4.0, 100.0, 32);
    // Learner as fast as it can be: after each insert of 10 it samples all it may.
    uint64_t inserted = 0, sampled = 0;
    for (int i = 0; i < 1000; i++) {
        limiter_inserted(&l, 10);
        inserted += 10;
        sampled += s_drain(&l, 32);
        // Never more than the ratio plus the tolerance ahead.
        ck_assert_double_le((double)sampled, 4.0 * (double)inserted + 100.0);
    }
    // And never further behind than one batch plus the tolerance (it keeps up).
    ck_assert_double_ge((double)sampled, 4.0 * (double)inserted - 100.0 - 32.0);
}
END_TEST

START_TEST(test_no_limit) {
    limiter_t l;
    limiter_init(&l, 0.0, 0.0, 32);
    ck_assert(limiter_can_sample(&l, 1u << 30));
    limiter_sampled(&l, 1u << 30);
    ck_assert(limiter_can_sample(&l, 1u << 30));
}
END_TEST

// A learner that fell behind (here: never sampled while a million rows arrived) may catch up
// by tolerance + max_request + tolerance, not by 4 million rows.
START_TEST(test_lag_forgiven) {
    limiter_t l;
    limiter_init(&l, 4.0, 100.0, 32);
    limiter_inserted(&l, 1000000);
    uint64_t burst = s_drain(&l, 32);
    ck_assert_uint_le(burst, 100 + 32 + 100);
    ck_assert_uint_ge(burst, 100 + 100);
    // Then the ratio again: 10 more rows allow 40 more samples, plus what was left of the
    // lead after the last batch of 32 (less than 32).
    limiter_inserted(&l, 10);
    uint64_t more = s_drain(&l, 8);
    ck_assert_uint_le(more, 40 + 32);
    ck_assert_uint_ge(more, 40 - 8);
}
END_TEST

// Tolerance 0 must not refuse everything: the credit can still reach one request's rows.
START_TEST(test_zero_tolerance_serves) {
    limiter_t l;
    limiter_init(&l, 1.0, 0.0, 64);
    limiter_inserted(&l, 64);
    ck_assert(limiter_can_sample(&l, 64));
    limiter_sampled(&l, 64);
    ck_assert(!limiter_can_sample(&l, 1));
    limiter_inserted(&l, 1000);
    ck_assert_uint_eq(s_drain(&l, 64), 64);
}
END_TEST

// A restored credit is clamped: a huge one (a snapshot's counters from a run with a larger
// tolerance, or plain corruption) cannot release a burst, and a very negative one (Reverb
// issue #118) cannot block sampling for more than the tolerance's worth of inserts.
START_TEST(test_restore_bounded_both_ways) {
    limiter_t l;
    limiter_init(&l, 2.0, 50.0, 16);
    limiter_restore(&l, 1e15);
    ck_assert_uint_le(s_drain(&l, 16), 50 + 16 + 50);
    limiter_restore(&l, -1e15);
    ck_assert(!limiter_can_sample(&l, 16));
    // (50 + 16) / 2 = 33 inserted rows are enough to serve the next batch of 16.
    limiter_inserted(&l, 33);
    ck_assert(limiter_can_sample(&l, 16));
    limiter_restore(&l, NAN);
    ck_assert(isfinite(l.credit));
    // Without a ratio, a restored credit means nothing.
    limiter_init(&l, 0.0, 50.0, 16);
    limiter_restore(&l, -1e15);
    ck_assert(limiter_can_sample(&l, 1000));
}
END_TEST

// A refund gives back what a request that was not served had taken, within the bounds: it
// cannot lift the credit past max_credit (tolerance + one request), so refunds cannot
// accumulate into a burst either.
START_TEST(test_refund_bounded) {
    limiter_t l;
    limiter_init(&l, 1.0, 0.0, 64);
    limiter_inserted(&l, 64);
    limiter_sampled(&l, 64);
    ck_assert(!limiter_can_sample(&l, 64));
    limiter_refund(&l, 64);
    ck_assert(limiter_can_sample(&l, 64));
    limiter_refund(&l, 1u << 20);
    ck_assert_uint_eq(s_drain(&l, 64), 64);
    limiter_init(&l, 0.0, 0.0, 64); // no ratio: nothing to refund
    limiter_refund(&l, 5);
    ck_assert(l.credit == 0.0);
}
END_TEST

Suite *limiter_suite(void) {
    Suite *s = suite_create("limiter");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_ratio_held);
    tcase_add_test(tc, test_no_limit);
    tcase_add_test(tc, test_lag_forgiven);
    tcase_add_test(tc, test_zero_tolerance_serves);
    tcase_add_test(tc, test_restore_bounded_both_ways);
    tcase_add_test(tc, test_refund_bounded);
    suite_add_tcase(s, tc);
    return s;
}
