// learner.c: see learner.h.
#define LOG_MODULE "learner"
#include "learner.h"

#include "apex.h"
#include "blas.h"
#include "clock.h"
#include "fileio.h"
#include "group.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "net.h"
#include "security.h"
#include "shards.h"
#include "train.h"
#include "wire.h"
#include "xalloc.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define REQUEST_TICK_MS 20 // re-issue requests that could not be sent / timed out
#define REPUBLISH_MS 1000  // a held weights request is answered after this long regardless
#define WAITERS_MAX 1024   // weights requests held until the next version (s_hold)
#define STATUS_LOG_MS 5000
#define STOP_CHECK_MS 50
#define MAX_DRAIN 64
#define LIVENESS_LOG_MS 5000
#define GROUP_IDLE_ROUND_MS 50 // a rank without a batch still joins a round this often

// A round's values (s_group_round), summed over the ranks: flags, then each rank's totals.
enum {
    R_READY, // ranks with a batch: all of them -> a training step
    R_STOP,  // ranks that want to stop
    R_CKPT,  // rank 0's checkpoint timer fired
    R_ROWS,  // sampled rows trained
    R_WAIT_NS,
    R_TRAIN_NS,
    R_OPTIM_NS,
    R_NET_NS,
    R_COMM_NS,
    R_BAD, // bad messages
    R_LOSS,
    R_N
};

typedef enum { SLOT_FREE = 0, SLOT_IN_FLIGHT, SLOT_READY } s_slot_state;

// A weights request held until the learner has a newer version (s_hold).
typedef struct {
    uint8_t id[NET_ROUTING_ID_MAX];
    uint8_t id_len;
    int64_t since_ms;
} s_waiter;

// One prefetch slot: a request in flight, then the batches it brought back
// ([learner] batches_per_request of them, trained one after the other).
typedef struct {
    s_slot_state state;
    uint64_t id;
    int64_t sent_ms;
    uint64_t arrival; // order in which batches became ready
    int shard;        // the replay shard asked (its reply's keys go back there)
    uint32_t count;   // rows per batch
    uint32_t next;    // the next batch to train, of [learner] batches_per_request
    uint64_t *keys;
    float *is_w, *rewards, *discounts;
    uint8_t *obs, *next_obs; // observations as the replay stores them (the run's dtype)
    int32_t *actions;
} s_slot;

struct learner {
    apex_config_t cfg;
    char run_dir[CONFIG_STR_LEN + 64];
    char ckpt_path[CONFIG_STR_LEN + 96];
    trainer_t *trainer;
    void *ctx, *weights_sock, *stats_sock;
    shards_t *shards; // the replay: one DEALER per shard (learner/shards.h)
    security_t *security;
    wire_decoder_t *dec;
    wire_buf_t out;
    loop_t *loop;
    s_slot *slots;
    int n_slots;
    uint64_t next_id, next_arrival;
    float *priorities;
    uint64_t weights_version;
    int64_t idle_since_ns; // start of the current wait for data; 0 = not waiting
    int64_t last_reply_ms; // liveness of the replay server
    uint64_t timeouts, late_replies, not_ready, bad_messages, dropped_updates;
    // Weights (s_reader_weights): the current version encoded once, shared by every reply
    // (zmq_msg_copy counts references), and the requests held until the next version.
    zmq_msg_t weights_msg;
    int has_weights_msg;
    s_waiter *waiters; // (WAITERS_MAX)
    int n_waiters;
    uint64_t weights_requests, weights_replies, bad_weights_requests, unheld_requests;
    int started; // first OK reply seen
    int resumed; // from a checkpoint, whose counters are in resumed_extra
    ckpt_extra_t resumed_extra;
    char pub_ep[CONFIG_STR_LEN], stats_ep[CONFIG_STR_LEN]; // as bound (ephemeral ports resolved)
    // Mirror of trainer_steps for learner_updates(), the only state other threads read.
    atomic_int_fast64_t updates;
    metrics_t metrics;
    log_limiter_t bad_log, live_log, metrics_log, weights_log, tb_log;
    atomic_int stop_requested;
    // Learner group (group.h; NULL: a single learner). The ranks step together: every step
    // is preceded by a round (s_group_idle) that tells whether every rank has a batch, and
    // carries the stop and checkpoint flags and each rank's totals for rank 0's metrics.
    group_t *group;
    int rank, n_ranks;
    int group_stopped;              // a round said stop: no further round
    int ckpt_due;                   // rank 0: the checkpoint timer fired since the last round
    int64_t last_round_ms;          // a rank without a batch joins a round this often
    double own[R_N];                // this rank's totals (from R_ROWS on)
    double sum[R_N], sum_prev[R_N]; // rank 0: the group's, at the last round / metrics row
};

void learner_checkpoint_path(const apex_config_t *cfg, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s/checkpoint.bin", cfg->run.out_dir, cfg->run.name);
}

// ---------------------------------------------------------------------------------------
// Start-up

static void s_train_config(const apex_config_t *c, train_config_t *t) {
    train_config_default(t);
    nn_config_from_run(&t->net, c);
    t->batch_size = (int)c->learner.batch_size;
    optim_config_default(&t->optim,
                         c->learner.optimizer == CONFIG_OPTIM_RMSPROP ? OPTIM_RMSPROP : OPTIM_ADAM);
    t->optim.lr = (float)c->learner.lr;
    t->lr_end = (float)c->learner.lr_end;
    t->lr_steps = c->learner.lr_steps;
    t->optim.adam_beta1 = (float)c->learner.adam_beta1;
    t->optim.adam_beta2 = (float)c->learner.adam_beta2;
    t->optim.adam_eps = (float)c->learner.adam_eps;
    t->optim.rms_decay = (float)c->learner.rms_decay;
    t->optim.rms_eps = (float)c->learner.rms_eps;
    t->grad_clip = (float)c->learner.grad_clip;
    t->huber_delta = (float)c->learner.huber_delta;
    t->target_update = c->learner.target_update;
    t->priority_eps = (float)c->learner.priority_eps;
    t->seed = (uint64_t)c->run.seed;
    t->zero_stage = (int)c->learner.zero_stage;
}

