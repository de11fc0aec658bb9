// check_fuzz_replay.c: replays the replay-server handler harness's corpus and saved crashes
// under gcc (fuzz/fuzz_replay.c, included with FUZZ_NO_ENTRY), so that `make test` keeps each
// fixed bug fixed, and checks that the seeds reach the handlers: programs of the corpus make
// the server serve sample replies (which the harness then decodes as a learner would) and
// store transitions, in whole-observation and in frame-mode runs.
#include "check_apex.h"

#define FUZZ_NO_ENTRY
#include "../fuzz/fuzz_replay.c"

START_TEST(test_replay_corpus) {
    fuzz_replay_stats = (fuzz_replay_stats_t){0};
    int n = check_fuzz_dir("corpus", "replay", fuzz_replay_one, &fuzz_input_name);
    ck_assert_msg(n >= 5, "fuzz/corpus/replay holds %d seeds (run from the repo root?)", n);
    // The seeds get past the decoder into every handler.
    ck_assert_uint_gt(fuzz_replay_stats.stored, 0);
    ck_assert_uint_gt(fuzz_replay_stats.replies_ok, 0);
    ck_assert_uint_gt(fuzz_replay_stats.replies_other, 0);
    ck_assert_uint_gt(fuzz_replay_stats.updated, 0);
    // Frame mode (issue #27): rows stored through the frame maps and sampled back (checked
    // against the harness's model), a batch held back for a gap and stored once the batch
    // before it came, a gap given up on after time passed, and batches of the other layout
    // refused by both kinds of server.
    ck_assert_uint_gt(fuzz_replay_stats.frame_rows_stored, 0);
    ck_assert_uint_gt(fuzz_replay_stats.frame_replies_ok, 0);
    ck_assert_uint_gt(fuzz_replay_stats.frame_held_back, 0);
    ck_assert_uint_gt(fuzz_replay_stats.frame_held_stored, 0);
    ck_assert_uint_gt(fuzz_replay_stats.frame_gaps_given_up, 0);
    ck_assert_uint_gt(fuzz_replay_stats.layout_refused, 0);
}
END_TEST

START_TEST(test_replay_regressions) {
    check_fuzz_dir("regressions", "replay", fuzz_replay_one, &fuzz_input_name);
}
END_TEST

// Empty and one-byte programs are complete programs (the input reads as zeros past its end).
START_TEST(test_replay_edge_inputs) {
    static const uint8_t z[2] = {0, 0};
    for (size_t n = 0; n <= sizeof z; n++) {
        ck_assert_int_eq(fuzz_replay_one(z, n), 0);
    }
    for (int b = 0; b < 256; b++) { // every run configuration, then one batch
        uint8_t p[2] = {(uint8_t)b, 0};
        ck_assert_int_eq(fuzz_replay_one(p, sizeof p), 0);
    }
}
END_TEST

Suite *fuzz_replay_suite(void) {
    Suite *s = suite_create("fuzz_replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_replay_corpus);
    tcase_add_test(tc, test_replay_regressions);
    tcase_add_test(tc, test_replay_edge_inputs);
    suite_add_tcase(s, tc);
    return s;
}
