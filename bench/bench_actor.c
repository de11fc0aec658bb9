// bench_actor.c: env steps/s of one real actor_t (actor/actor.h) on CartPole-v1 and on
// MinAtar Breakout with MinAtar's conv network.
//
// Everything an actor does per vector step is timed: batched Q inference for 64 envs,
// epsilon-greedy selection, vecenv stepping with auto-reset, n-step folding, and per batch of
// 50 transitions the initial priorities (two batched forward passes), protobuf encoding and
// the send. The actor talks to a sink thread that binds what the other daemons would:
//   ROUTER (replay insert): decodes every TransitionBatch and answers InsertAck, as
//                           apex-replay does, so acks flow back into the actor's loop;
//   ROUTER (learner weights): answers the actor's WeightsRequests as a learner that has not
//                             trained yet does: its first request at once with version 1,
//                             the very network the actor starts with (both are seeded from
//                             [run] seed), every later one (have_version 1) after holding it
//                             for a second (the learner's heartbeat), so the actor acts with
//                             its initial network throughout and the weights path costs what
//                             it costs between two versions;
//   PULL   (learner stats): drains ActorStats.
// The actor runs on the calling thread via actor_run(actor, max_vector_steps) for a fixed
// number of vector steps per window; env steps come from actor_get_stats. The median
// window is reported, per network:
//   BENCH actor.cartpole64.env_steps_per_s <v> steps/s              4-256-256-dueling(2)
//   BENCH actor.cartpole64.net64x64.env_steps_per_s <v> steps/s     4-64-64-dueling(2)
//   BENCH actor.minatar_breakout64.env_steps_per_s <v> steps/s      MinAtar/Breakout-v0,
//       uint8 10x10x4 -> conv 16 3x3 s1 -> 128 -> dueling(6) (MinAtar's DQN body)
// plus "#" lines with min/max, the actor thread's CPU use (it should be ~100% of one
// core: the actor is single-threaded, OpenBLAS is set to 1 thread) and what the sink saw.
// Peer: ../shared/peers/cartpole.py (pure env stepping, no network; see bench/run_actor.sh).
//
//   BENCH actor.atari_render64.env_steps_per_s <v> steps/s       MinAtar/Breakout-render84-v0
//       (issue #27): 84x84 grayscale frames, [env] frame_stack 4, the Nature body (uint8
//       84x84x4 -> conv 32 8x8 s4, 64 4x4 s2, 64 3x3 s1 -> 512 -> dueling(6)): the
//       Atari-shaped actor, sending each new frame once compressed with zstd ([replay]
//       compress); .lz4.env_steps_per_s and .raw.env_steps_per_s (uncompressed frames) beside
// Usage: bench_actor [--net big|small|minatar|atari|both|all] [--window s, default 1]
//                    [--windows 3..64, 5]    (both = big and small; all = the four)
//                    [--vsteps N vector steps per window; default 0 = calibrated to --window]
//                    [--library auto|openblas|onednn: [run] blas_library, auto as the
//                    product's default: the Atari body's conv layers on oneDNN's primitives
//                    where libdnnl2 loads]
#define LOG_MODULE "bench"
#include "actor.h"
#include "apex.h"
#include "blas.h"
#include "clock.h"
#include "config_shard.h"
#include "config.h"
#include "log.h"
#include "nn.h"
#include "parse.h"
#include "rng.h"
#include "wire.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define N_ENVS 64
#define SEND_BATCH 50
#define MAX_WINDOWS 64
#define EP_LEN 64
#define POLL_MS 20
#define WARMUP_VSTEPS 500
#define WEIGHTS_VERSION 1    // a learner's first version
#define WEIGHTS_HOLD_MS 1000 // learner.c REPUBLISH_MS: a held request is answered this late

// ---------------------------------------------------------------------------------------
// The sink: stands in for apex-replay (insert) and apex-learner (weights, stats)
// ---------------------------------------------------------------------------------------

