// actor.c: see actor.h.
#define LOG_MODULE "actor"
#include "actor.h"

#include "apex.h"
#include "blas.h"
#include "clock.h"
#include "config_shard.h"
#include "env.h"
#include "envsrc.h"
#include "explore.h"
#include "fcodec.h"
#include "framestack.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "nn.h"
#include "security.h"
#include "nstep.h"
#include "rng.h"
#include "weights_client.h"
#include "wire.h"
#include "xalloc.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

// How many queued weights messages one read decodes at most.
#define WEIGHTS_DRAIN_MAX 256

#define FLUSH_TICK_MS 20 // retry pending batches, rate-limit granularity
#define STOP_CHECK_MS 50
#define EPISODES_CAP 4096       // finished episodes buffered between two ActorStats
#define STOP_DRAIN_MAX_MS 10000 // the longest a stopping actor waits for acks
#define LOG_INTERVAL_MS 5000
#define STATUS_LOG_MS 10000
#define MAX_DRAIN 256

struct actor {
    apex_config_t cfg;
    int index;
    envsrc_t *src;        // the built-in envs or the Python env bridge (envsrc.h)
    int G, GE;            // the envs step in G groups of GE; group g is envs g*GE .. g*GE+GE-1
    int group;            // the group to act on next
    envsrc_result_t *res; // (G) each group's latest results (its observations to act on)
    int obs_dim, n_actions, obs_dtype;
    int action_dim;      // continuous actions of this many floats (0: discrete, n_actions)
    size_t action_bytes; // one action: an int32 or action_dim floats (wire_action_bytes)
    size_t obs_bytes;    // one observation: frame_stack frames (what the network reads)
    size_t frame_bytes;  // one frame, what the envs emit (= obs_bytes without stacking)
    // [env] frame_stack = K > 1: each env's last K frames (framestack.h); res[g]'s obs and
    // final_obs then point at stacks (fs's, and stk_final's for the episodes that ended).
    framestack_t fs;
    uint8_t *stk_final; // (n_envs, obs_bytes)
    uint8_t *stk_live;  // (n_envs) 1 once an env's stack holds its episode's frames
    // Frame mode (config_frame_mode, issue #27): every frame gets a number (per epoch, from
    // 0) and goes to the replay once, in the next batch; rows name their stacks by the
    // number of the newest frame. fq holds the frames not sent yet (fq_first is fq[0]'s
    // number), with each one's link to the frame before it in its stack (0: itself, an
    // episode's first frame). cur_fid: each env's newest frame; final_fid: the final frame of
    // the episode that just ended; fid_t: the newest frame of s_t (as obs_t).
    int fm;
    uint8_t *fq;
    uint32_t *fq_prev;
    uint32_t fq_n, fq_cap;
    // [replay] compress: fq holds the frames' blobs back to back (fq_bytes used, each at most
    // fq_bound), fq_sizes their sizes; fc compresses them (its contexts made once).
    fcodec_t *fc;
    uint32_t *fq_sizes;
    size_t fq_bytes, fq_bound;
    uint64_t fq_first;
    uint64_t *cur_fid, *final_fid, *fid_t;
    nstep_t nstep;
    nstep_out_t out; // transitions waiting to fill a batch
    nn_config_t net_cfg;
    // wdata: the learner's weights message, n_weights floats (nn_run_weights_params): the acting
    // network, and for continuous actions then DPG's first critic, which gives the initial
    // priorities. params and critic are views into it.
    float *wdata;
    size_t n_weights;
    nn_params_t params; // the Q-network, or DPG's policy mu
    nn_state_t state;
    nn_config_t critic_cfg; // continuous actions only: Q(s, a) (nn_critic_config)
    nn_params_t critic;
    nn_state_t cstate;
    rng_t rng;        // action selection
    float *q;         // (n_envs, A): Q-values, or the policy's mu(s) (n_envs, action_dim)
    float *eps;       // (n_envs): epsilon_i, or for continuous actions the noise's sigma_i
    int32_t *actions; // (n_envs) discrete actions
    float *cont;      // (n_envs, action_dim) continuous actions (NULL when discrete)
    double *ou;       // (n_envs, action_dim) Ornstein-Uhlenbeck states ([actor] noise_theta
                      // < 1), zeroed at each episode's start; NULL for Gaussian noise
    uint8_t *act;     // the actions of either kind as bytes (n_envs, action_bytes)
    float *prio;      // (send_batch)
    uint8_t *obs_t;   // (n_envs, obs bytes): s_t of each env's step in flight (the source
                      // moves on to the next observation, a reset one where an episode ended)
    // Pending FIFO of encoded batches (bounded; see actor.h).
    // The window of unacknowledged batches, oldest first, with consecutive seqs from
    // pending_seq0 (see "Sending" below).
    wire_buf_t *pending;
    int64_t *pending_sent_ms; // 0 = not sent yet
    uint8_t *pending_acked;
    uint32_t *pending_rows; // transitions in each batch (st.rows_acked)
    int pending_head, pending_len, pending_cap;
    uint64_t pending_seq0;
    uint64_t epoch;
    wire_buf_t scratch;
    wire_decoder_t *dec;
    uint64_t frames_reported; // env steps covered by the ActorStats sent so far
    // Episode stats since the last ActorStats (ep_n of them; s_take_episodes).
    vecenv_episode_t *episodes;
    float *ep_returns, *ep_eps;
    uint32_t *ep_lengths;
    int ep_n;
    void *ctx, *insert_sock, *stats_sock;
    weights_client_t weights; // asks the learner for weights (weights_client.h)
    security_t *security;
    loop_t *loop;
    uint64_t seq;
    uint64_t vector_steps, max_vector_steps, steps_since_sync;
    int64_t rate_start_ms;
    uint64_t rate_start_steps;
    actor_stats_t st; // the actor thread's counters
    // st_lock guards st_shared only: a copy of st published by the actor thread every
    // FLUSH_TICK_MS and when actor_run returns, so that actor_get_stats may run anywhere.
    pthread_mutex_t st_lock;
    actor_stats_t st_shared;
    log_limiter_t drop_log, bad_log, ack_log, prio_log, reconnect_log, void_log;
    int64_t last_ack_ms; // monotonic time of the last good ack
    // The newest valid Weights received (the weights DEALER's answers are read as they
    // arrive), taken into params at the next weight sync.
    float *staged;
    uint64_t staged_version;
    int has_staged;
    int64_t staged_seen_ms; // monotonic time the staged version was last received
    log_limiter_t old_log;
    atomic_int stop_requested;
    // [run] deterministic (docs/architecture.md "Deterministic runs"): the weight-sync period
    // being stepped (from 0), the weights target waited for before stepping on (0: none),
    // whether its weights have come (staged), and whether the next batch ends the period.
    int det;
    uint64_t det_period, det_want;
    int det_got, det_end;
    // ... and the period's episodes for its last batch (TransitionBatch.det_returns): the
    // returns of its last WIRE_DET_RETURNS_MAX, a ring.
    float det_ret[WIRE_DET_RETURNS_MAX];
    int det_ret_next, det_ret_n;
};

// ---------------------------------------------------------------------------------------
// Start-up

