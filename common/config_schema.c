// config_schema.c: the schema table, the retired keys, and lookups in them (see
// config_schema.h).
//
// Defaults are strings parsed by the same code as the file, so a default can never be of
// the wrong type or out of range without the tests noticing (check_config.c loads the
// defaults alone and checks they validate).
#include "config_schema.h"

#include "apex.h"

#include <stdio.h>
#include <string.h>

#define OFF(field) offsetof(apex_config_t, field)
#define STR(field) OFF(field), sizeof(((apex_config_t *)0)->field)
#define BIG CONFIG_NO_LIMIT

// ---------------------------------------------------------------------------------------
// The schema: one row per key. Keep help texts short; configs/*.ini carry the long story.
const config_row_t config_schema[] = {
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
    {"run", "blas_kernel", T_STR, STR(run.blas_kernel), 1, 0, "auto", NULL,
     "the OpenBLAS kernel the learner, actors and evaluator run: auto (the best the CPU's "
     "features allow, unless OPENBLAS_CORETYPE is set), openblas (OpenBLAS's own choice), or a "
     "core (" CONFIG_BLAS_CORES "); logged at start-up"},
    {"run", "blas_library", T_ENUM, OFF(run.blas_library), 0, 0, 0, "auto", "openblas|onednn|auto",
     "the libraries computing the learner's, actors' and evaluator's matrix products and conv "
     "layers: auto (OpenBLAS's products, and oneDNN's convolution primitives for the conv "
     "layers of networks that do enough work, the Atari bodies, where Debian's libdnnl2 loads; "
     "else im2col on OpenBLAS; a run whose network gets no such body loads no oneDNN, and a "
     "learner at [learner] threads > 1 that does takes oneDNN's sgemm for the products too: "
     "one thread pool), openblas (OpenBLAS for everything, oneDNN not loaded), or onednn "
     "(oneDNN's sgemm for the products too, checked against a reference at start-up; a daemon "
     "that cannot load it refuses to start). The Nature learner on an Intel Xeon: auto 1.47x "
     "openblas, onednn 1.54x at one thread"},

    {"run", "deterministic", T_BOOL, OFF(run.deterministic), 0, 0, 1, "false", NULL,
     "bit-identical reruns for a fixed config, seed and topology: the replay applies inserts, "
     "samples and priority updates in an order fixed by counters, actors take fixed weights "
     "versions at fixed steps (see docs/architecture.md \"Deterministic runs\"); needs "
     "samples_per_insert > 0 and one replay server"},

    {"env", "id", T_STR, STR(env.id), 1, 0, "CartPole-v1", NULL,
     "environment: a built-in id (CartPole-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1, "
     "MountainCarContinuous-v0, MinAtar/<Game>-v0 "
     "with Game Asterix, Breakout, Freeway, Seaquest or SpaceInvaders, MinAtar/<Game>-render84-v0 "
     "(the same games observed as one 84x84 grayscale frame), the MuJoCo tasks "
     "HalfCheetah-v4, Hopper-v4, Walker2d-v4, Ant-v4, InvertedPendulum-v4 and "
     "InvertedDoublePendulum-v4 with [env] model_xml), python (Gymnasium-style "
     "Python envs from [env] make, stepped by apex-actor's env workers, see [python]), or "
     "external (stepped by your own actors); python and external need obs_dim (or obs_shape), "
     "n_actions (discrete) or action_dim, action_low and action_high (continuous), and obs_dtype"},
    {"env", "obs_dim", T_INT, OFF(env.ext_obs_dim), 0, 0, 1 << 20, "0", NULL,
     "observation length for id = python or external (0 = the built-in id's)"},
    {"env", "n_actions", T_INT, OFF(env.ext_n_actions), 0, 0, CONFIG_MAX_ACTIONS, "0", NULL,
     "number of discrete actions for id = python or external (0 = the built-in id's)"},
    {"env", "action_dim", T_INT, OFF(env.ext_action_dim), 0, 0, CONFIG_MAX_ACTION_DIM, "0", NULL,
     "continuous actions: floats per action, for id = python or external (0 = discrete, or the "
     "built-in id's); needs action_low and action_high"},
    {"env", "action_low", T_STR, STR(env.action_low_text), 0, 0, "", NULL,
     "continuous actions' lower bounds: one number for every component, or action_dim of them "
     "comma separated (id = python or external; empty: the built-in id's)"},
    {"env", "action_high", T_STR, STR(env.action_high_text), 0, 0, "", NULL,
     "continuous actions' upper bounds, as action_low"},
    {"env", "obs_dtype", T_ENUM, OFF(env.obs_dtype), 0, 0, 0, "auto", "float32|uint8|auto",
     "observation element type (auto: the environment's, float32 for python and external; "
     "uint8 stores a quarter of the bytes)"},
    {"env", "obs_shape", T_STR, STR(env.obs_shape), 0, 0, "", NULL,
     "observation shape HxWxC, channels last, e.g. 84x84x4 (for id = python or external; a "
     "conv network needs one; empty: a vector of obs_dim)"},
    {"env", "obs_layout", T_ENUM, OFF(env.obs_layout), 0, 0, 0, "hwc", "hwc|chw",
     "id = python with an obs_shape HxWxC: how the env's observations are laid out; hwc: "
     "channels last, (H, W, C), as obs_shape; chw: channels first, (C, H, W) (e.g. the (K, H, W) "
     "of Gymnasium's FrameStackObservation), which the env workers transpose to channels last "
     "before sending; a worker whose observation_space is neither is refused at start-up, "
     "naming both"},
    {"env", "obs_scale", T_FLOAT, OFF(env.obs_scale), 0, 0, 1e6, "0", NULL,
     "observations are multiplied by this before the network (0: the environment's own: 1 for "
     "the built-in ones, 1/255 for python or external uint8, 1 for their float32)"},
    {"env", "frame_stack", T_INT, OFF(env.frame_stack), 0, 1, 16, "1", NULL,
     "the last K observations the env emitted, stacked oldest first, are what the actors and "
     "the evaluator act on and the replay stores (the DQN papers' 4 for Atari; the first "
     "observation repeated at an episode's start); obs_dim and obs_shape stay one frame's, the "
     "run's observation is K of them (for images: K frames of C channels); not for id = "
     "external, whose actors are the user's"},
    {"env", "make", T_STR, STR(env.make), 0, 0, "", NULL,
     "id = python: the env factory MODULE:CALLABLE, called once per env (MODULE: a dotted "
     "module on the workers' sys.path, which has python/, or a path to a .py file), e.g. "
     "apex_cartpole:CartPoleEnv"},
    {"env", "kwargs", T_STR, STR(env.kwargs), 0, 0, "", NULL,
     "id = python: keyword arguments for [env] make's CALLABLE, a JSON object on one line, "
     "e.g. {\"id\": \"CartPole-v1\"} (empty: none)"},
    {"env", "eval_kwargs", T_STR, STR(env.eval_kwargs), 0, 0, "", NULL,
     "id = python: keyword arguments merged over [env] kwargs (their keys replace kwargs') for "
     "the envs apex-eval steps itself (no eval_id), a JSON object on one line, e.g. "
     "{\"training\": false} for python/apex_atari.py's whole games and unclipped rewards "
     "(empty: kwargs as they are)"},
    {"env", "model_xml", T_STR, STR(env.model_xml), 0, 0, "", NULL,
     "a MuJoCo id: the path of the task's MuJoCo model (MJCF), normally Gymnasium's own, e.g. "
     "models/mujoco/half_cheetah.xml where scripts/fetch-mujoco-models installs them (apex "
     "ships none); relative to the working directory; apex-actor and apex-eval load it at "
     "start-up and refuse a model that is not the task's"},
    {"env", "eval_id", T_STR, STR(env.eval_id), 0, 0, "", NULL,
     "id = python or external: a built-in id with the same dynamics and spaces; the launcher "
     "evaluates checkpoints on it with apex-eval (empty: apex-eval steps a python env with "
     "its own env workers, and an external one not at all)"},

    {"network", "conv", T_STR, STR(network.conv_spec), 0, 0, "", NULL,
     "conv layers before the hidden ones, FILTERSxKERNELsSTRIDE, comma separated, no padding, "
     "ReLU after each (MinAtar's DQN: 16x3s1; Nature DQN: 32x8s4,64x4s2,64x3s1); empty: none"},
    {"network", "hidden", T_INTLIST, OFF(network.hidden), 0, 1, 8192, "256,256", NULL,
     "hidden layer sizes, comma separated (1 to 4 layers)"},
    {"network", "dueling", T_BOOL, OFF(network.dueling), 0, 0, 1, "true", NULL,
     "dueling head Q = V + A - mean(A) of the Q-network (discrete actions; continuous "
     "actions' policy and critics have plain heads: off for them)"},

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
     "that fell behind, or a restore, cannot release a burst); a deterministic run's ratio is "
     "exact and does not use it"},
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
    {"replay", "frame_storage", T_BOOL, OFF(replay.frame_storage), 0, 0, 1, "true", NULL,
     "with [env] frame_stack > 1: actors send each new frame once and the replay stores it "
     "once, rebuilding the stacks when it samples (about K times less memory and bandwidth; "
     "false: whole stacks for obs and next_obs, as without stacking)"},
    {"replay", "frame_capacity", T_INT, OFF(replay.frame_capacity), 0, 0, 1LL << 31, "0", NULL,
     "frames the replay holds with frame_storage, over all shards (0: capacity + capacity / 256 "
     "+ 4096 per shard; rows whose frames were evicted are not sampled)"},
    {"replay", "compress", T_ENUM, OFF(replay.compress), 0, 0, 0, "none", "none|lz4|zstd",
     "compress each frame (frame storage: the actors send and the replay keeps each frame "
     "compressed, alone, and decompresses the stacks it samples); also turns frame storage on "
     "for frame_stack = 1 (each frame once: obs and next_obs share theirs)"},
    {"replay", "compress_level", T_INT, OFF(replay.compress_level), 0, 0, 65537, "0", NULL,
     "zstd's level (1..22; 0 = its default, 3) or LZ4's acceleration (1..65537: higher is "
     "faster and compresses less; 0 = 1)"},
    {"replay", "wal_sync_ms", T_INT, OFF(replay.wal_sync_ms), 0, 1, 60000, "50", NULL,
     "write-ahead log group commit: with the log writer idle, a logged insert waits at most "
     "this long for its fdatasync to start (ms); under load commits run back to back"},

    {"learner", "batch_size", T_INT, OFF(learner.batch_size), 0, 1, 65536, "512", NULL,
     "transitions per update"},
    {"learner", "lr", T_FLOAT, OFF(learner.lr), 0, 1e-12, 10, "0.0005", NULL,
     "learning rate (continuous actions: the critics', and the policy's unless actor_lr)"},
    {"learner", "lr_end", T_FLOAT, OFF(learner.lr_end), 0, 1e-12, 10, "0.0001", NULL,
     "learning rate after lr_steps updates, reached linearly from lr (only with lr_steps > 0; "
     "discrete actions only: the DPG learner keeps lr and actor_lr constant)"},
    {"learner", "lr_steps", T_INT, OFF(learner.lr_steps), 0, 0, BIG, "0", NULL,
     "updates over which the learning rate is annealed linearly from lr to lr_end (0: lr "
     "stays constant; discrete actions only: the DPG learner keeps its rates constant)"},
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
     "global gradient-norm clip (0 = off); continuous actions: per network (the policy, "
     "each critic)"},
    {"learner", "huber_delta", T_FLOAT, OFF(learner.huber_delta), 0, 1e-6, 1e6, "1", NULL,
     "Huber loss threshold of the TD error (discrete actions only: the DPG learner's "
     "critics use the squared error, as TD3)"},
    {"learner", "target_update", T_INT, OFF(learner.target_update), 0, 1, BIG, "2500", NULL,
     "updates between target-network syncs (Ape-X: 2500); continuous actions: only with "
     "tau = 0, then hard copies of every target network"},
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
    {"learner", "precision", T_ENUM, OFF(learner.precision), 0, 0, 0, "fp32", "fp32|bf16",
     "the learner's matrix products (online and target networks, forward and backward): fp32, "
     "or bf16 = their inputs rounded to bfloat16 with fp32 sums, the weights, gradients and "
     "optimizer state staying fp32; bf16 needs a CPU with AVX512_BF16 (the learner refuses to "
     "start without). The actors and the evaluator run fp32 either way"},
    {"learner", "request_timeout_ms", T_INT, OFF(learner.request_timeout_ms), 0, 10, 3600000,
     "3000", NULL, "a sample request unanswered this long is re-issued (ms)"},
    {"learner", "metrics_interval_ms", T_INT, OFF(learner.metrics_interval_ms), 0, 100, 3600000,
     "1000", NULL, "period of metrics.csv rows (ms)"},
    {"learner", "metrics_every_updates", T_INT, OFF(learner.metrics_every_updates), 0, 0, BIG, "0",
     NULL,
     "a row of metrics.csv every this many updates instead of every metrics_interval_ms (0 = "
     "by time; a deterministic run writes one every 1000 updates then)"},
    {"learner", "ranks", T_INT, OFF(learner.ranks), 0, 1, 1024, "1", NULL,
     "learner processes the launchers (scripts/apex-local, scripts/apex-slurm) start as one "
     "data-parallel group: N > 1 runs apex-learner under mpirun or srun as N ranks, each "
     "training on its own batch_size; their --learners N overrides it. A learner started by "
     "hand is the group mpirun/srun make it"},
    {"learner", "zero_stage", T_INT, OFF(learner.zero_stage), 0, 0, 3, "1", NULL,
     "learner group (mpirun -np N apex-learner) only: 0 = all-reduce, optimizer state "
     "replicated; 1 = optimizer state sharded over the ranks (ZeRO-1); 2 = gradients sharded "
     "too (ZeRO-2); 3 = parameters sharded too, each layer all-gathered when a pass needs it "
     "(ZeRO-3; discrete actions only)"},
    {"learner", "policy_delay", T_INT, OFF(learner.policy_delay), 0, 1, 1000, "2", NULL,
     "continuous actions only: critic updates per policy update (TD3: 2; DDPG: 1)"},
    {"learner", "target_noise", T_FLOAT, OFF(learner.target_noise), 0, 0, 10, "0.2", NULL,
     "continuous actions only: sigma of TD3's target policy smoothing, in half-ranges of the "
     "action bounds (0 = off)"},
    {"learner", "target_noise_clip", T_FLOAT, OFF(learner.target_noise_clip), 0, 0, 10, "0.5", NULL,
     "continuous actions only: the smoothing noise is clipped to +-this, in half-ranges"},
    {"learner", "tau", T_FLOAT, OFF(learner.tau), 0, 0, 1, "0.005", NULL,
     "continuous actions only: Polyak rate of the target networks at each policy update (0 = "
     "hard copies every target_update updates, as Ape-X DPG)"},
    {"learner", "twin_critics", T_BOOL, OFF(learner.twin_critics), 0, 0, 1, "true", NULL,
     "continuous actions only: TD3's two critics and the minimum of their targets (false = "
     "one critic, DDPG)"},
    {"learner", "actor_lr", T_FLOAT, OFF(learner.actor_lr), 0, 0, 10, "0", NULL,
     "continuous actions only: the policy's learning rate (0 = lr)"},
    {"learner", "actor_grad_clip", T_FLOAT, OFF(learner.actor_grad_clip), 0, 0, 1e9, "0", NULL,
     "continuous actions only: the policy gradient is clipped elementwise to +-this before the "
     "norm clip (Ape-X DPG: 1; 0 = off)"},

    {"actor", "num_actors", T_INT, OFF(actor.num_actors), 0, 1, CONFIG_MAX_ACTORS, "2", NULL,
     "actor processes in the run: the epsilon schedule's N, the launcher's count, and the "
     "bound on actor ids the replay server accepts (--id 0..N-1)"},
    {"actor", "envs_per_actor", T_INT, OFF(actor.envs_per_actor), 0, 1, 4096, "16", NULL,
     "environments each actor steps in lock step"},
    {"actor", "n_step", T_INT, OFF(actor.n_step), 0, 1, 1000, "3", NULL, "n of n-step returns"},
    {"actor", "gamma", T_FLOAT, OFF(actor.gamma), 0, 0, 1, "0.99", NULL, "discount factor"},
    {"actor", "eps_base", T_FLOAT, OFF(actor.eps_base), 0, 0, 1, "0.4", NULL,
     "discrete actions only: epsilon schedule base: eps_i = eps_base^(1 + eps_alpha * i / "
     "(N - 1))"},
    {"actor", "eps_alpha", T_FLOAT, OFF(actor.eps_alpha), 0, 0, 100, "7", NULL,
     "discrete actions only: epsilon schedule exponent"},
    {"actor", "noise_sigma", T_FLOAT, OFF(actor.noise_sigma), 0, 0, 1, "0.4", NULL,
     "continuous actions only: Gaussian exploration a = clip(mu(s) + sigma_i * (high - low) / 2 "
     "* N(0, 1), low, high), sigma_i = noise_sigma^(1 + noise_alpha * i / (N - 1)) over the "
     "run's N envs (0: the policy's own actions)"},
    {"actor", "noise_alpha", T_FLOAT, OFF(actor.noise_alpha), 0, 0, 100, "7", NULL,
     "continuous actions only: noise schedule exponent (0: every env explores with "
     "noise_sigma)"},
    {"actor", "noise_theta", T_FLOAT, OFF(actor.noise_theta), 0, 0.01, 1, "1", NULL,
     "continuous actions only: 1 draws the noise afresh every step (Gaussian); below 1 it is an "
     "Ornstein-Uhlenbeck process per env, x <- (1 - noise_theta) x + sigma_i N(0, 1), zeroed at "
     "each episode's start (DDPG: 0.15)"},
    {"actor", "random_steps", T_INT, OFF(actor.random_steps), 0, 0, 1LL << 40, "0", NULL,
     "each actor's first random_steps env steps (frames, over its envs) take uniformly random "
     "actions, whatever the network says (TD3's start_steps: varied data in the replay before "
     "the policy's own; 0 = none)"},
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
     "discrete actions only: exploration rate during evaluation (0: greedy; MinAtar's paper "
     "reports epsilon 0.1); continuous runs evaluate the policy mu(s) greedily, without noise"},
    {"eval", "max_episode_steps", T_INT, OFF(eval.max_episode_steps), 0, 0, BIG, "27000", NULL,
     "an evaluation episode is cut after this many steps and counted with its return so far "
     "(a greedy policy can loop forever where an env has no time limit; 0 = never)"},
    {"eval", "interval_s", T_FLOAT, OFF(eval.interval_s), 0, 0, 1e6, "0", NULL,
     "apex-eval --follow evaluates the newest weights at most this often (0: as soon as an "
     "evaluation ends and newer weights exist)"},
    {"eval", "every_updates", T_INT, OFF(eval.every_updates), 0, 0, BIG, "0", NULL,
     "when > 0: evaluate the network at every multiple of this many updates, each one (the "
     "learner writes it to <run>/evals/, apex-eval --follow evaluates and removes it), instead "
     "of the newest weights when the evaluator is free; what makes eval.csv the same in reruns "
     "of a deterministic run. The evaluator must see the learner's run directory (its host or a "
     "shared file system: apex-local and apex-slurm run both on one node)"},
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
    {"endpoints", "learner_weights_bind", T_STR, STR(endpoints.learner_weights_bind), 1, 0,
     "tcp://127.0.0.1:5552", NULL,
     "learner binds this to hand out weights (ROUTER; actors and apex-eval ask with DEALERs)"},
    {"endpoints", "learner_weights", T_STR, STR(endpoints.learner_weights), 1, 0,
     "tcp://127.0.0.1:5552", NULL, "actors and apex-eval --follow connect here to ask for weights"},
    {"endpoints", "learner_stats_bind", T_STR, STR(endpoints.learner_stats_bind), 1, 0,
     "tcp://127.0.0.1:5553", NULL, "learner binds this for actor stats (PULL)"},
    {"endpoints", "learner_stats", T_STR, STR(endpoints.learner_stats), 1, 0,
     "tcp://127.0.0.1:5553", NULL, "actors connect here to send episode stats"},
    {"endpoints", "relay", T_STR, STR(endpoints.relay), 0, 0, "", NULL,
     "empty: actors ask the learner for weights; else apex-relay (one per host) binds this "
     "(ipc://PATH, or tcp:// with [security] mode = none), fetches each version once from "
     "learner_weights, and the actors ask it instead (apex-local and apex-slurm start the "
     "relays)"},

    {"security", "mode", T_ENUM, OFF(security.mode), 0, 0, 0, "none", "none|curve",
     "none (plain TCP) or curve (CurveZMQ: encrypted, servers accept only authorized keys)"},
    {"security", "key_dir", T_STR, STR(security.key_dir), 1, 0, "keys", NULL,
     "directory of <name>.key / <name>.pub files made by apex-keygen"},
    {"security", "authorized_keys", T_STR, STR(security.authorized_keys), 1, 0,
     "keys/authorized_keys", NULL, "client public keys the servers accept, one per line"},
};
#define N_ROWS (sizeof config_schema / sizeof config_schema[0])
_Static_assert(N_ROWS <= CONFIG_MAX_KEYS, "apex_config_t's origin arrays hold every key");

