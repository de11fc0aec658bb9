// bench_replay_shards.c: one learner sampling from K replay shards over TCP loopback, for
// K = 1 and K = 2 side by side in one run (the same machine state for both).
//
// For each K: K real replay_server_t (replay/server.h), each in its own thread on ephemeral
// loopback ports, shard k of [replay] shards = K, CartPole dimensions, 2^capacity-log2
// transitions in all (2^c / K each), pre-filled to capacity. Against them:
//   pushers (default 4 threads, one DEALER each, routing id "actor-<i>"): TransitionBatches of
//           50 rows with priorities into shard i mod K (as actor i does), at most 256
//           unacknowledged each; every InsertAck is received and decoded.
//   learner (1 thread): the learner's own replay client, learner/shards.h (K = 1: one
//           DEALER, the server's ratio; K = 2: the choice of shard by mass, the global
//           minimum in each request, stats requests, liveness), keeping 4 SampleRequests of
//           4 batches of 512 in flight; per reply it copies the rows out (as a prefetch slot
//           does) and sends one PriorityUpdate per batch to the shard the reply came from.
// Over `windows` windows of `window` seconds after a warm-up, the medians of:
//   BENCH replay.shards<K>.sample512_batches_per_s <v> batches/s  (received by the learner)
//   BENCH replay.shards<K>.insert_transitions_per_s <v> transitions/s (acknowledged)
// plus "#" lines with min/max and the CPU of the whole process (% of one core). Every
// process of a real cluster (K shards, actors, learner) shares this machine's cores here.
//
// Usage: bench_replay_shards [--shards 1,2 (a list)] [--pushers 0..16] [--windows 3..64]
//                            [--window s] [--warmup s] [--capacity-log2 10..24]
#define LOG_MODULE "bench"
#include "apex.h"
#include "bench_common.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "parse.h"
#include "rng.h"
#include "security.h"
#include "server.h"
#include "shards.h"
#include "wire.h"
#include "xalloc.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define OBS_DIM BENCH_OBS_DIM
#define INSERT_N 50u        // rows per TransitionBatch ([actor] send_batch)
#define SAMPLE_N 512u       // rows per batch ([learner] batch_size)
#define BATCHES 4u          // batches per SampleRequest (batches_per_request = auto, CartPole)
#define PREFETCH 4          // requests in flight ([learner] prefetch)
#define FILL_N BENCH_FILL_N // rows per batch while pre-filling
#define PUSH_WINDOW 256
#define VARIANTS 16 // distinct pre-generated row sets per pusher, cycled
#define MAX_SHARDS 8
#define MAX_PUSHERS 16
#define MAX_WINDOWS 64
#define POLL_MS 20

typedef struct {
    int pushers, windows, cap_log2, n_k, ks[MAX_SHARDS];
    double window_s, warmup_s;
} opts_t;

typedef struct {
    atomic_int stop, failed;
    atomic_uint_fast64_t insert_rows, sample_batches;
    int K;
    char insert_ep[MAX_SHARDS][CONFIG_STR_LEN], sample_eps[MAX_SHARDS * CONFIG_STR_LEN];
    int cap_log2;
} shared_t;

static void s_fail(shared_t *sh, const char *what) {
    fprintf(stderr, "bench_replay_shards: %s: %s\n", what, zmq_strerror(errno));
    atomic_store(&sh->failed, 1);
    atomic_store(&sh->stop, 1);
}

// Sends `batches` batches of `rows` rows as `actor`, at most `window` unacknowledged; stops
// early on sh->stop. Counts acknowledged rows into counter (may be NULL). Returns 0 or -1.
static int s_push(shared_t *sh, void *ctx, const char *ep, uint32_t actor, uint64_t batches,
                  uint32_t rows, uint64_t window, atomic_uint_fast64_t *counter) {
    char id[32];
    snprintf(id, sizeof id, "actor-%u", actor);
    void *sock = bench_dealer(ctx, ep, id, NULL);
    if (!sock) {
        return -1;
    }
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 100 + actor);
    bench_rows_t r;
    uint32_t variants = rows == FILL_N ? 1 : VARIANTS; // (the pre-fill's rows are many already)
    bench_rows_init(&r, rows * variants, &rng);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_limits_t lim = bench_limits();
    wire_decoder_t *dec = wire_decoder_new(&lim);
    uint64_t seq = 0, acked = 0;
    int rc = 0;
    while (acked < batches && rc == 0 && !atomic_load(&sh->stop)) {
        if (seq < batches && seq - acked < window) {
            // Encoded per send with its own seq, as the actor does; the rows are cycled.
            bench_encode_rows(&b, &r, (uint32_t)(seq % variants) * rows, rows, actor, seq);
            if (zmq_send(sock, b.data, b.len, ZMQ_DONTWAIT) >= 0) {
                seq++;
                continue;
            }
            if (errno != EAGAIN) {
                rc = -1;
                break;
            }
        }
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
        zmq_poll(&it, 1, POLL_MS);
        int n = bench_drain_acks(sock, dec);
        rc = n < 0 ? -1 : 0;
        acked += n > 0 ? (uint64_t)n : 0;
        if (counter && n > 0) {
            atomic_fetch_add(counter, (uint64_t)n * rows);
        }
    }
    wire_buf_fini(&b);
    bench_rows_fini(&r);
    wire_decoder_destroy(&dec);
    zmq_close(sock);
    return rc;
}

