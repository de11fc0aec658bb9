// check_helpers.c: helpers shared by the suites (no suite of its own).
#include "check_apex.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "clock.h"

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

void check_reference_missing(const char *test, const char *missing) {
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        ck_abort_msg("%s: %s (CI=true: a missing reference fails)", test, missing);
    }
    fprintf(stderr, "%s SKIPPED: %s\n", test, missing);
}

const char *check_read_file(const char *path) {
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
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

// ---------------------------------------------------------------------------------------
// A stand-in for the learner's weights endpoint (check_apex.h)

void *check_weights_router(void *ctx, char *ep, size_t ep_len) {
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    ck_assert_ptr_nonnull(s);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &ep_len), 0);
    return s;
}

// Reads one request without blocking: 1 with *req filled, 0 when none is waiting. A
// request is tiny, so a decoder of the smallest limits reads it.
static int s_read_request(void *router, check_weights_request_t *req) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, router, ZMQ_DONTWAIT) < 0) {
        ck_assert_msg(errno == EAGAIN || errno == EINTR, "weights router: %s", zmq_strerror(errno));
        zmq_msg_close(&id);
        return 0;
    }
    ck_assert_msg(zmq_msg_more(&id), "a weights request without a body");
    ck_assert_uint_le(zmq_msg_size(&id), sizeof req->id);
    req->id_len = zmq_msg_size(&id);
    memcpy(req->id, zmq_msg_data(&id), req->id_len);
    zmq_msg_close(&id);
    zmq_msg_init(&body);
    ck_assert_int_ge(zmq_msg_recv(&body, router, ZMQ_DONTWAIT), 0); // frames come whole
    ck_assert_msg(!zmq_msg_more(&body), "a weights request of more than one frame");
    wire_limits_t lim = {
        .obs_dim = 1, .n_actions = 1, .num_params = 1, .max_count = 1, .max_episodes = 1};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    wire_msg_t m;
    int rc = wire_decode(dec, zmq_msg_data(&body), zmq_msg_size(&body), &m);
    ck_assert_msg(rc == APEX_OK && m.type == WIRE_MSG_WEIGHTS_REQUEST,
                  "the weights endpoint got %s, not a WeightsRequest",
                  rc == APEX_OK ? wire_msg_name(m.type) : wire_decoder_last_error(dec));
    req->have_version = m.u.weights_request.have_version;
    wire_decoder_destroy(&dec);
    zmq_msg_close(&body);
    return 1;
}

int check_weights_wait_request(void *router, int64_t deadline_ms, check_weights_request_t *req) {
    for (;;) {
        if (s_read_request(router, req)) {
            return 1;
        }
        int64_t left = deadline_ms - clock_now_ms();
        if (left <= 0) {
            return 0;
        }
        zmq_pollitem_t item = {.socket = router, .events = ZMQ_POLLIN};
        int rc = zmq_poll(&item, 1, (long)(left < 100 ? left : 100));
        ck_assert_msg(rc >= 0 || errno == EINTR, "zmq_poll: %s", zmq_strerror(errno));
    }
}

void check_weights_wait_reconnect(void *router, int64_t deadline_ms, uint64_t have,
                                  check_weights_request_t *q) {
    check_weights_request_t first;
    ck_assert_msg(check_weights_wait_request(router, deadline_ms, &first), "no weights request");
    ck_assert_uint_eq(first.have_version, have);
    int requests = 1;
    do {
        ck_assert_msg(check_weights_wait_request(router, deadline_ms, q),
                      "%d requests, all over the first connection: no reconnect", requests);
        ck_assert_uint_eq(q->have_version, have);
        requests++;
    } while (q->id_len == first.id_len && memcmp(q->id, first.id, q->id_len) == 0);
}

void check_weights_send(void *router, const check_weights_request_t *to, const void *data,
                        size_t len, int flags) {
    ck_assert_int_eq(zmq_send(router, to->id, to->id_len, ZMQ_SNDMORE), (int)to->id_len);
    ck_assert_int_eq(zmq_send(router, data, len, flags), (int)len);
}

int check_weights_answer(void *router, const wire_buf_t *answer, uint64_t *have) {
    check_weights_request_t q;
    int n = 0;
    while (s_read_request(router, &q)) {
        check_weights_send(router, &q, answer->data, answer->len, 0);
        n++;
        if (have) {
            *have = q.have_version;
        }
    }
    return n;
}

void check_encode_weights(wire_buf_t *out, uint64_t version, const float *params,
                          uint32_t num_params) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){.version = version,
                                   .learner_step = version * 100,
                                   .num_params = num_params,
                                   .params = params};
    wire_encode(&m, out);
}

// ---------------------------------------------------------------------------------------
// Fuzz inputs (check_fuzz_*.c)

// Reads a whole file; caller frees. NULL if it cannot be read.
uint8_t *check_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    while (1) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int check_fuzz_dir(const char *kind, const char *target, check_fuzz_fn fn, const char **name) {
    const char *root = getenv("APEX_SRC_DIR");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/fuzz/%s/%s", root && *root ? root : ".", kind, target);
    DIR *d = opendir(dir);
    if (!d) {
        return 0;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "README.md") == 0) {
            continue;
        }
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        size_t len = 0;
        uint8_t *data = check_slurp(path, &len);
        ck_assert_msg(data != NULL, "cannot read %s", path);
        *name = path;
        ck_assert_int_eq(fn(data, len), 0);
        *name = NULL;
        free(data);
        n++;
    }
    closedir(d);
    return n;
}