static void s_alloc(actor_t *a) {
    const config_actor_t *c = &a->cfg.actor;
    // OB: bytes of one observation (float32 or uint8 elements: nstep and the batches only copy
    // them; the network reads them as they are).
    int N = (int)c->envs_per_actor, OB = (int)a->obs_bytes, A = a->n_actions;
    int D = a->action_dim, AB = (int)a->action_bytes;
    int B = (int)c->send_batch;
    uint64_t first = (uint64_t)a->index * (uint64_t)N;
    a->res = xcalloc((size_t)a->G, sizeof *a->res);
    nstep_init_actions(&a->nstep, N, OB, AB, (int)c->n_step, c->gamma);
    // A step can emit up to n_envs * n transitions on top of a nearly full batch.
    nstep_out_init_actions(&a->out, B + nstep_max_emit(&a->nstep), OB, AB);
    a->n_weights = nn_run_weights_params(&a->cfg);
    a->wdata = xaligned_alloc(a->n_weights * sizeof(float));
    a->staged = xmalloc(a->n_weights * sizeof(float));
    nn_params_view(&a->params, &a->net_cfg, a->wdata);
    rng_t init;
    rng_init_stream(&init, (uint64_t)a->cfg.run.seed, RNG_ROLE_NET_INIT, 0);
    nn_params_init_random(&a->params, &init);
    nn_state_init(&a->state, &a->net_cfg, N > B ? N : B, 0);
    if (D > 0) {
        nn_critic_config(&a->critic_cfg, &a->net_cfg);
        nn_params_view(&a->critic, &a->critic_cfg, a->wdata + a->params.num_params);
        nn_params_init_random(&a->critic, &init); // until the first weights: as the learner's
        nn_state_init(&a->cstate, &a->critic_cfg, B, 0);
    }
    rng_init_stream(&a->rng, (uint64_t)a->cfg.run.seed, RNG_ROLE_ACTOR, (uint64_t)a->index);
    // The epoch names this run of the process, so that a restarted actor's seq 0 is not
    // taken for a re-sent batch of its previous life. It is the one value in a batch that
    // is not a function of the seed (tests of determinism compare everything else).
    rng_t e;
    rng_init(&e, (uint64_t)clock_wall_ms() * 1000003u ^ (uint64_t)clock_now_ns() ^
                     ((uint64_t)getpid() << 32));
    a->epoch = rng_next_u64(&e);
    a->q = xmalloc((size_t)N * (size_t)(D > 0 ? D : A) * sizeof(float));
    a->eps = xmalloc((size_t)N * sizeof(float));
    // Ape-X's schedule over the run's envs: epsilons, or for continuous actions the Gaussian
    // noise's sigmas (explore.h).
    explore_epsilons(a->eps, N, (int64_t)first, (int64_t)(c->num_actors * c->envs_per_actor),
                     D > 0 ? c->noise_sigma : c->eps_base, D > 0 ? c->noise_alpha : c->eps_alpha);
    a->actions = xcalloc((size_t)N, sizeof(int32_t));
    if (D > 0) {
        a->cont = xcalloc((size_t)N * (size_t)D, sizeof(float));
        if (c->noise_theta < 1.0) {
            a->ou = xcalloc((size_t)N * (size_t)D, sizeof(double));
        }
    }
    a->act = D > 0 ? (uint8_t *)a->cont : (uint8_t *)a->actions;
    a->prio = xmalloc((size_t)B * sizeof(float));
    a->obs_t = xmalloc((size_t)N * (size_t)OB);
    if (a->cfg.env.frame_stack > 1 || a->fm) { // frame mode numbers frames here, K = 1 too
        framestack_init(&a->fs, N, (int)a->cfg.env.frame_stack, a->frame_bytes);
        a->stk_final = xmalloc((size_t)N * (size_t)OB);
        a->stk_live = xcalloc((size_t)N, 1);
    }
    if (a->fm) {
        // A batch carries at most max_batch frames (the replay's limit); s_idle_step ships
        // early before one more step (2 frames per env at most) could pass it.
        a->fq_cap = (uint32_t)a->cfg.replay.max_batch;
        a->fq_bound = a->frame_bytes;
        if (a->cfg.replay.compress) {
            a->fc = fcodec_new(a->cfg.replay.compress, (int)a->cfg.replay.compress_level);
            APEX_ASSERT(a->fc); // only out of memory (the config names a valid codec)
            a->fq_bound = fcodec_bound(a->cfg.replay.compress, a->frame_bytes);
            a->fq_sizes = xmalloc((size_t)a->fq_cap * sizeof(uint32_t));
        }
        a->fq = xmalloc((size_t)a->fq_cap * a->fq_bound);
        a->fq_prev = xmalloc((size_t)a->fq_cap * sizeof(uint32_t));
        a->cur_fid = xcalloc((size_t)N, sizeof(uint64_t));
        a->final_fid = xcalloc((size_t)N, sizeof(uint64_t));
        a->fid_t = xcalloc((size_t)N, sizeof(uint64_t));
    }
    a->pending_cap = (int)c->max_pending_batches;
    a->pending = xcalloc((size_t)a->pending_cap, sizeof *a->pending);
    a->pending_sent_ms = xcalloc((size_t)a->pending_cap, sizeof *a->pending_sent_ms);
    a->pending_acked = xcalloc((size_t)a->pending_cap, 1);
    a->pending_rows = xcalloc((size_t)a->pending_cap, sizeof *a->pending_rows);
    // A batch of B rows: whole observations, or in frame mode the frames of about B steps and
    // the episodes' first frames (a larger one, shipped early, grows its buffer once).
    size_t batch_bytes = a->fm
                             ? 256 + (size_t)(B + 2 * N * (c->n_step + 2)) * (a->frame_bytes + 4) +
                                   (size_t)B * (32 + (size_t)AB)
                             : 256 + (size_t)B * (2 * (size_t)OB + 16 + (size_t)AB);
    batch_bytes += WIRE_DET_RETURNS_MAX * 4 + 32; // (a deterministic period's last batch)
    for (int i = 0; i < a->pending_cap; i++) {
        wire_buf_init(&a->pending[i], batch_bytes);
    }
    wire_buf_init(&a->scratch, 4 * a->n_weights + 1024);
    a->episodes = xmalloc(EPISODES_CAP * sizeof *a->episodes);
    a->ep_returns = xmalloc(EPISODES_CAP * sizeof(float));
    a->ep_eps = xmalloc(EPISODES_CAP * sizeof(float));
    a->ep_lengths = xmalloc(EPISODES_CAP * sizeof(uint32_t));
}

// Where the weights come from: this host's relay when the run has one (actor/relay.h: a
// plain ipc:// socket, no CURVE), else the learner.
static const char *s_weights_endpoint(const actor_t *a) {
    const config_endpoints_t *e = &a->cfg.endpoints;
    return e->relay[0] ? e->relay : e->learner_weights;
}

