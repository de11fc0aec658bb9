// config.h: the run configuration, one INI file shared by every daemon (STYLE S17).
//
// Every key is one row of the schema table in config_schema.c: section, name, type, range,
// default and help. From that table come parsing with full validation, defaults,
// `--set section.key=value` overrides, `--help-config` and `--print-config`. Every daemon
// validates the whole file, so a typo in any section is caught by whichever daemon starts
// first. An unknown key, a duplicate key, or a malformed or out-of-range value is an error
// reported as `file:line: [section] key: reason`; nothing is silently ignored.
// After loading, the config is an immutable value passed down as `const apex_config_t *`.
// The INI syntax itself is read by libinih.
//
// The modules behind this header: config.c, the engine (values against their rows, the INI
// file, --set, printing); config_schema.{h,c}, the rows (internal); config_check.{h,c}, the
// checks between keys and the values derived from them (internal); config_shard.{h,c}, the
// sharded replay's endpoints and capacities (included here).
#ifndef APEX_CONFIG_H
#define APEX_CONFIG_H

#include "config_shard.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CONFIG_MAX_HIDDEN 4
#define CONFIG_STR_LEN 256
#define CONFIG_ERR_LEN 1024 // an unknown [env] id's message lists every known id (~600 bytes)
#define CONFIG_MAX_KEYS 160 // rows of the schema (config_schema.c asserts it)
// The replay store's largest capacity (replay/store.h STORE_CAPACITY_MAX; server.c asserts
// the two agree), so that the schema refuses what the store would.
#define CONFIG_REPLAY_CAPACITY_MAX (1LL << 30)
// Limits the modules size their tables by, so that the schema accepts exactly what they do.
#define CONFIG_MAX_ACTIONS 4096 // the network's head (nn.c)
// Floats of a continuous action (Gymnasium's MuJoCo tasks have at most Humanoid's 17).
#define CONFIG_MAX_ACTION_DIM 64
#define CONFIG_MAX_ACTORS 4096 // the learner's per-actor metrics (metrics.h)
#define CONFIG_MAX_SHARDS 64   // [replay] shards: the learner's per-shard table (shards.h)

typedef enum { CONFIG_OPTIM_ADAM = 0, CONFIG_OPTIM_RMSPROP = 1 } config_optimizer;
// [learner] precision: the learner's products in fp32, or on bfloat16 inputs (learner/train.h).
typedef enum { CONFIG_PRECISION_FP32 = 0, CONFIG_PRECISION_BF16 = 1 } config_precision;
typedef enum { DURABILITY_NONE = 0, DURABILITY_SNAPSHOT = 1, DURABILITY_WAL = 2 } config_durability;
typedef enum { SECURITY_NONE = 0, SECURITY_CURVE = 1 } config_security_mode;

typedef struct {
    char name[64];
    int64_t seed;
    char out_dir[CONFIG_STR_LEN];
    double max_seconds;
    double target_return;
    int log_level;        // log_level from log.h
    char blas_kernel[32]; // "auto", "openblas" or one of CONFIG_BLAS_CORES (model/blas.h)
    int blas_library;     // config_blas_library
    int deterministic; // [run] deterministic: a schedule fixed by counters (docs/architecture.md)
} config_run_t;

// [run] blas_library: the library behind the products (model/blas.h's blas_use_library).
typedef enum {
    CONFIG_BLAS_OPENBLAS = 0,
    CONFIG_BLAS_ONEDNN = 1,
    CONFIG_BLAS_AUTO = 2
} config_blas_library;
// The name blas_use_library takes.
static inline const char *config_blas_library_name(int v) {
    return v == CONFIG_BLAS_ONEDNN ? "onednn" : v == CONFIG_BLAS_AUTO ? "auto" : "openblas";
}