typedef struct {
    shared_t *sh;
    void *ctx;
    int index;
    pthread_t thread;
} pusher_t;

static void *s_pusher_main(void *arg) {
    pusher_t *p = arg;
    shared_t *sh = p->sh;
    if (s_push(sh, p->ctx, sh->insert_ep[p->index % sh->K], (uint32_t)p->index, UINT64_MAX,
               INSERT_N, PUSH_WINDOW, &sh->insert_rows) != 0 &&
        !atomic_load(&sh->stop)) {
        s_fail(sh, "pusher");
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------
// The learner thread: learner/shards.h, as learner/learner.c drives it

typedef struct {
    shared_t *sh;
    pthread_t thread;
} learner_t;

static void *s_learner_main(void *arg) {
    learner_t *p = arg;
    shared_t *sh = p->sh;
    char a[64], b[MAX_SHARDS * CONFIG_STR_LEN + 64], c[64], err[CONFIG_ERR_LEN];
    snprintf(a, sizeof a, "replay.shards=%d", sh->K);
    snprintf(b, sizeof b, "endpoints.replay_sample=%s", sh->sample_eps);
    snprintf(c, sizeof c, "replay.capacity=%ld", 1L << sh->cap_log2);
    const char *sets[] = {a,
                          b,
                          c,
                          "learner.batch_size=512",
                          "learner.batches_per_request=4",
                          "actor.num_actors=1000"};
    apex_config_t cfg;
    if (config_load(&cfg, NULL, sets, APEX_ARRAY_LEN(sets), err, sizeof err) != 0) {
        fprintf(stderr, "bench_replay_shards: learner config: %s\n", err);
        s_fail(sh, "config");
        return NULL;
    }
    void *ctx = zmq_ctx_new();
    security_t *sec = security_new(ctx, &cfg, "learner", -1, 0);
    wire_limits_t lim = bench_limits();
    net_opts_t o = {.max_msg_bytes = (int64_t)lim.max_message_bytes};
    shards_t *S = shards_new(&cfg, 0, ctx, sec, &o);
    wire_decoder_t *dec = wire_decoder_new(&lim);
    size_t R = (size_t)SAMPLE_N * BATCHES;
    uint64_t *keys = xmalloc(R * sizeof *keys);
    float *buf = xmalloc(R * (2 * OBS_DIM + 4) * sizeof(float)), prio[SAMPLE_N];
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 1);
    uint64_t next_id = 0;
    int inflight = 0;
    while (!atomic_load(&sh->stop)) {
        int64_t now = clock_now_ms();
        shards_tick(S, now);
        while (inflight < PREFETCH) {
            int k = shards_pick(S, (uint32_t)R, now);
            wire_sample_request_t req = {
                .id = ++next_id, .batch_size = SAMPLE_N, .beta = 0.4f, .batches = BATCHES};
            if (k < 0 || shards_send_request(S, k, &req, now) != APEX_OK) {
                break; // not connected yet, or held: the next turn
            }
            inflight++;
        }
        zmq_pollitem_t it[MAX_SHARDS];
        for (int k = 0; k < sh->K; k++) {
            it[k] = (zmq_pollitem_t){.socket = shards_socket(S, k), .events = ZMQ_POLLIN};
        }
        zmq_poll(it, sh->K, POLL_MS);
        for (int k = 0; k < sh->K; k++) {
            wire_msg_t m;
            int rc;
            while ((rc = net_recv_decode(shards_socket(S, k), dec, &m)) != APEX_EAGAIN) {
                if (rc != APEX_OK || m.type != WIRE_MSG_SAMPLE_REPLY) {
                    s_fail(sh, "bad reply");
                    break;
                }
                const wire_sample_reply_t *r = &m.u.sample_reply;
                if (shards_take_reply(S, k, r, clock_now_ms()) != 0) {
                    continue; // a stats request's answer
                }
                inflight--;
                if (r->status != WIRE_SAMPLE_OK) {
                    shards_not_served(S, k, (uint32_t)R);
                    continue;
                }
                // As a prefetch slot: copy out, then one update per batch to its shard.
                memcpy(keys, r->keys, R * sizeof *keys);
                memcpy(buf, r->obs, R * OBS_DIM * sizeof(float));
                memcpy(buf + R * OBS_DIM, r->next_obs, R * OBS_DIM * sizeof(float));
                memcpy(buf + 2 * R * OBS_DIM, r->is_weights, R * sizeof(float));
                for (uint32_t j = 0; j < BATCHES; j++) {
                    for (uint32_t i = 0; i < SAMPLE_N; i++) {
                        prio[i] = rng_uniform_f(&rng) * 2.0f + 1e-6f;
                    }
                    wire_priority_update_t u = {
                        .count = SAMPLE_N, .keys = keys + j * SAMPLE_N, .priorities = prio};
                    shards_send_update(S, k, &u);
                }
                atomic_fetch_add(&sh->sample_batches, BATCHES);
            }
        }
    }
    xfree(keys);
    xfree(buf);
    wire_decoder_destroy(&dec);
    shards_destroy(&S);
    security_destroy(&sec);
    zmq_ctx_term(ctx);
    return NULL;
}

// ---------------------------------------------------------------------------------------
// Servers, measurement, main

// Starts shard k of K with 2^cap_log2 transitions in the run; the pre-fill writes as
// actors 1000 - K + k. Returns 0 or -1 (after saying why).
static int s_server_start(bench_server_t *srv, int K, int k, int cap_log2) {
    char a[64], c[64], err[CONFIG_ERR_LEN];
    snprintf(a, sizeof a, "replay.shards=%d", K);
    snprintf(c, sizeof c, "replay.capacity=%ld", 1L << cap_log2);
    const char *sets[] = {a, c};
    if (bench_server_start(srv, sets, APEX_ARRAY_LEN(sets), k, err, sizeof err) != 0) {
        fprintf(stderr, "bench_replay_shards: server: %s\n", err);
        return -1;
    }
    return 0;
}

// One K: servers, pre-fill, clients, windows, BENCH lines. Returns 0 or -1.
static int s_run(const opts_t *o, int K) {
    shared_t sh = {.K = K, .cap_log2 = o->cap_log2};
    bench_server_t srv[MAX_SHARDS] = {0};
    size_t off = 0;
    int rc = 0;
    for (int k = 0; k < K && rc == 0; k++) {
        rc = s_server_start(&srv[k], K, k, o->cap_log2);
        if (rc != 0) {
            break;
        }
        const replay_server_t *v = srv[k].server;
        snprintf(sh.insert_ep[k], CONFIG_STR_LEN, "%s", replay_server_insert_endpoint(v));
        off += (size_t)snprintf(sh.sample_eps + off, sizeof sh.sample_eps - off, "%s%s",
                                k ? "," : "", replay_server_sample_endpoint(v));
    }
    void *ctx = zmq_ctx_new();
    int64_t t0 = clock_now_ns();
    for (int k = 0; k < K && rc == 0; k++) { // each shard to its capacity
        uint64_t cap = 1ull << o->cap_log2, rows = cap / (uint64_t)K + ((uint64_t)k < cap % K);
        rc = s_push(&sh, ctx, sh.insert_ep[k], (uint32_t)(1000 - K + k),
                    (rows + FILL_N - 1) / FILL_N, FILL_N, 8, NULL);
    }
    printf("# K = %d shards of 2^%d / %d transitions, pre-filled in %.2f s; %d pushers (pusher i "
           "-> shard i mod K), 1 learner thread x %d requests of %u x %u\n",
           K, o->cap_log2, K, (double)(clock_now_ns() - t0) * 1e-9, o->pushers, PREFETCH, BATCHES,
           SAMPLE_N);
    pusher_t pushers[MAX_PUSHERS];
    learner_t learner = {.sh = &sh};
    int n_push = 0, learner_up = 0;
    if (rc == 0) {
        learner_up = pthread_create(&learner.thread, NULL, s_learner_main, &learner) == 0;
        for (int i = 0; i < o->pushers; i++) {
            pushers[i] = (pusher_t){.sh = &sh, .ctx = ctx, .index = i};
            n_push += pthread_create(&pushers[i].thread, NULL, s_pusher_main, &pushers[i]) == 0;
        }
        bench_sleep_s(o->warmup_s);
        double samples[MAX_WINDOWS], inserts[MAX_WINDOWS], cpu = 0;
        uint64_t s0 = atomic_load(&sh.sample_batches), i0 = atomic_load(&sh.insert_rows);
        double c0 = bench_cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        int64_t w0 = clock_now_ns();
        for (int w = 0; w < o->windows; w++) {
            bench_sleep_s(o->window_s);
            uint64_t s1 = atomic_load(&sh.sample_batches), i1 = atomic_load(&sh.insert_rows);
            double c1 = bench_cpu_s(CLOCK_PROCESS_CPUTIME_ID);
            int64_t w1 = clock_now_ns();
            double dt = (double)(w1 - w0) * 1e-9;
            samples[w] = (double)(s1 - s0) / dt;
            inserts[w] = (double)(i1 - i0) / dt;
            cpu += (c1 - c0) / dt;
            printf("# K = %d window %d: %.0f sample batches/s, %.0f inserted transitions/s\n", K, w,
                   samples[w], inserts[w]);
            s0 = s1, i0 = i1, c0 = c1, w0 = w1;
        }
        double sm = bench_median(samples, o->windows), im = bench_median(inserts, o->windows);
        printf("# replay.shards%d: sample512 min %.0f max %.0f, insert min %.0f max %.0f; process "
               "cpu %.0f%% of one core\n",
               K, samples[0], samples[o->windows - 1], inserts[0], inserts[o->windows - 1],
               100 * cpu / o->windows);
        // The default set-up (4 pushers) owns the plain names.
        char name[64];
        int n = snprintf(name, sizeof name, "replay.shards%d", K);
        if (o->pushers != 4) {
            snprintf(name + n, sizeof name - (size_t)n, ".pushers%d", o->pushers);
        }
        printf("BENCH %s.sample512_batches_per_s %.0f batches/s\n", name, sm);
        if (o->pushers > 0) {
            printf("BENCH %s.insert_transitions_per_s %.0f transitions/s\n", name, im);
        }
        fflush(stdout);
    }
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < n_push; i++) {
        pthread_join(pushers[i].thread, NULL);
    }
    if (learner_up) {
        pthread_join(learner.thread, NULL);
    }
    zmq_ctx_term(ctx);
    for (int k = 0; k < K; k++) {
        if (srv[k].server) {
            wire_replay_stats_t ss;
            bench_server_stop(&srv[k], &ss);
            printf("# K = %d shard %d: inserted %llu, sampled %llu rows, updated %llu, bad "
                   "messages %llu, duplicates %llu\n",
                   K, k, (unsigned long long)ss.inserted, (unsigned long long)ss.sampled,
                   (unsigned long long)ss.updated, (unsigned long long)ss.bad_messages,
                   (unsigned long long)ss.duplicate_batches);
            rc = ss.bad_messages ? -1 : rc;
        }
    }
    return rc == 0 && !atomic_load(&sh.failed) ? 0 : -1;
}

