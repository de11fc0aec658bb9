// check_round.c: learner/round.h on a group of one (no launcher: group.h's local no-op
// collectives, so a round's sums are this rank's own values): when a rank joins, what a round
// decides from the flags, the checkpoint flag taken once, and rank 0's metrics row from the
// sums (rows and bad messages summed, stage times as deltas since the previous row, loss the
// mean). The sums over several ranks are group_round's, tested under mpirun in check_group.
#include "check_apex.h"

#include <string.h>

#include "group.h"
#include "metrics.h"
#include "round.h"

START_TEST(test_due_and_decisions) {
    group_t *g = group_new();
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(group_size(g), 1);
    round_t r;
    round_init(&r, g, 1000);
    ck_assert_int_eq(r.rank, 0);
    ck_assert_int_eq(r.n_ranks, 1);
    // With a batch at once; without one every ROUND_IDLE_MS.
    ck_assert(round_due(&r, 1, 1000));
    ck_assert(!round_due(&r, 0, 1000 + ROUND_IDLE_MS - 1));
    ck_assert(round_due(&r, 0, 1000 + ROUND_IDLE_MS));
    metrics_t mt;
    memset(&mt, 0, sizeof mt);
    int ckpt = -1;
    ck_assert_int_eq(round_join(&r, &mt, 1, 0, 0, &ckpt, 2000), ROUND_DECIDED_TRAIN);
    ck_assert_int_eq(ckpt, 0);
    ck_assert(!round_due(&r, 0, 2000 + ROUND_IDLE_MS - 1)); // the round just joined counts
    ck_assert_int_eq(round_join(&r, &mt, 0, 0, 0, &ckpt, 2100), ROUND_DECIDED_WAIT);
    // Rank 0's checkpoint timer: the next round says so, once.
    r.ckpt_due = 1;
    ck_assert_int_eq(round_join(&r, &mt, 1, 0, 0, &ckpt, 2200), ROUND_DECIDED_TRAIN);
    ck_assert_int_eq(ckpt, 1);
    ck_assert_int_eq(r.ckpt_due, 0);
    ck_assert_int_eq(round_join(&r, &mt, 1, 0, 0, &ckpt, 2300), ROUND_DECIDED_TRAIN);
    ck_assert_int_eq(ckpt, 0);
    // Stop wins over a batch.
    ck_assert(!r.stopped);
    ck_assert_int_eq(round_join(&r, &mt, 1, 1, 0, &ckpt, 2400), ROUND_DECIDED_STOP);
    ck_assert(r.stopped);
    group_destroy(&g);
}
END_TEST

START_TEST(test_metrics_from_sums) {
    group_t *g = group_new();
    round_t r;
    round_init(&r, g, 0);
    metrics_t mt;
    memset(&mt, 0, sizeof mt);
    int ckpt;
    // Two rounds' worth of this rank's timers and counters.
    mt.wait_ns = 100, mt.train_ns = 200, mt.optim_ns = 300, mt.net_ns = 400;
    mt.sampled_rows = 64, mt.last_loss = 0.5;
    round_join(&r, &mt, 1, 0, 3, &ckpt, 10);
    ck_assert_int_eq(mt.wait_ns, 0); // moved into the rank's totals
    ck_assert_int_eq(mt.train_ns, 0);
    mt.train_ns = 1000;
    mt.sampled_rows = 128, mt.last_loss = 0.25;
    round_join(&r, &mt, 1, 0, 5, &ckpt, 20);
    ck_assert_double_eq(mt.last_loss, 0.25); // the group's mean (of one)
    mt.sampled_rows = 999;                   // rank 0's own counter: replaced by the sums
    round_metrics(&r, &mt);
    ck_assert_uint_eq(mt.sampled_rows, 128);
    ck_assert_uint_eq(mt.own_bad_messages, 5);
    ck_assert_int_eq(mt.train_ns, 1200);
    ck_assert_int_eq(mt.optim_ns, 300);
    ck_assert_int_eq(mt.net_ns, 400);
    ck_assert_int_ge(mt.wait_ns, 100); // plus the rounds' own waits
    // The next row (metrics_write_row resets the stage timers): deltas since this one.
    mt.wait_ns = mt.train_ns = mt.optim_ns = mt.net_ns = 0;
    mt.train_ns = 50;
    round_join(&r, &mt, 1, 0, 5, &ckpt, 30);
    round_metrics(&r, &mt);
    ck_assert_int_eq(mt.train_ns, 50);
    ck_assert_int_eq(mt.optim_ns, 0);
    group_destroy(&g);
}
END_TEST

Suite *round_suite(void) {
    Suite *s = suite_create("round");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_due_and_decisions);
    tcase_add_test(tc, test_metrics_from_sums);
    suite_add_tcase(s, tc);
    return s;
}