typedef struct {
    pthread_t thread;
    pthread_mutex_t lock; // guards ready and the endpoints until the sink is ready
    pthread_cond_t cond;
    int ready; // 1 = endpoints bound, -1 = failed
    char insert_ep[EP_LEN], weights_ep[EP_LEN], stats_ep[EP_LEN];
    atomic_int stop;
    atomic_uint_fast64_t rows, batches, stats_msgs, bad, weights_requests, weights_answers;
    uint32_t obs_dim, obs_dtype, n_actions; // of the batches it decodes
    uint32_t frame_stack, frame_codec;      // frame mode's batches (0: whole observations)
    const wire_buf_t *weights;              // Weights v WEIGHTS_VERSION, encoded (borrowed)
} sink_t;

// The one weights request the sink holds (the bench runs one actor), as the learner does.
typedef struct {
    uint8_t id[256];
    size_t id_len;
    int held;
    int64_t since_ms;
} s_held_t;

static void *s_bound(void *ctx, int type, char *ep) {
    void *s = zmq_socket(ctx, type);
    int zero = 0;
    size_t len = EP_LEN;
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
        fprintf(stderr, "bench_actor: sink socket: %s\n", zmq_strerror(errno));
        if (s) {
            zmq_close(s);
        }
        return NULL;
    }
    return s;
}

static void s_sink_signal(sink_t *k, int ready) {
    pthread_mutex_lock(&k->lock);
    k->ready = ready;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

// Handles one [routing id][TransitionBatch] from the ROUTER: decode, count, ack.
static void s_sink_insert(sink_t *k, void *router, wire_decoder_t *dec, wire_buf_t *out) {
    zmq_msg_t id, msg;
    zmq_msg_init(&id);
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&id, router, ZMQ_DONTWAIT) < 0 || !zmq_msg_more(&id) ||
        zmq_msg_recv(&msg, router, ZMQ_DONTWAIT) < 0) {
        atomic_fetch_add(&k->bad, 1);
    } else {
        wire_msg_t m;
        if (wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m) == APEX_OK &&
            m.type == WIRE_MSG_TRANSITION_BATCH) {
            atomic_fetch_add(&k->rows, m.u.batch.count);
            atomic_fetch_add(&k->batches, 1);
            wire_msg_t ack = {.type = WIRE_MSG_INSERT_ACK};
            ack.u.insert_ack = (wire_insert_ack_t){.actor_id = m.u.batch.actor_id,
                                                   .seq = m.u.batch.seq};
            wire_encode(&ack, out);
            // As the replay server: DONTWAIT, an ack that cannot go out is dropped.
            zmq_send(router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE | ZMQ_DONTWAIT);
            zmq_send(router, out->data, out->len, ZMQ_DONTWAIT);
        } else {
            atomic_fetch_add(&k->bad, 1);
        }
    }
    zmq_msg_close(&id);
    zmq_msg_close(&msg);
}

static void s_sink_answer(sink_t *k, void *sock, const void *id, size_t id_len) {
    // As the learner: DONTWAIT, an answer that cannot go out is dropped (the actor asks
    // again after WEIGHTS_RESEND_MS).
    if (zmq_send(sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
        zmq_send(sock, k->weights->data, k->weights->len, ZMQ_DONTWAIT) >= 0) {
        atomic_fetch_add(&k->weights_answers, 1);
    }
}

// Reads every waiting [routing id][WeightsRequest]: answered at once when the asker does not
// hold WEIGHTS_VERSION, held otherwise (the bench runs one actor: a request from another
// peer while one is held is answered at once rather than tracked).
static void s_sink_weights(sink_t *k, void *sock, wire_decoder_t *dec, s_held_t *h) {
    for (;;) {
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&id, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&msg);
            return;
        }
        wire_msg_t m;
        if (!zmq_msg_more(&id) || zmq_msg_size(&id) > sizeof h->id ||
            zmq_msg_recv(&msg, sock, ZMQ_DONTWAIT) < 0 || zmq_msg_more(&msg) ||
            wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m) != APEX_OK ||
            m.type != WIRE_MSG_WEIGHTS_REQUEST) {
            atomic_fetch_add(&k->bad, 1);
        } else {
            atomic_fetch_add(&k->weights_requests, 1);
            const void *who = zmq_msg_data(&id);
            size_t len = zmq_msg_size(&id);
            int same = h->held && h->id_len == len && memcmp(h->id, who, len) == 0;
            if (m.u.weights_request.have_version != WEIGHTS_VERSION || (h->held && !same)) {
                s_sink_answer(k, sock, who, len);
            } else if (!same) { // a repeated request keeps the time of the first
                memcpy(h->id, who, len);
                h->id_len = len;
                h->held = 1;
                h->since_ms = clock_now_ms();
            }
        }
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
    }
}

