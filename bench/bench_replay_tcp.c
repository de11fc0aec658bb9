// bench_replay_tcp.c: the replay server end to end over ZeroMQ on TCP loopback.
//
// A real replay_server_t (replay/server.h) runs in its own thread on ephemeral loopback
// ports, CartPole dimensions (obs_dim 4, 2 actions), capacity 2^20 filled to capacity
// before timing (so inserts overwrite FIFO, as in steady state). Against it:
//   pushers  (default 4 threads, one DEALER each, routing id "actor-<i>", as the actor):
//            TransitionBatches of 50 rows with priorities, at most `inflight_insert`
//            unacknowledged per pusher; each InsertAck is received and decoded.
//   learner  (1 thread, one DEALER, as learner/learner.c): keeps 4 SampleRequests (the
//            learner's prefetch) in flight, each for `batches` batches of 512 (default 4,
//            what the learner's batches_per_request = auto picks for CartPole); per reply it
//            decodes and copies the batches out (as the learner's prefetch slot does), sends
//            a PriorityUpdate per batch of 512 keys, then a new request.
// Measured over `windows` windows of `window` seconds after a warm-up: sample batches/s
// received by the learner and transitions/s acknowledged to the pushers; the median
// window is reported:
//   BENCH replay.tcp.sample512_batches_per_s <v> batches/s
//   BENCH replay.tcp.insert_transitions_per_s <v> transitions/s
// plus "#" lines with min/max and the CPU each thread used (% of one core), which shows
// what the run was limited by. The pushers share one ZeroMQ context and the learner has
// its own (as separate processes would), so libzmq's I/O threads are counted in "other".
// No peer: numpy_per.py is in-process only (see bench/run_replay.sh for that comparison).
//
// Usage: bench_replay_tcp [--pushers 0..16] [--inflight 1..256] [--windows 3..64]
//                         [--window s] [--warmup s] [--capacity-log2 10..24]
//                         [--insert-rate transitions/s total, 0 = unlimited]
//                         [--batches 1..8] (names get .batchesK unless K is 4)
#define LOG_MODULE "bench"
#include "apex.h"
#include "bench_common.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "parse.h"
#include "rng.h"
#include "server.h"
#include "security.h"
#include "wire.h"
#include "xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#define OBS_DIM BENCH_OBS_DIM // CartPole-v1
#define INSERT_N 50u          // rows per TransitionBatch ([actor] send_batch)
#define SAMPLE_N 512u         // rows per SampleRequest ([learner] batch_size)
#define FILL_N BENCH_FILL_N   // rows per batch while pre-filling
#define FILL_INFLIGHT 8       // unacknowledged pre-fill batches
// Unacknowledged batches per pusher: the actor's window ([actor] max_pending_batches,
// default 256). With durability = wal an insert is acknowledged only after its log record is
// fsynced, so a pusher's rate is bounded by window * batch / wal_sync_ms.
static int s_push_window = 256;
// Batches of SAMPLE_N per SampleRequest ([learner] batches_per_request): each reply brings
// this many, and each is answered with its own PriorityUpdate, as the learner trains them.
// The default, 4, is what the learner's batches_per_request = 0 (auto) picks for CartPole.
#define MAX_BATCHES_PER_REQUEST 8 // * SAMPLE_N = FILL_N = the server's max_batch
#define DEFAULT_BATCHES 4
static int s_batches = DEFAULT_BATCHES;
#define PUSH_INFLIGHT ((uint64_t)s_push_window)
#define PUSH_VARIANTS 16 // distinct pre-generated row sets per pusher, cycled
#define MAX_PUSHERS 16
#define MAX_WINDOWS 64
#define POLL_MS 20 // how often a blocked thread looks at the stop flag
#define BENCH_BETA 0.4f
#define PACE_SLACK_NS 10000000 // with --insert-rate: most a late pusher catches up (10 ms)

// ---------------------------------------------------------------------------------------
// Shared state: each thread owns its sockets; only these atomics cross threads.
// ---------------------------------------------------------------------------------------

typedef struct {
    atomic_int stop;
    atomic_int failed;                // a thread hit an unexpected error
    atomic_uint_fast64_t insert_rows; // rows acknowledged to pushers
    atomic_uint_fast64_t sample_ok;   // batches of SAMPLE_N received by the learner in OK replies
    atomic_uint_fast64_t sample_not_ready;
    const char *insert_ep, *sample_ep;
} shared_t;

