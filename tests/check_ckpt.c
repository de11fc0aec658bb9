// check_ckpt.c: checkpoint round trip (identical bytes, exact resume) and every way a
// file can be bad: corrupt byte, wrong magic, other version, truncated, wrong shape,
// wrong optimizer, missing directory, disk full; the previous good file always survives.
#include "check_apex.h"

#include "apex.h"
#include "ckpt.h"
#include "fileio.h"
#include "train.h"
#include "xalloc.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

// Reads a whole file; caller frees. *len gets its size.
static unsigned char *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = xmalloc((size_t)n + 1);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void s_spit(const char *path, const unsigned char *buf, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

static trainer_t *s_trainer(int hidden, optim_kind kind, uint64_t seed) {
    train_config_t tc;
    train_config_default(&tc);
    tc.net = (nn_config_t){3, 2, 2, {hidden, 8}, 1};
    tc.batch_size = 4;
    tc.target_update = 2;
    optim_config_default(&tc.optim, kind);
    tc.seed = seed;
    return trainer_new(&tc);
}

// A fixed batch for 3-dim obs, 2 actions.
static void s_train(trainer_t *tr, int steps) {
    float obs[12], nobs[12], rew[4] = {1, 0, -1, 0.5f}, disc[4] = {0.9f, 0.9f, 0, 0.9f};
    float w[4] = {1, 0.5f, 1, 0.7f}, prio[4];
    int32_t act[4] = {0, 1, 1, 0};
    for (int i = 0; i < 12; i++) {
        obs[i] = (float)(i % 5) * 0.3f - 0.5f;
        nobs[i] = (float)(i % 7) * 0.2f - 0.6f;
    }
    train_batch_t b = {obs, act, rew, disc, nobs, w, 4};
    for (int s = 0; s < steps; s++) {
        trainer_step(tr, &b, prio, NULL);
    }
}

static int s_same_state(const trainer_t *a, const trainer_t *b) {
    size_t bytes = trainer_num_params(a) * sizeof(float);
    const optim_t *oa = trainer_optim(a), *ob = trainer_optim(b);
    return memcmp(trainer_online(a)->data, trainer_online(b)->data, bytes) == 0 &&
           memcmp(trainer_target(a)->data, trainer_target(b)->data, bytes) == 0 &&
           memcmp(oa->m, ob->m, bytes) == 0 && memcmp(oa->v, ob->v, bytes) == 0 &&
           oa->step == ob->step && trainer_steps(a) == trainer_steps(b) &&
           memcmp(trainer_rng((trainer_t *)a)->s, trainer_rng((trainer_t *)b)->s, sizeof(rng_t)) ==
               0;
}

START_TEST(test_crc32c_known_vector) {
    // The CRC-32C check value (RFC 3720 / iSCSI): "123456789" -> 0xE3069283.
    ck_assert_uint_eq(fileio_crc32c(0, "123456789", 9), 0xE3069283u);
    // Incremental equals one shot.
    ck_assert_uint_eq(fileio_crc32c(fileio_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}
END_TEST

// The textbook bit-at-a-time CRC32C: the reference every fast path must match bit for bit
// (snapshots, checkpoints and logs written by older builds must still verify).
static uint32_t s_crc32c_ref(uint32_t crc, const unsigned char *p, size_t len) {
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) {
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        }
    }
    return ~crc;
}

START_TEST(test_crc32c_fast_paths_match_reference) {
    enum { N = 4096 + 64 };
    static unsigned char buf[N];
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (unsigned char)x;
    }
    int impls[] = {FILEIO_CRC_PORTABLE, FILEIO_CRC_SSE42};
    ck_assert(fileio_crc32c_has_impl(FILEIO_CRC_PORTABLE));
    for (size_t k = 0; k < sizeof impls / sizeof *impls; k++) {
        int impl = impls[k];
        if (!fileio_crc32c_has_impl(impl)) {
            continue; // e.g. no SSE4.2 on this CPU: the dispatcher never picks it either
        }
        ck_assert_uint_eq(fileio_crc32c_impl(impl, 0, "123456789", 9), 0xE3069283u);
        ck_assert_uint_eq(fileio_crc32c_impl(impl, 0, "", 0), 0);
        // Every start alignment, lengths around the 8-byte stride and long runs, and a
        // non-zero running CRC (the log chains kind then payload).
        for (size_t off = 0; off < 16; off++) {
            for (size_t len = 0; len < N - 16; len = len < 80 ? len + 1 : len * 3 + 7) {
                uint32_t want = s_crc32c_ref(0, buf + off, len);
                ck_assert_uint_eq(fileio_crc32c_impl(impl, 0, buf + off, len), want);
                ck_assert_uint_eq(fileio_crc32c(0, buf + off, len), want);
                uint32_t seed = s_crc32c_ref(0, buf, off + 1);
                ck_assert_uint_eq(fileio_crc32c_impl(impl, seed, buf + off, len),
                                  s_crc32c_ref(seed, buf + off, len));
            }
        }
    }
}
END_TEST