// The OpenBLAS cores [run] blas_kernel may name (any case), besides auto and openblas: one per
// instruction set and the tuned AMD one (model/blas.h knows every core OpenBLAS may report).
#define CONFIG_BLAS_CORES "Prescott Nehalem Sandybridge Haswell Zen SkylakeX Cooperlake"

// Element type of observations in transitions, replay and samples. uint8 is for
// observations that are bytes (image frames): a quarter of float32's memory and bandwidth.
// The values are wire.h's wire_obs_dtype (server.c asserts it); wire_obs_elem_bytes gives
// the element size.
// CONFIG_OBS_AUTO is the key's default only: config_load resolves it to the environment's.
typedef enum { CONFIG_OBS_FLOAT32 = 0, CONFIG_OBS_UINT8 = 1, CONFIG_OBS_AUTO = 2 } config_obs_dtype;
// [env] obs_layout: how a Python env's image observations are laid out. HWC: channels last,
// as obs_shape says (sent as they are); CHW: channels first, (C, H, W), which the env workers
// transpose to channels last before sending (python/apex_env.py --obs-layout chw).
typedef enum { CONFIG_OBS_HWC = 0, CONFIG_OBS_CHW = 1 } config_obs_layout;

// [env] id = external: the environment is stepped by the user's own actors (speaking
// proto/apex.proto), not by apex-actor; its shape and dtype come from these keys.
#define CONFIG_ENV_EXTERNAL "external"
// [env] id = python: apex-actor steps Gymnasium-style Python envs ([env] make) through its
// env workers (envs/pyenv.h, [python]); the observation keys are id = external's.
#define CONFIG_ENV_PYTHON "python"

typedef struct {
    char id[64];
    // Keys for id = external (0 = derived from a built-in id, which they must then match).
    int64_t ext_obs_dim;
    int64_t ext_n_actions;
    int64_t ext_action_dim;               // continuous actions (0: discrete)
    char action_low_text[CONFIG_STR_LEN]; // "x" for every component, or "x0,x1,..."
    char action_high_text[CONFIG_STR_LEN];
    char obs_shape[32];  // "HxWxC" (channels last), "" = a vector of obs_dim
    int obs_layout;      // config_obs_layout: id = python's observations as the env has them
    int obs_dtype;       // config_obs_dtype: the environment's (resolved from auto)
    double obs_scale;    // factor before the network (resolved from 0 = the environment's)
    int64_t frame_stack; // K: the run's observation is the env's last K (actor/framestack.h)
    // Derived from id via envinfo, or from the keys above: filled in by config_load. obs_* is
    // the run's observation (what the network reads and the replay stores): frame_stack
    // frames of the env's, frame-major; frame_* is one frame, what the env emits.
    int obs_dim;
    int obs_h, obs_w, obs_c; // 0, 0, 0 for a vector observation; obs_c = K x frame_c
    int frame_dim, frame_c;  // one frame's elements and channels (obs_dim = K x frame_dim)
    int n_actions;           // discrete actions (0: continuous)
    int action_dim;          // continuous actions of this many floats (0: discrete)
    float action_low[CONFIG_MAX_ACTION_DIM], action_high[CONFIG_MAX_ACTION_DIM]; // their bounds
    int max_episode_steps; // 0: no time limit (external envs, MinAtar)
    // id = python
    char make[CONFIG_STR_LEN];        // MODULE:CALLABLE
    char kwargs[CONFIG_STR_LEN];      // JSON object for CALLABLE, "" = none
    char eval_kwargs[CONFIG_STR_LEN]; // JSON object merged over kwargs for apex-eval's envs
    char eval_id[64]; // a built-in id stepping the same MDP, for evaluation ("" = none)
    // A MuJoCo id (envinfo_is_mujoco): the path of its MJCF model, loaded at the start-up of
    // apex-actor and apex-eval ("" for any other id)
    char model_xml[CONFIG_STR_LEN];
} config_env_t;

// How apex-actor talks to its Python env workers (envs/pyenv.h pyenv_transport).
typedef enum { CONFIG_PY_LOCAL = 0, CONFIG_PY_ZMQ = 1 } config_py_transport;

