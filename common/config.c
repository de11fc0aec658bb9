// config.c: the schema table and the INI loader (see config.h).
//
// Defaults are strings parsed by the same code as the file, so a default can never be of
// the wrong type or out of range without the tests noticing (check_config.c loads the
// defaults alone and checks they validate).
#include "config.h"

#include "apex.h"
#include "envinfo.h"
#include "log.h"
#include "parse.h"
#include "xalloc.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { T_INT, T_FLOAT, T_BOOL, T_STR, T_ENUM, T_INTLIST } s_type;

typedef struct {
    const char *section;
    const char *key;
    s_type type;
    size_t offset; // into apex_config_t
    size_t size;   // T_STR: buffer size
    double min, max;
    const char *def;
    const char *choices; // T_ENUM: "a|b|c" (stored as the index)
    const char *help;
} s_row;

#define OFF(field) offsetof(apex_config_t, field)
#define STR(field) OFF(field), sizeof(((apex_config_t *)0)->field)
#define BIG 9.0e18

// ---------------------------------------------------------------------------------------
// The schema: one row per key. Keep help texts short; configs/*.ini carry the long story.
static const s_row s_schema[] = {
    {"run", "name", T_STR, STR(run.name), 1, 0, "cartpole", NULL,
     "run name; outputs go to <out_dir>/<name>/"},
    {"run", "seed", T_INT, OFF(run.seed), 0, 0, 1e15, "1", NULL,
     "seed for every random stream of the run (actors, envs, replay, network init)"},
    {"run", "out_dir", T_STR, STR(run.out_dir), 1, 0, "runs", NULL,
     "parent directory of run directories"},
    {"run", "max_seconds", T_FLOAT, OFF(run.max_seconds), 0, 0, 1e9, "0", NULL,
     "launcher stops the run after this many seconds (0 = no limit)"},
    {"run", "target_return", T_FLOAT, OFF(run.target_return), 0, -1e9, 1e9, "475", NULL,
     "launcher stops the run once a greedy 100-episode evaluation reaches this mean return"},
    {"run", "log_level", T_ENUM, OFF(run.log_level), 0, 0, 0, "info", "error|warn|info|debug",
     "log verbosity"},

    {"env", "id", T_STR, STR(env.id), 1, 0, "CartPole-v1", NULL,
     "environment: a built-in id (CartPole-v1, Acrobot-v1, MountainCar-v0, MinAtar/<Game>-v0 "
     "with Game Asterix, Breakout, Freeway, Seaquest or SpaceInvaders), python (Gymnasium-style "
     "Python envs from [env] make, stepped by apex-actor's env workers, see [python]), or "
     "external (stepped by your own actors); python and external need obs_dim (or obs_shape), "
     "n_actions and obs_dtype"},
    {"env", "obs_dim", T_INT, OFF(env.ext_obs_dim), 0, 0, 1 << 20, "0", NULL,
     "observation length for id = python or external (0 = the built-in id's)"},
    {"env", "n_actions", T_INT, OFF(env.ext_n_actions), 0, 0, CONFIG_MAX_ACTIONS, "0", NULL,
     "number of discrete actions for id = python or external (0 = the built-in id's)"},
    {"env", "obs_dtype", T_ENUM, OFF(env.obs_dtype), 0, 0, 0, "auto", "float32|uint8|auto",
     "observation element type (auto: the environment's, float32 for python and external; "
     "uint8 stores a quarter of the bytes)"},
    {"env", "obs_shape", T_STR, STR(env.obs_shape), 0, 0, "", NULL,
     "observation shape HxWxC, channels last, e.g. 84x84x4 (for id = python or external; a "
     "conv network needs one; empty: a vector of obs_dim)"},
    {"env", "obs_scale", T_FLOAT, OFF(env.obs_scale), 0, 0, 1e6, "0", NULL,
     "observations are multiplied by this before the network (0: the environment's own: 1 for "
     "the built-in ones, 1/255 for python or external uint8, 1 for their float32)"},
    {"env", "make", T_STR, STR(env.make), 0, 0, "", NULL,
     "id = python: the env factory MODULE:CALLABLE, called once per env (MODULE: a dotted "
     "module on the workers' sys.path, which has python/, or a path to a .py file), e.g. "
     "apex_cartpole:CartPoleEnv"},
    {"env", "kwargs", T_STR, STR(env.kwargs), 0, 0, "", NULL,
     "id = python: keyword arguments for [env] make's CALLABLE, a JSON object on one line, "
     "e.g. {\"id\": \"CartPole-v1\"} (empty: none)"},
    {"env", "eval_id", T_STR, STR(env.eval_id), 0, 0, "", NULL,
     "id = python or external: a built-in id with the same dynamics and spaces; the launcher "
     "evaluates checkpoints on it with apex-eval (empty: no evaluation)"},

    {"network", "conv", T_STR, STR(network.conv_spec), 0, 0, "", NULL,
     "conv layers before the hidden ones, FILTERSxKERNELsSTRIDE, comma separated, no padding, "
     "ReLU after each (MinAtar's DQN: 16x3s1; Nature DQN: 32x8s4,64x4s2,64x3s1); empty: none"},
    {"network", "hidden", T_INTLIST, OFF(network.hidden), 0, 1, 8192, "256,256", NULL,
     "hidden layer sizes, comma separated (1 to 4 layers)"},
    {"network", "dueling", T_BOOL, OFF(network.dueling), 0, 0, 1, "true", NULL,
     "dueling head Q = V + A - mean(A)"},

    {"replay", "capacity", T_INT, OFF(replay.capacity), 0, 1, CONFIG_REPLAY_CAPACITY_MAX, "1048576",
     NULL, "transitions kept (FIFO ring); memory is allocated once at start-up"},
    {"replay", "shards", T_INT, OFF(replay.shards), 0, 1, CONFIG_MAX_SHARDS, "1", NULL,
     "replay shards: K apex-replay processes (--shard 0..K-1), each with capacity / K, its own "
     "endpoints and durability directory; actor i inserts into shard i mod K, the learner "
     "samples shard k with probability P_k / sum P (its total priority)"},
    {"replay", "alpha", T_FLOAT, OFF(replay.alpha), 0, 0, 1, "0.6", NULL,
     "priority exponent: P(i) ~ p_i^alpha"},
    {"replay", "min_size_to_sample", T_INT, OFF(replay.min_size_to_sample), 0, 1, 1LL << 31, "1000",
     NULL, "no sample is served before the replay holds this many transitions"},
    {"replay", "samples_per_insert", T_FLOAT, OFF(replay.samples_per_insert), 0, 0, 1e6, "0", NULL,
     "target ratio of sampled to inserted transitions (0 = no ratio limit)"},
    {"replay", "spi_tolerance", T_FLOAT, OFF(replay.spi_tolerance), 0, 0, 1e12, "1e5", NULL,
     "allowed deviation from samples_per_insert, in sampled transitions: sampling may lead "
     "samples_per_insert * inserted by this much, and a lag beyond it is forgiven (so a learner "
     "that fell behind, or a restore, cannot release a burst)"},
    {"replay", "sample_timeout_ms", T_INT, OFF(replay.sample_timeout_ms), 0, 1, 3600000, "1000",
     NULL, "a held-back sample request is answered 'not ready' after this long (ms)"},
    {"replay", "max_batch", T_INT, OFF(replay.max_batch), 0, 1, 65536, "4096", NULL,
     "largest number of transitions in one insert message or sample request"},
    {"replay", "stats_interval_ms", T_INT, OFF(replay.stats_interval_ms), 0, 100, 3600000, "5000",
     NULL, "period of the replay server's stats log line (ms)"},
    {"replay", "max_message_bytes", T_INT, OFF(replay.max_message_bytes), 0, 0, 1LL << 31, "0",
     NULL, "larger messages are refused by ZeroMQ (0 = derived from max_batch and obs size)"},
    {"replay", "durability", T_ENUM, OFF(replay.durability), 0, 0, 0, "none", "none|snapshot|wal",
     "what survives a replay server crash"},
    {"replay", "snapshot_interval_s", T_FLOAT, OFF(replay.snapshot_interval_s), 0, 0.1, 1e7, "300",
     NULL, "seconds between replay snapshots (durability = snapshot or wal)"},
    {"replay", "wal_sync_ms", T_INT, OFF(replay.wal_sync_ms), 0, 1, 60000, "50", NULL,
     "write-ahead log group commit: with the log writer idle, a logged insert waits at most "
     "this long for its fdatasync to start (ms); under load commits run back to back"},

    {"learner", "batch_size", T_INT, OFF(learner.batch_size), 0, 1, 65536, "512", NULL,
     "transitions per update"},
    {"learner", "lr", T_FLOAT, OFF(learner.lr), 0, 1e-12, 10, "0.0005", NULL, "learning rate"},
    {"learner", "lr_end", T_FLOAT, OFF(learner.lr_end), 0, 1e-12, 10, "0.0001", NULL,
     "learning rate after lr_steps updates, reached linearly from lr (only with lr_steps > 0)"},
    {"learner", "lr_steps", T_INT, OFF(learner.lr_steps), 0, 0, BIG, "0", NULL,
     "updates over which the learning rate is annealed linearly from lr to lr_end (0: lr "
     "stays constant)"},
    {"learner", "optimizer", T_ENUM, OFF(learner.optimizer), 0, 0, 0, "adam", "adam|rmsprop",
     "adam, or centered rmsprop as in the Ape-X paper"},
    {"learner", "adam_beta1", T_FLOAT, OFF(learner.adam_beta1), 0, 0, 0.999999, "0.9", NULL,
     "Adam first-moment decay"},
    {"learner", "adam_beta2", T_FLOAT, OFF(learner.adam_beta2), 0, 0, 0.999999999, "0.999", NULL,
     "Adam second-moment decay"},
    {"learner", "adam_eps", T_FLOAT, OFF(learner.adam_eps), 0, 0, 1, "1e-8", NULL, "Adam epsilon"},
    {"learner", "rms_decay", T_FLOAT, OFF(learner.rms_decay), 0, 0, 0.999999, "0.95", NULL,
     "centered RMSProp decay (Ape-X: 0.95)"},
    {"learner", "rms_eps", T_FLOAT, OFF(learner.rms_eps), 0, 0, 1, "1.5e-7", NULL,
     "centered RMSProp epsilon (Ape-X: 1.5e-7)"},
    {"learner", "grad_clip", T_FLOAT, OFF(learner.grad_clip), 0, 0, 1e9, "40", NULL,
     "global gradient-norm clip (0 = off)"},
    {"learner", "huber_delta", T_FLOAT, OFF(learner.huber_delta), 0, 1e-6, 1e6, "1", NULL,
     "Huber loss threshold"},
    {"learner", "target_update", T_INT, OFF(learner.target_update), 0, 1, BIG, "2500", NULL,
     "updates between target-network syncs (Ape-X: 2500)"},
    {"learner", "publish_every", T_INT, OFF(learner.publish_every), 0, 1, BIG, "50", NULL,
     "updates between weight broadcasts to the actors"},
    {"learner", "prefetch", T_INT, OFF(learner.prefetch), 0, 1, 64, "4", NULL,
     "sample requests kept in flight to the replay server"},
    {"learner", "batches_per_request", T_INT, OFF(learner.batches_per_request), 0, 0, 64, "0", NULL,
     "batches each sample request brings (each its own stratified sample; one round trip "
     "for several updates); 0 = up to 4 while a reply stays within 1 MiB and max_batch"},
    {"learner", "beta_start", T_FLOAT, OFF(learner.beta_start), 0, 0, 1, "0.4", NULL,
     "importance-sampling exponent at update 0"},
    {"learner", "beta_end", T_FLOAT, OFF(learner.beta_end), 0, 0, 1, "1.0", NULL,
     "importance-sampling exponent after beta_steps updates"},
    {"learner", "beta_steps", T_INT, OFF(learner.beta_steps), 0, 1, BIG, "100000", NULL,
     "updates over which beta is annealed linearly"},
    {"learner", "priority_eps", T_FLOAT, OFF(learner.priority_eps), 0, 0, 1, "1e-6", NULL,
     "added to |TD error| to form a priority"},
    {"learner", "checkpoint_interval_s", T_FLOAT, OFF(learner.checkpoint_interval_s), 0, 0.1, 1e7,
     "60", NULL, "seconds between checkpoints (one is also written at shutdown)"},
    {"learner", "max_steps", T_INT, OFF(learner.max_steps), 0, 0, BIG, "0", NULL,
     "stop after this many updates (0 = no limit)"},
    {"learner", "threads", T_INT, OFF(learner.threads), 0, 1, 256, "1", NULL,
     "OpenBLAS threads for the learner"},
    {"learner", "request_timeout_ms", T_INT, OFF(learner.request_timeout_ms), 0, 10, 3600000,
     "3000", NULL, "a sample request unanswered this long is re-issued (ms)"},
    {"learner", "metrics_interval_ms", T_INT, OFF(learner.metrics_interval_ms), 0, 100, 3600000,
     "1000", NULL, "period of metrics.csv rows (ms)"},
    {"learner", "ranks", T_INT, OFF(learner.ranks), 0, 1, 1024, "1", NULL,
     "learner processes the launchers (scripts/apex-local, scripts/apex-slurm) start as one "
     "data-parallel group: N > 1 runs apex-learner under mpirun or srun as N ranks, each "
     "training on its own batch_size; their --learners N overrides it. A learner started by "
     "hand is the group mpirun/srun make it"},
    {"learner", "zero_stage", T_INT, OFF(learner.zero_stage), 0, 0, 2, "1", NULL,
     "learner group (mpirun -np N apex-learner) only: 0 = all-reduce, optimizer state "
     "replicated; 1 = optimizer state sharded over the ranks (ZeRO-1); 2 = gradients sharded "
     "too (ZeRO-2)"},

    {"actor", "num_actors", T_INT, OFF(actor.num_actors), 0, 1, CONFIG_MAX_ACTORS, "2", NULL,
     "actor processes in the run: the epsilon schedule's N, the launcher's count, and the "
     "bound on actor ids the replay server accepts (--id 0..N-1)"},
    {"actor", "envs_per_actor", T_INT, OFF(actor.envs_per_actor), 0, 1, 4096, "16", NULL,
     "environments each actor steps in lock step"},
    {"actor", "n_step", T_INT, OFF(actor.n_step), 0, 1, 1000, "3", NULL, "n of n-step returns"},
    {"actor", "gamma", T_FLOAT, OFF(actor.gamma), 0, 0, 1, "0.99", NULL, "discount factor"},
    {"actor", "eps_base", T_FLOAT, OFF(actor.eps_base), 0, 0, 1, "0.4", NULL,
     "epsilon schedule base: eps_i = eps_base^(1 + eps_alpha * i / (N - 1))"},
    {"actor", "eps_alpha", T_FLOAT, OFF(actor.eps_alpha), 0, 0, 100, "7", NULL,
     "epsilon schedule exponent"},
    {"actor", "send_batch", T_INT, OFF(actor.send_batch), 0, 1, 65536, "50", NULL,
     "transitions per message to the replay server"},
    {"actor", "weight_sync_steps", T_INT, OFF(actor.weight_sync_steps), 0, 1, BIG, "400", NULL,
     "env steps (frames, summed over an actor's envs) between weight refreshes from the "
     "learner; the paper's 400"},
    {"actor", "max_pending_batches", T_INT, OFF(actor.max_pending_batches), 0, 1, 8192, "256", NULL,
     "unacknowledged batches kept for re-sending; when full the oldest is dropped"},
    {"actor", "ack_timeout_ms", T_INT, OFF(actor.ack_timeout_ms), 0, 10, 3600000, "3000", NULL,
     "a batch not acknowledged this long is sent again (ms)"},
    {"actor", "stats_interval_ms", T_INT, OFF(actor.stats_interval_ms), 0, 50, 3600000, "1000",
     NULL, "period of ActorStats messages to the learner (ms)"},
    {"actor", "max_steps_per_s", T_INT, OFF(actor.max_steps_per_s), 0, 0, BIG, "0", NULL,
     "cap on vector steps per second per actor (0 = as fast as possible)"},

    {"eval", "episodes", T_INT, OFF(eval.episodes), 0, 1, 100000, "100", NULL,
     "episodes per evaluation (apex-eval; the launcher's stop on [run] target_return)"},
    {"eval", "epsilon", T_FLOAT, OFF(eval.epsilon), 0, 0, 1, "0", NULL,
     "exploration rate during evaluation (0: greedy; MinAtar's paper reports epsilon 0.1)"},
    {"eval", "max_episode_steps", T_INT, OFF(eval.max_episode_steps), 0, 0, BIG, "27000", NULL,
     "an evaluation episode is cut after this many steps and counted with its return so far "
     "(a greedy policy can loop forever where an env has no time limit; 0 = never)"},
    {"eval", "interval_s", T_FLOAT, OFF(eval.interval_s), 0, 0, 1e6, "0", NULL,
     "apex-eval --follow evaluates the newest weights at most this often (0: as soon as an "
     "evaluation ends and newer weights exist)"},
    {"python", "workers", T_INT, OFF(python.workers), 0, 1, 256, "1", NULL,
     "id = python: env worker processes per actor; each steps envs_per_actor / workers envs"},
    {"python", "groups", T_INT, OFF(python.groups), 0, 1, 64, "2", NULL,
     "id = python: each worker's envs are stepped in this many groups, so that Python steps "
     "one while the actor infers for another (1 = lock step)"},
    {"python", "spawn", T_BOOL, OFF(python.spawn), 0, 0, 1, "true", NULL,
     "id = python: true, the actor starts its workers (and restarts them); false, they are "
     "started by hand (python3 python/apex_env.py --connect ... --worker-id K) and connect "
     "to [python] bind"},
    {"python", "transport", T_ENUM, OFF(python.transport), 0, 0, 0, "local", "local|zmq",
     "id = python: local, spawned workers talk over pipes and shared memory (no socket); zmq, "
     "over ZeroMQ at [python] bind (CURVE under [security] mode = curve; needed for spawn = "
     "false)"},
    {"python", "bind", T_STR, STR(python.bind), 1, 0, "tcp://127.0.0.1:*", NULL,
     "id = python, transport zmq: the endpoint actor 0 binds for its workers (ROUTER); actor i "
     "binds port + i; * = an ephemeral port (spawned workers only)"},
    {"python", "interpreter", T_STR, STR(python.interpreter), 1, 0, "/usr/bin/python3", NULL,
     "id = python: the Python the workers run (a path; it needs numpy, and pyzmq for zmq)"},
    {"python", "script", T_STR, STR(python.script), 0, 0, "", NULL,
     "id = python: the worker script (empty: python/apex_env.py of the tree the binaries were "
     "built in, found from the binary's directory)"},
    {"python", "step_timeout_ms", T_INT, OFF(python.step_timeout_ms), 0, 10, 3600000, "10000", NULL,
     "id = python: a worker whose reply to a step is this late is lost (restarted when "
     "spawned); its envs' episodes are dropped (ms)"},
    {"python", "hello_timeout_ms", T_INT, OFF(python.hello_timeout_ms), 0, 10, 3600000, "30000",
     NULL,
     "id = python: start-up waits this long for every worker's HELLO and first reset; "
     "later, the bound on a restarted worker's (ms)"},

    {"endpoints", "replay_insert_bind", T_STR, STR(endpoints.replay_insert_bind), 1, 0,
     "tcp://127.0.0.1:5550", NULL,
     "replay binds this for actor inserts (ROUTER; actors connect DEALERs); with [replay] "
     "shards > 1 one endpoint (shard k at port + 10 k) or one per shard, comma separated"},
    {"endpoints", "replay_insert", T_STR, STR(endpoints.replay_insert), 1, 0,
     "tcp://127.0.0.1:5550", NULL,
     "actors connect here to push transitions (sharded: as replay_insert_bind)"},
    {"endpoints", "replay_sample_bind", T_STR, STR(endpoints.replay_sample_bind), 1, 0,
     "tcp://127.0.0.1:5551", NULL,
     "replay binds this for learner requests (ROUTER; the learner connects a DEALER); "
     "sharded: as replay_insert_bind"},
    {"endpoints", "replay_sample", T_STR, STR(endpoints.replay_sample), 1, 0,
     "tcp://127.0.0.1:5551", NULL,
     "the learner connects here to sample and update (sharded: as replay_insert_bind)"},
    {"endpoints", "learner_pub_bind", T_STR, STR(endpoints.learner_pub_bind), 1, 0,
     "tcp://127.0.0.1:5552", NULL,
     "learner binds this to hand out weights (ROUTER; actors and apex-eval ask with DEALERs)"},
    {"endpoints", "learner_pub", T_STR, STR(endpoints.learner_pub), 1, 0, "tcp://127.0.0.1:5552",
     NULL, "actors and apex-eval --follow connect here to ask for weights"},
    {"endpoints", "learner_stats_bind", T_STR, STR(endpoints.learner_stats_bind), 1, 0,
     "tcp://127.0.0.1:5553", NULL, "learner binds this for actor stats (PULL)"},
    {"endpoints", "learner_stats", T_STR, STR(endpoints.learner_stats), 1, 0,
     "tcp://127.0.0.1:5553", NULL, "actors connect here to send episode stats"},

    {"security", "mode", T_ENUM, OFF(security.mode), 0, 0, 0, "none", "none|curve",
     "none (plain TCP) or curve (CurveZMQ: encrypted, servers accept only authorized keys)"},
    {"security", "key_dir", T_STR, STR(security.key_dir), 1, 0, "keys", NULL,
     "directory of <name>.key / <name>.pub files made by apex-keygen"},
    {"security", "authorized_keys", T_STR, STR(security.authorized_keys), 1, 0,
     "keys/authorized_keys", NULL, "client public keys the servers accept, one per line"},
};
#define N_ROWS (sizeof s_schema / sizeof s_schema[0])
_Static_assert(N_ROWS <= CONFIG_MAX_KEYS, "apex_config_t's origin arrays hold every key");