static int s_open_sockets(actor_t *a) {
    const config_endpoints_t *e = &a->cfg.endpoints;
    wire_limits_t lim = {.obs_dim = (uint32_t)a->obs_dim,
                         .n_actions = (uint32_t)a->n_actions,
                         .num_params = (uint32_t)a->n_weights,
                         .max_count = (uint32_t)a->cfg.replay.max_batch};
    a->dec = wire_decoder_new(&lim);
    int64_t max_bytes = (int64_t)wire_max_message_bytes(&lim);
    a->ctx = zmq_ctx_new();
    net_opts_t o_insert = {.max_msg_bytes = max_bytes, .sndhwm = 64};
    net_opts_t o_stats = {.sndhwm = 16};
    a->security = security_new(a->ctx, &a->cfg, "actor", a->index, 0);
    if (!a->security) {
        return -1;
    }
    a->insert_sock = net_socket(a->ctx, ZMQ_DEALER, &o_insert);
    a->stats_sock = net_socket(a->ctx, ZMQ_PUSH, &o_stats);
    if (!a->insert_sock || !a->stats_sock ||
        security_client(a->security, a->insert_sock, "replay") ||
        security_client(a->security, a->stats_sock, "learner")) {
        return -1;
    }
    char id[32];
    snprintf(id, sizeof id, "actor-%d", a->index);
    zmq_setsockopt(a->insert_sock, ZMQ_ROUTING_ID, id, strlen(id));
    int one = 1;
    // Batches are buffered by us (bounded, counted), not queued by libzmq to a dead peer.
    zmq_setsockopt(a->insert_sock, ZMQ_IMMEDIATE, &one, sizeof one);
    zmq_setsockopt(a->stats_sock, ZMQ_IMMEDIATE, &one, sizeof one);
    if (net_connect(a->insert_sock, e->replay_insert) != 0 ||
        weights_client_open(&a->weights, a->ctx, e->relay[0] ? NULL : a->security,
                            s_weights_endpoint(a), max_bytes) != 0 ||
        net_connect(a->stats_sock, e->learner_stats) != 0) {
        return -1;
    }
    return 0;
}

static int s_idle_step(loop_t *loop, void *arg);
static void s_stack(actor_t *a, int g, envsrc_result_t *r);
static int s_reader_acks(loop_t *loop, void *sock, void *arg);
static int s_reader_weights(loop_t *loop, void *sock, void *arg);
static int s_timer_flush(loop_t *loop, void *arg);
static int s_timer_stats(loop_t *loop, void *arg);
static int s_timer_status(loop_t *loop, void *arg);

actor_t *actor_new(const apex_config_t *cfg, int index) {
    const int N = (int)cfg->actor.envs_per_actor;
    // The envs first: with id = python this starts the env workers and checks their spaces,
    // the start-up error most likely to happen.
    envsrc_t *src = envsrc_new(cfg, N, (uint64_t)index * (uint64_t)N, index);
    if (!src) {
        return NULL;
    }
    actor_t *a = xcalloc(1, sizeof *a);
    pthread_mutex_init(&a->st_lock, NULL);
    a->cfg = *cfg;
    // [replay] shards = K: this actor inserts into shard index mod K only (its exactly-once
    // marks and acks then live on one shard); its copy of the config names that shard alone.
    config_select_shard(&a->cfg, config_actor_shard(cfg, index));
    a->index = index;
    a->src = src;
    a->G = envsrc_groups(src);
    a->GE = envsrc_group_size(src);
    a->obs_dim = cfg->env.obs_dim;
    a->n_actions = cfg->env.n_actions;
    a->action_dim = cfg->env.action_dim;
    a->action_bytes = wire_action_bytes((uint32_t)a->action_dim);
    a->obs_dtype = cfg->env.obs_dtype;
    a->frame_bytes = envsrc_obs_bytes(src);
    a->obs_bytes = a->frame_bytes * (size_t)cfg->env.frame_stack;
    a->fm = config_frame_mode(cfg);
    a->det = cfg->run.deterministic;
    nn_config_from_run(&a->net_cfg, cfg);
    // Inference on small batches: one BLAS thread per actor process is fastest and leaves
    // the other cores to the other daemons.
    blas_set_threads(1);
    s_alloc(a);
    if (s_open_sockets(a) != 0) {
        actor_destroy(&a);
        return NULL;
    }
    a->last_ack_ms = clock_now_ms();
    a->loop = loop_new();
    loop_add_reader(a->loop, a->insert_sock, s_reader_acks, a);
    loop_add_reader(a->loop, a->weights.sock, s_reader_weights, a);
    if (!a->det) { // (a deterministic actor's first period acts with its initial weights)
        weights_client_ask(&a->weights, 0, clock_now_ms());
    }
    loop_set_idle(a->loop, s_idle_step, a);
    loop_add_timer(a->loop, FLUSH_TICK_MS, s_timer_flush, a);
    loop_add_timer(a->loop, cfg->actor.stats_interval_ms, s_timer_stats, a);
    loop_add_timer(a->loop, STATUS_LOG_MS, s_timer_status, a);
    // Group 0's first observations: the loop acts on them first (see s_idle_step).
    envsrc_recv(a->src, 0, &a->res[0]);
    s_stack(a, 0, &a->res[0]);
    log_info("actor %d: %lld x %s%s, %s %.4g .. %.4g, n-step %lld, batches of %lld to %s", index,
             (long long)cfg->actor.envs_per_actor, envsrc_name(src),
             a->G > 1 ? " (in overlapped groups)" : "",
             a->action_dim > 0 ? "Gaussian noise sigmas" : "epsilons", (double)a->eps[0],
             (double)a->eps[cfg->actor.envs_per_actor - 1], (long long)cfg->actor.n_step,
             (long long)cfg->actor.send_batch, a->cfg.endpoints.replay_insert);
    return a;
}