// [python]: apex-actor's Python env workers for [env] id = python.
typedef struct {
    int64_t workers; // processes per actor; each steps envs_per_actor / workers envs
    int64_t groups;  // each worker's envs in this many groups, stepped overlapped
    int spawn;       // 1: the actor starts its workers; 0: they are started by hand
    int transport;   // config_py_transport
    char bind[CONFIG_STR_LEN];
    char interpreter[CONFIG_STR_LEN];
    char script[CONFIG_STR_LEN]; // "" = ../python/apex_env.py from the binary's directory
    int64_t step_timeout_ms;
    int64_t hello_timeout_ms;
} config_python_t;

#define CONFIG_MAX_CONV 4

typedef struct {
    char conv_spec[128]; // [network] conv as written, e.g. "32x8s4,64x4s2,64x3s1"
    int n_conv;          // parsed from conv_spec by config_load
    struct {
        int filters, kernel, stride;
    } conv[CONFIG_MAX_CONV];
    int hidden[CONFIG_MAX_HIDDEN];
    int n_hidden;
    int dueling;
} config_network_t;

typedef struct {
    int64_t capacity; // of the whole run; shard k holds config_shard_capacity(cfg, k)
    int64_t shards;   // K apex-replay processes (docs/architecture.md "Sharded replay")
    // Derived: the shard this process is (config_select_shard; apex-replay --shard), else 0.
    int shard;
    double alpha;
    int64_t min_size_to_sample;
    double samples_per_insert;
    double spi_tolerance;
    int64_t sample_timeout_ms;
    int64_t max_batch;
    int64_t stats_interval_ms;
    int64_t max_message_bytes;
    int durability; // config_durability
    double snapshot_interval_s;
    int64_t wal_sync_ms;
    // Frame mode (issue #27): with [env] frame_stack > 1, each frame is sent and stored once
    // (config_frame_mode). frame_capacity: frames the run's replay holds (0: derived).
    int frame_storage;
    int64_t frame_capacity;
    // Frame compression (common/fcodec.h's fcodec_kind: none, lz4, zstd) and its level
    // (0: the codec's default).
    int compress;
    int64_t compress_level;
} config_replay_t;

typedef struct {
    int64_t batch_size;
    double lr;
    double lr_end;    // lr after lr_steps updates (linear), when lr_steps > 0
    int64_t lr_steps; // 0: lr stays constant
    int optimizer;    // config_optimizer
    double adam_beta1;
    double adam_beta2;
    double adam_eps;
    double rms_decay;
    double rms_eps;
    double grad_clip;
    double huber_delta;
    int64_t target_update;
    int64_t publish_every;
    int64_t prefetch;
    int64_t batches_per_request;
    double beta_start;
    double beta_end;
    int64_t beta_steps;
    double priority_eps;
    double checkpoint_interval_s;
    int64_t max_steps;
    int64_t threads;
    int precision; // config_precision
    int64_t request_timeout_ms;
    int64_t metrics_interval_ms;
    int64_t metrics_every_updates; // 0: by metrics_interval_ms (or 1000 when deterministic)
    int64_t zero_stage;            // a learner group's ZeRO stage (learner/train.h)
    int64_t ranks; // learner processes the launchers start as one group (1: a single one)
    // Continuous actions only (the DPG learner, learner/train_dpg.h; issue #28).
    int64_t policy_delay;     // critic updates per policy update (TD3: 2)
    double target_noise;      // target policy smoothing sigma, in half-ranges (0: off)
    double target_noise_clip; // its clip, in half-ranges
    double tau;               // Polyak rate of the targets; 0: hard copies every target_update
    int twin_critics;         // TD3's two critics and their minimum (false: DDPG's one)
    double actor_lr;          // the policy's learning rate; 0: lr
    double actor_grad_clip;   // elementwise clip of the policy gradient; 0: off
} config_learner_t;