typedef struct {
    shared_t *sh;
    void *ctx;
    int index;
    double rows_per_s; // 0 = unlimited
    pthread_t thread;
} pusher_t;

typedef struct {
    shared_t *sh;
    void *ctx;
    int inflight;
    pthread_t thread;
} sampler_t;

static void s_fail(shared_t *sh, const char *what) {
    fprintf(stderr, "bench_replay_tcp: %s: %s\n", what, zmq_strerror(errno));
    atomic_store(&sh->failed, 1);
    atomic_store(&sh->stop, 1);
}

// With --curve: the key directory made by main, read by every client socket.
static char s_key_dir[512];

static int s_curve_client(void *s) {
    char path[600], pub[41], sec[41], spub[41], err[600];
    snprintf(path, sizeof path, "%s/actor.key", s_key_dir);
    if (security_read_key_file(path, pub, sec, err, sizeof err) != 0) {
        fprintf(stderr, "bench_replay_tcp: %s\n", err);
        return -1;
    }
    snprintf(path, sizeof path, "%s/replay.pub", s_key_dir);
    if (security_read_key_file(path, spub, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "bench_replay_tcp: %s\n", err);
        return -1;
    }
    return zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, spub, 41) ||
           zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 41) ||
           zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 41);
}

static void *s_dealer(void *ctx, const char *ep, const char *id) {
    return bench_dealer(ctx, ep, id, s_key_dir[0] ? s_curve_client : NULL);
}

// Sends buf; returns 1 when sent, 0 when it would block, -1 on error.
static int s_send(void *sock, const wire_buf_t *b, int flags) {
    while (zmq_send(sock, b->data, b->len, flags) < 0) {
        if (errno == EAGAIN) {
            return 0;
        }
        if (errno != EINTR) {
            return -1;
        }
    }
    return 1;
}

// Waits up to ms for input on sock. Returns 0 or -1 on error (EINTR is not an error).
static int s_wait_in(void *sock, long ms) {
    zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
    return zmq_poll(&it, 1, ms) < 0 && errno != EINTR ? -1 : 0;
}

// ---------------------------------------------------------------------------------------
// Pre-fill: the whole capacity in batches of FILL_N, FILL_INFLIGHT unacknowledged
// ---------------------------------------------------------------------------------------

static int s_prefill(void *ctx, const char *ep, uint64_t rows, rng_t *rng) {
    void *sock = s_dealer(ctx, ep, "prefill");
    if (!sock) {
        return -1;
    }
    bench_rows_t r;
    bench_rows_init(&r, FILL_N, rng);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_limits_t lim = bench_limits();
    wire_decoder_t *dec = wire_decoder_new(&lim);
    uint64_t batches = (rows + FILL_N - 1) / FILL_N, sent = 0, acked = 0;
    int rc = 0;
    while (acked < batches && rc == 0) {
        if (sent < batches && sent - acked < FILL_INFLIGHT) {
            bench_encode_rows(&b, &r, 0, FILL_N, 999, sent);
            rc = s_send(sock, &b, 0) == 1 ? 0 : -1;
            sent++;
            continue;
        }
        int n = s_wait_in(sock, 5000) == 0 ? bench_drain_acks(sock, dec) : -1;
        rc = n < 0 ? -1 : 0;
        acked += n > 0 ? (uint64_t)n : 0;
    }
    wire_decoder_destroy(&dec);
    wire_buf_fini(&b);
    bench_rows_fini(&r);
    zmq_close(sock);
    return rc;
}

// ---------------------------------------------------------------------------------------
// Pusher thread: an actor's insert traffic without the actor
// ---------------------------------------------------------------------------------------