// Keys that existed once and were removed: a config that still has one gets an error that
// says why, instead of "unknown key".
static const struct {
    const char *section, *key, *why;
} s_retired[] = {
    {"replay", "reset_limiter_on_restore",
     "removed: a restore now brings the rate limiter's state back with the data, so the "
     "learner keeps the configured replay ratio across a replay restart (delete the line)"},
};

// ---------------------------------------------------------------------------------------
// Value parsing: one function per type, all with end-pointer and range checks.

// An integer against the row's range (doubles, as for every type).
static int s_int_in_range(int64_t x, const s_row *r, char *err, size_t errlen) {
    if ((double)x < r->min || (double)x > r->max) {
        return apex_errf(err, errlen, -1, "%lld is out of range [%.0f, %.0f]", (long long)x, r->min,
                         r->max);
    }
    return 0;
}

static int s_parse_int(const char *v, const s_row *r, int64_t *out, char *err, size_t errlen) {
    int64_t x;
    if (parse_int64(v, INT64_MIN, INT64_MAX, &x) != 0) {
        return apex_errf(err, errlen, -1, "'%s' is not an integer", v);
    }
    if (s_int_in_range(x, r, err, errlen) != 0) {
        return -1;
    }
    *out = x;
    return 0;
}

static int s_parse_float(const char *v, const s_row *r, double *out, char *err, size_t errlen) {
    errno = 0;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !isfinite(x)) {
        return apex_errf(err, errlen, -1, "'%s' is not a finite number", v);
    }
    if (x < r->min || x > r->max) {
        return apex_errf(err, errlen, -1, "%g is out of range [%g, %g]", x, r->min, r->max);
    }
    *out = x;
    return 0;
}