static void s_alloc_slots(learner_t *l) {
    // B: rows of every batch one request brings; OB: bytes of one observation.
    size_t B = (size_t)(l->cfg.learner.batch_size * l->cfg.learner.batches_per_request),
           OB = (size_t)l->cfg.env.obs_dim * wire_obs_elem_bytes((uint32_t)l->cfg.env.obs_dtype);
    l->n_slots = (int)l->cfg.learner.prefetch;
    l->slots = xcalloc((size_t)l->n_slots, sizeof *l->slots);
    for (int i = 0; i < l->n_slots; i++) {
        s_slot *s = &l->slots[i];
        s->keys = xmalloc(B * sizeof *s->keys);
        s->is_w = xmalloc(B * sizeof(float));
        s->obs = xmalloc(B * OB);
        s->next_obs = xmalloc(B * OB);
        s->rewards = xmalloc(B * sizeof(float));
        s->discounts = xmalloc(B * sizeof(float));
        s->actions = xmalloc(B * sizeof(int32_t));
    }
    l->priorities = xmalloc(B * sizeof(float));
}

static int s_load_or_init(learner_t *l, int resume) {
    struct stat st;
    if (!resume || stat(l->ckpt_path, &st) != 0) {
        log_info("starting from scratch (%s)", resume ? "no checkpoint yet" : "--no-resume");
        return 0;
    }
    ckpt_extra_t extra;
    int rc = trainer_load(l->trainer, l->ckpt_path, &extra);
    if (rc != APEX_OK) {
        log_error("cannot resume from %s: %s\n---> HINT: move the file away to start afresh, or "
                  "run with --no-resume",
                  l->ckpt_path, apex_strerror(rc));
        return -1;
    }
    // Versions published after that checkpoint died with the previous process, and actors
    // may already hold them: start a new incarnation (the high 32 bits), so that versions
    // stay strictly increasing across restarts whatever was lost.
    l->weights_version = ((extra.weights_version >> 32) + 1) << 32;
    l->resumed = 1;
    l->resumed_extra = extra;
    log_info("resumed from %s at update %lld, %llu frames, %llu episodes, %.0f s; weights "
             "" WIRE_VERSION_FMT,
             l->ckpt_path, (long long)trainer_steps(l->trainer),
             (unsigned long long)extra.user[CKPT_USER_FRAMES],
             (unsigned long long)extra.user[CKPT_USER_EPISODES],
             (double)extra.user[CKPT_USER_ELAPSED_MS] / 1000.0,
             WIRE_VERSION_ARGS(l->weights_version));
    return 0;
}

// Weights go out as answers to requests (WeightsRequest, proto/apex.proto) on a ROUTER, not
// on a PUB. A PUB or XPUB (even in manual mode) processes every subscription a peer sends
// inside libzmq, eagerly: libzmq 4.3.4 reads a peer's pipe to the end and stores each topic,
// and a peer that sends faster than that kept the learner's thread inside libzmq (a CI run:
// 2.5 GB, no weights published for a minute). A ROUTER only queues what a peer sends, up to
// RCVHWM per peer, and the learner reads MAX_DRAIN requests a turn, fairly over peers: a
// flooding peer is slowed by TCP and costs at most its own queue.
static void *s_open_weights(learner_t *l, const char *endpoint) {
    // A request is a few bytes. The bound also applies to ZMTP handshake commands, and a
    // CURVE HELLO/INITIATE is a few hundred bytes, so it cannot be tiny (tests/smoke/curve.sh).
    // SNDHWM: a peer gets one answer per request, so its queue fills only if it floods.
    net_opts_t o = {.sndhwm = 4, .rcvhwm = 16, .max_msg_bytes = 4096};
    void *sock = net_socket(l->ctx, ZMQ_ROUTER, &o);
    if (!sock || security_server(l->security, sock) ||
        net_bind(sock, endpoint, l->pub_ep, sizeof l->pub_ep) != 0) {
        net_close(&sock);
        return NULL;
    }
    return sock;
}

static int s_open_sockets(learner_t *l) {
    const apex_config_t *c = &l->cfg;
    wire_limits_t lim = {.obs_dim = (uint32_t)c->env.obs_dim,
                         .obs_dtype = (uint32_t)c->env.obs_dtype,
                         .n_actions = (uint32_t)c->env.n_actions,
                         .max_count = (uint32_t)c->replay.max_batch,
                         .max_episodes = 65536};
    size_t max_bytes = wire_max_message_bytes(&lim);
    l->dec = wire_decoder_new(&lim);
    wire_buf_init(&l->out, 4 * trainer_num_params(l->trainer) + 1024);
    l->ctx = zmq_ctx_new();
    l->security = security_new(l->ctx, c, "learner", -1, 1); // ZAP first, then servers
    if (!l->security) {
        return -1;
    }
    net_opts_t o_sample = {.max_msg_bytes = (int64_t)max_bytes};
    net_opts_t o_stats = {.max_msg_bytes = (int64_t)max_bytes, .rcvhwm = 1000};
    // Connected with ZMQ_IMMEDIATE: requests never queue on a connection that is not up
    // (nobody would answer them); the request timer re-issues them once a shard is reachable.
    // Every rank of a group samples; only rank 0 publishes weights and hears the actors.
    // With one replay server its limiter counts every rank's samples. With shards each rank
    // holds the ratio itself (learner/shards.h), so it holds its share: the ranks step
    // together and sample alike, so R shares of spi / R hold the run's spi.
    apex_config_t *share = xmalloc(sizeof *share); // large for a stack; shards_new copies
    *share = *c;
    if (l->n_ranks > 1 && c->replay.shards > 1) {
        share->replay.samples_per_insert /= l->n_ranks;
        share->replay.spi_tolerance /= l->n_ranks;
    }
    l->shards = shards_new(share, l->ctx, l->security, &o_sample);
    free(share);
    if (!l->shards) {
        return -1;
    }
    if (l->rank == 0) {
        l->weights_sock = s_open_weights(l, c->endpoints.learner_pub_bind);
        l->stats_sock = net_socket(l->ctx, ZMQ_PULL, &o_stats);
        if (!l->weights_sock || !l->stats_sock || security_server(l->security, l->stats_sock)) {
            return -1;
        }
    }
    if (l->rank == 0 && net_bind(l->stats_sock, c->endpoints.learner_stats_bind, l->stats_ep,
                                 sizeof l->stats_ep) != 0) {
        return -1;
    }
    return 0;
}