void actor_destroy(actor_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    actor_t *a = *self_p;
    loop_destroy(&a->loop);
    net_close(&a->insert_sock);
    weights_client_close(&a->weights);
    net_close(&a->stats_sock);
    security_destroy(&a->security);
    if (a->ctx) {
        zmq_ctx_term(a->ctx);
    }
    wire_decoder_destroy(&a->dec);
    for (int i = 0; i < a->pending_cap; i++) {
        wire_buf_fini(&a->pending[i]);
    }
    free(a->pending);
    free(a->pending_sent_ms);
    free(a->pending_acked);
    free(a->pending_rows);
    wire_buf_fini(&a->scratch);
    envsrc_destroy(&a->src);
    free(a->res);
    nstep_fini(&a->nstep);
    nstep_out_fini(&a->out);
    xfree(a->wdata);
    nn_state_fini(&a->state);
    nn_state_fini(&a->cstate);
    free(a->q);
    free(a->eps);
    free(a->actions);
    free(a->cont);
    free(a->ou);
    free(a->prio);
    free(a->obs_t);
    if (a->stk_live) {
        framestack_fini(&a->fs);
    }
    free(a->stk_final);
    free(a->stk_live);
    free(a->fq);
    free(a->fq_prev);
    free(a->fq_sizes);
    fcodec_destroy(&a->fc);
    free(a->cur_fid);
    free(a->final_fid);
    free(a->fid_t);
    free(a->episodes);
    free(a->ep_returns);
    free(a->ep_eps);
    free(a->ep_lengths);
    free(a->staged);
    pthread_mutex_destroy(&a->st_lock);
    free(a);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Sending. Every batch stays in a bounded window until the replay server acknowledges it
// (after storing it, and in wal mode after its log record is on disk). A batch is sent at
// once if the replay server is connected, and sent again when no ack came within
// ack_timeout_ms (a lost connection, a restarted server); the server stores each
// (actor, epoch, seq) once, so re-sending is safe. While the server is unreachable the window
// fills; when it is full the oldest batch is dropped and counted. Nothing blocks.

static int s_slot(const actor_t *a, int i) { return (a->pending_head + i) % a->pending_cap; }

static void s_flush_pending(actor_t *a) {
    int64_t now = clock_now_ms();
    for (int i = 0; i < a->pending_len; i++) {
        int k = s_slot(a, i);
        int64_t sent = a->pending_sent_ms[k];
        if (a->pending_acked[k] || (sent && now - sent < a->cfg.actor.ack_timeout_ms)) {
            continue;
        }
        wire_buf_t *b = &a->pending[k];
        if (net_send(a->insert_sock, b->data, b->len, ZMQ_DONTWAIT) != APEX_OK) {
            return; // not connected (ZMQ_IMMEDIATE) or the pipe is full: next tick
        }
        if (sent) {
            a->st.batches_resent++;
        } else {
            a->st.batches_sent++;
        }
        a->pending_sent_ms[k] = now;
    }
}

// Pops acknowledged batches off the front of the window.
static void s_pop_acked(actor_t *a) {
    while (a->pending_len > 0 && a->pending_acked[a->pending_head]) {
        a->pending_acked[a->pending_head] = 0;
        a->pending_head = (a->pending_head + 1) % a->pending_cap;
        a->pending_len--;
        a->pending_seq0++;
    }
}

static void s_take_ack(actor_t *a, uint64_t seq) {
    if (seq < a->pending_seq0 || seq - a->pending_seq0 >= (uint64_t)a->pending_len) {
        return; // a duplicate ack for a re-sent batch, or one dropped meanwhile
    }
    int k = s_slot(a, (int)(seq - a->pending_seq0));
    if (!a->pending_acked[k]) {
        a->pending_acked[k] = 1;
        a->st.batches_acked++;
        a->st.rows_acked += a->pending_rows[k];
    }
    s_pop_acked(a);
}

static void s_enqueue(actor_t *a, const wire_msg_t *m) {
    if (a->pending_len == a->pending_cap) {
        a->pending_acked[a->pending_head] = 0;
        a->pending_head = (a->pending_head + 1) % a->pending_cap;
        a->pending_len--;
        a->pending_seq0++;
        a->st.batches_dropped++;
        // Under CURVE a server that refuses our key looks exactly like one that is down
        // (the handshake fails and ZeroMQ retries quietly): say so.
        log_every(&a->drop_log, LOG_INTERVAL_MS, LOG_WARN,
                  "replay server at %s not acknowledging: %d batches unacknowledged, %llu oldest "
                  "dropped%s%s%s",
                  a->cfg.endpoints.replay_insert, a->pending_cap,
                  (unsigned long long)a->st.batches_dropped,
                  a->cfg.security.mode == SECURITY_CURVE
                      ? " (down, or refusing this actor's key: is the public key of this actor's "
                        "key pair in "
                      : "",
                  a->cfg.security.mode == SECURITY_CURVE ? a->cfg.security.authorized_keys : "",
                  a->cfg.security.mode == SECURITY_CURVE ? " on the replay host?)" : "");
    }
    int k = s_slot(a, a->pending_len);
    wire_encode(m, &a->pending[k]); // the buffers were sized for a full batch: no allocation
    a->pending_sent_ms[k] = 0;
    a->pending_acked[k] = 0;
    a->pending_rows[k] = m->u.batch.count;
    a->pending_len++;
}

// Sends the first `rows` rows of a->out as one batch, with initial priorities: |TD| of the
// local Q-network, or for continuous actions of the local critic at (s, a) against R + disc
// Q(s', mu(s')) (Ape-X DPG's actors, nn_dpg_td_priorities).
static void s_send_rows(actor_t *a, int rows) {
    nstep_out_t *o = &a->out;
    const int cont = a->action_dim > 0;
    const float eps = (float)a->cfg.learner.priority_eps;
    if (rows == 0) {
        // (a deterministic period's end with no rows left: nothing to prioritise)
    } else if (cont) {
        nn_dpg_td_priorities(a->prio, &a->state, &a->params, &a->cstate, &a->critic, o->obs,
                             (const float *)(const void *)o->actions, o->rewards, o->discounts,
                             o->next_obs, eps, rows);
    } else {
        nn_td_priorities(a->prio, &a->state, &a->params, o->obs,
                         (const int32_t *)(const void *)o->actions, o->rewards, o->discounts,
                         o->next_obs, eps, rows);
    }
    // Weights that pass validation (finite) can still overflow in the forward pass, and the
    // replay refuses a batch with a priority outside the wire's range (NaN included): send
    // none, so it uses its max priority.
    int prio_ok = 1;
    for (int i = 0; i < rows; i++) {
        prio_ok &= a->prio[i] >= 0.0f && a->prio[i] <= WIRE_PRIORITY_MAX; // false for NaN
    }
    if (!prio_ok) {
        a->st.bad_priorities++;
        log_every(&a->prio_log, LOG_INTERVAL_MS, LOG_WARN,
                  "initial priorities out of range (weights " WIRE_VERSION_FMT
                  " overflow): %llu batches sent without priorities",
                  WIRE_VERSION_ARGS(a->st.weights_version),
                  (unsigned long long)a->st.bad_priorities);
    }
    // A deterministic period's last batch: the actor's totals through the period and its
    // episodes' returns, oldest first (the ring unrolled on the stack).
    float det_returns[WIRE_DET_RETURNS_MAX];
    int nr = a->det_end ? a->det_ret_n : 0;
    int first = (a->det_ret_next - a->det_ret_n + WIRE_DET_RETURNS_MAX) % WIRE_DET_RETURNS_MAX;
    for (int i = 0; i < nr; i++) {
        det_returns[i] = a->det_ret[(first + i) % WIRE_DET_RETURNS_MAX];
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = (uint32_t)a->index,
                               .epoch = a->epoch,
                               .seq = a->seq++,
                               .weights_version = a->st.weights_version,
                               .count = (uint32_t)rows,
                               .obs_dim = (uint32_t)a->obs_dim,
                               .obs_dtype = (uint32_t)a->obs_dtype,
                               .obs = o->obs,
                               .actions = cont ? NULL : (const int32_t *)(const void *)o->actions,
                               .action_dim = (uint32_t)a->action_dim,
                               .cont_actions = cont ? (const float *)(const void *)o->actions
                                                    : NULL,
                               .rewards = o->rewards,
                               .discounts = o->discounts,
                               .next_obs = o->next_obs,
                               .priorities = prio_ok ? a->prio : NULL,
                               .det_period = a->det ? a->det_period + 1 : 0,
                               .det_period_end = a->det_end,
                               .det_frames = a->det_end ? a->st.steps : 0,
                               .det_episodes = a->det_end ? a->st.episodes : 0,
                               .det_returns = nr ? det_returns : NULL,
                               .det_n_returns = (uint32_t)nr};
    if (a->det_end) {
        a->det_ret_n = a->det_ret_next = 0;
    }
    a->det_end = 0;
    if (a->fm) {
        wire_batch_t *b = &m.u.batch;
        b->obs = b->next_obs = NULL;
        b->frame_stack = (uint32_t)a->cfg.env.frame_stack;
        b->first_frame = a->fq_first;
        b->frame_count = a->fq_n;
        b->frames = a->fq;
        b->frame_prev = a->fq_prev;
        b->obs_frames = o->obs_tag;
        b->next_frames = o->next_tag;
        b->frame_codec = (uint32_t)a->cfg.replay.compress;
        b->frame_sizes = a->fq_sizes;
        a->fq_first += a->fq_n;
        a->fq_n = 0;
        a->fq_bytes = 0;
    }
    s_enqueue(a, &m);
    s_flush_pending(a);
}

// Ships the first `count` rows of a->out as one batch, and moves the remaining rows to the
// front. (Their n-step returns are finite: every env's rewards are bounded, a Python env's
// by PYENV_REWARD_MAX, so that n_step of them cannot overflow float32.)
static void s_ship(actor_t *a, int count) {
    nstep_out_t *o = &a->out;
    size_t OB = a->obs_bytes;
    s_send_rows(a, count);
    int rest = o->count - count;
    if (rest > 0) {
        size_t ro = (size_t)count * OB, no = (size_t)rest * OB;
        memmove(o->obs, o->obs + ro, no);
        memmove(o->next_obs, o->next_obs + ro, no);
        memmove(o->obs_tag, o->obs_tag + count, (size_t)rest * sizeof(uint64_t));
        memmove(o->next_tag, o->next_tag + count, (size_t)rest * sizeof(uint64_t));
        memmove(o->actions, o->actions + (size_t)count * a->action_bytes,
                (size_t)rest * a->action_bytes);
        memmove(o->rewards, o->rewards + count, (size_t)rest * sizeof(float));
        memmove(o->discounts, o->discounts + count, (size_t)rest * sizeof(float));
    }
    o->count = rest;
}

// ---------------------------------------------------------------------------------------
// Weights

// The replay server's insert socket, silent this long with batches unacknowledged, is
// reconnected by hand, for the reasons weights_client_revive gives for the weights link.
#define SILENT_RECONNECT_MS WEIGHTS_SILENT_MS

static void s_log_reconnect(actor_t *a, const char *who, const char *ep) {
    log_every(&a->reconnect_log, LOG_INTERVAL_MS, LOG_WARN, "%s at %s silent for %d s: reconnected",
              who, ep, SILENT_RECONNECT_MS / 1000);
}

// Reads every queued answer to the weights requests (at most WEIGHTS_DRAIN_MAX per call, so a
// flood cannot take the loop) and stages the newest valid one: garbage before or after valid
// weights cannot hide them. "Newest" is by version (wire_weights_judge), not by arrival: a
// killed learner's last answers can still be queued when its successor's arrive. A valid
// answer of a version taken or held already means the request was served: the next one goes
// out at once, and the learner holds it until it has a newer version (weights_client.h).
// Anything else (garbage, another network's size, an older version) leaves the request to
// its resend timeout, so a peer answering with what the actor refuses cannot make it ask
// again and again.
static int s_reader_weights(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    actor_t *a = arg;
    wire_msg_t m;
    int answered = 0;
    for (int i = 0; i < WEIGHTS_DRAIN_MAX; i++) {
        int rc = net_recv_decode(sock, a->dec, &m);
        if (rc == APEX_EAGAIN) {
            break;
        }
        if (rc == APEX_OK && m.type == WIRE_MSG_WEIGHTS && a->det) {
            // Only the answer for the target waited for is taken; any other (the learner's
            // heartbeat while the target is not known yet) says the link is alive.
            weights_client_heard(&a->weights, clock_now_ms());
            if (a->det_want && m.u.weights.det_target == a->det_want) {
                memcpy(a->staged, m.u.weights.params, a->n_weights * sizeof(float));
                a->staged_version = m.u.weights.version;
                a->det_got = 1;
            }
            answered = 1;
            continue;
        }
        if (rc == APEX_OK && m.type == WIRE_MSG_WEIGHTS) {
            int64_t now = clock_now_ms();
            uint64_t v = m.u.weights.version;
            weights_client_heard(&a->weights, now);
            wire_weights_verdict w = wire_weights_judge(v, a->has_staged, a->staged_version,
                                                        now - a->staged_seen_ms);
            if (w == WIRE_WEIGHTS_SAME) {
                a->staged_seen_ms = now;
                answered = 1;
                continue;
            }
            if (w == WIRE_WEIGHTS_STALE) {
                log_every(&a->old_log, LOG_INTERVAL_MS, LOG_INFO,
                          "ignored weights " WIRE_VERSION_FMT " older than " WIRE_VERSION_FMT
                          " (a restarted learner's old connection)",
                          WIRE_VERSION_ARGS(v), WIRE_VERSION_ARGS(a->staged_version));
                continue;
            }
            memcpy(a->staged, m.u.weights.params, a->n_weights * sizeof(float));
            a->staged_version = v;
            a->staged_seen_ms = now;
            a->has_staged = 1;
            answered = 1;
            continue;
        }
        a->st.bad_messages++;
        log_every(&a->bad_log, LOG_INTERVAL_MS, LOG_WARN, "dropped bad weights message: %s",
                  rc == APEX_OK ? "wrong message kind" : wire_decoder_last_error(a->dec));
    }
    if (answered) {
        weights_client_answered(&a->weights);
        if (!a->det) {
            weights_client_ask(&a->weights, a->has_staged ? a->staged_version : 0, clock_now_ms());
        } else if (a->det_want && !a->det_got) {
            weights_client_ask(&a->weights, 0, clock_now_ms()); // still waiting: ask again
        }
    }
    return 0;
}

// [run] deterministic. A period ends after weight_sync_steps frames, as a sync does: its
// rows go out at once, the last batch marked (rows or not), so that the replay can store
// every actor's period p before any actor's p + 1. The next period p + 1 acts with the
// weights of target p + 1: those the learner had after training every request the replay had
// served when all actors' periods up to p - 1 were stored (learner.c s_det_version); the
// actor waits for them.
static void s_take_episodes(actor_t *a);

static void s_det_end_period(actor_t *a) {
    s_take_episodes(a); // (every episode that ended by this step)
    int B = (int)a->cfg.actor.send_batch;
    while (a->out.count > B) {
        s_ship(a, B);
    }
    a->det_end = 1;
    s_ship(a, a->out.count);
    a->det_period++;
    a->st.weight_syncs++;
    a->det_want = a->det_period;
    a->det_got = 0;
    a->weights.det_target = a->det_want;
    weights_client_ask(&a->weights, 0, clock_now_ms());
}

// Whether a deterministic actor may step: its period's weights are in, and its window has
// room for what a step can send (it waits for acks rather than drop a batch as a normal
// actor does with a full window: a dropped batch would be a hole in the schedule).
static int s_det_ready(actor_t *a) {
    if (a->det_want) {
        s_reader_weights(a->loop, a->weights.sock, a);
        if (!a->det_got) {
            if (weights_client_revive(&a->weights, clock_now_ms())) {
                s_log_reconnect(a, "learner", a->weights.endpoint);
            }
            weights_client_ask(&a->weights, 0, clock_now_ms());
            return 0;
        }
        memcpy(a->wdata, a->staged, a->n_weights * sizeof(float));
        a->st.weights_version = a->staged_version;
        a->st.weight_updates++;
        a->det_want = 0;
    }
    int B = (int)a->cfg.actor.send_batch;
    int room = ((int)a->cfg.actor.envs_per_actor + B - 1) / B + 3;
    return a->pending_len == 0 || a->pending_cap - a->pending_len >= room;
}

// Every weight_sync_steps: the staged weights, if newer, become the acting network. The
// learner answers a held request within a second, so no weights for long means a dead link.
static void s_sync_weights(actor_t *a) {
    a->st.weight_syncs++;
    s_reader_weights(a->loop, a->weights.sock, a);
    if (a->has_staged && a->staged_version != a->st.weights_version) {
        if (a->staged_version >> 32 != a->st.weights_version >> 32) {
            // Once per learner incarnation (a start or restart): what a log reader needs to
            // follow the actor across learner restarts.
            log_info("acting with weights " WIRE_VERSION_FMT " (learner incarnation %u)",
                     WIRE_VERSION_ARGS(a->staged_version), (unsigned)(a->staged_version >> 32));
        }
        memcpy(a->wdata, a->staged, a->n_weights * sizeof(float));
        a->st.weights_version = a->staged_version;
        a->st.weight_updates++;
    }
    int64_t now = clock_now_ms();
    if (weights_client_revive(&a->weights, now)) {
        s_log_reconnect(a, a->cfg.endpoints.relay[0] ? "weights relay" : "learner",
                        a->weights.endpoint);
        return; // the next request at the next sync (weights_client_revive)
    }
    weights_client_ask(&a->weights, a->has_staged ? a->staged_version : 0, now);
}

// ---------------------------------------------------------------------------------------
// The step

static int s_rate_limited(actor_t *a) {
    int64_t rate = a->cfg.actor.max_steps_per_s;
    if (rate <= 0) {
        return 0;
    }
    int64_t now = clock_now_ms();
    if (a->rate_start_ms == 0 || now - a->rate_start_ms > 1000) {
        a->rate_start_ms = now; // a fresh window: no catching up on a burst after a stall
        a->rate_start_steps = a->vector_steps;
    }
    double allowed = (double)rate * (double)(now - a->rate_start_ms + 1) / 1000.0;
    return (double)(a->vector_steps - a->rate_start_steps) >= allowed;
}

// [env] frame_stack > 1: group g's results as stacks. Each env's new frame joins its stack;
// an episode that ended gives its transition the stack with the final frame (stk_final) and
// restarts its stack with the next episode's first frame, K times; so does an env's first
// frame, and a step that did not happen (a void or faulted step, after which the env starts
// over). r's obs and final_obs then point at the group's stacks.
// Frame mode: queues a new frame for the next batch and returns its number. prev: the number
// of the frame before it in its stack, or UINT64_MAX for an episode's first frame.
static uint64_t s_frame(actor_t *a, const uint8_t *frame, uint64_t prev) {
    APEX_ASSERT(a->fq_n < a->fq_cap); // s_idle_step ships before a step could overflow it
    uint64_t fid = a->fq_first + a->fq_n;
    if (a->fc) {
        // Each frame alone, as the replay keeps it; a context made once: no allocation.
        size_t n = fcodec_compress(a->fc, frame, a->frame_bytes, a->fq + a->fq_bytes, a->fq_bound);
        APEX_ASSERT(n > 0); // the destination has the codec's bound
        a->fq_sizes[a->fq_n] = (uint32_t)n;
        a->fq_bytes += n;
    } else {
        memcpy(a->fq + (size_t)a->fq_n * a->frame_bytes, frame, a->frame_bytes);
    }
    a->fq_prev[a->fq_n++] = prev == UINT64_MAX ? 0 : (uint32_t)(fid - prev);
    return fid;
}

static void s_stack(actor_t *a, int g, envsrc_result_t *r) {
    if (!a->stk_live) {
        return;
    }
    const size_t FB = a->frame_bytes, SB = a->obs_bytes;
    const int e0 = g * a->GE;
    for (int j = 0; j < a->GE; j++) {
        const int e = e0 + j;
        const uint8_t *frame = (const uint8_t *)r->obs + (size_t)j * FB;
        if (!a->stk_live[e] || r->status[j] != PYENV_OK) {
            framestack_reset(&a->fs, e, frame);
            a->stk_live[e] = 1;
            if (a->fm) {
                a->cur_fid[e] = s_frame(a, frame, UINT64_MAX);
            }
        } else if (r->terminated[j] || r->truncated[j]) {
            const uint8_t *final = (const uint8_t *)r->final_obs + (size_t)j * FB;
            framestack_final(&a->fs, e, final, a->stk_final + (size_t)e * SB);
            framestack_reset(&a->fs, e, frame);
            if (a->fm) {
                a->final_fid[e] = s_frame(a, final, a->cur_fid[e]);
                a->cur_fid[e] = s_frame(a, frame, UINT64_MAX);
            }
        } else {
            framestack_push(&a->fs, e, frame);
            if (a->fm) {
                a->cur_fid[e] = s_frame(a, frame, a->cur_fid[e]);
            }
        }
    }
    r->obs = framestack_obs(&a->fs, e0);
    r->final_obs = a->stk_final + (size_t)e0 * SB;
}

// Folds group g's results into n-step transitions: env e = g * GE + j stepped from
// obs_t[e] with action e of act. A void step (an env fault, a lost worker, a continuous
// env's diverged simulation: status not OK) is not folded, and the env's pending steps are
// dropped with the episode they belonged to.
static void s_fold(actor_t *a, int g, const envsrc_result_t *r) {
    const size_t OB = a->obs_bytes;
    const int e0 = g * a->GE;
    if (a->ou) {
        // An episode that ended (or a void step, which resets the env) starts the next with
        // no noise carried over: x = 0.
        const size_t D = (size_t)a->action_dim;
        for (int j = 0; j < a->GE; j++) {
            if (r->status[j] != PYENV_OK || r->terminated[j] || r->truncated[j]) {
                memset(a->ou + (size_t)(e0 + j) * D, 0, D * sizeof(double));
            }
        }
    }
    if (r->ok == a->GE && a->G == 1 && !a->fm) { // all envs stepped: the built-in envs' case
        nstep_push_all(&a->nstep, a->obs_t, a->act, r->rewards, r->obs, r->final_obs, r->terminated,
                       r->truncated, &a->out);
        return;
    }
    const uint8_t *obs = r->obs, *final = r->final_obs;
    for (int j = 0; j < a->GE; j++) {
        int e = e0 + j;
        if (r->status[j] != PYENV_OK) {
            nstep_clear_env(&a->nstep, e);
            continue;
        }
        int ended = r->terminated[j] || r->truncated[j];
        // Frame mode: the rows carry the numbers of their stacks' newest frames (0 otherwise).
        uint64_t obs_tag = a->fm ? a->fid_t[e] : 0;
        uint64_t next_tag = a->fm ? (ended ? a->final_fid[e] : a->cur_fid[e]) : 0;
        nstep_push_tag(&a->nstep, e, a->obs_t + (size_t)e * OB, obs_tag,
                       a->act + (size_t)e * a->action_bytes, r->rewards[j],
                       (ended ? final : obs) + (size_t)j * OB, next_tag, r->terminated[j],
                       r->truncated[j], &a->out);
    }
}

// Uniformly random actions for envs off .. off + n - 1: discrete in [0, n_actions), or each
// continuous component in [low, high] (the bounds the actors clip to).
static void s_random_actions(actor_t *a, size_t off, int n) {
    const int D = a->action_dim;
    if (D == 0) {
        for (int i = 0; i < n; i++) {
            a->actions[off + (size_t)i] = (int32_t)(rng_next_u64(&a->rng) % (uint64_t)a->n_actions);
        }
        return;
    }
    const config_env_t *ev = &a->cfg.env;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < D; j++) {
            float u = (float)rng_uniform(&a->rng);
            float v = ev->action_low[j] + u * (ev->action_high[j] - ev->action_low[j]);
            a->cont[(off + (size_t)i) * (size_t)D + (size_t)j] =
                v < ev->action_high[j] ? v : ev->action_high[j]; // rounding never passes high
        }
    }
}