static int s_parse_bool(const char *v, int *out, char *err, size_t errlen) {
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(v, yes[i]) == 0) {
            *out = 1;
            return 0;
        }
        if (strcmp(v, no[i]) == 0) {
            *out = 0;
            return 0;
        }
    }
    return apex_errf(err, errlen, -1, "'%s' is not a boolean (true/false)", v);
}

static int s_parse_enum(const char *v, const s_row *r, int *out, char *err, size_t errlen) {
    const char *p = r->choices;
    for (int i = 0; *p; i++) {
        size_t n = strcspn(p, "|");
        if (strlen(v) == n && strncmp(v, p, n) == 0) {
            *out = i;
            return 0;
        }
        p += n + (p[n] == '|');
    }
    return apex_errf(err, errlen, -1, "'%s' is not one of %s", v, r->choices);
}

static int s_parse_intlist(const char *v, const s_row *r, apex_config_t *cfg, char *err,
                           size_t errlen) {
    // Only [network] hidden uses this type; its count lives next to it.
    int vals[CONFIG_MAX_HIDDEN] = {0};
    int n = 0;
    const char *p = v;
    while (1) {
        int64_t x;
        const char *end;
        if (parse_int64_prefix(p, &x, &end) != 0) {
            return apex_errf(err, errlen, -1, "'%s' is not a comma-separated list of integers", v);
        }
        if (s_int_in_range(x, r, err, errlen) != 0) {
            return -1;
        }
        if (n == CONFIG_MAX_HIDDEN) {
            return apex_errf(err, errlen, -1, "at most %d values allowed", CONFIG_MAX_HIDDEN);
        }
        vals[n++] = (int)x;
        while (*end == ' ') {
            end++;
        }
        if (*end == '\0') {
            break;
        }
        if (*end != ',') {
            return apex_errf(err, errlen, -1, "'%s' is not a comma-separated list of integers", v);
        }
        p = end + 1;
    }
    memcpy(cfg->network.hidden, vals, sizeof vals);
    cfg->network.n_hidden = n;
    return 0;
}