static void s_sink_loop(sink_t *k, void *router, void *weights, void *pull) {
    wire_limits_t lim = {.obs_dim = k->obs_dim,
                         .obs_dtype = k->obs_dtype,
                         .n_actions = k->n_actions,
                         .max_count = 4096,
                         .max_episodes = 4096,
                         .frame_stack = k->frame_stack,
                         .frame_codec = k->frame_codec};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    wire_buf_t out;
    wire_buf_init(&out, 64);
    s_held_t held = {.held = 0};
    zmq_pollitem_t items[3] = {{.socket = router, .events = ZMQ_POLLIN},
                               {.socket = pull, .events = ZMQ_POLLIN},
                               {.socket = weights, .events = ZMQ_POLLIN}};
    while (!atomic_load(&k->stop)) {
        if (zmq_poll(items, 3, POLL_MS) < 0) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "bench_actor: sink poll: %s\n", zmq_strerror(errno));
            atomic_fetch_add(&k->bad, 1);
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) {
            s_sink_insert(k, router, dec, &out);
        }
        if (items[1].revents & ZMQ_POLLIN) {
            zmq_msg_t msg;
            zmq_msg_init(&msg);
            if (zmq_msg_recv(&msg, pull, ZMQ_DONTWAIT) >= 0) {
                atomic_fetch_add(&k->stats_msgs, 1);
            }
            zmq_msg_close(&msg);
        }
        if (items[2].revents & ZMQ_POLLIN) {
            s_sink_weights(k, weights, dec, &held);
        }
        if (held.held && clock_now_ms() - held.since_ms >= WEIGHTS_HOLD_MS) {
            s_sink_answer(k, weights, held.id, held.id_len);
            held.held = 0;
        }
    }
    wire_buf_fini(&out);
    wire_decoder_destroy(&dec);
}

static void *s_sink_main(void *arg) {
    sink_t *k = arg;
    void *ctx = zmq_ctx_new();
    void *router = s_bound(ctx, ZMQ_ROUTER, k->insert_ep);
    void *weights = s_bound(ctx, ZMQ_ROUTER, k->weights_ep);
    void *pull = s_bound(ctx, ZMQ_PULL, k->stats_ep);
    int ok = router && weights && pull;
    s_sink_signal(k, ok ? 1 : -1);
    if (ok) {
        s_sink_loop(k, router, weights, pull);
    }
    void *socks[] = {router, weights, pull};
    for (size_t i = 0; i < APEX_ARRAY_LEN(socks); i++) {
        if (socks[i]) {
            zmq_close(socks[i]);
        }
    }
    zmq_ctx_term(ctx);
    return NULL;
}

// Starts the sink, answering weights requests with the encoded Weights in weights (borrowed
// until s_sink_stop), and waits until its endpoints are bound. Returns 0 or -1.
static int s_sink_start(sink_t *k, const apex_config_t *cfg, const wire_buf_t *weights) {
    memset(k, 0, sizeof *k);
    k->obs_dim = (uint32_t)cfg->env.obs_dim, k->obs_dtype = (uint32_t)cfg->env.obs_dtype;
    k->n_actions = (uint32_t)cfg->env.n_actions;
    k->frame_stack = config_frame_mode(cfg) ? (uint32_t)cfg->env.frame_stack : 0;
    k->frame_codec = config_frame_mode(cfg) ? (uint32_t)cfg->replay.compress : 0;
    k->weights = weights;
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    if (pthread_create(&k->thread, NULL, s_sink_main, k) != 0) {
        return -1;
    }
    pthread_mutex_lock(&k->lock);
    while (k->ready == 0) {
        pthread_cond_wait(&k->cond, &k->lock);
    }
    int ready = k->ready;
    pthread_mutex_unlock(&k->lock);
    return ready == 1 ? 0 : -1;
}

static void s_sink_stop(sink_t *k) {
    atomic_store(&k->stop, 1);
    pthread_join(k->thread, NULL);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->cond);
}