START_TEST(test_round_trip_and_exact_resume) {
    const char *dir = check_tmpdir();
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/a.ckpt", dir);
    snprintf(p2, sizeof p2, "%s/b.ckpt", dir);
    trainer_t *a = s_trainer(16, OPTIM_ADAM, 1), *b = s_trainer(16, OPTIM_ADAM, 2);
    s_train(a, 5); // target synced at step 4, so target != online now
    rng_next_u64(trainer_rng(a));
    ckpt_extra_t ex = {77, {1, 2, 3, 4}}, ex_got;
    ck_assert_int_eq(trainer_save(a, p1, &ex), APEX_OK);
    ck_assert_int_eq(trainer_load(b, p1, &ex_got), APEX_OK);
    ck_assert(s_same_state(a, b));
    ck_assert_int_eq(memcmp(&ex, &ex_got, sizeof ex), 0);
    ck_assert_int_eq(trainer_save(b, p2, &ex), APEX_OK);
    size_t n1, n2;
    unsigned char *f1 = s_slurp(p1, &n1), *f2 = s_slurp(p2, &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_int_eq(memcmp(f1, f2, n1), 0); // identical bytes
    ck_assert_int_eq(access(p1, F_OK), 0);
    char tmp[620];
    snprintf(tmp, sizeof tmp, "%s.tmp", p1);
    ck_assert_int_ne(access(tmp, F_OK), 0); // no temp file left behind
    // Resuming continues exactly: the same steps give the same bits.
    s_train(a, 3);
    s_train(b, 3);
    ck_assert(s_same_state(a, b));
    xfree(f1);
    xfree(f2);
    trainer_destroy(&a);
    trainer_destroy(&b);
    check_rmtree(dir);
}
END_TEST

// Writes a good checkpoint, lets mutate() damage the bytes, and expects load to fail with
// want_rc while leaving the loading trainer untouched.
static void s_expect_bad(void (*mutate)(unsigned char *buf, size_t *len), int want_rc) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/x.ckpt", dir);
    trainer_t *a = s_trainer(16, OPTIM_ADAM, 1), *b = s_trainer(16, OPTIM_ADAM, 2);
    trainer_t *b_copy = s_trainer(16, OPTIM_ADAM, 2);
    s_train(a, 3);
    ck_assert_int_eq(trainer_save(a, path, NULL), APEX_OK);
    size_t len;
    unsigned char *buf = s_slurp(path, &len);
    mutate(buf, &len);
    s_spit(path, buf, len);
    ck_assert_int_eq(trainer_load(b, path, NULL), want_rc);
    ck_assert(s_same_state(b, b_copy));
    xfree(buf);
    trainer_destroy(&a);
    trainer_destroy(&b);
    trainer_destroy(&b_copy);
    check_rmtree(dir);
}

static void s_flip_payload(unsigned char *buf, size_t *len) { buf[*len - 5] ^= 0x10; }
static void s_flip_header(unsigned char *buf, size_t *len) {
    (void)len;
    buf[offsetof(ckpt_header_t, learner_step)] ^= 1;
}
static void s_bad_magic(unsigned char *buf, size_t *len) {
    (void)len;
    memcpy(buf, "NOTACKPT", 8);
}
static void s_bad_version(unsigned char *buf, size_t *len) {
    (void)len;
    buf[offsetof(ckpt_header_t, format_version)] = 9;
}
static void s_truncate(unsigned char *buf, size_t *len) {
    (void)buf;
    *len -= 100;
}
static void s_truncate_header(unsigned char *buf, size_t *len) {
    (void)buf;
    *len = 10;
}