static int s_apply(apex_config_t *cfg, const s_row *r, const char *v, char *err, size_t errlen) {
    char *base = (char *)cfg + r->offset;
    switch (r->type) {
    case T_INT:
        return s_parse_int(v, r, (int64_t *)base, err, errlen);
    case T_FLOAT:
        return s_parse_float(v, r, (double *)base, err, errlen);
    case T_BOOL:
        return s_parse_bool(v, (int *)base, err, errlen);
    case T_ENUM:
        return s_parse_enum(v, r, (int *)base, err, errlen);
    case T_INTLIST:
        return s_parse_intlist(v, r, cfg, err, errlen);
    case T_STR:
        if (strlen(v) < r->min) {
            return apex_errf(err, errlen, -1, "must not be empty");
        }
        // --print-config must write a file that loads back to the same values: refuse what
        // INI cannot carry (a leading comment character, surrounding blanks, control
        // characters, or a line longer than libinih's INI_MAX_LINE).
        if (v[0] == ';' || v[0] == '#' || v[0] == ' ' || v[0] == '\t' ||
            (v[0] && (v[strlen(v) - 1] == ' ' || v[strlen(v) - 1] == '\t'))) {
            return apex_errf(err, errlen, -1,
                             "must not start with ';' or '#' or start/end with blanks");
        }
        for (const char *c = v; *c; c++) {
            if ((unsigned char)*c < 0x20) {
                return apex_errf(err, errlen, -1, "must not contain control characters");
            }
            if (c[0] == ' ' && (c[1] == ';' || c[1] == '#')) {
                return apex_errf(err, errlen, -1,
                                 "must not contain ' ;' or ' #' (read as a comment)");
            }
        }
        if (strlen(r->key) + 3 + strlen(v) > INI_MAX_LINE - 2) {
            return apex_errf(err, errlen, -1, "too long for one INI line (%d characters)",
                             INI_MAX_LINE - 2);
        }
        if (strlen(v) >= r->size) {
            return apex_errf(err, errlen, -1, "longer than %zu characters", r->size - 1);
        }
        memcpy(base, v, strlen(v) + 1);
        return 0;
    }
    return apex_errf(err, errlen, -1, "internal: unknown type");
}

static const s_row *s_find(const char *section, const char *key) {
    for (size_t i = 0; i < N_ROWS; i++) {
        if (strcmp(s_schema[i].section, section) == 0 && strcmp(s_schema[i].key, key) == 0) {
            return &s_schema[i];
        }
    }
    return NULL;
}

static int s_section_known(const char *section) {
    for (size_t i = 0; i < N_ROWS; i++) {
        if (strcmp(s_schema[i].section, section) == 0) {
            return 1;
        }
    }
    return 0;
}

void config_defaults(apex_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    char err[CONFIG_ERR_LEN];
    for (size_t i = 0; i < N_ROWS; i++) {
        if (s_apply(cfg, &s_schema[i], s_schema[i].def, err, sizeof err) != 0) {
            APEX_PANIC("config schema default for [%s] %s: %s", s_schema[i].section,
                       s_schema[i].key, err);
        }
    }
}

// ---------------------------------------------------------------------------------------
// INI file reading. libinih does not report line numbers to the handler in Debian's build
// (INI_HANDLER_LINENO is 0), so a reader wrapper counts lines as inih pulls them.

typedef struct {
    FILE *f;
    int line;       // line number of the line inih is processing
    int next_line;  // line number of the next line to read
    int indented;   // the current line starts with whitespace (a continuation line)
    int too_long;   // a line did not fit inih's buffer
    int bad_header; // line of a "[" without its "]" (inih keeps the section before)
    char bad_text[64];
    apex_config_t *cfg;
    unsigned char seen[N_ROWS];
    char *err;
    size_t errlen;
    int failed;
} s_ini_ctx;

static char *s_reader(char *str, int num, void *stream) {
    s_ini_ctx *c = stream;
    char *r = fgets(str, num, c->f);
    if (!r) {
        return NULL;
    }
    size_t n = strlen(str);
    c->line = c->next_line;
    c->indented = (str[0] == ' ' || str[0] == '\t');
    const char *t = str + strspn(str, " \t");
    if (*t == '[' && !strchr(t, ']') && !c->bad_header) {
        c->bad_header = c->line;
        snprintf(c->bad_text, sizeof c->bad_text, "%.*s", (int)strcspn(t, "\r\n"), t);
    }
    if (n > 0 && str[n - 1] == '\n') {
        c->next_line++;
    } else if (!feof(c->f)) {
        c->too_long = 1;
    }
    return r;
}

static const char *s_retired_why(const char *section, const char *key) {
    for (size_t i = 0; i < sizeof s_retired / sizeof s_retired[0]; i++) {
        if (strcmp(s_retired[i].section, section) == 0 && strcmp(s_retired[i].key, key) == 0) {
            return s_retired[i].why;
        }
    }
    return NULL;
}

static int s_handler(void *user, const char *section, const char *key, const char *value) {
    s_ini_ctx *c = user;
    if (c->failed) {
        return 0;
    }
    char why[CONFIG_ERR_LEN];
    const s_row *r = s_find(section, key);
    if (c->bad_header) {
        snprintf(c->err, c->errlen, "%s:%d: '%s' is not a section header (missing ']')",
                 c->cfg->source, c->bad_header, c->bad_text);
        c->failed = 1;
        return 0;
    }
    if (c->too_long) {
        snprintf(why, sizeof why, "line too long");
    } else if (!s_section_known(section)) {
        snprintf(why, sizeof why, "unknown section");
    } else if (!r && s_retired_why(section, key)) {
        snprintf(why, sizeof why, "%s", s_retired_why(section, key));
    } else if (!r) {
        snprintf(why, sizeof why, "unknown key (see --help-config)");
    } else if (c->indented) {
        snprintf(why, sizeof why, "indented continuation lines are not supported");
    } else if (c->seen[r - s_schema]) {
        snprintf(why, sizeof why, "duplicate key");
    } else if (s_apply(c->cfg, r, value, why, sizeof why) == 0) {
        c->seen[r - s_schema] = 1;
        c->cfg->origin_line[r - s_schema] = (uint16_t)(c->line > 65535 ? 65535 : c->line);
        return 1;
    }
    snprintf(c->err, c->errlen, "%s:%d: [%s] %s: %s", c->cfg->source, c->line, section, key, why);
    c->failed = 1;
    return 0;
}