// ---------------------------------------------------------------------------------------
// Measurement
// ---------------------------------------------------------------------------------------

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_cpu_s(clockid_t which) {
    struct timespec ts;
    clock_gettime(which, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One benchmarked set-up: the env and the network, as config values.
typedef struct {
    const char *name; // the BENCH line
    const char *env, *conv, *hidden;
    uint32_t obs_dim, obs_dtype, n_actions; // obs_dim: the stacked observation's
    int frame_stack;                        // [env] frame_stack (0: 1)
    const char *compress;                   // [replay] compress (NULL: none)
} setup_t;

// The config of the benchmarked actor, with the sink's endpoints (k NULL: the defaults, for
// what does not depend on them). Returns 0, or -1 with a message.
static int s_config(apex_config_t *cfg, const sink_t *k, const setup_t *su) {
    char h[64], env[96], conv[64], ins[96], weights[96], stats[96], fs[48], err[CONFIG_ERR_LEN];
    char cz[48];
    snprintf(fs, sizeof fs, "env.frame_stack=%d", su->frame_stack > 1 ? su->frame_stack : 1);
    snprintf(cz, sizeof cz, "replay.compress=%s", su->compress ? su->compress : "none");
    snprintf(h, sizeof h, "network.hidden=%s", su->hidden);
    snprintf(env, sizeof env, "env.id=%s", su->env);
    snprintf(conv, sizeof conv, "network.conv=%s", su->conv);
    snprintf(ins, sizeof ins, "endpoints.replay_insert=%s", k ? k->insert_ep : "");
    snprintf(weights, sizeof weights, "endpoints.learner_weights=%s", k ? k->weights_ep : "");
    snprintf(stats, sizeof stats, "endpoints.learner_stats=%s", k ? k->stats_ep : "");
    const char *sets[] = {env,
                          fs,
                          cz,
                          conv,
                          h,
                          "network.dueling=true",
                          "actor.envs_per_actor=64",
                          "actor.send_batch=50",
                          "actor.num_actors=1",
                          "actor.max_steps_per_s=0",
                          "run.seed=1",
                          ins,
                          weights,
                          stats};
    int n = (int)APEX_ARRAY_LEN(sets) - (k ? 0 : 3);
    if (config_load(cfg, NULL, sets, n, err, sizeof err) != 0) {
        fprintf(stderr, "bench_actor: config: %s\n", err);
        return -1;
    }
    return 0;
}

// What a learner that has not trained yet answers with: Weights v WEIGHTS_VERSION holding
// the network the actor starts with (learner/train.c and actor/actor.c both draw it from
// [run] seed, RNG_ROLE_NET_INIT stream 0), encoded into out.
static void s_initial_weights(wire_buf_t *out, const apex_config_t *cfg) {
    nn_config_t n;
    nn_config_from_run(&n, cfg);
    nn_params_t p;
    nn_params_init(&p, &n);
    rng_t init;
    rng_init_stream(&init, (uint64_t)cfg->run.seed, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&p, &init);
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){
        .version = WEIGHTS_VERSION, .num_params = (uint32_t)p.num_params, .params = p.data};
    wire_encode(&m, out);
    nn_params_fini(&p);
}

// Runs one actor for a warm-up and `windows` windows of vsteps vector steps each (0: as
// many as take about window_s); prints the BENCH line `name`. Returns 0, or -1 on failure.
static int s_bench_net(const setup_t *su, long vsteps, double window_s, int windows) {
    const char *name = su->name, *hidden = su->hidden;
    apex_config_t cfg;
    if (s_config(&cfg, NULL, su) != 0) {
        return -1;
    }
    wire_buf_t weights;
    wire_buf_init(&weights, 0);
    s_initial_weights(&weights, &cfg);
    sink_t k;
    if (s_sink_start(&k, &cfg, &weights) != 0) {
        wire_buf_fini(&weights);
        return -1;
    }
    actor_t *a = s_config(&cfg, &k, su) == 0 ? actor_new(&cfg, 0) : NULL;
    if (!a) {
        s_sink_stop(&k);
        wire_buf_fini(&weights);
        return -1;
    }
    actor_stats_t st;
    // Warm-up (connect, page in, fill the n-step rings), which also calibrates vsteps = 0
    // to windows of about window_s seconds.
    uint64_t target = WARMUP_VSTEPS;
    int64_t t0 = clock_now_ns();
    actor_run(a, target);
    if (vsteps == 0) {
        double per_s = WARMUP_VSTEPS / ((double)(clock_now_ns() - t0) * 1e-9);
        vsteps = APEX_MAX(100, (long)(per_s * window_s));
    }
    double rate[MAX_WINDOWS], cpu = 0.0, cpu_all = 0.0, wall = 0.0;
    uint64_t steps_timed = 0;
    for (int w = 0; w < windows; w++) {
        actor_get_stats(a, &st);
        uint64_t steps0 = st.steps;
        double c0 = s_cpu_s(CLOCK_THREAD_CPUTIME_ID), p0 = s_cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        t0 = clock_now_ns();
        target += (uint64_t)vsteps;
        actor_run(a, target);
        double dt = (double)(clock_now_ns() - t0) * 1e-9;
        cpu += s_cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
        cpu_all += s_cpu_s(CLOCK_PROCESS_CPUTIME_ID) - p0;
        wall += dt;
        actor_get_stats(a, &st);
        rate[w] = (double)(st.steps - steps0) / dt;
        steps_timed += st.steps - steps0;
    }
    qsort(rate, (size_t)windows, sizeof rate[0], s_cmp_double);
    double med = windows % 2 ? rate[windows / 2]
                             : 0.5 * (rate[windows / 2 - 1] + rate[windows / 2]);
    // The actor thread's share of the wall clock shows how much the machine let it run;
    // steps per actor-thread cpu second is the one-core rate with that noise removed.
    printf("# %s (%s, conv '%s', hidden %s, dueling): %d windows of %ld vector steps x %d envs, "
           "min %.0f max "
           "%.0f steps/s; actor thread cpu %.0f%% of wall (%.0f steps per actor-cpu second), "
           "whole process (actor + sink + libzmq I/O) %.0f%%\n",
           name, su->env, su->conv, hidden, windows, vsteps, N_ENVS, rate[0], rate[windows - 1],
           100 * cpu / wall, (double)steps_timed / cpu, 100 * cpu_all / wall);
    printf("# %s: actor sent %llu batches (%llu acked, %llu dropped), %llu episodes, weights "
           "v%llu; sink got %llu batches, %llu rows, %llu stats messages, %llu weights requests "
           "(%llu answered), %llu bad\n",
           name, (unsigned long long)st.batches_sent, (unsigned long long)st.batches_acked,
           (unsigned long long)st.batches_dropped, (unsigned long long)st.episodes,
           (unsigned long long)st.weights_version, (unsigned long long)atomic_load(&k.batches),
           (unsigned long long)atomic_load(&k.rows), (unsigned long long)atomic_load(&k.stats_msgs),
           (unsigned long long)atomic_load(&k.weights_requests),
           (unsigned long long)atomic_load(&k.weights_answers),
           (unsigned long long)atomic_load(&k.bad));
    printf("BENCH %s %.0f steps/s\n", name, med);
    fflush(stdout);
    int rc = atomic_load(&k.bad) == 0 && st.batches_sent > 0 ? 0 : -1;
    actor_destroy(&a);
    s_sink_stop(&k);
    wire_buf_fini(&weights);
    return rc;
}

// Parses "--name value" pairs; returns 0, or -1 with a message on anything unknown.
static int s_parse_args(int argc, char **argv, const char **net, long *vsteps, long *windows,
                        double *window_s, const char **library) {
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_actor: %s needs a value\n", argv[i]);
            return -1;
        }
        char *end = NULL;
        if (!strcmp(argv[i], "--net")) {
            *net = argv[i + 1];
            continue;
        }
        if (!strcmp(argv[i], "--library")) {
            *library = argv[i + 1];
            continue;
        }
        if (!strcmp(argv[i], "--window")) {
            *window_s = strtod(argv[i + 1], &end);
            if (end == argv[i + 1] || *end != '\0') {
                fprintf(stderr, "bench_actor: bad value for --window: %s\n", argv[i + 1]);
                return -1;
            }
            continue;
        }
        long *dst = !strcmp(argv[i], "--vsteps")    ? vsteps
                    : !strcmp(argv[i], "--windows") ? windows
                                                    : NULL;
        if (!dst) {
            fprintf(stderr, "bench_actor: unknown option %s\n", argv[i]);
            return -1;
        }
        int64_t x;
        if (parse_int64(argv[i + 1], LONG_MIN, LONG_MAX, &x) != 0) {
            fprintf(stderr, "bench_actor: bad value for %s: %s\n", argv[i], argv[i + 1]);
            return -1;
        }
        *dst = (long)x;
    }
    return 0;
}