static int s_parse(int argc, char **argv, opts_t *o) {
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        int *di = !strcmp(k, "--pushers")         ? &o->pushers
                  : !strcmp(k, "--windows")       ? &o->windows
                  : !strcmp(k, "--capacity-log2") ? &o->cap_log2
                                                  : NULL;
        int64_t x;
        if (!strcmp(k, "--shards")) {
            o->n_k = 0;
            for (const char *p = v, *end; *p && o->n_k < MAX_SHARDS; p = *end ? end + 1 : end) {
                if (parse_int64_prefix(p, &x, &end) != 0 || x < 1 || x > MAX_SHARDS) {
                    return -1;
                }
                o->ks[o->n_k++] = (int)x;
            }
        } else if (di) {
            if (parse_int64(v, INT_MIN, INT_MAX, &x) != 0) {
                return -1;
            }
            *di = (int)x;
        } else if (!strcmp(k, "--window")) {
            o->window_s = atof(v);
        } else if (!strcmp(k, "--warmup")) {
            o->warmup_s = atof(v);
        } else {
            return -1;
        }
    }
    return argc % 2 == 1 && o->pushers >= 0 && o->pushers <= MAX_PUSHERS && o->windows >= 3 &&
                   o->windows <= MAX_WINDOWS && o->cap_log2 >= 10 && o->cap_log2 <= 24 &&
                   o->window_s > 0 && o->warmup_s >= 0 && o->n_k > 0
               ? 0
               : -1;
}

int main(int argc, char **argv) {
    opts_t o = {.pushers = 4,
                .windows = 5,
                .cap_log2 = 20,
                .n_k = 2,
                .ks = {1, 2},
                .window_s = 2.0,
                .warmup_s = 1.0};
    if (s_parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: bench_replay_shards [--shards 1,2] [--pushers 0..16] "
                        "[--windows 3..64] [--window s] [--warmup s] [--capacity-log2 10..24]\n");
        return 2;
    }
    log_set_role("bench_replay_shards");
    log_set_level(LOG_WARN);
    int rc = 0;
    for (int i = 0; i < o.n_k && rc == 0; i++) {
        rc = s_run(&o, o.ks[i]);
    }
    return rc == 0 ? 0 : 1;
}