static int s_load_file(apex_config_t *cfg, const char *path, char *err, size_t errlen) {
    s_ini_ctx c = {.line = 0, .next_line = 1, .cfg = cfg, .err = err, .errlen = errlen};
    c.f = fopen(path, "r");
    if (!c.f) {
        return apex_errf(err, errlen, -1, "%s: cannot open config: %s", path, strerror(errno));
    }
    int rc = ini_parse_stream(s_reader, &c, s_handler, &c);
    fclose(c.f);
    if (c.failed) {
        return -1;
    }
    if (c.bad_header) {
        return apex_errf(err, errlen, -1, "%s:%d: '%s' is not a section header (missing ']')", path,
                         c.bad_header, c.bad_text);
    }
    if (rc != 0) {
        if (c.too_long) {
            return apex_errf(err, errlen, -1, "%s:%d: line too long", path, c.line);
        }
        return apex_errf(err, errlen, -1,
                         "%s:%d: syntax error (expected '[section]' or 'key = value')", path,
                         rc > 0 ? rc : c.line);
    }
    return 0;
}

int config_set(apex_config_t *cfg, const char *assignment, char *err, size_t errlen) {
    const char *dot = strchr(assignment, '.');
    const char *eq = strchr(assignment, '=');
    if (!dot || !eq || dot > eq) {
        return apex_errf(err, errlen, -1, "--set %s: expected section.key=value", assignment);
    }
    char section[64], key[64];
    size_t ls = (size_t)(dot - assignment), lk = (size_t)(eq - dot - 1);
    if (ls == 0 || ls >= sizeof section || lk == 0 || lk >= sizeof key) {
        return apex_errf(err, errlen, -1, "--set %s: expected section.key=value", assignment);
    }
    memcpy(section, assignment, ls);
    section[ls] = '\0';
    memcpy(key, dot + 1, lk);
    key[lk] = '\0';
    const s_row *r = s_find(section, key);
    if (!r) {
        const char *retired = s_retired_why(section, key);
        return apex_errf(err, errlen, -1, "--set: [%s] %s: %s", section, key,
                         retired ? retired : "unknown key (see --help-config)");
    }
    char why[CONFIG_ERR_LEN];
    if (s_apply(cfg, r, eq + 1, why, sizeof why) != 0) {
        return apex_errf(err, errlen, -1, "--set: [%s] %s: %s", section, key, why);
    }
    cfg->origin_set[r - s_schema] = 1;
    return 0;
}

static int s_cross_check_sizes(apex_config_t *cfg, char *err, size_t errlen);

// Where [section] key's value came from, for the messages of the cross checks, which would
// otherwise blame the file for a value given by --set: "--set section.key", "file:line", or
// "file (default)". Writes into buf and returns it.
static const char *s_where(const apex_config_t *cfg, const char *section, const char *key,
                           char *buf, size_t n) {
    const s_row *r = s_find(section, key);
    APEX_ASSERT(r != NULL);
    size_t i = (size_t)(r - s_schema);
    if (cfg->origin_set[i]) {
        snprintf(buf, n, "--set %s.%s", section, key);
    } else if (cfg->origin_line[i]) {
        snprintf(buf, n, "%s:%u", cfg->source, (unsigned)cfg->origin_line[i]);
    } else {
        snprintf(buf, n, "%s (default)", cfg->source);
    }
    return buf;
}
#define WHERE(sec, key) s_where(cfg, sec, key, (char[CONFIG_STR_LEN + 32]){0}, CONFIG_STR_LEN + 32)

// Parses "HxWxC" into *h, *w, *c (each >= 1). 0 or -1.
static int s_parse_shape(const char *v, int *h, int *w, int *c) {
    char tail;
    if (sscanf(v, "%dx%dx%d%c", h, w, c, &tail) != 3 || *h < 1 || *w < 1 || *c < 1 ||
        (int64_t)*h * *w * *c > (1 << 20)) {
        return -1;
    }
    return 0;
}

// Parses [network] conv ("16x3s1,32x4s2", or "" for none) into cfg->network.conv, then walks
// the observation shape through the layers (no padding: out = (in - k) / s + 1), so that a
// stack that does not fit its input is a config error naming the layer.
static int s_parse_conv(apex_config_t *cfg, char *err, size_t errlen) {
    config_network_t *n = &cfg->network;
    n->n_conv = 0;
    const char *p = n->conv_spec;
    while (*p == ' ') {
        p++;
    }
    if (*p == '\0' || strcmp(p, "none") == 0) {
        return 0;
    }
    while (*p) {
        int f, k, st, used = 0;
        if (sscanf(p, " %dx%ds%d%n", &f, &k, &st, &used) != 3 || f < 1 || f > 4096 || k < 1 ||
            k > 256 || st < 1 || st > 256) {
            return apex_errf(
                err, errlen, -1,
                "%s: [network] conv: '%s' is not a list of FILTERSxKERNELsSTRIDE (e.g. "
                "16x3s1 or 32x8s4,64x4s2,64x3s1; filters 1..4096, kernel and stride "
                "1..256)",
                WHERE("network", "conv"), n->conv_spec);
        }
        if (n->n_conv == CONFIG_MAX_CONV) {
            return apex_errf(err, errlen, -1, "%s: [network] conv: at most %d layers",
                             WHERE("network", "conv"), CONFIG_MAX_CONV);
        }
        n->conv[n->n_conv].filters = f, n->conv[n->n_conv].kernel = k;
        n->conv[n->n_conv].stride = st;
        n->n_conv++;
        p += used;
        while (*p == ' ') {
            p++;
        }
        if (*p == ',') {
            p++;
        } else if (*p) {
            return apex_errf(err, errlen, -1,
                             "%s: [network] conv: '%s': expected ',' after layer %d",
                             WHERE("network", "conv"), n->conv_spec, n->n_conv);
        }
    }
    const config_env_t *e = &cfg->env;
    if (e->obs_h == 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [network] conv: conv layers need an image observation; %s's is a "
                         "vector of %d (for id = external, set [env] obs_shape)",
                         WHERE("network", "conv"), e->id, e->obs_dim);
    }
    int h = e->obs_h, w = e->obs_w;
    for (int l = 0; l < n->n_conv; l++) {
        int k = n->conv[l].kernel, st = n->conv[l].stride;
        if (k > h || k > w) {
            return apex_errf(err, errlen, -1,
                             "%s: [network] conv: layer %d (%dx%ds%d) has a kernel larger than its "
                             "%dx%d input",
                             WHERE("network", "conv"), l + 1, n->conv[l].filters, k, st, h, w);
        }
        h = (h - k) / st + 1, w = (w - k) / st + 1;
    }
    return 0;
}

// [env]'s observation keys against the environment: the dtype and shape of a built-in id are
// its own (a matching value is accepted: --print-config writes them back); scale 0 and dtype
// auto resolve to the environment's.
static int s_cross_check_obs(apex_config_t *cfg, const envinfo_t *e, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    int h = 0, w = 0, c = 0;
    if (env->obs_shape[0] && s_parse_shape(env->obs_shape, &h, &w, &c) != 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] obs_shape: '%s' is not HxWxC (positive, at most 2^20 elements)",
                         WHERE("env", "obs_shape"), env->obs_shape);
    }
    if (e) {
        if (env->obs_dtype != CONFIG_OBS_AUTO && env->obs_dtype != e->obs_dtype) {
            return apex_errf(err, errlen, -1, "%s: [env] obs_dtype: %s's observations are %s",
                             WHERE("env", "obs_dtype"), e->id,
                             e->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32");
        }
        if (env->obs_shape[0] && (h != e->obs_h || w != e->obs_w || c != e->obs_c)) {
            return apex_errf(err, errlen, -1, "%s: [env] obs_shape: %s's observations are %s",
                             WHERE("env", "obs_shape"), e->id,
                             e->obs_h ? "images" : "vectors (leave obs_shape empty)");
        }
        env->obs_dtype = e->obs_dtype;
        env->obs_h = e->obs_h, env->obs_w = e->obs_w, env->obs_c = e->obs_c;
        if (env->obs_scale == 0) {
            env->obs_scale = e->obs_scale;
        }
        return 0;
    }
    if (env->obs_dtype == CONFIG_OBS_AUTO) {
        env->obs_dtype = CONFIG_OBS_FLOAT32;
    }
    if (env->obs_shape[0]) {
        if ((int64_t)h * w * c != env->obs_dim) {
            return apex_errf(
                err, errlen, -1, "%s: [env] obs_shape: %s is %lld elements, obs_dim is %d",
                WHERE("env", "obs_shape"), env->obs_shape, (long long)h * w * c, env->obs_dim);
        }
        env->obs_h = h, env->obs_w = w, env->obs_c = c;
    }
    if (env->obs_scale == 0) {
        env->obs_scale = env->obs_dtype == CONFIG_OBS_UINT8 ? 1.0 / 255.0 : 1.0;
    }
    return 0;
}