static int s_reader_sample(loop_t *loop, void *sock, void *arg);
static int s_reader_stats(loop_t *loop, void *sock, void *arg);
static int s_reader_weights(loop_t *loop, void *sock, void *arg);
static int s_idle_train(loop_t *loop, void *arg);
static int s_timer_requests(loop_t *loop, void *arg);
static int s_timer_metrics(loop_t *loop, void *arg);
static int s_timer_checkpoint(loop_t *loop, void *arg);
static int s_timer_status(loop_t *loop, void *arg);
static int s_timer_publish(loop_t *loop, void *arg);
static int s_group_init(learner_t *l);
static int s_group_idle(learner_t *l);
static void s_group_metrics(learner_t *l);
static void s_group_leave(learner_t *l);
static void s_group_report(learner_t *l, int at_stop);

learner_t *learner_new(const apex_config_t *cfg, int resume) {
    learner_t *l = xcalloc(1, sizeof *l);
    l->cfg = *cfg;
    if (s_group_init(l) != 0) {
        free(l);
        return NULL;
    }
    snprintf(l->run_dir, sizeof l->run_dir, "%s/%s", cfg->run.out_dir, cfg->run.name);
    learner_checkpoint_path(cfg, l->ckpt_path, sizeof l->ckpt_path);
    int e = fileio_mkdir_p(l->run_dir);
    if (e != 0) {
        log_error("cannot create run directory %s: %s", l->run_dir, strerror(e));
        learner_destroy(&l);
        return NULL;
    }
    blas_set_threads((int)cfg->learner.threads);
    train_config_t tc;
    s_train_config(cfg, &tc);
    l->trainer = trainer_new_group(&tc, l->group);
    if (!l->trainer || s_load_or_init(l, resume) != 0) {
        learner_destroy(&l);
        return NULL;
    }
    s_alloc_slots(l);
    l->waiters = xcalloc(WAITERS_MAX, sizeof *l->waiters);
    char path[CONFIG_STR_LEN + 96];
    snprintf(path, sizeof path, "%s/metrics.csv", l->run_dir);
    if (l->rank != 0) {
        memset(&l->metrics, 0, sizeof l->metrics); // rank 0 writes the group's metrics
    } else if (metrics_init(&l->metrics, path) != 0) {
        log_error("cannot open %s: %s", path, strerror(errno));
        learner_destroy(&l);
        return NULL;
    }
    // TensorBoard: <run dir>/tb/, a new file per learner process (a resumed one too).
    snprintf(path, sizeof path, "%s/tb", l->run_dir);
    l->metrics.tb = l->rank == 0 ? tbevents_new(path) : NULL;
    if (l->rank == 0 && !l->metrics.tb) {
        log_warn("no TensorBoard events (see above); metrics.csv is written as always");
    }
    if (l->resumed) {
        const ckpt_extra_t *x = &l->resumed_extra;
        metrics_resume(&l->metrics, x->user[CKPT_USER_FRAMES], x->user[CKPT_USER_EPISODES],
                       (int64_t)x->user[CKPT_USER_ELAPSED_MS]);
    }
    l->metrics.updates = (uint64_t)trainer_steps(l->trainer);
    atomic_store(&l->updates, trainer_steps(l->trainer));
    l->metrics.prev_updates = l->metrics.updates;
    if (s_open_sockets(l) != 0) {
        learner_destroy(&l);
        return NULL;
    }
    l->loop = loop_new();
    for (int k = 0; k < shards_count(l->shards); k++) {
        loop_add_reader(l->loop, shards_socket(l->shards, k), s_reader_sample, l);
    }
    security_attach(l->security, l->loop);
    loop_set_idle(l->loop, s_idle_train, l);
    loop_add_timer(l->loop, REQUEST_TICK_MS, s_timer_requests, l);
    if (l->rank == 0) {
        loop_add_reader(l->loop, l->stats_sock, s_reader_stats, l);
        loop_add_reader(l->loop, l->weights_sock, s_reader_weights, l);
        loop_add_timer(l->loop, cfg->learner.metrics_interval_ms, s_timer_metrics, l);
        loop_add_timer(l->loop, (int64_t)(cfg->learner.checkpoint_interval_s * 1000),
                       s_timer_checkpoint, l);
        loop_add_timer(l->loop, STATUS_LOG_MS, s_timer_status, l);
        loop_add_timer(l->loop, REPUBLISH_MS / 2, s_timer_publish, l); // held 1-1.5 s
    }
    l->last_reply_ms = clock_now_ms();
    char lr[80];
    if (cfg->learner.lr_steps > 0) {
        snprintf(lr, sizeof lr, "lr %g -> %g over %lld updates (now %g)", cfg->learner.lr,
                 cfg->learner.lr_end, (long long)cfg->learner.lr_steps,
                 (double)trainer_lr(l->trainer));
    } else {
        snprintf(lr, sizeof lr, "lr %g", cfg->learner.lr);
    }
    log_info("learner: %zu parameters, batch %lld, prefetch %d x %lld batches per request, %s, "
             "%s; replay at %s, weights on %s",
             trainer_num_params(l->trainer), (long long)cfg->learner.batch_size, l->n_slots,
             (long long)cfg->learner.batches_per_request,
             cfg->learner.optimizer == CONFIG_OPTIM_RMSPROP ? "rmsprop" : "adam", lr,
             cfg->endpoints.replay_sample, cfg->endpoints.learner_pub_bind);
    return l;
}