int main(int argc, char **argv) {
    // The kernel every apex daemon would run here ([run] blas_kernel = auto): it may start
    // the benchmark again with another one.
    blas_startup(argv, "auto");
    const char *net = "both";
    long vsteps = 0, windows = 5;
    double window_s = 1.0;
    int big = 0, small = 0, minatar = 0, atari = 0;
    const char *library = "auto";
    char err[512];
    if (s_parse_args(argc, argv, &net, &vsteps, &windows, &window_s, &library) == 0) {
        int all = !strcmp(net, "all");
        big = all || !strcmp(net, "big") || !strcmp(net, "both");
        small = all || !strcmp(net, "small") || !strcmp(net, "both");
        minatar = all || !strcmp(net, "minatar");
        atari = all || !strcmp(net, "atari");
        // (as a daemon decides: the Atari network is the only one here that gets a body)
        if (blas_use_library(library, 1, atari, err, sizeof err) != 0) {
            fprintf(stderr, "bench_actor: %s\n", err);
            return 2;
        }
    }
    if (!(big || small || minatar || atari) || vsteps < 0 || windows < 3 || windows > MAX_WINDOWS ||
        !(window_s > 0)) {
        fprintf(stderr, "usage: bench_actor [--net big|small|minatar|atari|both|all] [--window s] "
                        "[--vsteps N per window, 0 = from --window] [--windows 3..64] "
                        "[--library auto|openblas|onednn]\n");
        return 2;
    }
    static const setup_t s_big = {"actor.cartpole64.env_steps_per_s",
                                  "CartPole-v1",
                                  "",
                                  "256,256",
                                  4,
                                  WIRE_OBS_FLOAT32,
                                  2,
                                  1,
                                  NULL};
    static const setup_t s_small = {"actor.cartpole64.net64x64.env_steps_per_s",
                                    "CartPole-v1",
                                    "",
                                    "64,64",
                                    4,
                                    WIRE_OBS_FLOAT32,
                                    2,
                                    1,
                                    NULL};
    static const setup_t s_minatar = {"actor.minatar_breakout64.env_steps_per_s",
                                      "MinAtar/Breakout-v0",
                                      "16x3s1",
                                      "128",
                                      400,
                                      WIRE_OBS_UINT8,
                                      6,
                                      1,
                                      NULL};
    // Frame storage is on (the default with stacks): each new frame sent once, zstd-compressed
    // for the issue's line, LZ4 and raw beside it.
    static const setup_t s_atari = {"actor.atari_render64.env_steps_per_s",
                                    "MinAtar/Breakout-render84-v0",
                                    "32x8s4,64x4s2,64x3s1",
                                    "512",
                                    4 * 84 * 84,
                                    WIRE_OBS_UINT8,
                                    6,
                                    4,
                                    "zstd"};
    setup_t s_atari_lz4 = s_atari, s_atari_raw = s_atari;
    s_atari_lz4.name = "actor.atari_render64.lz4.env_steps_per_s";
    s_atari_lz4.compress = "lz4";
    s_atari_raw.name = "actor.atari_render64.raw.env_steps_per_s";
    s_atari_raw.compress = NULL;
    log_set_role("bench_actor");
    log_set_level(LOG_WARN);
    int rc = 0;
    if (big) {
        rc |= s_bench_net(&s_big, vsteps, window_s, (int)windows);
    }
    if (small) {
        rc |= s_bench_net(&s_small, vsteps, window_s, (int)windows);
    }
    if (minatar) {
        rc |= s_bench_net(&s_minatar, vsteps, window_s, (int)windows);
    }
    if (atari) {
        rc |= s_bench_net(&s_atari, vsteps, window_s, (int)windows);
        rc |= s_bench_net(&s_atari_lz4, vsteps, window_s, (int)windows);
        rc |= s_bench_net(&s_atari_raw, vsteps, window_s, (int)windows);
    }
    return rc == 0 ? 0 : 1;
}