// Keys that existed once and were removed: a config that still has one gets an error that
// says why, instead of "unknown key".
static const struct {
    const char *section, *key, *why;
} s_retired[] = {
    {"replay", "reset_limiter_on_restore",
     "removed: a restore now brings the rate limiter's state back with the data, so the "
     "learner keeps the configured replay ratio across a replay restart (delete the line)"},
    {"endpoints", "learner_pub_bind",
     "renamed learner_weights_bind: the learner answers weights requests on a ROUTER, it "
     "publishes nothing (the same value works under the new name)"},
    {"endpoints", "learner_pub",
     "renamed learner_weights: actors and apex-eval ask the learner for weights, they do not "
     "subscribe (the same value works under the new name)"},
};

const size_t config_schema_len = N_ROWS;

// ---------------------------------------------------------------------------------------
// Lookups.

const config_row_t *config_schema_find(const char *section, const char *key) {
    for (size_t i = 0; i < N_ROWS; i++) {
        if (strcmp(config_schema[i].section, section) == 0 &&
            strcmp(config_schema[i].key, key) == 0) {
            return &config_schema[i];
        }
    }
    return NULL;
}

int config_schema_has_section(const char *section) {
    for (size_t i = 0; i < N_ROWS; i++) {
        if (strcmp(config_schema[i].section, section) == 0) {
            return 1;
        }
    }
    return 0;
}