START_TEST(test_corrupt_payload_byte) { s_expect_bad(s_flip_payload, APEX_EPROTO); }
END_TEST
START_TEST(test_corrupt_header_byte) { s_expect_bad(s_flip_header, APEX_EPROTO); }
END_TEST
START_TEST(test_wrong_magic) { s_expect_bad(s_bad_magic, APEX_EPROTO); }
END_TEST
START_TEST(test_wrong_version) { s_expect_bad(s_bad_version, APEX_EVERSION); }
END_TEST
START_TEST(test_truncated) {
    s_expect_bad(s_truncate, APEX_EPROTO);
    s_expect_bad(s_truncate_header, APEX_EPROTO);
}
END_TEST

START_TEST(test_wrong_shape_and_optimizer) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/s.ckpt", dir);
    trainer_t *a = s_trainer(16, OPTIM_ADAM, 1);
    trainer_t *wide = s_trainer(32, OPTIM_ADAM, 1), *rms = s_trainer(16, OPTIM_RMSPROP, 1);
    ck_assert_int_eq(trainer_save(a, path, NULL), APEX_OK);
    ck_assert_int_eq(trainer_load(wide, path, NULL), APEX_EINVAL); // 3-16-8 vs 3-32-8
    ck_assert_int_eq(trainer_load(rms, path, NULL), APEX_EINVAL);
    ck_assert_int_eq(trainer_steps(rms), 0);
    char missing[620];
    snprintf(missing, sizeof missing, "%s/none.ckpt", dir);
    ck_assert_int_eq(trainer_load(a, missing, NULL), APEX_EIO);
    trainer_destroy(&a);
    trainer_destroy(&wide);
    trainer_destroy(&rms);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_missing_directory_keeps_previous) {
    const char *dir = check_tmpdir();
    char good[600], bad[640];
    snprintf(good, sizeof good, "%s/good.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.ckpt", dir);
    trainer_t *a = s_trainer(16, OPTIM_ADAM, 1);
    ck_assert_int_eq(trainer_save(a, good, NULL), APEX_OK);
    size_t n0, n1;
    unsigned char *before = s_slurp(good, &n0);
    s_train(a, 2);
    ck_assert_int_eq(trainer_save(a, bad, NULL), APEX_EIO);
    unsigned char *after = s_slurp(good, &n1);
    ck_assert(n0 == n1 && memcmp(before, after, n0) == 0);
    xfree(before);
    xfree(after);
    trainer_destroy(&a);
    check_rmtree(dir);
}
END_TEST

START_TEST(test_disk_full_keeps_previous) {
    // A file-size limit makes write(2) fail with EFBIG part way, as a full disk would with
    // ENOSPC. Runs in its own forked process (CK_FORK), so the limit dies with it.
    const char *dir = check_tmpdir();
    char path[600], tmp[620];
    snprintf(path, sizeof path, "%s/full.ckpt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    trainer_t *a = s_trainer(16, OPTIM_ADAM, 1);
    ck_assert_int_eq(trainer_save(a, path, NULL), APEX_OK);
    size_t n0, n1;
    unsigned char *before = s_slurp(path, &n0);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {1000, RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    s_train(a, 2);
    ck_assert_int_eq(trainer_save(a, path, NULL), APEX_ENOSPC);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    unsigned char *after = s_slurp(path, &n1);
    ck_assert(n0 == n1 && memcmp(before, after, n0) == 0);
    xfree(before);
    xfree(after);
    trainer_destroy(&a);
    check_rmtree(dir);
}
END_TEST

Suite *ckpt_suite(void) {
    Suite *s = suite_create("ckpt");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_crc32c_known_vector);
    tcase_add_test(tc, test_crc32c_fast_paths_match_reference);
    tcase_add_test(tc, test_round_trip_and_exact_resume);
    tcase_add_test(tc, test_corrupt_payload_byte);
    tcase_add_test(tc, test_corrupt_header_byte);
    tcase_add_test(tc, test_wrong_magic);
    tcase_add_test(tc, test_wrong_version);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_wrong_shape_and_optimizer);
    tcase_add_test(tc, test_missing_directory_keeps_previous);
    tcase_add_test(tc, test_disk_full_keeps_previous);
    suite_add_tcase(s, tc);
    return s;
}