static void *s_pusher_main(void *arg) {
    pusher_t *p = arg;
    shared_t *sh = p->sh;
    char id[32];
    snprintf(id, sizeof id, "actor-%d", p->index);
    void *sock = s_dealer(p->ctx, sh->insert_ep, id);
    if (!sock) {
        s_fail(sh, "pusher socket");
        return NULL;
    }
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 100 + (uint64_t)p->index);
    bench_rows_t r;
    bench_rows_init(&r, INSERT_N * PUSH_VARIANTS, &rng);
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_limits_t lim = bench_limits();
    wire_decoder_t *dec = wire_decoder_new(&lim);
    uint64_t seq = 0, acked = 0;
    // Optional pacing: batch k may go out at t0 + k * period (no catching up after a stall).
    int64_t period_ns = p->rows_per_s > 0 ? (int64_t)(1e9 * INSERT_N / p->rows_per_s) : 0;
    int64_t next_ns = period_ns ? clock_now_ns() : 0;
    while (!atomic_load(&sh->stop)) {
        int n = bench_drain_acks(sock, dec);
        if (n < 0) {
            s_fail(sh, "pusher recv");
            break;
        }
        acked += (uint64_t)n;
        atomic_fetch_add(&sh->insert_rows, (uint64_t)n * INSERT_N);
        int64_t now = period_ns ? clock_now_ns() : 0;
        if (seq - acked < PUSH_INFLIGHT && now >= next_ns) {
            // Encoded per send, with its own seq, as the actor does.
            bench_encode_rows(&b, &r, (uint32_t)(seq % PUSH_VARIANTS) * INSERT_N, INSERT_N,
                              (uint32_t)p->index, seq);
            int rc = s_send(sock, &b, ZMQ_DONTWAIT);
            if (rc < 0) {
                s_fail(sh, "pusher send");
                break;
            }
            seq += (uint64_t)rc;
            // Paced: a late pusher catches up by at most PACE_SLACK_NS worth of batches.
            next_ns = period_ns ? APEX_MAX(next_ns + period_ns, now - PACE_SLACK_NS) : 0;
            if (rc == 1) {
                continue;
            }
        }
        long wait_ms = POLL_MS;
        if (period_ns && seq - acked < PUSH_INFLIGHT) {
            // Rounded up: a 0 ms poll would spin until the next batch is due.
            wait_ms = (long)APEX_MAX(1, (next_ns - clock_now_ns() + 999999) / 1000000);
        }
        if (s_wait_in(sock, wait_ms) != 0) {
            s_fail(sh, "pusher poll");
            break;
        }
    }
    wire_decoder_destroy(&dec);
    wire_buf_fini(&b);
    bench_rows_fini(&r);
    zmq_close(sock);
    return NULL;
}

// ---------------------------------------------------------------------------------------
// Sampler thread: the learner's replay traffic without the training step
// ---------------------------------------------------------------------------------------

typedef struct {
    void *sock;
    wire_decoder_t *dec;
    wire_buf_t out;
    rng_t rng;
    uint64_t next_id;
    // One prefetch slot's copy of a batch (the learner memcpys each reply out of the decoder).
    uint64_t *keys;
    float *is_w, *obs, *next_obs, *rewards, *discounts, *prio;
    int32_t *actions;
} sampler_state_t;

static int s_request(sampler_state_t *st) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = ++st->next_id,
                                                 .batch_size = SAMPLE_N,
                                                 .beta = BENCH_BETA,
                                                 .batches = (uint32_t)s_batches};
    wire_encode(&m, &st->out);
    return s_send(st->sock, &st->out, 0) == 1 ? 0 : -1;
}

// Handles one OK reply as the learner does: copy out, then per batch new priorities and a
// PriorityUpdate.
static int s_take_batch(sampler_state_t *st, const wire_sample_reply_t *r) {
    size_t B = r->count, O = r->obs_dim;
    memcpy(st->keys, r->keys, B * sizeof *st->keys);
    memcpy(st->is_w, r->is_weights, B * sizeof(float));
    memcpy(st->obs, r->obs, B * O * sizeof(float));
    memcpy(st->next_obs, r->next_obs, B * O * sizeof(float));
    memcpy(st->rewards, r->rewards, B * sizeof(float));
    memcpy(st->discounts, r->discounts, B * sizeof(float));
    memcpy(st->actions, r->actions, B * sizeof(int32_t));
    for (size_t k = 0; k < B; k += SAMPLE_N) {
        for (size_t i = 0; i < SAMPLE_N; i++) { // stand-in for |TD| + eps from training
            st->prio[i] = rng_uniform_f(&st->rng) * 2.0f + 1e-6f;
        }
        wire_msg_t m = {.type = WIRE_MSG_PRIORITY_UPDATE};
        m.u.priority_update = (wire_priority_update_t){
            .count = SAMPLE_N, .keys = st->keys + k, .priorities = st->prio};
        wire_encode(&m, &st->out);
        if (s_send(st->sock, &st->out, 0) != 1) {
            return -1;
        }
    }
    return 0;
}