// One group step (see envsrc.h): act on group g's observations, send the actions, then
// receive the next group's results (with G = 1, g's own: the lock step) and fold them.
// With the Python bridge and G = 2, Python steps group g while the actor infers for g + 1.
static int s_idle_step(loop_t *loop, void *arg) {
    (void)loop;
    actor_t *a = arg;
    if (a->max_vector_steps && a->vector_steps >= a->max_vector_steps) {
        return -1;
    }
    if (s_rate_limited(a) || (a->det && !s_det_ready(a))) {
        return 0;
    }
    const int g = a->group, GE = a->GE, A = a->n_actions;
    const size_t off = (size_t)g * (size_t)GE;
    const envsrc_result_t *cur = &a->res[g];
    nn_forward(&a->state, &a->params, cur->obs, GE, a->q);
    const int D = a->action_dim;
    if (D > 0) {
        // q holds mu(s) (GE, D): noise of each env's sigma, clipped to the bounds.
        const config_env_t *ev = &a->cfg.env;
        if (a->ou) {
            explore_ou(a->cont + off * (size_t)D, a->ou + off * (size_t)D, a->q, a->eps + off,
                       a->cfg.actor.noise_theta, GE, D, ev->action_low, ev->action_high, &a->rng);
        } else {
            explore_gaussian(a->cont + off * (size_t)D, a->q, a->eps + off, GE, D, ev->action_low,
                             ev->action_high, &a->rng);
        }
    } else {
        explore_select(a->actions + off, a->q, a->eps + off, GE, A, &a->rng);
    }
    if (a->st.steps < (uint64_t)a->cfg.actor.random_steps) {
        // [actor] random_steps (TD3's start_steps): uniform actions over the whole space, drawn
        // after the policy's (whose draws stay in the stream, so a run with and one without
        // differ only in these actions).
        s_random_actions(a, off, GE);
    }
    // nstep needs s_t, but the source moves on (auto-reset): keep a copy.
    memcpy(a->obs_t + off * a->obs_bytes, cur->obs, (size_t)GE * a->obs_bytes);
    if (a->fm) {
        memcpy(a->fid_t + off, a->cur_fid + off, (size_t)GE * sizeof(uint64_t));
    }
    if (D > 0) {
        envsrc_send_cont(a->src, g, a->cont + off * (size_t)D);
    } else {
        envsrc_send(a->src, g, a->actions + off);
    }
    const int h = (g + 1) % a->G;
    envsrc_recv(a->src, h, &a->res[h]);
    s_stack(a, h, &a->res[h]);
    s_fold(a, h, &a->res[h]);
    a->group = h;
    // Frames are the env steps that happened (void ones are not frames).
    envsrc_stats_t es;
    envsrc_get_stats(a->src, &es);
    // Void steps count toward the sync period too: an actor whose every step diverges (a
    // policy that drives a MuJoCo model off) must still take the learner's next weights.
    a->steps_since_sync += (es.steps - a->st.steps) + (es.void_steps - a->st.void_steps);
    a->st.steps = es.steps;
    a->st.env_faults = es.env_faults;
    a->st.episodes_dropped = es.episodes_dropped;
    if (es.void_steps != a->st.void_steps) {
        a->st.void_steps = es.void_steps;
        log_every(&a->void_log, LOG_INTERVAL_MS, LOG_WARN,
                  "%llu void steps (a diverging simulation: the env was reset and its pending "
                  "transitions dropped)",
                  (unsigned long long)es.void_steps);
    }
    if (h == 0) {
        a->vector_steps++; // every group stepped once more
    }
    int B = (int)a->cfg.actor.send_batch;
    while (a->out.count >= B) {
        s_ship(a, B);
    }
    // Frame mode: frames come with every step, rows only once their n steps are done (and
    // not at all after void steps), so the frames may fill a batch first: ship what there is.
    if (a->fm && a->fq_n + 2 * (uint32_t)a->cfg.actor.envs_per_actor > a->fq_cap) {
        s_ship(a, a->out.count < B ? a->out.count : B);
    }
    // weight_sync_steps counts env steps (frames), as in the Ape-X paper (400).
    if (a->steps_since_sync >= (uint64_t)a->cfg.actor.weight_sync_steps) {
        a->steps_since_sync = 0;
        if (a->det) {
            s_det_end_period(a);
        } else {
            s_sync_weights(a);
        }
    }
    return 1;
}

