// check_ckpt.c: checkpoint round trip (identical bytes, exact resume) and every way a
// file can be bad: corrupt byte, wrong magic, other version, truncated, wrong shape,
// wrong optimizer, missing directory, disk full; the previous good file always survives.
#include "check_apex.h"

#include "apex.h"
#include "ckpt.h"
#include "log.h"
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
    tc.net = (nn_config_t){
        .obs_dim = 3, .n_actions = 2, .n_hidden = 2, .hidden = {hidden, 8}, .dueling = 1};
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
    train_batch_t b = {obs, act, NULL, rew, disc, nobs, w, 4};
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
    // user[CKPT_USER_OPT_SHARDS] is the trainer's own (0: the moments are in the file).
    ckpt_extra_t ex = {77, {1, 2, 3, 0}}, ex_got;
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

// Runs fn with the log copied to a file and returns that file's text (caller frees).
static char *s_logged(void (*fn)(void *), void *arg) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/log.txt", dir);
    ck_assert_int_eq(log_open_file(path), 0);
    fn(arg);
    log_close_file();
    size_t n;
    char *text = (char *)s_slurp(path, &n);
    text[n] = '\0';
    check_rmtree(dir);
    return text;
}

// A conv net's checkpoint: the MinAtar body (10x10x4 uint8 -> conv 16 3x3 s1 -> 128 ->
// dueling 6) round-trips, and a net of another shape is refused with both shapes named.
static nn_config_t s_minatar_net(int filters) {
    nn_config_t c = nn_config_minatar(4, 6, 1);
    c.conv[0].filters = filters;
    return c;
}

typedef struct {
    const char *path;
    nn_config_t cfg;
    int rc;
} s_read_case;

static void s_read_online(void *arg) {
    s_read_case *c = arg;
    ckpt_header_t h;
    float *online = xmalloc(nn_num_params(&c->cfg) * sizeof(float));
    c->rc = ckpt_read_online(c->path, &c->cfg, &h, online);
    free(online);
}

START_TEST(test_conv_round_trip_and_shape_refused) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/conv.ckpt", dir);
    nn_config_t cfg = s_minatar_net(16);
    nn_params_t p;
    nn_params_init(&p, &cfg);
    ck_assert_uint_eq(p.num_params, 132695);
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&p, &r);
    ckpt_header_t h;
    ckpt_header_init(&h, &cfg);
    const float *arrays[1] = {p.data};
    ck_assert_int_eq(ckpt_write(path, &h, arrays, 1), APEX_OK);
    float *back = xmalloc(p.num_params * sizeof(float));
    ckpt_header_t got;
    ck_assert_int_eq(ckpt_read_online(path, &cfg, &got, back), APEX_OK);
    ck_assert_mem_eq(back, p.data, p.num_params * sizeof(float));
    nn_config_t stored;
    ckpt_header_config(&got, &stored);
    ck_assert(nn_config_equal(&stored, &cfg));
    // 32 filters instead of 16: refused, and the message names both networks.
    s_read_case c = {path, s_minatar_net(32), 0};
    char *log = s_logged(s_read_online, &c);
    ck_assert_int_eq(c.rc, APEX_EINVAL);
    ck_assert_msg(strstr(log, "checkpoint network 10x10x4 u8*1-c16k3s1-128-dueling(6) does not "
                              "match the configured network 10x10x4 u8*1-c32k3s1-128-dueling(6)"),
                  "%s", log);
    free(log);
    // The same body on an MLP input is another network too.
    c.cfg =
        (nn_config_t){.obs_dim = 400, .n_actions = 6, .n_hidden = 1, .hidden = {128}, .dueling = 1};
    log = s_logged(s_read_online, &c);
    ck_assert_int_eq(c.rc, APEX_EINVAL);
    ck_assert_msg(strstr(log, "checkpoint network 10x10x4 u8*1-c16k3s1-128-dueling(6) does not "
                              "match the configured network 400-128-dueling(6)"),
                  "%s", log);
    free(log);
    free(back);
    nn_params_fini(&p);
    check_rmtree(dir);
}
END_TEST

// tests/fixtures/ckpt_v1_mlp.bin was written by the build before conv layers (format 1,
// commit 8575adc's ckpt_write): network 4-8-6-dueling(2), 115 params, 4 arrays, array k
// holding (k + 1) * 0.001 * (i - 40) at index i, learner step 1234, weights version 3:77,
// user[0] 99999. It still loads, every value intact.
START_TEST(test_format1_mlp_checkpoint_loads) {
    nn_config_t cfg = {.obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {8, 6}, .dueling = 1};
    ck_assert_uint_eq(nn_num_params(&cfg), 115);
    float *a[4];
    for (int k = 0; k < 4; k++) {
        a[k] = xmalloc(115 * sizeof(float));
    }
    ckpt_header_t h;
    ck_assert_int_eq(ckpt_read("tests/fixtures/ckpt_v1_mlp.bin", &cfg, &h, a, 4), APEX_OK);
    ck_assert_uint_eq(h.format_version, 1);
    ck_assert_uint_eq(h.learner_step, 1234);
    ck_assert_uint_eq(h.extra.weights_version, (3ull << 32) | 77);
    ck_assert_uint_eq(h.extra.user[0], 99999);
    ck_assert_int_eq(h.n_conv, 0);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 115; i++) {
            ck_assert_float_eq(a[k][i], (float)(k + 1) * 0.001f * (float)(i - 40));
        }
        free(a[k]);
    }
}
END_TEST

