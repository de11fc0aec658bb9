// check_relay.c: apex-relay's core (actor/relay.h) between a stand-in learner (a
// common/weights_server.h on loopback TCP, as learner.c runs it) and DEALER clients on the
// relay's ipc:// socket, the way actors ask (issue #29). The relay serves each version the
// learner has, byte for byte; the learner answers the relay, not each client (its egress is
// one message per version whatever the number of clients); held requests wait for the next
// version; Weights of another size or with a NaN, and other messages, are dropped and
// counted, never served; a learner started afresh (versions from 1 again) is followed once
// the old one has gone quiet. And the config: a relay endpoint that is neither ipc:// nor
// tcp://, or tcp:// under CURVE, is refused. Every wait is for a condition.
#include "check_apex.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "cli.h"
#include "clock.h"
#include "config.h"
#include "nn.h"
#include "relay.h"
#include "weights_server.h"
#include "wire.h"
#include "xalloc.h"

#define WAIT_MS 20000
#define N_CLIENTS 12

typedef struct {
    void *ctx;
    weights_server_t *learner;
    char learner_ep[128];
    apex_config_t cfg;
    relay_t *relay;
    pthread_t thread;
    int rc;
    size_t np;
    float *params;
    wire_decoder_t *dec;
} s_fix;

static void *s_relay_main(void *arg) {
    s_fix *f = arg;
    f->rc = relay_run(f->relay);
    return NULL;
}

static void s_params(s_fix *f, uint64_t version) {
    for (size_t i = 0; i < f->np; i++) {
        f->params[i] = (float)version + 0.001f * (float)i;
    }
}

// The stand-in learner publishes version with np parameters (f->np: the run's).
static void s_publish(s_fix *f, uint64_t version, size_t np, int replace) {
    s_params(f, version);
    wire_weights_t w = {
        .version = version, .learner_step = 3, .num_params = (uint32_t)np, .params = f->params};
    if (replace) {
        weights_server_replace(f->learner, &w);
    } else {
        weights_server_publish(f->learner, &w);
    }
}

// The stand-in learner, on a new port or (a learner restarted) on the previous one, which
// ZeroMQ's I/O thread frees a little after the old socket is closed: retried until then.
static void s_learner_new(s_fix *f) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    do {
        f->learner = weights_server_new(f->ctx, NULL,
                                        f->learner_ep[0] ? f->learner_ep : "tcp://127.0.0.1:*", 16);
    } while (!f->learner && clock_now_ms() < deadline && zmq_poll(NULL, 0, 20) >= 0);
    ck_assert_ptr_nonnull(f->learner);
    snprintf(f->learner_ep, sizeof f->learner_ep, "%s", weights_server_endpoint(f->learner));
}

static void s_setup(s_fix *f) {
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    s_learner_new(f);
    char err[CONFIG_ERR_LEN], lw[200], relay[1200];
    snprintf(lw, sizeof lw, "endpoints.learner_weights=%s", f->learner_ep);
    snprintf(relay, sizeof relay, "endpoints.relay=ipc://%s/relay.sock", check_tmpdir());
    const char *sets[] = {"env.id=CartPole-v1", "network.hidden=16,16", lw, relay};
    ck_assert_msg(config_load(&f->cfg, NULL, sets, 4, err, sizeof err) == 0, "%s", err);
    f->np = nn_run_weights_params(&f->cfg);
    f->params = xmalloc((f->np + 1) * sizeof(float));
    wire_limits_t lim = {.num_params = (uint32_t)f->np, .max_count = 1};
    f->dec = wire_decoder_new(&lim);
    f->relay = relay_new(&f->cfg);
    ck_assert_ptr_nonnull(f->relay);
    ck_assert_int_eq(pthread_create(&f->thread, NULL, s_relay_main, f), 0);
}

static void s_teardown(s_fix *f) {
    relay_stop(f->relay);
    ck_assert_int_eq(pthread_join(f->thread, NULL), 0);
    ck_assert_int_eq(f->rc, 0);
    relay_destroy(&f->relay);
    ck_assert_ptr_null(f->relay);
    weights_server_destroy(&f->learner);
    zmq_ctx_term(f->ctx);
    wire_decoder_destroy(&f->dec);
    free(f->params);
}

// Serves the learner's side (requests, heartbeats) for up to wait_ms, until the relay's
// stats satisfy done (NULL: the whole time). Returns whether done held.
static int s_learner_until(s_fix *f, int (*done)(const relay_stats_t *, uint64_t), uint64_t arg,
                           int wait_ms) {
    int64_t deadline = clock_now_ms() + wait_ms;
    relay_stats_t st;
    while (clock_now_ms() < deadline) {
        weights_server_read(f->learner, 64, clock_now_ms());
        weights_server_heartbeat(f->learner, clock_now_ms());
        relay_get_stats(f->relay, &st);
        if (done && done(&st, arg)) {
            return 1;
        }
        zmq_pollitem_t it = {.socket = weights_server_socket(f->learner), .events = ZMQ_POLLIN};
        zmq_poll(&it, 1, 10);
    }
    return 0;
}