// ---------------------------------------------------------------------------------------
// Acks, stats, timers

static int s_reader_acks(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    actor_t *a = arg;
    wire_msg_t m;
    for (int i = 0, rc; i < MAX_DRAIN && (rc = net_recv_decode(sock, a->dec, &m)) != APEX_EAGAIN;
         i++) {
        if (rc == APEX_OK && m.type == WIRE_MSG_INSERT_ACK &&
            m.u.insert_ack.actor_id == (uint32_t)a->index) {
            // One ack may carry many seqs (the server coalesces); each is checked alone.
            s_take_ack(a, m.u.insert_ack.seq);
            for (uint32_t k = 0; k < m.u.insert_ack.n_more; k++) {
                s_take_ack(a, m.u.insert_ack.more[k]);
            }
            a->last_ack_ms = clock_now_ms();
        } else {
            a->st.bad_messages++;
            log_every(&a->ack_log, LOG_INTERVAL_MS, LOG_WARN,
                      "dropped bad message from the replay server at %s: %s; %llu bad in all",
                      a->cfg.endpoints.replay_insert,
                      rc != APEX_OK ? wire_decoder_last_error(a->dec)
                                    : (m.type == WIRE_MSG_INSERT_ACK ? "ack for another actor"
                                                                     : "wrong message kind"),
                      (unsigned long long)a->st.bad_messages);
        }
    }
    return 0;
}