// Receives every waiting reply; each is answered with (update and) a new request.
static int s_drain_replies(sampler_state_t *st, shared_t *sh) {
    for (;;) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (zmq_msg_recv(&msg, st->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&msg);
            return errno == EAGAIN || errno == EINTR ? 0 : -1;
        }
        wire_msg_t m;
        int rc = wire_decode(st->dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m);
        if (rc != APEX_OK || m.type != WIRE_MSG_SAMPLE_REPLY) {
            zmq_msg_close(&msg);
            errno = EPROTO;
            return -1;
        }
        const wire_sample_reply_t *r = &m.u.sample_reply;
        if (r->status == WIRE_SAMPLE_OK && r->count == SAMPLE_N * (uint32_t)s_batches) {
            rc = s_take_batch(st, r);
            atomic_fetch_add(&sh->sample_ok, (uint64_t)s_batches); // batches of SAMPLE_N
        } else {
            atomic_fetch_add(&sh->sample_not_ready, 1);
        }
        zmq_msg_close(&msg);
        if (rc != 0 || s_request(st) != 0) {
            return -1;
        }
    }
}

static void *s_sampler_main(void *arg) {
    sampler_t *p = arg;
    shared_t *sh = p->sh;
    sampler_state_t st = {.sock = s_dealer(p->ctx, sh->sample_ep, NULL)};
    if (!st.sock) {
        s_fail(sh, "sampler socket");
        return NULL;
    }
    wire_limits_t lim = bench_limits();
    st.dec = wire_decoder_new(&lim);
    wire_buf_init(&st.out, 0);
    rng_init_stream(&st.rng, 7, RNG_ROLE_TEST, 1);
    size_t rows = (size_t)SAMPLE_N * (size_t)s_batches;
    st.keys = xmalloc(rows * sizeof *st.keys);
    float **fbufs[] = {&st.is_w, &st.rewards, &st.discounts, &st.prio};
    for (size_t i = 0; i < APEX_ARRAY_LEN(fbufs); i++) {
        *fbufs[i] = xmalloc(rows * sizeof(float));
    }
    st.obs = xmalloc(rows * OBS_DIM * sizeof(float));
    st.next_obs = xmalloc(rows * OBS_DIM * sizeof(float));
    st.actions = xmalloc(rows * sizeof(int32_t));
    for (int i = 0; i < p->inflight; i++) {
        if (s_request(&st) != 0) {
            s_fail(sh, "sampler send");
        }
    }
    while (!atomic_load(&sh->stop)) {
        if (s_wait_in(st.sock, POLL_MS) != 0 || s_drain_replies(&st, sh) != 0) {
            s_fail(sh, "sampler");
            break;
        }
    }
    for (size_t i = 0; i < APEX_ARRAY_LEN(fbufs); i++) {
        xfree(*fbufs[i]);
    }
    xfree(st.keys);
    xfree(st.obs);
    xfree(st.next_obs);
    xfree(st.actions);
    wire_buf_fini(&st.out);
    wire_decoder_destroy(&st.dec);
    zmq_close(st.sock);
    return NULL;
}

// ---------------------------------------------------------------------------------------
// Measurement: counters and per-thread CPU time, sampled at window boundaries
// ---------------------------------------------------------------------------------------

typedef struct {
    int pushers, inflight, windows, cap_log2;
    double window_s, warmup_s, insert_rate;
    int curve; // 1: [security] mode = curve, all clients authorized
    int wal_sync_ms;
    const char *durability; // [replay] durability: none, snapshot or wal
} opts_t;

typedef struct {
    int64_t at_ns;
    uint64_t insert_rows, sample_ok;
    double cpu_server, cpu_pushers, cpu_sampler, cpu_process; // seconds
    // The whole replay server: its loop thread, its libzmq I/O threads, its log writer and
    // its (reaped) snapshot children. What a dedicated replay host would spend.
    double cpu_server_all;
} mark_t;

