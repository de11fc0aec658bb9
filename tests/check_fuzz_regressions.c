// check_fuzz_regressions.c: replays the fuzz corpus and every saved crash through the
// libFuzzer harnesses' own entry points, so that `make test` (gcc, no libFuzzer) keeps each
// fixed bug fixed and each seed message decodable.
//
// Targets: wire, config, pywire. Inputs: fuzz/corpus/<target>/ (the seeds; must not be
// empty), fuzz/regressions/<target>/ (inputs that once crashed; may be empty) and
// fuzz/replay/<target>/ (inputs too slow to fuzz from, e.g. 20000 unknown fields), relative
// to the repo root where `make test` runs, or to $APEX_SRC_DIR. The harnesses are compiled into this file with FUZZ_NO_ENTRY,
// so they do not define LLVMFuzzerTestOneInput here. A broken invariant aborts the forked
// test after printing the harness line and the input's path.
#include "check_apex.h"

#define FUZZ_NO_ENTRY
#include "../fuzz/fuzz_config.c"
#include "../fuzz/fuzz_pywire.c"
#include "../fuzz/fuzz_wire.c"

// Runs every regular file of fuzz/<kind>/<target> through fn (check_fuzz_dir).
static int s_replay(const char *kind, const char *target, int (*fn)(const uint8_t *, size_t)) {
    return check_fuzz_dir(kind, target, fn, &fuzz_input_name);
}

START_TEST(test_wire_corpus) {
    int n = s_replay("corpus", "wire", fuzz_wire_one);
    ck_assert_msg(n >= 10, "fuzz/corpus/wire holds %d seeds (run from the repo root?)", n);
}
END_TEST

START_TEST(test_wire_regressions) {
    s_replay("regressions", "wire", fuzz_wire_one);
    s_replay("replay", "wire", fuzz_wire_one);
}
END_TEST

START_TEST(test_config_corpus) {
    int n = s_replay("corpus", "config", fuzz_config_one);
    ck_assert_msg(n >= 2, "fuzz/corpus/config holds %d seeds (run from the repo root?)", n);
}
END_TEST

START_TEST(test_config_regressions) {
    s_replay("regressions", "config", fuzz_config_one);
    s_replay("replay", "config", fuzz_config_one);
}
END_TEST

START_TEST(test_pywire_corpus) {
    int n = s_replay("corpus", "pywire", fuzz_pywire_one);
    ck_assert_msg(n >= 20, "fuzz/corpus/pywire holds %d seeds (run from the repo root?)", n);
}
END_TEST

START_TEST(test_pywire_regressions) {
    s_replay("regressions", "pywire", fuzz_pywire_one);
    s_replay("replay", "pywire", fuzz_pywire_one);
}
END_TEST

// The harnesses' invariants are live: a hand-made valid message passes, and empty or
// truncated input is rejected without tripping any of them.
START_TEST(test_wire_edge_inputs) {
    static const uint8_t empty[1] = {0};
    ck_assert_int_eq(fuzz_wire_one(empty, 0), 0);
    ck_assert_int_eq(fuzz_wire_one(empty, 1), 0);
    // Envelope{version=1, insert_ack={actor_id=1, seq=2}}.
    static const uint8_t ack[] = {0x08, 0x01, 0x42, 0x04, 0x08, 0x01, 0x10, 0x02};
    for (size_t n = 0; n <= sizeof ack; n++) {
        ck_assert_int_eq(fuzz_wire_one(ack, n), 0);
    }
}
END_TEST

// Every prefix of a valid bridge message (a header cut short, a region cut anywhere), and
// the header alone.
START_TEST(test_pywire_edge_inputs) {
    const char *root = getenv("APEX_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/fuzz/corpus/pywire/result_f32x4_fault",
             root && *root ? root : ".");
    size_t len = 0;
    uint8_t *data = check_slurp(path, &len);
    ck_assert_msg(data != NULL, "cannot read %s", path);
    ck_assert_uint_gt(len, PYWIRE_HEADER_BYTES);
    fuzz_input_name = path;
    for (size_t n = 0; n <= len; n++) {
        ck_assert_int_eq(fuzz_pywire_one(data, n), 0);
    }
    fuzz_input_name = NULL;
    free(data);
}
END_TEST

START_TEST(test_config_edge_inputs) {
    static const char text[] = "[run]\nseed = 3\n\0run.seed=4\0learner.lr=nan\0x";
    for (size_t n = 0; n <= sizeof text - 1; n++) {
        ck_assert_int_eq(fuzz_config_one((const uint8_t *)text, n), 0);
    }
}
END_TEST

Suite *fuzz_regressions_suite(void) {
    Suite *s = suite_create("fuzz_regressions");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 120); // under ASan/UBSan (make asan) the config inputs are slower
    tcase_add_test(tc, test_wire_corpus);
    tcase_add_test(tc, test_wire_regressions);
    tcase_add_test(tc, test_config_corpus);
    tcase_add_test(tc, test_config_regressions);
    tcase_add_test(tc, test_pywire_corpus);
    tcase_add_test(tc, test_pywire_regressions);
    tcase_add_test(tc, test_wire_edge_inputs);
    tcase_add_test(tc, test_config_edge_inputs);
    tcase_add_test(tc, test_pywire_edge_inputs);
    suite_add_tcase(s, tc);
    return s;
}