static void s_publish_stats(actor_t *a) {
    pthread_mutex_lock(&a->st_lock);
    a->st_shared = a->st;
    pthread_mutex_unlock(&a->st_lock);
}

static int s_timer_flush(loop_t *loop, void *arg) {
    (void)loop;
    actor_t *a = arg;
    int64_t now = clock_now_ms();
    if (a->pending_len > 0 &&
        now - a->last_ack_ms > APEX_MAX(SILENT_RECONNECT_MS, 2 * a->cfg.actor.ack_timeout_ms)) {
        zmq_disconnect(a->insert_sock, a->cfg.endpoints.replay_insert);
        net_connect(a->insert_sock, a->cfg.endpoints.replay_insert);
        s_log_reconnect(a, "replay server", a->cfg.endpoints.replay_insert);
        a->last_ack_ms = now;
    }
    s_flush_pending(a);
    s_publish_stats(a);
    return atomic_load(&a->stop_requested) ? -1 : 0;
}

// Takes the episodes the envs finished: into the next ActorStats (up to EPISODES_CAP; the
// returns of more are not reported, their count is) and, in a deterministic run, into the
// period's ring of returns. Called by the stats timer and at a period's end, so that a
// period's episodes are those its steps finished, whenever the timer fires.
static void s_take_episodes(actor_t *a) {
    vecenv_episode_t spill[64];
    for (;;) {
        int room = EPISODES_CAP - a->ep_n;
        vecenv_episode_t *e = room > 0 ? a->episodes + a->ep_n : spill;
        int n = envsrc_drain_episodes(a->src, e, room > 0 ? room : (int)APEX_ARRAY_LEN(spill));
        if (n == 0) {
            return;
        }
        for (int i = 0; i < n; i++) {
            // Saturated at +-FLT_MAX: a return past float32 (env rewards near 3.4e38) would
            // make the learner refuse the whole message, frames and all (the wire takes
            // finite ones).
            double r = e[i].ret;
            float rf = r > FLT_MAX ? FLT_MAX : r < -FLT_MAX ? -FLT_MAX : (float)r;
            if (room > 0) {
                a->ep_returns[a->ep_n + i] = rf;
                a->ep_lengths[a->ep_n + i] = (uint32_t)e[i].len;
                a->ep_eps[a->ep_n + i] = a->eps[e[i].env];
            }
            if (a->det) {
                a->det_ret[a->det_ret_next] = rf;
                a->det_ret_next = (a->det_ret_next + 1) % WIRE_DET_RETURNS_MAX;
                a->det_ret_n += a->det_ret_n < WIRE_DET_RETURNS_MAX;
            }
        }
        a->ep_n += room > 0 ? n : 0;
        a->st.episodes += (uint64_t)n;
    }
}

