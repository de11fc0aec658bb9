// check_helpers.c: helpers shared by the suites (no suite of its own).
#include "check_apex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int s_close(double got, double want, double rtol, double atol) {
    if (isnan(got) || isnan(want)) {
        return 0;
    }
    return fabs(got - want) <= atol + rtol * fabs(want);
}

#define CLOSE_BODY                                                                                 \
    int bad = 0;                                                                                   \
    double worst = 0;                                                                              \
    for (size_t i = 0; i < n; i++) {                                                               \
        double g = got[i], w = want[i];                                                            \
        if (!s_close(g, w, rtol, atol)) {                                                          \
            if (bad < 5) {                                                                         \
                fprintf(stderr, "%s[%zu]: got %.9g want %.9g\n", what, i, g, w);                   \
            }                                                                                      \
            bad++;                                                                                 \
        }                                                                                          \
        if (fabs(g - w) > worst || isnan(g)) {                                                     \
            worst = isnan(g) ? INFINITY : fabs(g - w);                                             \
        }                                                                                          \
    }                                                                                              \
    if (bad) {                                                                                     \
        fprintf(stderr, "%s: %d of %zu mismatched, largest difference %.3g\n", what, bad, n,       \
                worst);                                                                            \
    }                                                                                              \
    return bad == 0;

int check_close_f(const float *got, const float *want, size_t n, double rtol, double atol,
                  const char *what) {
    CLOSE_BODY
}

int check_close_d(const double *got, const double *want, size_t n, double rtol, double atol,
                  const char *what) {
    CLOSE_BODY
}

const char *check_tmpdir(void) {
    static char path[512];
    const char *base = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/apex_test_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(path)) {
        ck_abort_msg("mkdtemp failed");
    }
    return path;
}

void check_rmtree(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "check_rmtree: could not remove %s\n", path);
    }
}

static void *s_replay_main(void *arg) {
    replay_server_run(arg);
    return NULL;
}

void check_replay_start(check_replay_t *r, const apex_config_t *cfg) {
    r->server = replay_server_new(cfg, 1);
    ck_assert_ptr_nonnull(r->server);
    ck_assert_int_eq(pthread_create(&r->thread, NULL, s_replay_main, r->server), 0);
}

void check_replay_stop(check_replay_t *r, wire_replay_stats_t *st) {
    replay_server_stop(r->server);
    ck_assert_int_eq(pthread_join(r->thread, NULL), 0);
    if (st) {
        replay_server_stats(r->server, st);
    }
    replay_server_destroy(&r->server);
}

// ---------------------------------------------------------------------------------------
// Clients of a replay server

void *check_dealer(void *ctx, const char *ep, const char *id, int rcvtimeo_ms) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_ptr_nonnull(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &rcvtimeo_ms, sizeof rcvtimeo_ms);
    if (id) {
        zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id));
    }
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    return s;
}

void check_send_msg(void *sock, const wire_msg_t *m) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(m, &b);
    ck_assert_int_eq(zmq_send(sock, b.data, b.len, 0), (int)b.len);
    wire_buf_fini(&b);
}

void check_send_rows(void *sock, const check_rows_t *r, uint32_t n, uint32_t obs_dim,
                     uint32_t actor, uint64_t seq, const float *prio) {
    ck_assert_uint_le(n, CHECK_ROWS_MAX);
    ck_assert_uint_le(obs_dim, CHECK_OBS_MAX);
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = actor,
                               .seq = seq,
                               .count = n,
                               .obs_dim = obs_dim,
                               .obs = r->obs,
                               .actions = r->actions,
                               .rewards = r->rewards,
                               .discounts = r->discounts,
                               .next_obs = r->next_obs,
                               .priorities = prio};
    check_send_msg(sock, &m);
}