typedef struct {
    int64_t num_actors;
    int64_t envs_per_actor;
    int64_t n_step;
    double gamma;
    double eps_base;
    double eps_alpha;
    double noise_sigma; // continuous actions: Gaussian noise schedule (explore.h)
    double noise_alpha;
    double noise_theta;   // 1: Gaussian noise; < 1: Ornstein-Uhlenbeck with this mean reversion
    int64_t random_steps; // each actor's first env steps with uniformly random actions
    int64_t send_batch;
    int64_t weight_sync_steps;
    int64_t max_pending_batches;
    int64_t ack_timeout_ms;
    int64_t stats_interval_ms;
    int64_t max_steps_per_s;
} config_actor_t;

typedef struct {
    char replay_insert_bind[CONFIG_STR_LEN];
    char replay_insert[CONFIG_STR_LEN];
    char replay_sample_bind[CONFIG_STR_LEN];
    char replay_sample[CONFIG_STR_LEN];
    char learner_weights_bind[CONFIG_STR_LEN];
    char learner_weights[CONFIG_STR_LEN];
    char learner_stats_bind[CONFIG_STR_LEN];
    char learner_stats[CONFIG_STR_LEN];
    char relay[CONFIG_STR_LEN]; // "" or where apex-relay serves this host's actors weights
} config_endpoints_t;

typedef struct {
    int64_t episodes;          // per evaluation
    double epsilon;            // exploration during evaluation (0: greedy)
    int64_t max_episode_steps; // episodes are cut there (0: never)
    double interval_s;         // at most one evaluation per interval (0: back to back)
    int64_t every_updates;     // > 0: the network at each multiple, every one (learner.c)
} config_eval_t;

typedef struct {
    int mode; // config_security_mode
    char key_dir[CONFIG_STR_LEN];
    char authorized_keys[CONFIG_STR_LEN];
} config_security_t;

typedef struct apex_config_s {
    char source[CONFIG_STR_LEN]; // path of the INI file, for messages
    // Where each key's value came from, for messages (schema row order): the file's line,
    // 0 = not in the file; from_set = given by --set (which wins over the file).
    uint16_t origin_line[CONFIG_MAX_KEYS];
    uint8_t origin_set[CONFIG_MAX_KEYS];
    config_run_t run;
    config_env_t env;
    config_network_t network;
    config_replay_t replay;
    config_learner_t learner;
    config_actor_t actor;
    config_eval_t eval;
    config_python_t python;
    config_endpoints_t endpoints;
    config_security_t security;
} apex_config_t;

// Fills cfg with the schema defaults (never fails).
void config_defaults(apex_config_t *cfg);

// Loads defaults, then the INI file at path (NULL: defaults only), then each "section.key=value"
// of sets[0..n_sets) in order, then cross-checks keys against each other.
// Returns 0, or -1 with a one-line message "file:line: [section] key: reason" in err.
int config_load(apex_config_t *cfg, const char *path, const char *const *sets, int n_sets,
                char *err, size_t errlen);

// Applies one "section.key=value" override to an already loaded config (used by tests and
// by config_load). Returns 0 or -1 with a message in err.
int config_set(apex_config_t *cfg, const char *assignment, char *err, size_t errlen);

// Writes the resolved configuration as a valid INI file (loadable by config_load).
void config_print(const apex_config_t *cfg, FILE *out);
// Writes every key with its type, range, default and help text.
void config_help(FILE *out);
// Writes the reference as a Markdown table (configs/README.md is generated from this).
void config_help_markdown(FILE *out);

// The schema itself, for tests that must cover every key (tests/check_keys.c): the number
// of keys, and the section and name of key i (0 <= i < config_key_count(), schema order;
// static strings). config_key_at returns 0, or -1 when i is out of range.
int config_key_count(void);
int config_key_at(int i, const char **section, const char **key);

#endif