static int s_timer_stats(loop_t *loop, void *arg) {
    (void)loop;
    actor_t *a = arg;
    s_take_episodes(a);
    int n = a->ep_n;
    a->ep_n = 0; // (sent or not: best effort, below)
    wire_msg_t m = {.type = WIRE_MSG_ACTOR_STATS};
    m.u.actor_stats = (wire_actor_stats_t){.actor_id = (uint32_t)a->index,
                                           .frames = a->st.steps,
                                           .frames_delta = a->st.steps - a->frames_reported,
                                           .weights_version = a->st.weights_version,
                                           .dropped_batches = a->st.batches_dropped,
                                           .env_faults = a->st.env_faults,
                                           .episodes_dropped = a->st.episodes_dropped,
                                           .n_episodes = (uint32_t)n,
                                           .returns = a->ep_returns,
                                           .lengths = a->ep_lengths,
                                           .epsilons = a->ep_eps};
    wire_encode(&m, &a->scratch);
    // Stats are best effort: while the learner is away the episodes are dropped, not
    // buffered; the frames of an unsent message go with the next one.
    if (net_send(a->stats_sock, a->scratch.data, a->scratch.len, ZMQ_DONTWAIT) == APEX_OK) {
        a->frames_reported = a->st.steps;
    }
    return 0;
}

static int s_timer_status(loop_t *loop, void *arg) {
    (void)loop;
    actor_t *a = arg;
    log_info("steps %llu  episodes %llu  void %llu  batches sent %llu re-sent %llu acked %llu "
             "dropped %llu unacked %d  weights " WIRE_VERSION_FMT,
             (unsigned long long)a->st.steps, (unsigned long long)a->st.episodes,
             (unsigned long long)a->st.void_steps, (unsigned long long)a->st.batches_sent,
             (unsigned long long)a->st.batches_resent, (unsigned long long)a->st.batches_acked,
             (unsigned long long)a->st.batches_dropped, a->pending_len,
             WIRE_VERSION_ARGS(a->st.weights_version));
    return 0;
}

// Asked to stop: the complete transitions not yet shipped go out, and the actor waits for the
// replay to acknowledge what it sent (re-sending as it always does), for up to
// ack_timeout_ms (at most STOP_DRAIN_MAX_MS: a launcher kills a daemon that takes longer).
// Launchers stop the actors before the replay, so a stop loses no transition the replay can
// take. Only a replay that is answering is waited for (it acknowledged a batch within the
// last ack_timeout_ms): one that is down or never answered would only make the stop slow;
// what stays unacknowledged is said.
static void s_drain_at_stop(actor_t *a) {
    if (a->det) {
        // (a deterministic run's batches wait at the replay for their period's turn, which a
        // run that stops does not reach: none would be acknowledged)
        return;
    }
    if (a->out.count > 0) {
        s_ship(a, a->out.count);
    }
    int64_t wait = APEX_MIN(a->cfg.actor.ack_timeout_ms, STOP_DRAIN_MAX_MS);
    int64_t t0 = clock_now_ms(), deadline = t0 + wait;
    if (a->st.batches_acked == 0 || t0 - a->last_ack_ms > a->cfg.actor.ack_timeout_ms) {
        deadline = t0; // (not answering: nothing to wait for)
    }
    uint64_t acked0 = a->st.batches_acked;
    int unacked0 = a->pending_len;
    while (a->pending_len > 0 && clock_now_ms() < deadline) {
        s_flush_pending(a);
        zmq_pollitem_t it = {.socket = a->insert_sock, .events = ZMQ_POLLIN};
        zmq_poll(&it, 1, 20);
        s_reader_acks(a->loop, a->insert_sock, a);
    }
    if (unacked0 > 0) {
        log_info("stopping: %llu of %d unacknowledged batches acknowledged in %lld ms%s",
                 (unsigned long long)(a->st.batches_acked - acked0), unacked0,
                 (long long)(clock_now_ms() - t0),
                 a->pending_len ? " (the replay did not answer for the rest: they are lost)" : "");
    }
}

int actor_run(actor_t *self, uint64_t max_vector_steps) {
    self->max_vector_steps = max_vector_steps;
    if (!self->det) {
        s_sync_weights(self);
    }
    loop_run(self->loop);
    s_drain_at_stop(self);
    s_publish_stats(self);
    // Every seq below `first unacked` was acknowledged (unless dropped): tests compare that
    // with the replay's exactly-once marks (apex-replay --dump) to prove no acked batch lost;
    // bench/fanout.py sums the acknowledged transitions against the replay's inserted count.
    log_info("stopping after %llu steps, %llu episodes; %llu batches sent, %llu acked, %llu "
             "dropped, %d unacked from seq %llu (epoch %llu); %llu transitions acknowledged; "
             "acting with weights " WIRE_VERSION_FMT,
             (unsigned long long)self->st.steps, (unsigned long long)self->st.episodes,
             (unsigned long long)self->st.batches_sent, (unsigned long long)self->st.batches_acked,
             (unsigned long long)self->st.batches_dropped, self->pending_len,
             (unsigned long long)self->pending_seq0, (unsigned long long)self->epoch,
             (unsigned long long)self->st.rows_acked, WIRE_VERSION_ARGS(self->st.weights_version));
    return 0;
}

void actor_stop(actor_t *self) { atomic_store(&self->stop_requested, 1); }

void actor_get_stats(const actor_t *self, actor_stats_t *out) {
    // Locking does not change the logical state: the cast only lets a const actor be read.
    pthread_mutex_t *lock = (pthread_mutex_t *)&self->st_lock;
    pthread_mutex_lock(lock);
    *out = self->st_shared;
    pthread_mutex_unlock(lock);
}

const struct loop *actor_loop(const actor_t *self) { return self->loop; }