static int s_serving(const relay_stats_t *st, uint64_t v) { return st->version == v; }
static int s_bad_at_least(const relay_stats_t *st, uint64_t n) { return st->bad >= n; }
// The relay's stats are published every 100 ms: wait for them.
static int s_answered(const relay_stats_t *st, uint64_t n) {
    return st->taken >= 2 && st->answers >= n;
}

static void s_ask(void *client, uint64_t have) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = have;
    check_send_msg(client, &m);
}

// The version client got within wait_ms while the learner side is served (0: none), its
// parameters checked against what the learner published for that version.
static uint64_t s_answer(s_fix *f, void *client, int wait_ms) {
    int64_t deadline = clock_now_ms() + wait_ms;
    for (;;) {
        zmq_pollitem_t it = {.socket = client, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 5) > 0) {
            break;
        }
        if (clock_now_ms() >= deadline) {
            return 0;
        }
        weights_server_read(f->learner, 64, clock_now_ms());
        weights_server_heartbeat(f->learner, clock_now_ms());
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    ck_assert_int_ge(zmq_msg_recv(&msg, client, 0), 0);
    wire_msg_t m;
    ck_assert_int_eq(wire_decode(f->dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
    ck_assert_int_eq(m.type, WIRE_MSG_WEIGHTS);
    uint64_t v = m.u.weights.version;
    float *want = xmalloc(f->np * sizeof(float));
    for (size_t i = 0; i < f->np; i++) {
        want[i] = (float)v + 0.001f * (float)i;
    }
    ck_assert_mem_eq(m.u.weights.params, want, f->np * sizeof(float));
    free(want);
    zmq_msg_close(&msg);
    return v;
}

START_TEST(test_relay_serves_each_version_once_from_the_learner) {
    s_fix f;
    s_setup(&f);
    void *c[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        char id[32];
        snprintf(id, sizeof id, "actor-%d", i);
        c[i] = check_dealer(f.ctx, relay_endpoint(f.relay), id, 0);
    }
    // Nothing yet: a client's request is held by the relay.
    s_ask(c[0], 0);
    ck_assert_uint_eq(s_answer(&f, c[0], 100), 0);
    // The first version reaches every client, byte for byte.
    s_publish(&f, 5, f.np, 0);
    ck_assert_uint_eq(s_answer(&f, c[0], WAIT_MS), 5);
    for (int i = 1; i < N_CLIENTS; i++) {
        s_ask(c[i], 0);
    }
    for (int i = 1; i < N_CLIENTS; i++) {
        ck_assert_uint_eq(s_answer(&f, c[i], WAIT_MS), 5);
    }
    // Every client holding v5 asks again: held until v6, which each then gets.
    for (int i = 0; i < N_CLIENTS; i++) {
        s_ask(c[i], 5);
    }
    ck_assert_uint_eq(s_answer(&f, c[0], 200), 0);
    s_publish(&f, 6, f.np, 0);
    for (int i = 0; i < N_CLIENTS; i++) {
        ck_assert_uint_eq(s_answer(&f, c[i], WAIT_MS), 6);
    }
    // The learner answered the relay only: one message per version (and the heartbeats of
    // its held request), not one per client.
    ck_assert(s_learner_until(&f, s_answered, 2 * N_CLIENTS, WAIT_MS));
    weights_server_stats_t ls;
    weights_server_stats(f.learner, &ls);
    relay_stats_t rs;
    relay_get_stats(f.relay, &rs);
    ck_assert_uint_eq(rs.taken, 2);
    ck_assert_uint_lt(ls.answers, N_CLIENTS);
    ck_assert_uint_ge(rs.answers, 2 * N_CLIENTS);
    // Weights of another size, then with a NaN: dropped and counted, v6 still served.
    s_publish(&f, 7, f.np - 1, 0);
    ck_assert(s_learner_until(&f, s_bad_at_least, 1, WAIT_MS));
    f.params[0] = NAN;
    wire_weights_t w = {.version = 8, .num_params = (uint32_t)f.np, .params = f.params};
    weights_server_publish(f.learner, &w);
    ck_assert(s_learner_until(&f, s_bad_at_least, 2, WAIT_MS));
    s_ask(c[1], 0);
    ck_assert_uint_eq(s_answer(&f, c[1], WAIT_MS), 6);
    // The next good version goes through.
    s_publish(&f, 9, f.np, 0);
    ck_assert(s_learner_until(&f, s_serving, 9, WAIT_MS));
    s_ask(c[2], 6);
    ck_assert_uint_eq(s_answer(&f, c[2], WAIT_MS), 9);
    // A learner started afresh on the same endpoint counts from 1 again: the relay serves it
    // once the old one has been quiet for WIRE_OLDER_WEIGHTS_AFTER_MS.
    weights_server_destroy(&f.learner);
    s_learner_new(&f);
    s_publish(&f, 1, f.np, 0);
    ck_assert_msg(s_learner_until(&f, s_serving, 1, WAIT_MS),
                  "the relay did not follow the new learner");
    s_ask(c[3], 0);
    ck_assert_uint_eq(s_answer(&f, c[3], WAIT_MS), 1);
    relay_get_stats(f.relay, &rs);
    ck_assert_uint_eq(rs.bad, 2);
    ck_assert_uint_eq(rs.refused, 0);
    for (int i = 0; i < N_CLIENTS; i++) {
        zmq_close(c[i]);
    }
    s_teardown(&f);
}
END_TEST

// Garbage on the actors' side is refused and counted (weights_server's checks), and the
// relay keeps serving.
START_TEST(test_relay_refuses_garbage_from_clients) {
    s_fix f;
    s_setup(&f);
    s_publish(&f, 3, f.np, 0);
    ck_assert(s_learner_until(&f, s_serving, 3, WAIT_MS));
    void *c = check_dealer(f.ctx, relay_endpoint(f.relay), "x", 0);
    const char junk[] = "\x08\x01not a request";
    ck_assert_int_ge(zmq_send(c, junk, sizeof junk, 0), 0);
    ck_assert_int_ge(zmq_send(c, "", 0, 0), 0);
    s_ask(c, 0);
    ck_assert_uint_eq(s_answer(&f, c, WAIT_MS), 3);
    relay_stats_t rs;
    for (int64_t end = clock_now_ms() + WAIT_MS; clock_now_ms() < end;) {
        relay_get_stats(f.relay, &rs);
        if (rs.refused >= 2) {
            break;
        }
        s_learner_until(&f, NULL, 0, 20);
    }
    ck_assert_uint_eq(rs.refused, 2);
    zmq_close(c);
    s_teardown(&f);
}
END_TEST

START_TEST(test_relay_config) {
    char err[CONFIG_ERR_LEN];
    apex_config_t cfg;
    const char *bad[] = {"endpoints.relay=relay.sock"};
    ck_assert_int_ne(config_load(&cfg, NULL, bad, 1, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "[endpoints] relay = 'relay.sock': need ipc://PATH or "
                              "tcp://HOST:PORT"),
                  "%s", err);
    const char *curve[] = {"endpoints.relay=tcp://127.0.0.1:6000", "security.mode=curve"};
    ck_assert_int_ne(config_load(&cfg, NULL, curve, 2, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "the relay serves its host's actors without CURVE, so only over "
                              "ipc://"),
                  "%s", err);
    const char *ok[] = {"endpoints.relay=ipc:///tmp/r.sock", "security.mode=curve"};
    ck_assert_msg(config_load(&cfg, NULL, ok, 2, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(cfg.endpoints.relay, "ipc:///tmp/r.sock");
    // No relay configured: apex-relay has nothing to serve on and says so.
    ck_assert_int_eq(config_load(&cfg, NULL, NULL, 0, err, sizeof err), 0);
    ck_assert_ptr_null(relay_new(&cfg));
}
END_TEST

// Hundreds of peers need descriptors: every daemon raises its soft limit of open files to
// the hard one at start-up (cli_startup). Check forks each test, so this process's limits
// are its own.
START_TEST(test_fd_limit_raised) {
    struct rlimit r;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
    // Below the hard limit whatever it is (a test process has a few descriptors open, so
    // the hard limit is at least 2 here).
    ck_assert(r.rlim_max == RLIM_INFINITY || r.rlim_max >= 2);
    rlim_t soft = r.rlim_max == RLIM_INFINITY || r.rlim_max > 32 ? 32 : r.rlim_max - 1;
    struct rlimit low = {.rlim_cur = soft, .rlim_max = r.rlim_max};
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    long now = cli_raise_fd_limit();
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
    ck_assert(r.rlim_cur == r.rlim_max);
    ck_assert(now == (r.rlim_max == RLIM_INFINITY ? LONG_MAX : (long)r.rlim_max));
}
END_TEST

Suite *relay_suite(void) {
    Suite *s = suite_create("relay");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_relay_serves_each_version_once_from_the_learner);
    tcase_add_test(tc, test_relay_refuses_garbage_from_clients);
    tcase_add_test(tc, test_relay_config);
    tcase_add_test(tc, test_fd_limit_raised);
    suite_add_tcase(s, tc);
    return s;
}
