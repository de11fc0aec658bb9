// bench_common.c: helpers the benchmarks share (bench_common.h). Not a benchmark.
#include "bench_common.h"

#include "apex.h"
#include "config.h"
#include "xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

// ---------------------------------------------------------------------------------------
// Timing

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void bench_sleep_s(double s) {
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

double bench_cpu_s(clockid_t which) {
    struct timespec ts;
    clock_gettime(which, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------
// Replay clients

void bench_rows_init(bench_rows_t *r, uint32_t n, rng_t *rng) {
    *r = (bench_rows_t){.n = n,
                        .obs = xmalloc((size_t)n * BENCH_OBS_DIM * sizeof(float)),
                        .next_obs = xmalloc((size_t)n * BENCH_OBS_DIM * sizeof(float)),
                        .rewards = xmalloc(n * sizeof(float)),
                        .discounts = xmalloc(n * sizeof(float)),
                        .prio = xmalloc(n * sizeof(float)),
                        .actions = xmalloc(n * sizeof(int32_t))};
    for (size_t i = 0; i < (size_t)n * BENCH_OBS_DIM; i++) {
        r->obs[i] = (float)rng_normal(rng) * 0.1f;
        r->next_obs[i] = (float)rng_normal(rng) * 0.1f;
    }
    for (uint32_t i = 0; i < n; i++) {
        r->rewards[i] = 2.9701f; // 3-step return of rewards 1
        r->discounts[i] = rng_below(rng, 20) ? 0.970299f : 0.0f;
        r->prio[i] = rng_uniform_f(rng) * 2.0f + 1e-3f;
        r->actions[i] = (int32_t)rng_below(rng, BENCH_N_ACTIONS);
    }
}

void bench_rows_fini(bench_rows_t *r) {
    xfree(r->obs);
    xfree(r->next_obs);
    xfree(r->rewards);
    xfree(r->discounts);
    xfree(r->prio);
    xfree(r->actions);
}

void bench_encode_rows(wire_buf_t *out, const bench_rows_t *r, uint32_t off, uint32_t n,
                       uint32_t actor, uint64_t seq) {
    size_t o = (size_t)off * BENCH_OBS_DIM;
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = actor,
                               .seq = seq,
                               .count = n,
                               .obs_dim = BENCH_OBS_DIM,
                               .obs = r->obs + o,
                               .actions = r->actions + off,
                               .rewards = r->rewards + off,
                               .discounts = r->discounts + off,
                               .next_obs = r->next_obs + o,
                               .priorities = r->prio + off};
    wire_encode(&m, out);
}

wire_limits_t bench_limits(void) {
    wire_limits_t lim = {
        .obs_dim = BENCH_OBS_DIM, .n_actions = BENCH_N_ACTIONS, .max_count = BENCH_FILL_N};
    lim.max_message_bytes = wire_max_message_bytes(&lim);
    return lim;
}

void *bench_dealer(void *ctx, const char *ep, const char *id, int (*prepare)(void *sock)) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    if (!s || (prepare && prepare(s) != 0) ||
        zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        (id && zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id)) != 0) || zmq_connect(s, ep) != 0) {
        if (s) {
            zmq_close(s);
        }
        return NULL;
    }
    return s;
}

int bench_drain_acks(void *sock, wire_decoder_t *dec) {
    int n = 0;
    for (;;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return errno == EAGAIN || errno == EINTR ? n : -1;
        }
        wire_msg_t m;
        int rc = wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m);
        zmq_msg_close(&msg);
        if (rc != APEX_OK || m.type != WIRE_MSG_INSERT_ACK) {
            errno = EPROTO;
            return -1;
        }
        n += 1 + (int)m.u.insert_ack.n_more;
    }
}

// ---------------------------------------------------------------------------------------
// Replay servers

#define MAX_SETS 32

static void *s_server_main(void *arg) {
    replay_server_run(arg);
    return NULL;
}

int bench_server_start(bench_server_t *s, const char *const *sets, int n_sets, int shard, char *err,
                       size_t err_len) {
    static const char *const base[] = {"env.id=CartPole-v1",
                                       "replay.max_batch=4096",
                                       "replay.min_size_to_sample=1000",
                                       "replay.samples_per_insert=0",
                                       "replay.stats_interval_ms=60000",
                                       "learner.batch_size=512",
                                       "actor.send_batch=50",
                                       "actor.num_actors=1000",
                                       "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                                       "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    const char *all[MAX_SETS];
    int n = 0;
    s->server = NULL;
    if (n_sets < 0 || (size_t)n_sets > MAX_SETS - APEX_ARRAY_LEN(base)) {
        snprintf(err, err_len, "more than %zu --set strings", MAX_SETS - APEX_ARRAY_LEN(base));
        return -1;
    }
    for (size_t i = 0; i < APEX_ARRAY_LEN(base); i++) {
        all[n++] = base[i];
    }
    for (int i = 0; i < n_sets; i++) {
        all[n++] = sets[i];
    }
    apex_config_t cfg;
    if (config_load(&cfg, NULL, all, n, err, err_len) != 0) {
        return -1;
    }
    if (config_select_shard(&cfg, shard) != 0) {
        snprintf(err, err_len, "no shard %d in [replay] shards = %lld", shard,
                 (long long)cfg.replay.shards);
        return -1;
    }
    s->server = replay_server_new(&cfg, 1);
    if (!s->server) {
        snprintf(err, err_len, "the replay server did not start (its log says why)");
        return -1;
    }
    int rc = pthread_create(&s->thread, NULL, s_server_main, s->server);
    if (rc != 0) {
        snprintf(err, err_len, "pthread_create: %s", strerror(rc));
        replay_server_destroy(&s->server);
        return -1;
    }
    return 0;
}

void bench_server_stop(bench_server_t *s, wire_replay_stats_t *st) {
    if (!s->server) {
        return;
    }
    replay_server_stop(s->server);
    pthread_join(s->thread, NULL);
    if (st) {
        replay_server_stats(s->server, st);
    }
    replay_server_destroy(&s->server);
}