typedef struct {
    pthread_t server;
    pusher_t *pushers;
    int n_pushers;
    sampler_t *sampler;
} threads_t;

static double s_thread_cpu_s(pthread_t t) {
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &cid) != 0 || clock_gettime(cid, &ts) != 0) {
        return 0.0;
    }
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// CPU seconds of this process's threads that belong to the replay server but are not its
// loop thread: libzmq I/O threads without a name prefix (the clients' contexts get one, see
// CLIENT_THREAD_PREFIX) and the log writer "apex-wal"; plus reaped children (snapshots).
static double s_server_helpers_cpu_s(void) {
    double total = 0.0;
    DIR *dir = opendir("/proc/self/task");
    for (struct dirent *e; dir && (e = readdir(dir)) != NULL;) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%.200s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) {
            continue;
        }
        int named = fgets(comm, sizeof comm, f) != NULL;
        fclose(f);
        if (!named || (strncmp(comm, "ZMQbg/IO/", 9) != 0 && strncmp(comm, "apex-wal", 8) != 0)) {
            continue;
        }
        unsigned long long ns = 0; // schedstat: time on a CPU, in ns
        snprintf(path, sizeof path, "/proc/self/task/%.200s/schedstat", e->d_name);
        f = fopen(path, "r");
        if (f && fscanf(f, "%llu", &ns) == 1) {
            total += 1e-9 * (double)ns;
        }
        if (f) {
            fclose(f);
        }
    }
    if (dir) {
        closedir(dir);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
        total += (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                 (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    }
    return total;
}

static void s_mark(mark_t *m, shared_t *sh, const threads_t *th) {
    m->cpu_process = bench_cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    m->cpu_server = s_thread_cpu_s(th->server);
    m->cpu_pushers = 0.0;
    for (int i = 0; i < th->n_pushers; i++) {
        m->cpu_pushers += s_thread_cpu_s(th->pushers[i].thread);
    }
    m->cpu_sampler = th->sampler ? s_thread_cpu_s(th->sampler->thread) : 0.0;
    m->cpu_server_all = m->cpu_server + s_server_helpers_cpu_s();
    m->insert_rows = atomic_load(&sh->insert_rows);
    m->sample_ok = atomic_load(&sh->sample_ok);
    m->at_ns = clock_now_ns();
}

// Runs the timed windows and prints the BENCH lines.
static void s_measure(const opts_t *o, shared_t *sh, const threads_t *th) {
    double samples[MAX_WINDOWS], inserts[MAX_WINDOWS], cpu_per_k[MAX_WINDOWS];
    double server_per_k[MAX_WINDOWS], server_cpu = 0.0;
    double cpu[4] = {0, 0, 0, 0}; // server, pushers, sampler, other (libzmq I/O, main)
    mark_t a, b;
    s_mark(&a, sh, th);
    for (int w = 0; w < o->windows; w++) {
        bench_sleep_s(o->window_s);
        s_mark(&b, sh, th);
        double dt = (double)(b.at_ns - a.at_ns) * 1e-9;
        samples[w] = (double)(b.sample_ok - a.sample_ok) / dt;
        inserts[w] = (double)(b.insert_rows - a.insert_rows) / dt;
        double mine[3] = {b.cpu_server - a.cpu_server, b.cpu_pushers - a.cpu_pushers,
                          b.cpu_sampler - a.cpu_sampler};
        for (int k = 0; k < 3; k++) {
            cpu[k] += mine[k] / dt;
        }
        cpu[3] += (b.cpu_process - a.cpu_process - mine[0] - mine[1] - mine[2]) / dt;
        // Whole-process CPU (server, clients and every libzmq I/O thread: CURVE encrypts on
        // both ends) per 1000 inserted transitions: what a set-up costs, whatever the load.
        double rows = (double)(b.insert_rows - a.insert_rows);
        cpu_per_k[w] = rows > 0 ? (b.cpu_process - a.cpu_process) * 1e6 / rows * 1e3 : 0;
        // The replay server's own share (see mark_t): with no sampler (--inflight 0) it is
        // the server's cost per insert, and 1 / it bounds a dedicated host's insert rate.
        server_per_k[w] = rows > 0 ? (b.cpu_server_all - a.cpu_server_all) * 1e6 / rows * 1e3 : 0;
        server_cpu += (b.cpu_server_all - a.cpu_server_all) / dt;
        printf("# window %d: %.0f sample batches/s, %.0f inserted transitions/s\n", w, samples[w],
               inserts[w]);
        a = b;
    }
    printf("# cpu (%% of one core, mean over windows): server thread %.0f, pushers %.0f, "
           "sampler %.0f, other (libzmq I/O threads, main) %.0f; the whole replay server "
           "(loop, its I/O threads, log writer, snapshot children) %.0f\n",
           100 * cpu[0] / o->windows, 100 * cpu[1] / o->windows, 100 * cpu[2] / o->windows,
           100 * cpu[3] / o->windows, 100 * server_cpu / o->windows);
    double smed = bench_median(samples, o->windows), imed = bench_median(inserts, o->windows);
    printf("# replay.tcp: %d windows x %.2f s, sample512 min %.0f max %.0f, insert min %.0f "
           "max %.0f\n",
           o->windows, o->window_s, samples[0], samples[o->windows - 1], inserts[0],
           inserts[o->windows - 1]);
    // The default configuration (4 unpaced pushers, K = 4) owns the plain names; others say
    // what differs, so that lines from different set-ups never share a name.
    char name[96] = "replay.tcp";
    size_t n = strlen(name);
    if (o->pushers != 4) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".pushers%d", o->pushers);
    }
    if (o->insert_rate > 0) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".paced%.0fk", o->insert_rate / 1e3);
    }
    if (o->inflight == 0) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".nosampler");
    } else if (o->inflight != 4) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".k%d", o->inflight);
    }
    if (o->inflight > 0 && s_batches != DEFAULT_BATCHES) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".batches%d", s_batches);
    }
    if (strcmp(o->durability, "none") != 0) {
        n += (size_t)snprintf(name + n, sizeof name - n, ".%s", o->durability);
        if (!strcmp(o->durability, "wal") && o->wal_sync_ms != 50) {
            n += (size_t)snprintf(name + n, sizeof name - n, "%dms", o->wal_sync_ms);
        }
    }
    if (o->curve) {
        snprintf(name + n, sizeof name - n, ".curve");
    }
    if (o->inflight > 0) {
        printf("BENCH %s.sample512_batches_per_s %.0f batches/s\n", name, smed);
    }
    printf("BENCH %s.cpu_us_per_1k_inserts %.1f us\n", name, bench_median(cpu_per_k, o->windows));
    if (o->pushers > 0) {
        printf("BENCH %s.server_cpu_us_per_1k_inserts %.1f us\n", name,
               bench_median(server_per_k, o->windows));
    }
    if (o->pushers > 0) {
        printf("BENCH %s.insert_transitions_per_s %.0f transitions/s\n", name, imed);
    }
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// Set-up and main
// ---------------------------------------------------------------------------------------