// [env] eval_id: a built-in env whose spaces are the run's (id = python or external).
static int s_cross_check_eval_id(const apex_config_t *cfg, char *err, size_t errlen) {
    const config_env_t *env = &cfg->env;
    if (!env->eval_id[0]) {
        return 0;
    }
    const envinfo_t *e = envinfo_find(env->eval_id);
    if (!e) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id: '%s' is not a built-in environment (%s)",
                         WHERE("env", "eval_id"), env->eval_id, envinfo_known_ids());
    }
    if (e->obs_dim != env->obs_dim || e->n_actions != env->n_actions ||
        e->obs_dtype != env->obs_dtype || e->obs_h != env->obs_h || e->obs_w != env->obs_w ||
        e->obs_c != env->obs_c) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id: %s has %d %s observation elements and %d actions; the "
                         "run's ([env] obs_dim, obs_dtype, obs_shape, n_actions) are %d %s and %d",
                         WHERE("env", "eval_id"), e->id, e->obs_dim,
                         e->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32", e->n_actions,
                         env->obs_dim, env->obs_dtype == CONFIG_OBS_UINT8 ? "uint8" : "float32",
                         env->n_actions);
    }
    return 0;
}

// [env] id = python: the factory and [python]'s keys against [actor]'s.
static int s_cross_check_python(const apex_config_t *cfg, char *err, size_t errlen) {
    const config_env_t *env = &cfg->env;
    const config_python_t *py = &cfg->python;
    if (py->spawn && (!env->make[0] || !strchr(env->make, ':'))) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] make: id = python needs the env factory as MODULE:CALLABLE "
                         "(have '%s'), e.g. apex_cartpole:CartPoleEnv",
                         WHERE("env", "make"), env->make);
    }
    size_t kl = strlen(env->kwargs);
    if (kl && (env->kwargs[0] != '{' || env->kwargs[kl - 1] != '}')) {
        return apex_errf(err, errlen, -1, "%s: [env] kwargs: '%s' is not a JSON object {...}",
                         WHERE("env", "kwargs"), env->kwargs);
    }
    if (py->transport == CONFIG_PY_LOCAL && !py->spawn) {
        return apex_errf(err, errlen, -1,
                         "%s: [python] transport: local is for workers the actor spawns (%s: spawn "
                         "= false); workers started by hand connect with transport = zmq",
                         WHERE("python", "transport"), WHERE("python", "spawn"));
    }
    if (!py->spawn && strstr(py->bind, ":*")) {
        return apex_errf(err, errlen, -1,
                         "%s: [python] bind: '%s' has an ephemeral port; workers started by hand "
                         "(spawn = false) need a fixed one to connect to",
                         WHERE("python", "bind"), py->bind);
    }
    int64_t E = cfg->actor.envs_per_actor;
    if (E % py->workers != 0 || (E / py->workers) % py->groups != 0) {
        return apex_errf(
            err, errlen, -1,
            "%s: [python] workers %lld x groups %lld must divide [actor] "
            "envs_per_actor %lld (%s): each worker steps envs_per_actor / workers envs "
            "in groups of equal size",
            WHERE("python", E % py->workers ? "workers" : "groups"), (long long)py->workers,
            (long long)py->groups, (long long)E, WHERE("actor", "envs_per_actor"));
    }
    return 0;
}

// Checks between keys, and the values derived from them.
static int s_cross_check(apex_config_t *cfg, char *err, size_t errlen) {
    config_env_t *env = &cfg->env;
    int is_python = strcmp(env->id, CONFIG_ENV_PYTHON) == 0;
    if (!is_python && (env->make[0] || env->kwargs[0])) {
        return apex_errf(err, errlen, -1, "%s: [env] %s is for id = python (id is '%s')",
                         WHERE("env", env->make[0] ? "make" : "kwargs"),
                         env->make[0] ? "make" : "kwargs", env->id);
    }
    if (strcmp(env->id, CONFIG_ENV_EXTERNAL) == 0 || is_python) {
        if (env->obs_shape[0]) {
            int h, w, c;
            if (s_parse_shape(env->obs_shape, &h, &w, &c) != 0) {
                return apex_errf(err, errlen, -1,
                                 "%s: [env] obs_shape: '%s' is not HxWxC (positive, at most 2^20 "
                                 "elements)",
                                 WHERE("env", "obs_shape"), env->obs_shape);
            }
            if (env->ext_obs_dim == 0) {
                env->ext_obs_dim = (int64_t)h * w * c; // the shape gives the length
            }
        }
        if (env->ext_obs_dim < 1 || env->ext_n_actions < 2) {
            return apex_errf(err, errlen, -1,
                             "%s: [env] id = %s needs obs_dim (or obs_shape) and n_actions >= "
                             "2 (have %lld and %lld)",
                             WHERE("env", "id"), env->id, (long long)env->ext_obs_dim,
                             (long long)env->ext_n_actions);
        }
        env->obs_dim = (int)env->ext_obs_dim;
        env->n_actions = (int)env->ext_n_actions;
        env->max_episode_steps = 0;
        if (s_cross_check_obs(cfg, NULL, err, errlen) != 0 || s_parse_conv(cfg, err, errlen) != 0 ||
            s_cross_check_eval_id(cfg, err, errlen) != 0 ||
            (is_python && s_cross_check_python(cfg, err, errlen) != 0)) {
            return -1;
        }
        return s_cross_check_sizes(cfg, err, errlen);
    }
    const envinfo_t *e = envinfo_find(env->id);
    if (!e) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] id: unknown environment '%s' (known: %s, or %s, or %s)",
                         WHERE("env", "id"), env->id, envinfo_known_ids(), CONFIG_ENV_PYTHON,
                         CONFIG_ENV_EXTERNAL);
    }
    if (env->eval_id[0] && strcmp(env->eval_id, env->id) != 0) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] eval_id is for id = python or external (id is %s)",
                         WHERE("env", "eval_id"), env->id);
    }
    // --print-config writes the derived values back, so a matching value is accepted.
    if ((env->ext_obs_dim != 0 && env->ext_obs_dim != e->obs_dim) ||
        (env->ext_n_actions != 0 && env->ext_n_actions != e->n_actions)) {
        return apex_errf(err, errlen, -1,
                         "%s: [env] obs_dim and n_actions are for id = external; %s has %d and %d",
                         WHERE("env", env->ext_obs_dim != 0 && env->ext_obs_dim != e->obs_dim
                                          ? "obs_dim"
                                          : "n_actions"),
                         e->id, e->obs_dim, e->n_actions);
    }
    env->obs_dim = e->obs_dim;
    env->n_actions = e->n_actions;
    env->max_episode_steps = e->max_episode_steps;
    env->ext_obs_dim = e->obs_dim;
    env->ext_n_actions = e->n_actions;
    if (s_cross_check_obs(cfg, e, err, errlen) != 0 || s_parse_conv(cfg, err, errlen) != 0) {
        return -1;
    }
    return s_cross_check_sizes(cfg, err, errlen);
}

// [learner] batches_per_request = 0. Every request/reply pair costs each side a few
// system calls and I/O-thread wake-ups whatever its size (~28 per batch over TCP), so small
// replies are merged: up to 4 batches (3x the batches/s over TCP, bench/RESULTS.md), while
// a reply stays within 1 MiB (beyond that the copy, not the message, is the cost, and the
// learner's prefetch slots grow with it) and within [replay] max_batch.
static int64_t s_auto_batches_per_request(const apex_config_t *cfg) {
    const int64_t elem = cfg->env.obs_dtype == CONFIG_OBS_UINT8 ? 1 : 4;
    // obs and next_obs, key, weight, action, reward, discount
    const int64_t row_bytes = 2 * cfg->env.obs_dim * elem + 8 + 4 * 4;
    int64_t k = 4;
    k = APEX_MIN(k, cfg->replay.max_batch / cfg->learner.batch_size);
    k = APEX_MIN(k, (int64_t)(1 << 20) / (cfg->learner.batch_size * row_bytes));
    return APEX_MAX(k, (int64_t)1);
}