const char *config_schema_retired(const char *section, const char *key) {
    for (size_t i = 0; i < sizeof s_retired / sizeof s_retired[0]; i++) {
        if (strcmp(s_retired[i].section, section) == 0 && strcmp(s_retired[i].key, key) == 0) {
            return s_retired[i].why;
        }
    }
    return NULL;
}

const char *config_schema_where(const apex_config_t *cfg, const char *section, const char *key,
                                char *buf, size_t n) {
    const config_row_t *r = config_schema_find(section, key);
    APEX_ASSERT(r != NULL);
    size_t i = (size_t)(r - config_schema);
    if (cfg->origin_set[i]) {
        snprintf(buf, n, "--set %s.%s", section, key);
    } else if (cfg->origin_line[i]) {
        snprintf(buf, n, "%s:%u", cfg->source, (unsigned)cfg->origin_line[i]);
    } else {
        snprintf(buf, n, "%s (default)", cfg->source);
    }
    return buf;
}

// ---------------------------------------------------------------------------------------
// The schema as data (see config.h).

int config_key_count(void) { return (int)N_ROWS; }

int config_key_at(int i, const char **section, const char **key) {
    if (i < 0 || (size_t)i >= N_ROWS) {
        return -1;
    }
    *section = config_schema[i].section;
    *key = config_schema[i].key;
    return 0;
}