// Parses "--name value" pairs; returns 0, or -1 with a message on anything unknown.
static int s_parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) {
            fprintf(stderr, "bench_replay_tcp: %s needs a value\n", argv[i]);
            return -1;
        }
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--durability")) {
            if (strcmp(v, "none") && strcmp(v, "snapshot") && strcmp(v, "wal")) {
                fprintf(stderr, "bench_replay_tcp: --durability none|snapshot|wal\n");
                return -1;
            }
            o->durability = v;
            continue;
        }
        double *dd = !strcmp(k, "--window")        ? &o->window_s
                     : !strcmp(k, "--warmup")      ? &o->warmup_s
                     : !strcmp(k, "--insert-rate") ? &o->insert_rate
                                                   : NULL;
        int *di = !strcmp(k, "--pushers")         ? &o->pushers
                  : !strcmp(k, "--inflight")      ? &o->inflight
                  : !strcmp(k, "--windows")       ? &o->windows
                  : !strcmp(k, "--capacity-log2") ? &o->cap_log2
                  : !strcmp(k, "--curve")         ? &o->curve
                  : !strcmp(k, "--push-window")   ? &s_push_window
                  : !strcmp(k, "--wal-sync-ms")   ? &o->wal_sync_ms
                  : !strcmp(k, "--batches")       ? &s_batches
                                                  : NULL;
        int ok;
        if (dd) {
            char *end = NULL;
            *dd = strtod(v, &end);
            ok = end != v && *end == '\0';
        } else if (di) {
            int64_t x = 0;
            ok = parse_int64(v, INT64_MIN, INT64_MAX, &x) == 0;
            *di = x >= -1000000 && x <= 1000000 ? (int)x : -1;
        } else {
            fprintf(stderr, "bench_replay_tcp: unknown option %s\n", k);
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "bench_replay_tcp: bad value for %s: %s\n", k, v);
            return -1;
        }
    }
    int ok = o->pushers >= 0 && o->pushers <= MAX_PUSHERS && o->inflight >= 0 &&
             o->inflight <= 256 && o->windows >= 3 && o->windows <= MAX_WINDOWS &&
             o->cap_log2 >= 10 && o->cap_log2 <= 24 && o->window_s > 0 && o->warmup_s >= 0 &&
             o->insert_rate >= 0 && s_push_window >= 1 && s_push_window <= 8192 &&
             o->wal_sync_ms >= 1 && s_batches >= 1 && s_batches <= MAX_BATCHES_PER_REQUEST;
    return ok ? 0 : -1;
}

