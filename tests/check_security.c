// check_security.c: CurveZMQ end to end on the real replay server: an authorized client's
// batches are stored; a client whose key is not on the allow-list, a plaintext client, and a
// client that expects another server key get nothing in (the server's counters prove it).
// Key files: format, permissions, errors.
#include "check_apex.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "security.h"
#include "server.h"
#include "wire.h"

static char s_dir[512];

static void s_keys(void) {
    snprintf(s_dir, sizeof s_dir, "%s", check_tmpdir());
    char pub[SECURITY_KEY_Z85_LEN + 1], err[256];
    const char *names[] = {"replay", "learner", "actor", "intruder"};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(security_keygen(s_dir, names[i], pub, err, sizeof err) == 0, "%s", err);
    }
    // Only the actor is authorized.
    char path[600], key[SECURITY_KEY_Z85_LEN + 1];
    snprintf(path, sizeof path, "%s/actor.pub", s_dir);
    ck_assert_int_eq(security_read_key_file(path, key, NULL, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/authorized_keys", s_dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "# comment\n\n%s actor\n", key);
    fclose(f);
}

START_TEST(test_key_files) {
    s_keys();
    char path[600], pub[SECURITY_KEY_Z85_LEN + 1], sec[SECURITY_KEY_Z85_LEN + 1], err[256];
    snprintf(path, sizeof path, "%s/replay.key", s_dir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    ck_assert_int_eq(security_read_key_file(path, pub, sec, err, sizeof err), 0);
    ck_assert_int_eq(strlen(pub), 40);
    // The public and secret keys belong together.
    char derived[SECURITY_KEY_Z85_LEN + 1];
    ck_assert_int_eq(zmq_curve_public(derived, sec), 0);
    ck_assert_str_eq(derived, pub);
    chmod(path, 0644);
    ck_assert_int_eq(security_read_key_file(path, pub, sec, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "too open"));
    snprintf(path, sizeof path, "%s/replay.pub", s_dir);
    ck_assert_int_eq(security_read_key_file(path, pub, sec, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "no valid secret-key"));
    ck_assert_int_eq(security_read_key_file("/nonexistent.key", pub, NULL, err, sizeof err), -1);
    check_rmtree(s_dir);
}
END_TEST

typedef struct {
    replay_server_t *server;
    pthread_t thread;
} s_srv;

static void *s_run(void *arg) {
    replay_server_run(arg);
    return NULL;
}

static void s_config(apex_config_t *cfg, const char *authorized) {
    char err[CONFIG_ERR_LEN], kd[600], ak[600];
    snprintf(kd, sizeof kd, "security.key_dir=%s", s_dir);
    snprintf(ak, sizeof ak, "security.authorized_keys=%s", authorized);
    const char *sets[] = {"security.mode=curve",
                          kd,
                          ak,
                          "replay.capacity=1000",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    ck_assert_msg(config_load(cfg, NULL, sets, 6, err, sizeof err) == 0, "%s", err);
}

// A DEALER that sends one batch and waits up to wait_ms for its ack; returns 1 if acked.
static int s_try_insert(void *ctx, const char *ep, const char *client, const char *server_pub) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, timeout = 1500;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    char path[600], pub[SECURITY_KEY_Z85_LEN + 1], sec[SECURITY_KEY_Z85_LEN + 1], err[256];
    if (client) {
        snprintf(path, sizeof path, "%s/%s.key", s_dir, client);
        ck_assert_int_eq(security_read_key_file(path, pub, sec, err, sizeof err), 0);
        char spub[SECURITY_KEY_Z85_LEN + 1];
        snprintf(path, sizeof path, "%s/%s.pub", s_dir, server_pub);
        ck_assert_int_eq(security_read_key_file(path, spub, NULL, err, sizeof err), 0);
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spub, 41);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 41);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
    }
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    float obs[4] = {1, 2, 3, 4}, r = 1, d = 0.9f;
    int32_t a = 0;
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .epoch = 1,
                               .count = 1,
                               .obs_dim = 4,
                               .obs = obs,
                               .actions = &a,
                               .rewards = &r,
                               .discounts = &d,
                               .next_obs = obs};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    zmq_send(s, b.data, b.len, 0);
    wire_buf_fini(&b);
    char reply[256];
    int acked = zmq_recv(s, reply, sizeof reply, 0) > 0;
    zmq_close(s);
    return acked;
}

START_TEST(test_curve_end_to_end) {
    s_keys();
    apex_config_t cfg;
    char ak[600];
    snprintf(ak, sizeof ak, "%s/authorized_keys", s_dir);
    s_config(&cfg, ak);
    s_srv srv = {.server = replay_server_new(&cfg, 1)};
    ck_assert_ptr_nonnull(srv.server);
    pthread_create(&srv.thread, NULL, s_run, srv.server);
    void *ctx = zmq_ctx_new();
    const char *ep = replay_server_insert_endpoint(srv.server);
    ck_assert_int_eq(s_try_insert(ctx, ep, "intruder", "replay"), 0); // not on the allow-list
    ck_assert_int_eq(s_try_insert(ctx, ep, NULL, NULL), 0);           // plaintext
    ck_assert_int_eq(s_try_insert(ctx, ep, "actor", "learner"), 0);   // wrong server key
    ck_assert_int_eq(s_try_insert(ctx, ep, "actor", "replay"), 1);    // authorized
    zmq_ctx_term(ctx);
    replay_server_stop(srv.server);
    pthread_join(srv.thread, NULL);
    wire_replay_stats_t st;
    replay_server_stats(srv.server, &st);
    ck_assert_uint_eq(st.inserted, 1); // only the authorized client's batch
    ck_assert_uint_ge(replay_server_denied(srv.server), 1);
    replay_server_destroy(&srv.server);
    check_rmtree(s_dir);
}
END_TEST

START_TEST(test_missing_keys_refused) {
    s_keys();
    apex_config_t cfg;
    s_config(&cfg, "/nonexistent/authorized_keys");
    ck_assert_ptr_null(replay_server_new(&cfg, 1)); // allow-list missing
    char ak[600];
    snprintf(ak, sizeof ak, "%s/authorized_keys", s_dir);
    s_config(&cfg, ak);
    snprintf(cfg.security.key_dir, sizeof cfg.security.key_dir, "%.200s/none", s_dir);
    ck_assert_ptr_null(replay_server_new(&cfg, 1)); // own key missing
    check_rmtree(s_dir);
}
END_TEST

Suite *security_suite(void) {
    Suite *s = suite_create("security");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_key_files);
    tcase_add_test(tc, test_curve_end_to_end);
    tcase_add_test(tc, test_missing_keys_refused);
    suite_add_tcase(s, tc);
    return s;
}