void learner_destroy(learner_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    learner_t *l = *self_p;
    loop_destroy(&l->loop);
    shards_destroy(&l->shards);
    net_close(&l->weights_sock);
    net_close(&l->stats_sock);
    if (l->has_weights_msg) {
        zmq_msg_close(&l->weights_msg);
    }
    free(l->waiters);
    security_destroy(&l->security);
    if (l->ctx) {
        zmq_ctx_term(l->ctx);
    }
    wire_decoder_destroy(&l->dec);
    wire_buf_fini(&l->out);
    metrics_fini(&l->metrics);
    for (int i = 0; i < l->n_slots; i++) {
        s_slot *s = &l->slots[i];
        free(s->keys);
        free(s->is_w);
        free(s->obs);
        free(s->next_obs);
        free(s->rewards);
        free(s->discounts);
        free(s->actions);
    }
    free(l->slots);
    free(l->priorities);
    trainer_destroy(&l->trainer);
    group_destroy(&l->group); // MPI_Finalize, last
    free(l);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Requests and replies

static float s_beta(const learner_t *l) {
    const config_learner_t *c = &l->cfg.learner;
    double f = (double)trainer_steps(l->trainer) / (double)c->beta_steps;
    return (float)(c->beta_start + (c->beta_end - c->beta_start) * (f < 1.0 ? f : 1.0));
}

// Frees the slots waiting on a shard that went down (their replies will not come), so
// that their requests go to the shards still up.
static void s_forget_down_shards(learner_t *l) {
    for (int k; (k = shards_take_down(l->shards)) >= 0;) {
        for (int i = 0; i < l->n_slots; i++) {
            if (l->slots[i].state == SLOT_IN_FLIGHT && l->slots[i].shard == k) {
                l->slots[i].state = SLOT_FREE;
                l->timeouts++;
            }
        }
    }
}

// Sends a request for every free slot, each to the shard shards_pick draws (the one server
// when [replay] shards = 1). A send that would block (not connected) leaves the slot free for
// the next tick; with several shards, the request goes to another one instead.
static void s_issue_requests(learner_t *l) {
    int64_t now = clock_now_ms();
    uint32_t rows = (uint32_t)(l->cfg.learner.batch_size * l->cfg.learner.batches_per_request);
    for (int i = 0; i < l->n_slots; i++) {
        s_slot *s = &l->slots[i];
        if (s->state != SLOT_FREE) {
            continue;
        }
        wire_sample_request_t req = {.id = l->next_id + 1,
                                     .batch_size = (uint32_t)l->cfg.learner.batch_size,
                                     .beta = s_beta(l),
                                     .batches = (uint32_t)l->cfg.learner.batches_per_request};
        int k, rc = APEX_EAGAIN;
        // A failed send takes its shard down (shards_send_request), so this ends within K tries.
        while ((k = shards_pick(l->shards, rows, now)) >= 0 &&
               (rc = shards_send_request(l->shards, k, &req, now)) != APEX_OK &&
               shards_count(l->shards) > 1) {
        }
        s_forget_down_shards(l);
        if (rc != APEX_OK) {
            return;
        }
        s->id = ++l->next_id;
        s->shard = k;
        s->sent_ms = now;
        s->state = SLOT_IN_FLIGHT;
    }
}

static s_slot *s_slot_for_id(learner_t *l, int shard, uint64_t id) {
    for (int i = 0; i < l->n_slots; i++) {
        if (l->slots[i].state == SLOT_IN_FLIGHT && l->slots[i].id == id &&
            l->slots[i].shard == shard) {
            return &l->slots[i];
        }
    }
    return NULL;
}

// A reply on shard k's socket.
static void s_take_reply(learner_t *l, int k, const wire_sample_reply_t *r) {
    int64_t now = clock_now_ms();
    int own = shards_take_reply(l->shards, k, r, now); // keeps the stats; 1: its own request
    l->metrics.replay = *shards_stats(l->shards);      // the run's: summed over the shards
    l->bad_messages += own < 0;
    if (own != 0) {
        return;
    }
    l->last_reply_ms = now;
    s_slot *s = s_slot_for_id(l, k, r->id);
    if (!s) {
        l->late_replies++; // answered after its timeout; its slot was already re-issued
        return;
    }
    uint32_t per_batch = (uint32_t)l->cfg.learner.batch_size,
             n_batches = (uint32_t)l->cfg.learner.batches_per_request;
    if (r->status != WIRE_SAMPLE_OK) {
        // NOT_READY: the replay's limiter is holding learning back (e.g. min_size_to_sample).
        // REFUSED: a configuration mismatch; logged, and retried so that a fixed replay
        // server is picked up.
        if (r->status == WIRE_SAMPLE_REFUSED) {
            log_every(&l->bad_log, LIVENESS_LOG_MS, LOG_ERROR,
                      "replay refused a sample of %lld (check [replay] capacity)",
                      (long long)l->cfg.learner.batch_size);
        }
        shards_not_served(l->shards, k, per_batch * n_batches);
        l->not_ready++;
        s->state = SLOT_FREE;
        return;
    }
    if (r->count != per_batch * n_batches) {
        l->bad_messages++;
        s->state = SLOT_FREE;
        return;
    }
    // The decoder checked the reply's dtype and dims against the run's; the network reads the
    // observations as they are (uint8 or float32, with the run's scale: model/nn.h).
    size_t B = r->count, OB = (size_t)r->obs_dim * wire_obs_elem_bytes(r->obs_dtype);
    memcpy(s->keys, r->keys, B * sizeof *s->keys);
    memcpy(s->is_w, r->is_weights, B * sizeof(float));
    memcpy(s->obs, r->obs, B * OB);
    memcpy(s->next_obs, r->next_obs, B * OB);
    memcpy(s->rewards, r->rewards, B * sizeof(float));
    memcpy(s->discounts, r->discounts, B * sizeof(float));
    memcpy(s->actions, r->actions, B * sizeof(int32_t));
    s->count = per_batch;
    s->next = 0;
    s->arrival = ++l->next_arrival;
    s->state = SLOT_READY;
    if (!l->started) {
        l->started = 1;
        log_info("first batch received (replay holds %llu transitions): training starts",
                 (unsigned long long)l->metrics.replay.size);
    }
}

static int s_reader_sample(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    learner_t *l = arg;
    int64_t t0 = clock_now_ns();
    int k = shards_index(l->shards, sock);
    wire_msg_t m;
    for (int i = 0, rc; i < MAX_DRAIN && (rc = net_recv_decode(sock, l->dec, &m)) != APEX_EAGAIN;
         i++) {
        if (rc == APEX_OK && m.type == WIRE_MSG_SAMPLE_REPLY) {
            s_take_reply(l, k, &m.u.sample_reply);
        } else {
            l->bad_messages++;
            log_every(&l->bad_log, LIVENESS_LOG_MS, LOG_WARN, "dropped bad reply from replay: %s",
                      rc == APEX_OK ? "wrong message kind" : wire_decoder_last_error(l->dec));
        }
    }
    s_issue_requests(l);
    l->metrics.net_ns += clock_now_ns() - t0;
    return 0;
}

static int s_reader_stats(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    learner_t *l = arg;
    int64_t now = clock_now_ms();
    wire_msg_t m;
    for (int i = 0, rc; i < MAX_DRAIN && (rc = net_recv_decode(sock, l->dec, &m)) != APEX_EAGAIN;
         i++) {
        const char *why = rc == APEX_OK ? "wrong message kind" : wire_decoder_last_error(l->dec);
        if (rc == APEX_OK && m.type == WIRE_MSG_ACTOR_STATS &&
            m.u.actor_stats.actor_id >= (uint32_t)l->cfg.actor.num_actors) {
            rc = APEX_EINVAL; // a forged id would corrupt the per-actor metrics
            why = "actor_id not below [actor] num_actors";
        }
        if (rc == APEX_OK && m.type == WIRE_MSG_ACTOR_STATS) {
            metrics_add_actor_stats(&l->metrics, &m.u.actor_stats, now);
        } else {
            l->bad_messages++;
            log_every(&l->bad_log, LIVENESS_LOG_MS, LOG_WARN, "dropped bad actor stats: %s", why);
        }
    }
    return 0;
}

// Sends the current weights to the peer id (dropped by the ROUTER when that peer's queue is
// full or it is gone: it asks again after its own timeout).
static void s_send_weights(learner_t *l, const void *id, size_t id_len) {
    if (!l->has_weights_msg) {
        return; // nothing published yet (learner_run publishes before the loop runs)
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_copy(&m, &l->weights_msg) != 0 ||
        zmq_send(l->weights_sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&m, l->weights_sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    l->weights_replies++;
}

// Holds the request of peer id until the next version (one entry per peer: a repeated
// request leaves it as it is). A full table (1024 peers waiting: a flood of connections)
// drops the request, counted: answering it at once would have the asker ask again at once,
// a loop of full weights. The asker asks again after WEIGHTS_RESEND_MS, with the version it
// holds, and is answered at once if that is not the newest.
static void s_hold(learner_t *l, const uint8_t *id, size_t id_len, int64_t now) {
    for (int i = 0; i < l->n_waiters; i++) {
        if (l->waiters[i].id_len == id_len && memcmp(l->waiters[i].id, id, id_len) == 0) {
            return; // held since its first request: the heartbeat stays due
        }
    }
    if (l->n_waiters == WAITERS_MAX) {
        l->unheld_requests++;
        log_every(&l->weights_log, LIVENESS_LOG_MS, LOG_WARN,
                  "weights endpoint: %d requests held already; dropped one (%llu in all): a "
                  "flood of connections, or more actors than the learner expects",
                  WAITERS_MAX, (unsigned long long)l->unheld_requests);
        return;
    }
    s_waiter *w = &l->waiters[l->n_waiters++];
    memcpy(w->id, id, id_len);
    w->id_len = (uint8_t)id_len;
    w->since_ms = now;
}

// Answers the held requests that arrived at or before held_since_ms (INT64_MAX: all).
static void s_answer_waiters(learner_t *l, int64_t held_since_ms) {
    int kept = 0;
    for (int i = 0; i < l->n_waiters; i++) {
        s_waiter *w = &l->waiters[i];
        if (w->since_ms <= held_since_ms) {
            s_send_weights(l, w->id, w->id_len);
        } else {
            l->waiters[kept++] = *w;
        }
    }
    l->n_waiters = kept;
}

// Weights requests (DEALER -> ROUTER): answered at once when the peer's version is older than
// the current one, held (s_hold) when it is the current one or newer (a learner started
// afresh counts from 0 again, and an actor keeps a newer version for a while, see
// wire_weights_judge: answering it at once would be a loop of weights it refuses). Anything
// else is counted and dropped.
static int s_reader_weights(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    learner_t *l = arg;
    int64_t now = clock_now_ms();
    for (int i = 0; i < MAX_DRAIN; i++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        int extra = 0;
        if (net_recv_routed(sock, &id, &body, &extra) <= 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            break;
        }
        const char *why = NULL;
        wire_msg_t m;
        if (extra) {
            why = "not [routing id][one frame]";
        } else if (zmq_msg_size(&id) == 0 || zmq_msg_size(&id) > NET_ROUTING_ID_MAX) {
            why = "bad routing id";
        } else if (wire_decode(l->dec, zmq_msg_data(&body), zmq_msg_size(&body), &m) != APEX_OK) {
            why = wire_decoder_last_error(l->dec);
        } else if (m.type != WIRE_MSG_WEIGHTS_REQUEST) {
            why = wire_msg_name(m.type);
        }
        if (why) {
            l->bad_weights_requests++;
            l->bad_messages++;
            log_every(&l->weights_log, LIVENESS_LOG_MS, LOG_WARN,
                      "weights endpoint: dropped a message that is not a weights request (%s); "
                      "%llu in all",
                      why, (unsigned long long)l->bad_weights_requests);
        } else {
            l->weights_requests++;
            if (l->has_weights_msg && m.u.weights_request.have_version < l->weights_version) {
                s_send_weights(l, zmq_msg_data(&id), zmq_msg_size(&id));
            } else {
                s_hold(l, zmq_msg_data(&id), zmq_msg_size(&id), now);
            }
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Training, publishing, checkpoints

// A new version: encoded once into a message of its own (the previous one lives on in the
// replies still queued), then sent to every held request.
static void s_publish(learner_t *l) {
    l->weights_version++;
    const nn_params_t *p = trainer_online(l->trainer);
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
    m.u.weights = (wire_weights_t){.version = l->weights_version,
                                   .learner_step = (uint64_t)trainer_steps(l->trainer),
                                   .env_frames = metrics_frames(&l->metrics),
                                   .num_params = (uint32_t)p->num_params,
                                   .params = p->data};
    wire_encode(&m, &l->out);
    if (l->has_weights_msg) {
        zmq_msg_close(&l->weights_msg);
    }
    zmq_msg_init_size(&l->weights_msg, l->out.len);
    memcpy(zmq_msg_data(&l->weights_msg), l->out.data, l->out.len);
    l->has_weights_msg = 1;
    l->metrics.weights_version = l->weights_version;
    s_answer_waiters(l, INT64_MAX);
}

static s_slot *s_next_ready(learner_t *l) {
    s_slot *best = NULL;
    for (int i = 0; i < l->n_slots; i++) {
        s_slot *s = &l->slots[i];
        if (s->state == SLOT_READY && (!best || s->arrival < best->arrival)) {
            best = s;
        }
    }
    return best;
}

// Trains the slot's next batch and sends its priorities; the slot's request is re-issued
// once its last batch is trained.
static void s_train_one(learner_t *l, s_slot *s) {
    size_t r0 = (size_t)s->next * s->count,
           o0 = r0 * (size_t)l->cfg.env.obs_dim *
                wire_obs_elem_bytes((uint32_t)l->cfg.env.obs_dtype);
    train_batch_t b = {.obs = s->obs + o0,
                       .actions = s->actions + r0,
                       .rewards = s->rewards + r0,
                       .discounts = s->discounts + r0,
                       .next_obs = s->next_obs + o0,
                       .is_weights = s->is_w + r0,
                       .size = (int)s->count};
    train_stats_t st;
    float loss = trainer_step(l->trainer, &b, l->priorities, &st);
    int64_t t0 = clock_now_ns();
    // To the shard the keys came from (keys name slots of one shard's ring).
    wire_priority_update_t up = {
        .count = s->count, .keys = s->keys + r0, .priorities = l->priorities};
    if (shards_send_update(l->shards, s->shard, &up) != APEX_OK) {
        l->dropped_updates++;
    }
    if (++s->next == (uint32_t)l->cfg.learner.batches_per_request) {
        s->state = SLOT_FREE;
        s_issue_requests(l);
    }
    metrics_t *mt = &l->metrics;
    mt->updates = (uint64_t)trainer_steps(l->trainer);
    atomic_store_explicit(&l->updates, trainer_steps(l->trainer), memory_order_relaxed);
    mt->sampled_rows += s->count;
    mt->last_loss = loss;
    mt->train_ns += st.forward_ns + st.backward_ns;
    mt->optim_ns += st.optim_ns;
    if (l->rank == 0 && mt->updates % (uint64_t)l->cfg.learner.publish_every == 0) {
        s_publish(l);
    }
    mt->net_ns += clock_now_ns() - t0;
}

static int s_idle_train(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    if (l->group) {
        return s_group_idle(l);
    }
    if (l->cfg.learner.max_steps > 0 && trainer_steps(l->trainer) >= l->cfg.learner.max_steps) {
        log_info("reached [learner] max_steps = %lld", (long long)l->cfg.learner.max_steps);
        return -1;
    }
    s_slot *s = s_next_ready(l);
    int64_t now = clock_now_ns();
    if (!s) {
        if (!l->idle_since_ns) {
            l->idle_since_ns = now;
        }
        return 0; // the loop now waits in zmq_poll for a reply: that is the wait-for-data time
    }
    if (l->idle_since_ns) {
        l->metrics.wait_ns += now - l->idle_since_ns;
        l->idle_since_ns = 0;
    }
    s_train_one(l, s);
    return 1;
}

static int s_timer_requests(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    int64_t now = clock_now_ms();
    for (int i = 0; i < l->n_slots; i++) {
        s_slot *s = &l->slots[i];
        if (s->state == SLOT_IN_FLIGHT && now - s->sent_ms > l->cfg.learner.request_timeout_ms) {
            s->state = SLOT_FREE;
            l->timeouts++;
            shards_timed_out(l->shards, s->shard, now);
        }
    }
    shards_tick(l->shards, now); // with several shards: their liveness, logged per shard
    s_forget_down_shards(l);
    if (shards_count(l->shards) == 1 &&
        now - l->last_reply_ms > l->cfg.learner.request_timeout_ms) {
        log_every(&l->live_log, LIVENESS_LOG_MS, LOG_WARN,
                  "replay server at %s has not answered for %.1f s (%llu requests timed out); "
                  "retrying",
                  l->cfg.endpoints.replay_sample, (double)(now - l->last_reply_ms) / 1000.0,
                  (unsigned long long)l->timeouts);
    }
    s_issue_requests(l);
    if (atomic_load(&l->stop_requested)) {
        return -1;
    }
    return 0;
}

static int s_timer_publish(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    // Requests held this long are answered with the weights they have: a peer that hears
    // nothing for several seconds knows its link is dead, not the learner slow.
    s_answer_waiters(l, clock_now_ms() - REPUBLISH_MS);
    return 0;
}

static int s_timer_metrics(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    l->metrics.own_bad_messages = l->bad_messages;
    l->metrics.weights_answers = l->weights_replies;
    l->metrics.weights_held = (uint64_t)l->n_waiters;
    l->metrics.weights_refused = l->bad_weights_requests + l->unheld_requests;
    uint64_t own_rows = l->metrics.sampled_rows;
    s_group_metrics(l); // a group's sums instead of rank 0's own counters
    if (metrics_write_row(&l->metrics, clock_now_ms()) != 0) {
        log_every(&l->metrics_log, LIVENESS_LOG_MS, LOG_ERROR,
                  "cannot append to %s/metrics.csv: %s; training goes on", l->run_dir,
                  strerror(errno));
    }
    l->metrics.sampled_rows = own_rows;
    if (l->metrics.tb_err != APEX_OK) {
        log_every(&l->tb_log, LIVENESS_LOG_MS, LOG_ERROR,
                  "cannot write %s: %s (%llu events dropped so far); training goes on",
                  tbevents_path(l->metrics.tb), apex_strerror(l->metrics.tb_err),
                  (unsigned long long)tbevents_dropped(l->metrics.tb));
    }
    return 0;
}

static int s_checkpoint(learner_t *l) {
    ckpt_extra_t extra = {.weights_version = l->weights_version};
    // The run totals, so that a resumed learner continues them (metrics_resume).
    extra.user[CKPT_USER_FRAMES] = metrics_frames(&l->metrics);
    extra.user[CKPT_USER_EPISODES] = l->metrics.episodes;
    extra.user[CKPT_USER_ELAPSED_MS] = (uint64_t)metrics_elapsed_ms(&l->metrics, clock_now_ms());
    int64_t t0 = clock_now_ms();
    int rc = trainer_save(l->trainer, l->ckpt_path, &extra);
    if (rc != APEX_OK) {
        log_error("checkpoint %s failed: %s; the previous checkpoint is intact, training goes on",
                  l->ckpt_path, apex_strerror(rc));
        return -1;
    }
    log_debug("checkpoint at update %lld written in %lld ms", (long long)trainer_steps(l->trainer),
              (long long)(clock_now_ms() - t0));
    return 0;
}

static int s_timer_checkpoint(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    if (l->group) {
        l->ckpt_due = 1; // every rank writes its shard after the next round
        return 0;
    }
    s_checkpoint(l);
    return 0;
}

static int s_timer_status(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    char line[512];
    metrics_format_status(&l->metrics, line, sizeof line);
    log_info("%s  weights requests %llu, answers %llu, held %d, refused %llu", line,
             (unsigned long long)l->weights_requests, (unsigned long long)l->weights_replies,
             l->n_waiters, (unsigned long long)l->bad_weights_requests);
    return 0;
}

// ---------------------------------------------------------------------------------------
// Learner group (mpirun -np N apex-learner; group.h, train.h)

// MPI only under a launcher (group_launch_size); a group of one is a single learner.
static int s_group_init(learner_t *l) {
    l->rank = 0, l->n_ranks = 1;
    if (group_launch_size() == 1) {
        return 0;
    }
    l->group = group_new();
    if (!l->group) {
        return -1;
    }
    l->rank = group_rank(l->group), l->n_ranks = group_size(l->group);
    if (l->n_ranks == 1) {
        group_destroy(&l->group); // mpirun -np 1 under PMIx: nothing to share
        return 0;
    }
    char role[64];
    snprintf(role, sizeof role, "apex-learner.%d", l->rank);
    if (l->rank > 0) {
        log_set_role(role); // rank 0 keeps the daemon's name
    }
    log_info("rank %d of a learner group of %d (ZeRO stage %lld); effective batch %lld", l->rank,
             l->n_ranks, (long long)l->cfg.learner.zero_stage,
             (long long)(l->n_ranks * l->cfg.learner.batch_size));
    return 0;
}

// What a rank holds (train_memory_t) and, at the stop, the share of the training steps'
// time spent in collectives (for bench/run_zero.sh and for the operator).
static void s_group_report(learner_t *l, int at_stop) {
    if (!l->group) {
        return;
    }
    if (!at_stop) {
        train_memory_t m;
        trainer_memory(l->trainer, &m);
        log_info("rank %d memory: params %zu, gradients %zu, optimizer state %zu bytes", l->rank,
                 m.param_bytes, m.grad_bytes, m.opt_bytes);
        return;
    }
    double step_ns = l->own[R_TRAIN_NS] + l->own[R_OPTIM_NS];
    log_info("rank %d: collectives %.1f%% of the training steps' time (%.0f of %.0f ms)", l->rank,
             step_ns > 0 ? 100.0 * (double)group_comm_ns(l->group) / step_ns : 0.0,
             (double)group_comm_ns(l->group) / 1e6, step_ns / 1e6);
}

// One round: every rank says whether it has a batch, wants to stop, and (rank 0) whether a
// checkpoint is due, and adds its totals. Returns -1 when the group stops (every rank sees
// the same sums, so every rank decides the same), else 1 when every rank has a batch.
static int s_group_round(learner_t *l, int ready, int stop) {
    metrics_t *mt = &l->metrics;
    // This rank's interval timers move into its totals (rank 0's metrics row uses the sums).
    l->own[R_WAIT_NS] += (double)mt->wait_ns, l->own[R_TRAIN_NS] += (double)mt->train_ns;
    l->own[R_OPTIM_NS] += (double)mt->optim_ns, l->own[R_NET_NS] += (double)mt->net_ns;
    mt->wait_ns = mt->train_ns = mt->optim_ns = mt->net_ns = 0;
    l->own[R_ROWS] = (double)mt->sampled_rows;
    l->own[R_COMM_NS] = (double)group_comm_ns(l->group);
    l->own[R_BAD] = (double)l->bad_messages;
    l->own[R_LOSS] = mt->last_loss;
    double x[R_N];
    memcpy(x, l->own, sizeof x);
    x[R_READY] = ready, x[R_STOP] = stop, x[R_CKPT] = l->rank == 0 && l->ckpt_due;
    int64_t t0 = clock_now_ns();
    group_round(l->group, x, R_N);
    l->own[R_WAIT_NS] += (double)(clock_now_ns() - t0); // waiting for the other ranks
    l->last_round_ms = clock_now_ms();
    if (l->rank == 0) {
        memcpy(l->sum, x, sizeof x);
        mt->last_loss = x[R_LOSS] / l->n_ranks; // the group's mean loss of the last step
    }
    if (x[R_CKPT] > 0) {
        l->ckpt_due = 0;
        s_checkpoint(l); // collective: every rank writes its shard at this same step
    }
    if (x[R_STOP] > 0) {
        l->group_stopped = 1;
        return -1;
    }
    return x[R_READY] == l->n_ranks;
}

// The idle handler of a rank: a rank with a batch joins a round at once (and trains when
// every rank has one); a rank without joins one every GROUP_IDLE_ROUND_MS, so that a stop or
// a checkpoint never waits for the replay server.
static int s_group_idle(learner_t *l) {
    if (l->cfg.learner.max_steps > 0 && trainer_steps(l->trainer) >= l->cfg.learner.max_steps) {
        log_info("reached [learner] max_steps = %lld", (long long)l->cfg.learner.max_steps);
        return -1; // every rank gets here after the same step
    }
    s_slot *s = s_next_ready(l);
    int64_t now = clock_now_ns();
    if (!s && clock_now_ms() - l->last_round_ms < GROUP_IDLE_ROUND_MS) {
        if (!l->idle_since_ns) {
            l->idle_since_ns = now;
        }
        return 0;
    }
    if (l->idle_since_ns) {
        l->metrics.wait_ns += now - l->idle_since_ns;
        l->idle_since_ns = 0;
    }
    int rc = s_group_round(l, s != NULL, atomic_load(&l->stop_requested));
    if (rc < 0) {
        return -1;
    }
    if (rc == 1) {
        s_train_one(l, s);
    }
    return s != NULL; // with a batch, join the next round right away
}

// Rank 0's metrics row from the group's sums: rows and bad messages summed, the time
// fractions averaged over the ranks.
static void s_group_metrics(learner_t *l) {
    if (!l->group) {
        return;
    }
    metrics_t *mt = &l->metrics;
    l->own[R_WAIT_NS] += (double)mt->wait_ns, l->own[R_TRAIN_NS] += (double)mt->train_ns;
    l->own[R_OPTIM_NS] += (double)mt->optim_ns, l->own[R_NET_NS] += (double)mt->net_ns;
    double *d = l->sum, *p = l->sum_prev, N = l->n_ranks;
    mt->sampled_rows = (uint64_t)d[R_ROWS];
    mt->own_bad_messages = (uint64_t)d[R_BAD];
    mt->wait_ns = (int64_t)((d[R_WAIT_NS] - p[R_WAIT_NS]) / N);
    mt->train_ns = (int64_t)((d[R_TRAIN_NS] - p[R_TRAIN_NS]) / N);
    mt->optim_ns = (int64_t)((d[R_OPTIM_NS] - p[R_OPTIM_NS]) / N);
    mt->net_ns = (int64_t)((d[R_NET_NS] - p[R_NET_NS]) / N);
    memcpy(p, d, sizeof l->sum);
}

// After the loop: a rank that stopped on its own (signal, max_steps, learner_stop) tells
// the others in one last round; a rank that a round stopped already knows.
static void s_group_leave(learner_t *l) {
    if (l->group && !l->group_stopped) {
        while (s_group_round(l, 0, 1) >= 0) {
        }
    }
}

int learner_run(learner_t *self) {
    // Record this incarnation (the high 32 bits of the weights version) on disk before any
    // version of it is published: a learner killed before its first periodic checkpoint then
    // still cannot hand out a version twice after the next restart.
    s_group_report(self, 0);
    s_checkpoint(self);
    if (self->rank == 0) {
        s_publish(self); // requests from now on are answered with these (or newer) weights
    }
    s_issue_requests(self);
    loop_run(self->loop);
    s_group_leave(self);
    s_group_report(self, 1);
    if (self->rank == 0) {
        s_timer_metrics(self->loop, self);
    }
    int rc = s_checkpoint(self);
    log_info("stopped at update %lld (final checkpoint %s)",
             (long long)trainer_steps(self->trainer), rc == 0 ? "written" : "FAILED");
    return rc;
}

void learner_stop(learner_t *self) { atomic_store(&self->stop_requested, 1); }

const char *learner_pub_endpoint(const learner_t *self) { return self->pub_ep; }

int64_t learner_updates(const learner_t *self) {
    // atomic_load takes a non-const pointer in C11 (DR 459); the object is only read.
    return atomic_load_explicit((atomic_int_fast64_t *)&self->updates, memory_order_relaxed);
}

struct trainer *learner_trainer(learner_t *self) {
    return self->trainer;
}
const struct loop *learner_loop(const learner_t *self) { return self->loop; }
const char *learner_stats_endpoint(const learner_t *self) { return self->stats_ep; }
uint64_t learner_request_timeouts(const learner_t *self) { return self->timeouts; }