static char s_run_dir[512];

static int s_server_start(bench_server_t *srv, const opts_t *o) {
    char cap[64], err[CONFIG_ERR_LEN], dur[64], out[600], kd[600], ak[600];
    snprintf(cap, sizeof cap, "replay.capacity=%ld", 1L << o->cap_log2);
    snprintf(dur, sizeof dur, "replay.durability=%s", o->durability);
    char sync[64];
    snprintf(sync, sizeof sync, "replay.wal_sync_ms=%d", o->wal_sync_ms);
    snprintf(out, sizeof out, "run.out_dir=%s", s_run_dir);
    snprintf(kd, sizeof kd, "security.key_dir=%s", s_key_dir);
    snprintf(ak, sizeof ak, "security.authorized_keys=%s/authorized_keys", s_key_dir);
    // The last three only with --curve. The pre-fill writes as actor 999 (of 1000).
    const char *sets[] = {cap, dur, out, sync, "security.mode=curve", kd, ak};
    int n = (int)APEX_ARRAY_LEN(sets) - (o->curve ? 0 : 3);
    if (bench_server_start(srv, sets, n, 0, err, sizeof err) != 0) {
        fprintf(stderr, "bench_replay_tcp: server: %s\n", err);
        return -1;
    }
    return 0;
}

// The clients' libzmq threads are named "1/ZMQbg/..." so that s_server_helpers_cpu_s can
// tell the server's own I/O threads (no prefix) from them.
#define CLIENT_THREAD_PREFIX 1
static void *s_client_ctx(void) {
    void *ctx = zmq_ctx_new();
    zmq_ctx_set(ctx, ZMQ_THREAD_NAME_PREFIX, CLIENT_THREAD_PREFIX);
    return ctx;
}

// Starts the pushers and the sampler, measures, stops and joins them. Returns 0 or -1.
static int s_run_clients(const opts_t *o, shared_t *sh, pthread_t server) {
    void *push_ctx = s_client_ctx(), *samp_ctx = s_client_ctx();
    pusher_t pushers[MAX_PUSHERS];
    sampler_t sampler = {.sh = sh, .ctx = samp_ctx, .inflight = o->inflight};
    threads_t th = {.server = server,
                    .pushers = pushers,
                    .n_pushers = 0,
                    .sampler = o->inflight > 0 ? &sampler : NULL};
    int rc = th.sampler ? pthread_create(&sampler.thread, NULL, s_sampler_main, &sampler) : 0;
    for (int i = 0; i < o->pushers && rc == 0; i++) {
        pushers[i] = (pusher_t){
            .sh = sh, .ctx = push_ctx, .index = i, .rows_per_s = o->insert_rate / o->pushers};
        rc = pthread_create(&pushers[i].thread, NULL, s_pusher_main, &pushers[i]);
        th.n_pushers += rc == 0;
    }
    if (rc == 0) {
        bench_sleep_s(o->warmup_s);
        s_measure(o, sh, &th);
    } else {
        fprintf(stderr, "bench_replay_tcp: pthread_create: %s\n", strerror(rc));
    }
    atomic_store(&sh->stop, 1);
    for (int i = 0; i < th.n_pushers; i++) {
        pthread_join(pushers[i].thread, NULL);
    }
    if (th.sampler) {
        pthread_join(sampler.thread, NULL);
    }
    zmq_ctx_term(push_ctx);
    zmq_ctx_term(samp_ctx);
    return rc == 0 && !atomic_load(&sh->failed) ? 0 : -1;
}

