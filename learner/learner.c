// learner.c: see learner.h. Orchestration: the modules do the work (prefetch.h: requests
// and replies; common/weights_server.h: the weights endpoint; round.h: a group's steps;
// algo.h: the update, DQN or DPG by the action space; metrics.h: metrics.csv), this file
// starts them, wires them to one loop and decides when to train, publish and checkpoint.
#define LOG_MODULE "learner"
#include "learner.h"

#include "algo.h"
#include "apex.h"
#include "blas.h"
#include "ckpt.h"
#include "clock.h"
#include "fileio.h"
#include "group.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "net.h"
#include "prefetch.h"
#include "round.h"
#include "security.h"
#include "shards.h"
#include "weights_server.h"
#include "wire.h"
#include "xalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#define REQUEST_TICK_MS 20 // re-issue requests that could not be sent / timed out
// Weights requests held until the next version: one per peer (actors, evaluators, relays),
// so twice the run's actors, and never fewer than 1 024 (peers the config does not count:
// an evaluator per checkpoint sweep, a monitoring client). A peer beyond it is answered at
// its next request, counted (weights_server.h).
#define WAITERS_MIN 1024
#define STATUS_LOG_MS 5000
#define MAX_DRAIN 64
#define LOG_INTERVAL_MS 5000
#define STATS_MAX_EPISODES 65536 // most episodes one ActorStats may carry

struct learner {
    apex_config_t cfg;
    char run_dir[CONFIG_STR_LEN + 64];
    char ckpt_path[CONFIG_STR_LEN + 96];
    algo_t algo; // the update: DQN's trainer or DPG's (algo.h)
    void *ctx, *stats_sock;
    char stats_ep[CONFIG_STR_LEN]; // as bound (an ephemeral port resolved)
    security_t *security;
    shards_t *shards;          // the replay: one DEALER per shard (shards.h)
    prefetch_t *prefetch;      // the requests in flight and the batches they brought
    weights_server_t *weights; // rank 0: the weights endpoint
    wire_decoder_t *stats_dec; // ActorStats
    loop_t *loop;
    float *priorities; // (batch_size) of the step just trained
    // [eval] every_updates > 0: the network every that many updates, for the evaluator
    // (rank 0: the published weights, of which the evaluated network is the prefix).
    float *eval_buf;
    nn_config_t eval_net;
    char eval_dir[CONFIG_STR_LEN + 80];
    uint64_t eval_failed;
    uint64_t weights_version; // the last one published
    int64_t idle_since_ns;    // start of the current wait for data; 0 = not waiting
    uint64_t bad_stats;       // ActorStats refused
    int resumed;              // from a checkpoint, whose counters are in resumed_extra
    ckpt_extra_t resumed_extra;
    // Mirror of trainer_steps for learner_updates(), the only state other threads read.
    atomic_int_fast64_t updates;
    metrics_t metrics;
    log_limiter_t bad_log, metrics_log, tb_log;
    atomic_int stop_requested;
    group_t *group; // a learner group (group.h); NULL: a single learner
    round_t round;  // how the group's ranks step together
    // [run] deterministic (rank 0): the next horizon to ask the replay about, the version
    // published at start-up and the update it was published at (what s_det_version counts
    // from), and the metrics row cadence in updates.
    uint64_t det_h;
    uint64_t det_v0;
    int64_t det_u0;
    int64_t det_metrics_every;
};

void learner_checkpoint_path(const apex_config_t *cfg, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s/checkpoint.bin", cfg->run.out_dir, cfg->run.name);
}

// ---------------------------------------------------------------------------------------
// Start-up

static int s_load_or_init(learner_t *l, int resume) {
    struct stat st;
    if (!resume || stat(l->ckpt_path, &st) != 0) {
        log_info("starting from scratch (%s)", resume ? "no checkpoint yet" : "--no-resume");
        return 0;
    }
    ckpt_extra_t extra;
    int rc = algo_load(&l->algo, l->ckpt_path, &extra);
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
    if (l->cfg.run.deterministic) {
        log_warn("deterministic run resumed from a checkpoint: the replay and the actors did "
                 "not stop with it, so the run diverges from one that was never interrupted");
    }
    log_info("resumed from %s at update %lld, %llu frames, %llu episodes, %.0f s; weights "
             "" WIRE_VERSION_FMT,
             l->ckpt_path, (long long)algo_steps(&l->algo),
             (unsigned long long)extra.user[CKPT_USER_FRAMES],
             (unsigned long long)extra.user[CKPT_USER_EPISODES],
             (double)extra.user[CKPT_USER_ELAPSED_MS] / 1000.0,
             WIRE_VERSION_ARGS(l->weights_version));
    return 0;
}