// A format this build does not know says which it is and what to do.
static void s_read_v9(void *arg) {
    s_read_case *c = arg;
    ckpt_header_t h;
    float *x[4];
    for (int k = 0; k < 4; k++) {
        x[k] = xmalloc(115 * sizeof(float));
    }
    c->rc = ckpt_read(c->path, &c->cfg, &h, x, 4);
    for (int k = 0; k < 4; k++) {
        free(x[k]);
    }
}

START_TEST(test_unknown_format_names_version_and_hint) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/v9.ckpt", dir);
    size_t len;
    unsigned char *buf = s_slurp("tests/fixtures/ckpt_v1_mlp.bin", &len);
    buf[offsetof(ckpt_header_t, format_version)] = 9;
    s_spit(path, buf, len);
    s_read_case c = {
        path, {.obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {8, 6}, .dueling = 1}, 0};
    char *log = s_logged(s_read_v9, &c);
    ck_assert_int_eq(c.rc, APEX_EVERSION);
    ck_assert_msg(strstr(log, "checkpoint format version 9 (header 168 bytes); this build reads "
                              "versions 1 and 2"),
                  "%s", log);
    ck_assert_msg(strstr(log, "HINT"), "%s", log);
    free(log);
    free(buf);
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

// ckpt_writer (a stage 3 rank 0 writes the arrays as it gathers them): the same bytes as
// ckpt_write for the same header and arrays, whatever the pieces; readable by ckpt_read.
// Then the failures: a missing directory fails at open, the appends and commit return the
// error and the writer is freed; a file-size limit part way (as a full disk) returns
// APEX_ENOSPC at the append that hit it and at commit, no .tmp remains; the previous file
// survives both.
START_TEST(test_writer_in_pieces) {
    const char *dir = check_tmpdir();
    char whole[600], pieces[600], bad[640], tmp[620];
    snprintf(whole, sizeof whole, "%s/whole.ckpt", dir);
    snprintf(pieces, sizeof pieces, "%s/pieces.ckpt", dir);
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.ckpt", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", pieces);
    nn_config_t net = {.obs_dim = 3, .n_actions = 2, .n_hidden = 1, .hidden = {40}};
    size_t n = nn_num_params(&net);
    float *a = xmalloc(n * sizeof(float)), *b = xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)i * 0.25f - 3.0f;
        b[i] = 1.0f / (float)(i + 1);
    }
    ckpt_header_t h1, h2;
    ckpt_header_init(&h1, &net);
    h1.learner_step = 77;
    h1.extra.user[CKPT_USER_OPT_SHARDS] = 2;
    h2 = h1;
    const float *arrays[2] = {a, b};
    ck_assert_int_eq(ckpt_write(whole, &h1, arrays, 2), APEX_OK);
    ckpt_writer_t *w = NULL;
    ck_assert_int_eq(ckpt_writer_open(&w, pieces, &h2, 2), APEX_OK);
    size_t cuts[] = {1, 7, n - 8}; // a: three pieces; b: one, then the rest
    const float *x = a;
    for (size_t c = 0; c < 3; c++) {
        ck_assert_int_eq(ckpt_writer_append(w, x, cuts[c]), APEX_OK);
        x += cuts[c];
    }
    ck_assert_int_eq(ckpt_writer_append(w, b, 5), APEX_OK);
    ck_assert_int_eq(ckpt_writer_append(w, b + 5, n - 5), APEX_OK);
    ck_assert_int_eq(ckpt_writer_commit(&w), APEX_OK);
    ck_assert_ptr_null(w);
    size_t n0, n1;
    unsigned char *f0 = s_slurp(whole, &n0), *f1 = s_slurp(pieces, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert_int_eq(memcmp(f0, f1, n0), 0);
    xfree(f0);
    ckpt_header_t got;
    float *ra = xmalloc(n * sizeof(float)), *rb = xmalloc(n * sizeof(float));
    float *rarr[2] = {ra, rb};
    ck_assert_int_eq(ckpt_read(pieces, &net, &got, rarr, 2), APEX_OK);
    ck_assert_int_eq(memcmp(ra, a, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(rb, b, n * sizeof(float)), 0);
    ck_assert_uint_eq(got.learner_step, 77);
    // A missing directory: the error at open, and from every call after it.
    ck_assert_int_eq(ckpt_writer_open(&w, bad, &h2, 2), APEX_EIO);
    ck_assert_int_eq(ckpt_writer_append(w, a, n), APEX_EIO);
    ck_assert_int_eq(ckpt_writer_commit(&w), APEX_EIO);
    ck_assert_ptr_null(w);
    // A file-size limit part way through b (in a forked test, CK_FORK: the limit dies with it).
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {(rlim_t)(sizeof(ckpt_header_t) + n * sizeof(float) + 64), RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_eq(ckpt_writer_open(&w, pieces, &h2, 2), APEX_OK);
    ck_assert_int_eq(ckpt_writer_append(w, a, n), APEX_OK);
    ck_assert_int_eq(ckpt_writer_append(w, b, n), APEX_ENOSPC);
    ck_assert_int_eq(ckpt_writer_commit(&w), APEX_ENOSPC);
    ck_assert_int_ne(access(tmp, F_OK), 0);
    unsigned char *f2 = s_slurp(pieces, &n0);
    ck_assert(n0 == n1 && memcmp(f1, f2, n0) == 0);
    xfree(f1);
    xfree(f2);
    xfree(ra);
    xfree(rb);
    xfree(a);
    xfree(b);
    check_rmtree(dir);
}
END_TEST

// ckpt_read_range (a stage 3 rank's slice of each array): the same floats as a whole read,
// for ranges at the start, in the middle across the CHUNK boundary and at the end, with
// the arrays as stored; a flipped byte outside the range still fails the checksum, a
// truncated file fails, and a failed read leaves the header untouched.
START_TEST(test_read_range) {
    const char *dir = check_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/range.ckpt", dir);
    nn_config_t net = {.obs_dim = 300, .n_actions = 2, .n_hidden = 2, .hidden = {1000, 40}};
    size_t n = nn_num_params(&net); // 343 k floats: the payload spans several 1 MB pieces
    ck_assert_uint_gt(n, 300000);
    float *a[4], *full[4], *got[4];
    for (int i = 0; i < 4; i++) {
        a[i] = xmalloc(n * sizeof(float));
        full[i] = xmalloc(n * sizeof(float));
        got[i] = xmalloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) {
            a[i][j] = (float)(i * 1000003 + (int)j) * 0.001f;
        }
    }
    ckpt_header_t h, r;
    ckpt_header_init(&h, &net);
    h.learner_step = 5;
    ck_assert_int_eq(ckpt_write(path, &h, (const float *const *)a, 4), APEX_OK);
    ck_assert_int_eq(ckpt_read_any(path, &net, &r, full, 4), APEX_OK);
    size_t los[] = {0, 262000, n - 77, 0}, counts[] = {10, 1000, 77, n};
    for (int c = 0; c < 4; c++) {
        memset(&r, 0, sizeof r);
        ck_assert_int_eq(ckpt_read_range(path, &net, &r, los[c], counts[c], got, 4), APEX_OK);
        ck_assert_uint_eq(r.n_arrays, 4);
        ck_assert_uint_eq(r.learner_step, 5);
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(memcmp(got[i], full[i] + los[c], counts[c] * sizeof(float)), 0);
        }
    }
    ck_assert_int_eq(ckpt_read_range(path, &net, &r, 0, 10, got, 3), APEX_EINVAL); // 4 stored
    size_t len;
    unsigned char *bytes = s_slurp(path, &len);
    bytes[len - 5] ^= 0x10; // in the last array, far from the range read
    s_spit(path, bytes, len);
    memset(&r, 0x5A, sizeof r);
    ck_assert_int_eq(ckpt_read_range(path, &net, &r, 0, 10, got, 4), APEX_EPROTO);
    ck_assert_uint_eq(r.learner_step, 0x5A5A5A5A5A5A5A5Aull); // untouched
    bytes[len - 5] ^= 0x10;
    s_spit(path, bytes, len - 4);
    ck_assert_int_eq(ckpt_read_range(path, &net, &r, 0, 10, got, 4), APEX_EPROTO);
    xfree(bytes);
    for (int i = 0; i < 4; i++) {
        xfree(a[i]);
        xfree(full[i]);
        xfree(got[i]);
    }
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
    tcase_add_test(tc, test_conv_round_trip_and_shape_refused);
    tcase_add_test(tc, test_format1_mlp_checkpoint_loads);
    tcase_add_test(tc, test_unknown_format_names_version_and_hint);
    tcase_add_test(tc, test_disk_full_keeps_previous);
    tcase_add_test(tc, test_writer_in_pieces);
    tcase_add_test(tc, test_read_range);
    suite_add_tcase(s, tc);
    return s;
}