// The batch-size checks of s_cross_check.
static int s_cross_check_sizes(apex_config_t *cfg, char *err, size_t errlen) {
    if (cfg->replay.min_size_to_sample > cfg->replay.capacity) {
        return apex_errf(err, errlen, -1,
                         "%s: [replay] min_size_to_sample: %lld exceeds capacity %lld (%s; the "
                         "learner would wait forever)",
                         WHERE("replay", "min_size_to_sample"),
                         (long long)cfg->replay.min_size_to_sample, (long long)cfg->replay.capacity,
                         WHERE("replay", "capacity"));
    }
    if (cfg->learner.batch_size > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [learner] batch_size: %lld exceeds [replay] max_batch %lld (%s)",
                         WHERE("learner", "batch_size"), (long long)cfg->learner.batch_size,
                         (long long)cfg->replay.max_batch, WHERE("replay", "max_batch"));
    }
    if (cfg->learner.batches_per_request == 0) {
        cfg->learner.batches_per_request = s_auto_batches_per_request(cfg);
    }
    if (cfg->learner.batch_size * cfg->learner.batches_per_request > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [learner] batches_per_request: %lld batches of %lld exceed [replay] "
                         "max_batch %lld (the rows of one reply)",
                         WHERE("learner", "batches_per_request"),
                         (long long)cfg->learner.batches_per_request,
                         (long long)cfg->learner.batch_size, (long long)cfg->replay.max_batch);
    }
    if (cfg->actor.send_batch > cfg->replay.max_batch) {
        return apex_errf(err, errlen, -1,
                         "%s: [actor] send_batch: %lld exceeds [replay] max_batch %lld (%s)",
                         WHERE("actor", "send_batch"), (long long)cfg->actor.send_batch,
                         (long long)cfg->replay.max_batch, WHERE("replay", "max_batch"));
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Sharded replay: which endpoints, which capacity (config.h has the rule).

// The four keys that name replay endpoints, in schema order.
static const char *const s_replay_ep_keys[] = {"replay_insert_bind", "replay_insert",
                                               "replay_sample_bind", "replay_sample"};

static char *s_replay_ep_field(apex_config_t *cfg, int i) {
    config_endpoints_t *e = &cfg->endpoints;
    char *f[] = {e->replay_insert_bind, e->replay_insert, e->replay_sample_bind, e->replay_sample};
    return f[i];
}

// Splits "scheme://address" at the scheme; *addr points after "://" (NULL: no scheme).
static size_t s_scheme_len(const char *ep, const char **addr) {
    const char *p = strstr(ep, "://");
    *addr = p ? p + 3 : NULL;
    return p ? (size_t)(p + 3 - ep) : 0;
}

// The port of a tcp address ("host:port", "[v6]:port", "*:port"): a pointer to its first
// character, or NULL when the address has none.
static const char *s_tcp_port(const char *addr, size_t len) {
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        colon = addr[i] == ':' ? addr + i : colon;
        colon = addr[i] == ']' ? NULL : colon; // a colon inside [v6] is not the port's
    }
    return colon ? colon + 1 : NULL;
}

// Writes host + ":" + (port0 + stride k, or '*') for a tcp entry without its own port.
static int s_port_plus(char *out, size_t n, const char *prefix, size_t prefix_len,
                       const char *port0, int k, char *err, size_t errlen) {
    if (strcmp(port0, "*") == 0) {
        return snprintf(out, n, "%.*s:*", (int)prefix_len, prefix) < (int)n
                   ? 0
                   : apex_errf(err, errlen, -1, "too long");
    }
    int64_t p = 0;
    int rc = parse_int64(port0, 1, 65535, &p);
    int64_t q = p + (int64_t)CONFIG_SHARD_PORT_STRIDE * k;
    if (rc != 0 || q > 65535) {
        return apex_errf(err, errlen, -1, "port '%s' + %d is not a port", port0,
                         CONFIG_SHARD_PORT_STRIDE * k);
    }
    return snprintf(out, n, "%.*s:%lld", (int)prefix_len, prefix, (long long)q) < (int)n
               ? 0
               : apex_errf(err, errlen, -1, "too long");
}

int config_shard_endpoint(const char *value, int k, int K, char *out, size_t n, char *err,
                          size_t errlen) {
    if (K <= 1) {
        return snprintf(out, n, "%s", value) < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
    }
    int entries = 1;
    for (const char *c = value; *c; c++) {
        entries += *c == ',';
    }
    if (entries != 1 && entries != K) {
        return apex_errf(err, errlen, -1,
                         "'%s' has %d endpoints; [replay] shards is %d (give one endpoint, or one "
                         "per shard, comma separated)",
                         value, entries, K);
    }
    const char *addr0;
    size_t scheme = s_scheme_len(value, &addr0);
    size_t first_len = strcspn(value, ",");
    if (!scheme || scheme > first_len) {
        return apex_errf(err, errlen, -1, "'%s': the first endpoint needs a scheme (tcp://...)",
                         value);
    }
    int tcp = strncmp(value, "tcp://", 6) == 0;
    char port0[16] = "";
    if (tcp) {
        const char *p = s_tcp_port(addr0, first_len - scheme);
        size_t plen = p ? (size_t)(value + first_len - p) : 0;
        if (!p || plen == 0 || plen >= sizeof port0) {
            return apex_errf(err, errlen, -1, "'%.*s' has no port", (int)first_len, value);
        }
        memcpy(port0, p, plen);
        port0[plen] = '\0';
    }
    if (entries == 1) { // one endpoint for all: port + stride k, or a suffix
        if (tcp) {
            size_t host = first_len - strlen(port0) - 1;
            return s_port_plus(out, n, value, host, port0, k, err, errlen);
        }
        int w = k == 0 ? snprintf(out, n, "%s", value) : snprintf(out, n, "%s-%d", value, k);
        return w < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
    }
    const char *e = value;
    for (int i = 0; i < k; i++) {
        e += strcspn(e, ",") + 1;
    }
    size_t len = strcspn(e, ",");
    if (len == 0) {
        return apex_errf(err, errlen, -1, "'%s': endpoint %d is empty", value, k);
    }
    char entry[CONFIG_STR_LEN];
    const char *addr;
    if (s_scheme_len(e, &addr) == 0 || (size_t)(addr - e) > len) { // no scheme: the first's
        snprintf(entry, sizeof entry, "%.*s%.*s", (int)scheme, value, (int)len, e);
    } else {
        snprintf(entry, sizeof entry, "%.*s", (int)len, e);
    }
    s_scheme_len(entry, &addr);
    if (tcp && strncmp(entry, "tcp://", 6) == 0 && !s_tcp_port(addr, strlen(addr))) {
        return s_port_plus(out, n, entry, strlen(entry), port0, k, err, errlen);
    }
    return snprintf(out, n, "%s", entry) < (int)n ? 0 : apex_errf(err, errlen, -1, "too long");
}

int64_t config_shard_capacity(const apex_config_t *cfg, int k) {
    int64_t K = cfg->replay.shards, c = cfg->replay.capacity;
    return c / K + (k < c % K ? 1 : 0);
}

int config_actor_shard(const apex_config_t *cfg, int index) {
    return (int)(index % cfg->replay.shards);
}

int config_select_shard(apex_config_t *cfg, int k) {
    int K = (int)cfg->replay.shards;
    if (k < 0 || k >= K) {
        return -1;
    }
    if (K == 1) {
        return 0; // the config is shard 0's as it is
    }
    char err[CONFIG_ERR_LEN];
    for (int i = 0; i < 4; i++) {
        char ep[CONFIG_STR_LEN] = {0}; // zero-filled: the struct stays comparable with memcmp
        if (config_shard_endpoint(s_replay_ep_field(cfg, i), k, K, ep, sizeof ep, err,
                                  sizeof err) != 0) {
            return -1; // config_load checked every key resolves: not reached after it
        }
        memcpy(s_replay_ep_field(cfg, i), ep, sizeof ep);
    }
    cfg->replay.capacity = config_shard_capacity(cfg, k);
    cfg->replay.shard = k;
    return 0;
}