int main(int argc, char **argv) {
    opts_t o = {.pushers = 4,
                .inflight = 4,
                .windows = 5,
                .cap_log2 = 20,
                .window_s = 2.0,
                .warmup_s = 1.0,
                .insert_rate = 0,
                .durability = "none",
                .wal_sync_ms = 50};
    if (s_parse_args(argc, argv, &o) != 0) {
        fprintf(stderr,
                "usage: bench_replay_tcp [--pushers 0..16] [--inflight 0..256, 0 = no sampler] "
                "[--windows 3..64] [--window s] [--warmup s] [--capacity-log2 10..24] "
                "[--insert-rate transitions/s, 0 = unlimited] [--durability none|snapshot|wal] "
                "[--wal-sync-ms ms] [--curve 0|1] [--push-window batches] "
                "[--batches 1..8 per request]\n");
        return 2;
    }
    log_set_role("bench_replay_tcp");
    log_set_level(LOG_WARN);
    // A scratch directory for the replay's files (durability) and the keys (curve).
    snprintf(s_run_dir, sizeof s_run_dir, "/tmp/apex_bench_XXXXXX");
    if (!mkdtemp(s_run_dir)) {
        perror("mkdtemp");
        return 2;
    }
    if (o.curve) {
        char pub[41], err[512], path[600];
        snprintf(s_key_dir, sizeof s_key_dir, "%.400s/keys", s_run_dir);
        if (security_keygen(s_key_dir, "replay", pub, err, sizeof err) != 0 ||
            security_keygen(s_key_dir, "actor", pub, err, sizeof err) != 0) {
            fprintf(stderr, "bench_replay_tcp: %s\n", err);
            return 2;
        }
        snprintf(path, sizeof path, "%s/authorized_keys", s_key_dir);
        FILE *f = fopen(path, "w");
        if (!f || fprintf(f, "%s\n", pub) < 0 || fclose(f) != 0) {
            return 2;
        }
    }
    bench_server_t srv;
    if (s_server_start(&srv, &o) != 0) {
        return 2;
    }
    shared_t sh = {.insert_ep = replay_server_insert_endpoint(srv.server),
                   .sample_ep = replay_server_sample_endpoint(srv.server)};
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 0);
    void *fill_ctx = s_client_ctx();
    int64_t t0 = clock_now_ns();
    int rc = s_prefill(fill_ctx, sh.insert_ep, 1ull << o.cap_log2, &rng);
    zmq_ctx_term(fill_ctx);
    printf("# apex replay server over tcp loopback: capacity 2^%d pre-filled in %.2f s; "
           "%d pushers x batches of %u (<= %d unacked each%s), 1 learner thread x %d requests "
           "of %u in flight\n",
           o.cap_log2, (double)(clock_now_ns() - t0) * 1e-9, o.pushers, INSERT_N, s_push_window,
           o.insert_rate > 0 ? ", paced" : "", o.inflight, SAMPLE_N);
    fflush(stdout);
    if (rc != 0) {
        fprintf(stderr, "bench_replay_tcp: pre-fill failed: %s\n", zmq_strerror(errno));
    } else {
        rc = s_run_clients(&o, &sh, srv.thread);
    }
    wire_replay_stats_t st;
    bench_server_stop(&srv, &st);
    printf("# server: inserted %llu, sampled %llu rows, updated %llu, stale updates %llu, bad "
           "messages %llu, learner not-ready replies %llu\n",
           (unsigned long long)st.inserted, (unsigned long long)st.sampled,
           (unsigned long long)st.updated, (unsigned long long)st.stale_updates,
           (unsigned long long)st.bad_messages,
           (unsigned long long)atomic_load(&sh.sample_not_ready));
    if (st.bad_messages != 0) {
        fprintf(stderr, "bench_replay_tcp: the server counted bad messages\n");
        rc = -1;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", s_run_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_replay_tcp: could not remove %s\n", s_run_dir);
    }
    return rc == 0 ? 0 : 1;
}
