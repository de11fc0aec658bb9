// check_fuzz_learner.c: replays the learner handler harness's corpus and saved crashes under
// gcc (fuzz/fuzz_learner.c, included with FUZZ_NO_ENTRY), so that `make test` keeps each
// fixed bug fixed, and checks that the seeds reach the handlers: programs of the corpus get
// batches to training (a continuous run's too), weights requests answered and held, and
// actor stats folded in.
#include "check_apex.h"

#define FUZZ_NO_ENTRY
#include "../fuzz/fuzz_learner.c"

START_TEST(test_learner_corpus) {
    fuzz_learner_stats = (fuzz_learner_stats_t){0};
    int n = check_fuzz_dir("corpus", "learner", fuzz_learner_one, &fuzz_input_name);
    ck_assert_msg(n >= 5, "fuzz/corpus/learner holds %d seeds (run from the repo root?)", n);
    ck_assert_uint_gt(fuzz_learner_stats.trained, 0);
    ck_assert_uint_gt(fuzz_learner_stats.trained_cont, 0); // a continuous run's batches too
    ck_assert_uint_gt(fuzz_learner_stats.weights_answers, 0);
    ck_assert_uint_gt(fuzz_learner_stats.episodes, 0);
}
END_TEST

START_TEST(test_learner_regressions) {
    check_fuzz_dir("regressions", "learner", fuzz_learner_one, &fuzz_input_name);
}
END_TEST

START_TEST(test_learner_edge_inputs) {
    static const uint8_t z[2] = {0, 0};
    for (size_t n = 0; n <= sizeof z; n++) {
        ck_assert_int_eq(fuzz_learner_one(z, n), 0);
    }
    for (int b = 0; b < 64; b++) { // every run configuration, then requests go out
        uint8_t p[3] = {(uint8_t)b, 0, 0};
        ck_assert_int_eq(fuzz_learner_one(p, sizeof p), 0);
    }
}
END_TEST

Suite *fuzz_learner_suite(void) {
    Suite *s = suite_create("fuzz_learner");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_learner_corpus);
    tcase_add_test(tc, test_learner_regressions);
    tcase_add_test(tc, test_learner_edge_inputs);
    suite_add_tcase(s, tc);
    return s;
}