// [replay] shards > 1: every replay endpoint resolves for every shard, and the shards that
// clients connect to are distinct (two entries reaching one server would count its priority
// mass twice); each shard holds at least one transition and has at least one actor.
static int s_cross_check_shards(apex_config_t *cfg, char *err, size_t errlen) {
    int K = (int)cfg->replay.shards;
    if (K == 1) {
        return 0;
    }
    if (cfg->replay.capacity < K || cfg->actor.num_actors < K) {
        const char *key = cfg->replay.capacity < K ? "capacity" : "num_actors";
        return apex_errf(
            err, errlen, -1,
            "%s: [replay] shards: %d shards need a capacity and [actor] num_actors of "
            "at least %d (%s is %lld: %s)",
            WHERE("replay", "shards"), K, K, key,
            (long long)(cfg->replay.capacity < K ? cfg->replay.capacity : cfg->actor.num_actors),
            WHERE(cfg->replay.capacity < K ? "replay" : "actor", key));
    }
    // Binds (keys 0, 2) and connects (1, 3) are checked as two sets: within each, the insert
    // and sample endpoints of every shard and the learner's two must all differ.
    const config_endpoints_t *le = &cfg->endpoints;
    const char *learner[2][2] = {{le->learner_pub_bind, le->learner_stats_bind},
                                 {le->learner_pub, le->learner_stats}};
    char(*eps)[CONFIG_STR_LEN] = xcalloc(4 * (size_t)K, CONFIG_STR_LEN); // [set][index]
    int n[2] = {0, 0}, rc = 0;
    char why[CONFIG_ERR_LEN];
    for (int i = 0; i < 4 && rc == 0; i++) {
        int set = i % 2;
        char(*seen)[CONFIG_STR_LEN] = eps + (size_t)set * 2 * K;
        for (int k = 0; k < K && rc == 0; k++) {
            char *e = seen[n[set]];
            if (config_shard_endpoint(s_replay_ep_field(cfg, i), k, K, e, CONFIG_STR_LEN, why,
                                      sizeof why) != 0) {
                rc = apex_errf(err, errlen, -1, "%s: [endpoints] %s: shard %d: %s",
                               WHERE("endpoints", s_replay_ep_keys[i]), s_replay_ep_keys[i], k,
                               why);
                break;
            }
            const char *clash = NULL;
            for (int j = 0; j < n[set] && !clash && !strstr(e, ":*"); j++) {
                clash = strcmp(seen[j], e) == 0 ? "another replay shard" : NULL;
            }
            for (int j = 0; j < 2 && !clash && !strstr(e, ":*"); j++) {
                clash = strcmp(learner[set][j], e) == 0 ? "the learner" : NULL;
            }
            if (clash) {
                rc = apex_errf(
                    err, errlen, -1, "%s: [endpoints] %s: shard %d is at %s, which %s uses",
                    WHERE("endpoints", s_replay_ep_keys[i]), s_replay_ep_keys[i], k, e, clash);
            }
            n[set]++;
        }
    }
    free(eps);
    return rc;
}

int config_load(apex_config_t *cfg, const char *path, const char *const *sets, int n_sets,
                char *err, size_t errlen) {
    config_defaults(cfg);
    snprintf(cfg->source, sizeof cfg->source, "%s", path ? path : "(defaults)");
    if (path && s_load_file(cfg, path, err, errlen) != 0) {
        return -1;
    }
    for (int i = 0; i < n_sets; i++) {
        if (config_set(cfg, sets[i], err, errlen) != 0) {
            return -1;
        }
    }
    if (s_cross_check(cfg, err, errlen) != 0) {
        return -1;
    }
    return s_cross_check_shards(cfg, err, errlen);
}

// ---------------------------------------------------------------------------------------
// Printing: the resolved config as INI, and the reference.

static void s_format_value(const apex_config_t *cfg, const s_row *r, char *buf, size_t n) {
    const char *base = (const char *)cfg + r->offset;
    switch (r->type) {
    case T_INT:
        snprintf(buf, n, "%lld", (long long)*(const int64_t *)base);
        break;
    case T_FLOAT:
        snprintf(buf, n, "%.17g", *(const double *)base);
        break;
    case T_BOOL:
        snprintf(buf, n, "%s", *(const int *)base ? "true" : "false");
        break;
    case T_STR:
        snprintf(buf, n, "%s", base);
        break;
    case T_ENUM: {
        const char *p = r->choices;
        for (int i = *(const int *)base; i > 0 && *p; i--) {
            p += strcspn(p, "|") + 1;
        }
        snprintf(buf, n, "%.*s", (int)strcspn(p, "|"), p);
        break;
    }
    case T_INTLIST: {
        size_t off = 0;
        buf[0] = '\0';
        for (int i = 0; i < cfg->network.n_hidden && off < n; i++) {
            off += (size_t)snprintf(buf + off, n - off, "%s%d", i ? "," : "",
                                    cfg->network.hidden[i]);
        }
        break;
    }
    }
}

void config_print(const apex_config_t *cfg, FILE *out) {
    const char *section = "";
    fprintf(out, "; resolved configuration (from %s)\n", cfg->source);
    for (size_t i = 0; i < N_ROWS; i++) {
        if (strcmp(section, s_schema[i].section) != 0) {
            section = s_schema[i].section;
            fprintf(out, "\n[%s]\n", section);
        }
        char v[CONFIG_STR_LEN + 32];
        s_format_value(cfg, &s_schema[i], v, sizeof v);
        fprintf(out, "%s = %s\n", s_schema[i].key, v);
    }
}

static const char *s_type_name(const s_row *r) {
    static const char *const names[] = {"int", "float", "bool", "string", "enum", "int list"};
    return names[r->type];
}

static void s_range(const s_row *r, char *buf, size_t n) {
    if (r->type == T_INT || r->type == T_INTLIST) {
        if (r->max >= BIG) {
            snprintf(buf, n, "%.0f .. (no limit)", r->min);
        } else {
            snprintf(buf, n, "%.0f .. %.0f", r->min, r->max);
        }
    } else if (r->type == T_FLOAT) {
        snprintf(buf, n, "%g .. %g", r->min, r->max);
    } else if (r->type == T_ENUM) {
        snprintf(buf, n, "%s", r->choices);
    } else {
        snprintf(buf, n, "%s", r->type == T_BOOL ? "true|false" : "");
    }
}

void config_help(FILE *out) {
    const char *section = "";
    for (size_t i = 0; i < N_ROWS; i++) {
        const s_row *r = &s_schema[i];
        if (strcmp(section, r->section) != 0) {
            section = r->section;
            fprintf(out, "\n[%s]\n", section);
        }
        char range[128];
        s_range(r, range, sizeof range);
        fprintf(out, "  %-22s %-8s default %-22s %s\n  %-22s %-8s %s\n", r->key, s_type_name(r),
                r->def, range, "", "", r->help);
    }
}

// Writes s with the characters that Markdown tables and HTML would swallow escaped.
static void s_md(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|') {
            fputs(" / ", out);
        } else if (*s == '<') {
            fputs("&lt;", out);
        } else if (*s == '>') {
            fputs("&gt;", out);
        } else {
            fputc(*s, out);
        }
    }
}

void config_help_markdown(FILE *out) {
    fprintf(out,
            "| section | key | type | default | range | meaning |\n|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < N_ROWS; i++) {
        const s_row *r = &s_schema[i];
        char range[128];
        s_range(r, range, sizeof range);
        fprintf(out, "| %s | %s | %s | `%s` | ", r->section, r->key, s_type_name(r), r->def);
        s_md(out, range);
        fputs(" | ", out);
        s_md(out, r->help);
        fputs(" |\n", out);
    }
}

// ---------------------------------------------------------------------------------------
// The schema as data (see config.h).

int config_key_count(void) { return (int)N_ROWS; }

int config_key_at(int i, const char **section, const char **key) {
    if (i < 0 || (size_t)i >= N_ROWS) {
        return -1;
    }
    *section = s_schema[i].section;
    *key = s_schema[i].key;
    return 0;
}