// metrics.csv and TensorBoard (rank 0 writes the group's), continuing a resumed run's totals.
static int s_open_metrics(learner_t *l) {
    char path[CONFIG_STR_LEN + 96];
    snprintf(path, sizeof path, "%s/metrics.csv", l->run_dir);
    if (l->round.rank != 0) {
        memset(&l->metrics, 0, sizeof l->metrics);
    } else if (metrics_init(&l->metrics, path, l->cfg.env.action_dim > 0) != 0) {
        log_error("cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    l->metrics.det = l->cfg.run.deterministic;
    // TensorBoard: <run dir>/tb/, a new file per learner process (a resumed one too).
    snprintf(path, sizeof path, "%s/tb", l->run_dir);
    l->metrics.tb = l->round.rank == 0 ? tbevents_new(path) : NULL;
    if (l->round.rank == 0 && !l->metrics.tb) {
        log_warn("no TensorBoard events (see above); metrics.csv is written as always");
    }
    if (l->resumed) {
        const ckpt_extra_t *x = &l->resumed_extra;
        metrics_resume(&l->metrics, x->user[CKPT_USER_FRAMES], x->user[CKPT_USER_EPISODES],
                       (int64_t)x->user[CKPT_USER_ELAPSED_MS]);
    }
    l->metrics.updates = (uint64_t)algo_steps(&l->algo);
    l->metrics.prev_updates = l->metrics.updates;
    atomic_store(&l->updates, algo_steps(&l->algo));
    return 0;
}

static int s_open_sockets(learner_t *l) {
    const apex_config_t *c = &l->cfg;
    wire_limits_t lim = {.obs_dim = (uint32_t)c->env.obs_dim,
                         .obs_dtype = (uint32_t)c->env.obs_dtype,
                         .n_actions = (uint32_t)c->env.n_actions,
                         .action_dim = (uint32_t)c->env.action_dim,
                         .action_low = c->env.action_low,
                         .action_high = c->env.action_high,
                         .max_count = (uint32_t)c->replay.max_batch,
                         .max_episodes = STATS_MAX_EPISODES,
                         .max_actors = (uint32_t)c->actor.num_actors}; // bounds metrics' table
    size_t max_bytes = wire_max_message_bytes(&lim);
    l->stats_dec = wire_decoder_new(&lim);
    l->ctx = zmq_ctx_new();
    l->security = security_new(l->ctx, c, "learner", -1, 1); // ZAP first, then servers
    if (!l->security) {
        return -1;
    }
    // Connected with ZMQ_IMMEDIATE: requests never queue on a connection that is not up
    // (nobody would answer them); the request timer re-issues them once a shard is reachable.
    // Every rank of a group samples; only rank 0 publishes weights and hears the actors.
    // With one replay server its limiter counts every rank's samples. With shards each rank
    // holds the ratio itself (learner/shards.h), so it holds its share: the ranks step
    // together and sample alike, so R shares of spi / R hold the run's spi.
    net_opts_t o_sample = {.max_msg_bytes = (int64_t)max_bytes};
    apex_config_t *share = xmalloc(sizeof *share); // large for a stack; shards_new copies
    *share = *c;
    if (l->round.n_ranks > 1 && c->replay.shards > 1) {
        share->replay.samples_per_insert /= l->round.n_ranks;
        share->replay.spi_tolerance /= l->round.n_ranks;
    }
    l->shards = shards_new(share, l->round.rank, l->ctx, l->security, &o_sample);
    free(share);
    if (!l->shards) {
        return -1;
    }
    l->prefetch = prefetch_new(c, l->shards, clock_now_ms());
    if (l->round.rank != 0) {
        return 0;
    }
    l->weights = weights_server_new(l->ctx, l->security, c->endpoints.learner_weights_bind,
                                    (int)APEX_MAX(2 * c->actor.num_actors, WAITERS_MIN));
    net_opts_t o_stats = {.max_msg_bytes = (int64_t)max_bytes, .rcvhwm = 1000};
    l->stats_sock = net_socket(l->ctx, ZMQ_PULL, &o_stats);
    if (!l->weights || !l->stats_sock || security_server(l->security, l->stats_sock) ||
        net_bind(l->stats_sock, c->endpoints.learner_stats_bind, l->stats_ep, sizeof l->stats_ep) !=
            0) {
        return -1;
    }
    return 0;
}

// The group's size against [learner] ranks, which only the launchers read (apex-local,
// apex-slurm start that many ranks): a difference is said, not refused. The size MPI gives is
// the truth the group trains with (the effective batch, each rank's share of the replay
// ratio); a group may resume on another number of ranks on purpose (`mpirun -np 3` over a run
// of 2); and `mpirun -np N apex-learner -c run.ini` must not need a redundant --set. Rank 0
// alone says it, once.
static void s_check_ranks(const learner_t *l) {
    long long want = (long long)l->cfg.learner.ranks, n = l->round.n_ranks;
    long long B = (long long)l->cfg.learner.batch_size;
    if (l->round.rank != 0 || n == want) {
        return;
    }
    if (n == 1) {
        log_warn("one learner, but [learner] ranks = %lld: each update trains %lld rows where the "
                 "config means %lld x %lld = %lld\n---> HINT: start the group with mpirun -np "
                 "%lld or scripts/apex-local (which reads [learner] ranks), or set [learner] "
                 "ranks = 1",
                 want, B, want, B, want * B, want);
        return;
    }
    log_warn("a learner group of %lld ranks, but [learner] ranks = %lld: each update trains %lld x "
             "%lld = %lld rows where the config means %lld x %lld = %lld\n---> HINT: start %lld "
             "rank(s), or set [learner] ranks = %lld (scripts/apex-local and apex-slurm read it)",
             n, want, n, B, n * B, want, B, want * B, want, n);
}

// MPI only under a launcher (group_launch_size); a group of one is a single learner.
static int s_group_init(learner_t *l) {
    if (group_launch_size() > 1) {
        l->group = group_new();
        if (!l->group) {
            return -1;
        }
        if (group_size(l->group) == 1) {
            group_destroy(&l->group); // mpirun -np 1 under PMIx: nothing to share
        }
    }
    round_init(&l->round, l->group, clock_now_ms());
    s_check_ranks(l);
    if (!l->group) {
        return 0;
    }
    char role[64];
    snprintf(role, sizeof role, "apex-learner.%d", l->round.rank);
    if (l->round.rank > 0) {
        log_set_role(role); // rank 0 keeps the daemon's name
    }
    // OpenMPI's mpi_yield_when_idle, as MPI_Init found it (group.h).
    log_info("rank %d of a learner group of %d (ZeRO stage %lld); effective batch %lld; %s=%s (%s)",
             l->round.rank, l->round.n_ranks, (long long)l->cfg.learner.zero_stage,
             (long long)(l->round.n_ranks * l->cfg.learner.batch_size), GROUP_YIELD_ENV,
             *group_yield(l->group) ? group_yield(l->group) : "(unset)",
             group_yield_defaulted(l->group)
                 ? "apex-learner's default: waiting ranks yield their core"
                 : "from the environment");
    return 0;
}

static int s_reader_sample(loop_t *loop, void *sock, void *arg);
static void s_write_metrics(learner_t *l);

// Updates between two rows of metrics.csv (0: a row every [learner] metrics_interval_ms).
static int64_t s_metrics_every(const learner_t *l) {
    return l->cfg.run.deterministic ? l->det_metrics_every : l->cfg.learner.metrics_every_updates;
}
static int s_reader_stats(loop_t *loop, void *sock, void *arg);
static int s_reader_weights(loop_t *loop, void *sock, void *arg);
static int s_idle_train(loop_t *loop, void *arg);
static int s_timer_requests(loop_t *loop, void *arg);
static int s_timer_metrics(loop_t *loop, void *arg);
static int s_timer_checkpoint(loop_t *loop, void *arg);
static int s_timer_status(loop_t *loop, void *arg);
static int s_timer_heartbeat(loop_t *loop, void *arg);

// [run] deterministic: the schedule the replay holds counts on [learner] ranks x prefetch
// requests in flight, so the group must have the ranks the config says.
static int s_det_init(learner_t *l) {
    if (l->round.n_ranks != l->cfg.learner.ranks) {
        log_error("a deterministic run with a learner group of %d ranks, but [learner] ranks = "
                  "%lld: the replay's schedule counts on the config's\n---> HINT: start %lld "
                  "rank(s), or set [learner] ranks = %d",
                  l->round.n_ranks, (long long)l->cfg.learner.ranks,
                  (long long)l->cfg.learner.ranks, l->round.n_ranks);
        return -1;
    }
    prefetch_det_group(l->prefetch, l->round.rank, l->round.n_ranks);
    if (l->weights) {
        weights_server_det_enable(l->weights);
    }
    l->det_h = 1;
    l->det_metrics_every = l->cfg.learner.metrics_every_updates > 0
                               ? l->cfg.learner.metrics_every_updates
                               : LEARNER_DET_METRICS_EVERY;
    log_info("deterministic run: samples, priority updates and actors' weights follow a "
             "schedule fixed by counters (rank %d of %d); metrics.csv every %lld updates",
             l->round.rank, l->round.n_ranks, (long long)l->det_metrics_every);
    return 0;
}

static void s_add_loop(learner_t *l) {
    l->loop = loop_new();
    for (int k = 0; k < shards_count(l->shards); k++) {
        loop_add_reader(l->loop, shards_socket(l->shards, k), s_reader_sample, l);
    }
    security_attach(l->security, l->loop);
    loop_set_idle(l->loop, s_idle_train, l);
    loop_add_timer(l->loop, REQUEST_TICK_MS, s_timer_requests, l);
    if (l->round.rank != 0) {
        return;
    }
    const config_learner_t *c = &l->cfg.learner;
    loop_add_reader(l->loop, l->stats_sock, s_reader_stats, l);
    loop_add_reader(l->loop, weights_server_socket(l->weights), s_reader_weights, l);
    if (!l->cfg.run.deterministic && c->metrics_every_updates == 0) {
        loop_add_timer(l->loop, c->metrics_interval_ms, s_timer_metrics, l);
    }
    loop_add_timer(l->loop, (int64_t)(c->checkpoint_interval_s * 1000), s_timer_checkpoint, l);
    loop_add_timer(l->loop, STATUS_LOG_MS, s_timer_status, l);
    // Held requests are answered 1-1.5 s after they arrived when no version comes.
    loop_add_timer(l->loop, WEIGHTS_SERVER_HOLD_MS / 2, s_timer_heartbeat, l);
}

// [eval] every_updates > 0 (rank 0): the directory of evaluation points and a buffer of the
// published weights.
static int s_eval_init(learner_t *l) {
    if (l->round.rank != 0) {
        return 0;
    }
    snprintf(l->eval_dir, sizeof l->eval_dir, "%s/evals", l->run_dir);
    int e = fileio_mkdir_p(l->eval_dir);
    if (e != 0) {
        log_error("cannot create %s: %s", l->eval_dir, strerror(e));
        return -1;
    }
    nn_config_from_run(&l->eval_net, &l->cfg);
    l->eval_buf = xmalloc(algo_published_n(&l->algo) * sizeof(float));
    APEX_ASSERT(algo_published_n(&l->algo) >= nn_num_params(&l->eval_net)); // (its prefix)
    log_info("[eval] every_updates = %lld: the network every %lld updates goes to %s/ for "
             "apex-eval --follow",
             (long long)l->cfg.eval.every_updates, (long long)l->cfg.eval.every_updates,
             l->eval_dir);
    return 0;
}

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
    if (algo_init(&l->algo, cfg, l->group) != 0 || s_load_or_init(l, resume) != 0 ||
        s_open_metrics(l) != 0 || s_open_sockets(l) != 0) {
        learner_destroy(&l);
        return NULL;
    }
    if (cfg->run.deterministic && s_det_init(l) != 0) {
        learner_destroy(&l);
        return NULL;
    }
    l->priorities = xmalloc((size_t)cfg->learner.batch_size * sizeof(float));
    if (cfg->eval.every_updates > 0 && s_eval_init(l) != 0) {
        learner_destroy(&l);
        return NULL;
    }
    s_add_loop(l);
    char what[512];
    l->algo.ops->describe(l->algo.impl, cfg, what, sizeof what);
    log_info("learner: %s; replay at %s, weights on %s", what, cfg->endpoints.replay_sample,
             cfg->endpoints.learner_weights_bind);
    return l;
}

void learner_destroy(learner_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    learner_t *l = *self_p;
    loop_destroy(&l->loop);
    prefetch_destroy(&l->prefetch);
    shards_destroy(&l->shards);
    weights_server_destroy(&l->weights);
    net_close(&l->stats_sock);
    security_destroy(&l->security);
    if (l->ctx) {
        zmq_ctx_term(l->ctx);
    }
    wire_decoder_destroy(&l->stats_dec);
    metrics_fini(&l->metrics);
    free(l->priorities);
    free(l->eval_buf);
    algo_fini(&l->algo);
    group_destroy(&l->group); // MPI_Finalize, last
    free(l);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Sockets

static float s_beta(const learner_t *l) {
    const config_learner_t *c = &l->cfg.learner;
    double f = (double)algo_steps(&l->algo) / (double)c->beta_steps;
    return (float)(c->beta_start + (c->beta_end - c->beta_start) * (f < 1.0 ? f : 1.0));
}

// [run] deterministic, rank 0: the weights an actor acts with in its period p are those the
// learner had published after training every request the replay had served when its horizon
// reached p - 1 (every actor's periods before it stored): a number the replay counted, so
// the same in every run, and one the learner always gets to (those requests were served).
// Requests 1 .. S of a group of R ranks, batches_per_request k each, complete floor(S / R) k
// updates (after the u0 it started at); the version current after U updates is the one
// published at floor(U / P) P.
static uint64_t s_det_version(const learner_t *l, uint64_t served) {
    const config_learner_t *c = &l->cfg.learner;
    int64_t U = l->det_u0 + (int64_t)(served / (uint64_t)l->round.n_ranks) * c->batches_per_request;
    int64_t P = c->publish_every;
    return l->det_v0 + (uint64_t)(U / P - l->det_u0 / P);
}

// Takes the replay's answers about its horizons (each names its target's weights) and keeps
// the next question in flight.
static void s_det_targets(learner_t *l, int64_t now_ms) {
    if (!l->cfg.run.deterministic || !l->weights) {
        return;
    }
    uint64_t h, served;
    while (prefetch_det_take(l->prefetch, &h, &served)) {
        weights_server_det_set(l->weights, h + 1, s_det_version(l, served)); // targets from 1
        l->det_h = h + 1;
    }
    prefetch_det_watch(l->prefetch, l->det_h, now_ms);
}

static int s_reader_sample(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    learner_t *l = arg;
    int64_t t0 = clock_now_ns();
    prefetch_read(l->prefetch, shards_index(l->shards, sock), MAX_DRAIN, clock_now_ms());
    if (!l->cfg.run.deterministic) {
        l->metrics.replay = *shards_stats(l->shards); // the run's: summed over the shards
    } // (a deterministic run's are the trained batch's, s_train_one)
    s_det_targets(l, clock_now_ms());
    prefetch_issue(l->prefetch, s_beta(l), clock_now_ms());
    l->metrics.net_ns += clock_now_ns() - t0;
    return 0;
}

// ActorStats (PUSH -> PULL): the decoder bounds everything, the actor id included.
static int s_reader_stats(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    learner_t *l = arg;
    for (int i = 0; i < MAX_DRAIN; i++) {
        zmq_msg_t msg;
        zmq_msg_init(&msg);
        if (net_recv(sock, &msg, ZMQ_DONTWAIT) != APEX_OK) {
            zmq_msg_close(&msg);
            break;
        }
        const char *why = zmq_msg_more(&msg) ? "more than one frame" : NULL;
        if (why) {
            net_drain_more(sock);
        } else {
            why = metrics_take_message(&l->metrics, l->stats_dec, zmq_msg_data(&msg),
                                       zmq_msg_size(&msg), clock_now_ms());
        }
        zmq_msg_close(&msg);
        if (why) {
            l->bad_stats++;
            log_every(&l->bad_log, LOG_INTERVAL_MS, LOG_WARN,
                      "dropped bad actor stats: %s (%llu in all)", why,
                      (unsigned long long)l->bad_stats);
        }
    }
    return 0;
}

static int s_reader_weights(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    (void)sock;
    learner_t *l = arg;
    weights_server_read(l->weights, MAX_DRAIN, clock_now_ms());
    return 0;
}

// Bad messages this rank refused: sample replies, actor stats, weights requests.
static uint64_t s_bad_messages(const learner_t *l) {
    weights_server_stats_t w = {0};
    if (l->weights) {
        weights_server_stats(l->weights, &w);
    }
    return prefetch_stats(l->prefetch)->bad_messages + l->bad_stats + w.refused;
}

// ---------------------------------------------------------------------------------------
// Training, publishing, checkpoints

// The weights written straight into the outgoing message (weights_server_publish_fill).
static void s_fill_weights(void *arg, void *dst) { algo_publish(&((learner_t *)arg)->algo, dst); }

// Every rank of a group at the same update (ZeRO stage 3 gathers the weights to rank 0);
// rank 0 publishes.
static void s_publish(learner_t *l) {
    if (l->round.rank != 0) {
        algo_publish(&l->algo, NULL); // the other ranks' part of the gather
        return;
    }
    wire_weights_t w = {.version = ++l->weights_version,
                        .learner_step = (uint64_t)algo_steps(&l->algo),
                        .env_frames = metrics_frames(&l->metrics),
                        .num_params = (uint32_t)algo_published_n(&l->algo)};
    weights_server_publish_fill(l->weights, &w, s_fill_weights, l);
    l->metrics.weights_version = l->weights_version;
}

// [eval] every_updates: each rank at the same update (ZeRO stage 3 gathers the weights to
// rank 0), which writes the network it evaluates to evals/u<update>.bin (a checkpoint of one
// array, written whole then renamed: the evaluator never sees half of one). apex-eval
// --follow evaluates every file in order and removes it (actor/evaluator.c), so that the
// evaluations are of fixed updates, whichever moment the evaluator gets to them: the same in
// every rerun of a deterministic run. A write that fails (a full disk) loses that one point,
// logged; training goes on.
static void s_eval_snapshot(learner_t *l) {
    if (l->round.rank != 0) {
        algo_publish(&l->algo, NULL);
        return;
    }
    algo_publish(&l->algo, l->eval_buf);
    uint64_t u = (uint64_t)algo_steps(&l->algo);
    char path[CONFIG_STR_LEN + 112];
    snprintf(path, sizeof path, "%s/u%012llu.bin", l->eval_dir, (unsigned long long)u);
    ckpt_header_t h;
    ckpt_header_init(&h, &l->eval_net);
    h.learner_step = u;
    h.extra.weights_version = l->weights_version;
    h.extra.user[CKPT_USER_FRAMES] = metrics_frames(&l->metrics);
    const float *arrays[1] = {l->eval_buf};
    int rc = ckpt_write(path, &h, arrays, 1);
    if (rc != APEX_OK) {
        l->eval_failed++;
        log_every(&l->metrics_log, LOG_INTERVAL_MS, LOG_ERROR,
                  "cannot write %s: %s (%llu evaluation points lost; training goes on)", path,
                  apex_strerror(rc), (unsigned long long)l->eval_failed);
    }
}

// Trains the batch prefetch_next gave and sends its priorities; publishes every
// publish_every updates (rank 0).
static void s_train_one(learner_t *l, const prefetch_batch_t *b) {
    metrics_t *mt = &l->metrics;
    float loss = algo_step(&l->algo, &b->batch, l->priorities, mt); // and its timings, stats
    int64_t t0 = clock_now_ns();
    prefetch_trained(l->prefetch, l->priorities, s_beta(l), clock_now_ms());
    mt->updates = (uint64_t)algo_steps(&l->algo);
    atomic_store_explicit(&l->updates, algo_steps(&l->algo), memory_order_relaxed);
    mt->sampled_rows += (uint64_t)b->batch.size;
    mt->last_loss = loss;
    if (l->cfg.run.deterministic) {
        mt->replay = *b->stats; // the counters as of this batch's turn, not of its arrival
    }
    if (mt->updates % (uint64_t)l->cfg.learner.publish_every == 0) {
        s_publish(l);
    }
    if (l->round.rank == 0 && s_metrics_every(l) > 0 &&
        mt->updates % (uint64_t)s_metrics_every(l) == 0) {
        s_write_metrics(l);
    }
    if (l->cfg.eval.every_updates > 0 && mt->updates % (uint64_t)l->cfg.eval.every_updates == 0) {
        s_eval_snapshot(l);
    }
    mt->net_ns += clock_now_ns() - t0;
}

static int s_checkpoint(learner_t *l) {
    ckpt_extra_t extra = {.weights_version = l->weights_version};
    // The run totals, so that a resumed learner continues them (metrics_resume).
    extra.user[CKPT_USER_FRAMES] = metrics_frames(&l->metrics);
    extra.user[CKPT_USER_EPISODES] = l->metrics.episodes;
    extra.user[CKPT_USER_ELAPSED_MS] = (uint64_t)metrics_elapsed_ms(&l->metrics, clock_now_ms());
    int64_t t0 = clock_now_ms();
    int rc = algo_save(&l->algo, l->ckpt_path, &extra);
    if (rc != APEX_OK) {
        log_error("checkpoint %s failed: %s; the previous checkpoint is intact, training goes on",
                  l->ckpt_path, apex_strerror(rc));
        return -1;
    }
    log_debug("checkpoint at update %lld written in %lld ms", (long long)algo_steps(&l->algo),
              (long long)(clock_now_ms() - t0));
    return 0;
}

// Whether this rank wants to stop: [learner] max_steps reached (every rank of a group gets
// there after the same step), a signal or learner_stop.
static int s_max_steps(const learner_t *l) {
    int64_t max = l->cfg.learner.max_steps;
    if (max > 0 && algo_steps(&l->algo) >= max) {
        log_info("reached [learner] max_steps = %lld", (long long)max);
        return 1;
    }
    return 0;
}

// The time waited for data ends (a batch is there, or a round is joined).
static void s_wait_ends(learner_t *l, int64_t now_ns) {
    if (l->idle_since_ns) {
        l->metrics.wait_ns += now_ns - l->idle_since_ns;
        l->idle_since_ns = 0;
    }
}

// The idle handler: train when a batch is ready. A rank of a group trains only when the
// round says every rank has one (round.h); it joins a round at once with a batch, and every
// ROUND_IDLE_MS without one, so that a stop or a checkpoint never waits for the replay.
// Returns 1 to be called again at once, 0 to wait in zmq_poll (the wait-for-data time), -1 to
// stop the loop.
static int s_idle_train(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    if (s_max_steps(l)) {
        return -1;
    }
    prefetch_batch_t b;
    int have = prefetch_next(l->prefetch, &b);
    int64_t now = clock_now_ns();
    if (!round_due(&l->round, have, clock_now_ms()) || (!have && !l->group)) {
        if (!l->idle_since_ns) {
            l->idle_since_ns = now;
        }
        return 0;
    }
    s_wait_ends(l, now);
    if (l->group) {
        int ckpt = 0;
        round_decision d = round_join(&l->round, &l->metrics, have, atomic_load(&l->stop_requested),
                                      s_bad_messages(l), &ckpt, clock_now_ms());
        if (ckpt) {
            s_checkpoint(l); // collective: every rank writes its part at this same step
        }
        if (d == ROUND_DECIDED_STOP) {
            return -1;
        }
        if (d == ROUND_DECIDED_WAIT) {
            return have; // with a batch, join the next round right away
        }
    }
    s_train_one(l, &b);
    return 1;
}

static int s_timer_requests(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    prefetch_tick(l->prefetch, s_beta(l), clock_now_ms());
    s_det_targets(l, clock_now_ms());
    return atomic_load(&l->stop_requested) ? -1 : 0;
}

static int s_timer_heartbeat(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    // A peer that hears nothing for several seconds knows its link is dead, not the learner
    // slow.
    weights_server_heartbeat(l->weights, clock_now_ms());
    return 0;
}

static int s_timer_metrics(loop_t *loop, void *arg) {
    (void)loop;
    s_write_metrics(arg);
    return 0;
}

static void s_write_metrics(learner_t *l) {
    metrics_t *mt = &l->metrics;
    weights_server_stats_t w;
    weights_server_stats(l->weights, &w);
    mt->own_bad_messages = s_bad_messages(l);
    mt->weights_answers = w.answers;
    mt->weights_held = (uint64_t)w.held;
    mt->weights_refused = w.refused + w.unheld;
    uint64_t own_rows = mt->sampled_rows;
    if (l->group) {
        round_metrics(&l->round, mt); // the group's sums instead of rank 0's own counters
    }
    if (metrics_write_row(mt, clock_now_ms()) != 0) {
        log_every(&l->metrics_log, LOG_INTERVAL_MS, LOG_ERROR,
                  "cannot append to %s/metrics.csv: %s; training goes on", l->run_dir,
                  strerror(errno));
    }
    mt->sampled_rows = own_rows;
    if (mt->tb_err != APEX_OK) {
        log_every(&l->tb_log, LOG_INTERVAL_MS, LOG_ERROR,
                  "cannot write %s: %s (%llu events dropped so far); training goes on",
                  tbevents_path(mt->tb), apex_strerror(mt->tb_err),
                  (unsigned long long)tbevents_dropped(mt->tb));
    }
}

static int s_timer_checkpoint(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    if (l->group) {
        l->round.ckpt_due = 1; // every rank writes its part after the next round
    } else {
        s_checkpoint(l);
    }
    return 0;
}

static int s_timer_status(loop_t *loop, void *arg) {
    (void)loop;
    learner_t *l = arg;
    char line[512];
    metrics_format_status(&l->metrics, line, sizeof line);
    weights_server_stats_t w;
    weights_server_stats(l->weights, &w);
    log_info("%s  weights requests %llu, answers %llu (%llu bytes), held %d, refused %llu", line,
             (unsigned long long)w.requests, (unsigned long long)w.answers,
             (unsigned long long)w.bytes, w.held, (unsigned long long)w.refused);
    return 0;
}

int learner_run(learner_t *self) {
    // Record this incarnation (the high 32 bits of the weights version) on disk before any
    // version of it is published: a learner killed before its first periodic checkpoint then
    // still cannot hand out a version twice after the next restart.
    if (self->group) {
        train_memory_t m;
        algo_memory(&self->algo, &m);
        log_info("rank %d memory: params %zu, gradients %zu, optimizer state %zu, gathered "
                 "layers %zu, work %zu bytes",
                 self->round.rank, m.param_bytes, m.grad_bytes, m.opt_bytes, m.gather_bytes,
                 m.work_bytes);
    }
    s_checkpoint(self);
    s_publish(self); // requests from now on are answered with these (or newer) weights
    if (self->cfg.run.deterministic && self->weights) {
        // Target 1 (horizon 0: nothing stored yet) is these weights.
        self->det_v0 = self->weights_version;
        self->det_u0 = algo_steps(&self->algo);
        weights_server_det_set(self->weights, 1, self->det_v0);
    }
    prefetch_issue(self->prefetch, s_beta(self), clock_now_ms());
    loop_run(self->loop);
    // A rank that stopped on its own (signal, max_steps, learner_stop) tells the others in one
    // last round; a rank that a round stopped already knows.
    int ckpt;
    while (self->group && !self->round.stopped &&
           round_join(&self->round, &self->metrics, 0, 1, s_bad_messages(self), &ckpt,
                      clock_now_ms()) != ROUND_DECIDED_STOP) {
    }
    if (self->group) {
        round_report(&self->round);
    }
    shards_report(self->shards);
    // The last row (a counted cadence's row at this update is written already).
    if (self->round.rank == 0 &&
        (s_metrics_every(self) == 0 || algo_steps(&self->algo) % s_metrics_every(self) != 0)) {
        s_write_metrics(self);
    }
    int rc = s_checkpoint(self);
    log_info("stopped at update %lld (final checkpoint %s)", (long long)algo_steps(&self->algo),
             rc == 0 ? "written" : "FAILED");
    return rc;
}

void learner_stop(learner_t *self) { atomic_store(&self->stop_requested, 1); }

const char *learner_weights_endpoint(const learner_t *self) {
    return self->weights ? weights_server_endpoint(self->weights) : "";
}

int64_t learner_updates(const learner_t *self) {
    // atomic_load takes a non-const pointer in C11 (DR 459); the object is only read.
    return atomic_load_explicit((atomic_int_fast64_t *)&self->updates, memory_order_relaxed);
}

struct trainer *learner_trainer(learner_t *self) {
    return algo_trainer(&self->algo);
}
struct train_dpg *learner_dpg(learner_t *self) {
    return algo_dpg(&self->algo);
}
const struct loop *learner_loop(const learner_t *self) { return self->loop; }
const char *learner_stats_endpoint(const learner_t *self) { return self->stats_ep; }
uint64_t learner_request_timeouts(const learner_t *self) {
    return prefetch_stats(self->prefetch)->timeouts;
}
