// envinfo.h: the one table of environment ids, with each id's dimensions.
//
// Every built-in environment is one row of ENVINFO_TABLE below: its Gymnasium id, the size,
// dtype and shape of its observations, its action count and time limit, and the name of the
// env_spec_t (env.h) that steps it. No other file lists ids. The table is expanded twice:
//   - in envinfo.c into envinfo_table[], the dimensions every daemon validates with. That
//     file is data only and is linked into libapexcommon: config.c checks [env] against it,
//     and the replay server and the learner size themselves from it without linking any
//     environment code (they do not link libapexenv).
//   - in env.c (libapexenv) into the implementation registry behind env_find: row i is
//     stepped by the spec its row names, and that spec's info points at envinfo_table[i]
//     (the spec takes its id and dimensions from the row instead of repeating them). A row
//     whose spec does not exist does not link; check_envinfo checks that every row's spec
//     points back at its own row.
//
// What it does not do: step anything, or know the envs of the Python bridge ([env] id =
// python; their dimensions are [env] obs_dim, obs_shape, obs_dtype and n_actions, checked
// against each worker's HELLO) or of external actors (id = external).
//
// Adding an environment: one row here and its spec in envs/env_<name>.c (README.md,
// "Adding an environment").
#ifndef APEX_ENVINFO_H
#define APEX_ENVINFO_H

#include <stddef.h>

// Observation dtypes. The values are config_obs_dtype's and wire_obs_dtype's (env.c asserts
// it), so a row's obs_dtype compares with [env] obs_dtype directly.
typedef enum { ENVINFO_OBS_F32 = 0, ENVINFO_OBS_U8 = 1 } envinfo_obs_dtype;

// clang-format off
// X(KEY, spec, id, obs_dim, obs_dtype, obs_h, obs_w, obs_c, obs_scale, n_actions, action_dim,
//   action_low, action_high, max_episode_steps)
//   KEY                the row's index is ENVINFO_<KEY>
//   spec               the env_spec_t that steps it (defined in envs/env_*.c)
//   id                 Gymnasium id, exact and case-sensitive
//   obs_dim            observation length in elements (obs_h * obs_w * obs_c for images)
//   obs_dtype          envinfo_obs_dtype
//   obs_h, _w, _c      image shape, channels last; 0, 0, 0 for a vector
//   obs_scale          what the network multiplies observations by
//   n_actions          discrete actions 0 .. n_actions-1 (0 for a continuous env)
//   action_dim         continuous actions: this many floats, each in [action_low,
//                      action_high] (Gymnasium's Box); 0 for a discrete env
//   max_episode_steps  truncation limit (Gymnasium's TimeLimit), 0 = none
// Classic control: Gymnasium's registrations. MinAtar (Young & Tian 2019): 10 x 10 x C frames of
// 0/1 bytes, all 6 actions, no time limit (the v0 ids of MinAtar's own Gymnasium registration).
// MinAtar/<Game>-render84-v0: the same game (MinAtar/<Game>-v0's dynamics, RNG, sticky actions,
// rewards and ends), observed as one 84 x 84 grayscale frame (envs/minatar_render.h: a gray
// level per channel, nearest-neighbour upscaling) fed to the network at 1/255, the shape of
// the Nature DQN's input.
// The MuJoCo rows are ENVINFO_MUJOCO_TABLE below, at the end of this one.
#define ENVINFO_TABLE(X)                                                                                                                       \
    X(CARTPOLE,       env_cartpole_spec,               "CartPole-v1",              4,    ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 2, 0, 0.0f, 0.0f, 500) \
    X(ACROBOT,        env_acrobot_spec,                "Acrobot-v1",               6,    ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 3, 0, 0.0f, 0.0f, 500) \
    X(MOUNTAINCAR,    env_mountaincar_spec,            "MountainCar-v0",           2,    ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 3, 0, 0.0f, 0.0f, 200) \
    X(PENDULUM,       env_pendulum_spec,               "Pendulum-v1",              3,    ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 1, -2.0f, 2.0f, 200) \
    X(MOUNTAINCAR_CONTINUOUS, env_mountaincar_continuous_spec, "MountainCarContinuous-v0", 2, ENVINFO_OBS_F32, 0, 0, 0, 1.0f, 0, 1, -1.0f, 1.0f, 999) \
    X(ASTERIX,        env_minatar_asterix_spec,        "MinAtar/Asterix-v0",       400,  ENVINFO_OBS_U8,  10, 10, 4,  1.0f, 6, 0, 0.0f, 0.0f, 0)   \
    X(BREAKOUT,       env_minatar_breakout_spec,       "MinAtar/Breakout-v0",      400,  ENVINFO_OBS_U8,  10, 10, 4,  1.0f, 6, 0, 0.0f, 0.0f, 0)   \
    X(FREEWAY,        env_minatar_freeway_spec,        "MinAtar/Freeway-v0",       700,  ENVINFO_OBS_U8,  10, 10, 7,  1.0f, 6, 0, 0.0f, 0.0f, 0)   \
    X(SEAQUEST,       env_minatar_seaquest_spec,       "MinAtar/Seaquest-v0",      1000, ENVINFO_OBS_U8,  10, 10, 10, 1.0f, 6, 0, 0.0f, 0.0f, 0)   \
    X(SPACE_INVADERS, env_minatar_space_invaders_spec, "MinAtar/SpaceInvaders-v0", 600,  ENVINFO_OBS_U8,  10, 10, 6,  1.0f, 6, 0, 0.0f, 0.0f, 0)   \
    X(ASTERIX_RENDER84,        env_minatar_asterix_render84_spec,        "MinAtar/Asterix-render84-v0",       7056, ENVINFO_OBS_U8, 84, 84, 1, 1.0f / 255.0f, 6, 0, 0.0f, 0.0f, 0) \
    X(BREAKOUT_RENDER84,       env_minatar_breakout_render84_spec,       "MinAtar/Breakout-render84-v0",      7056, ENVINFO_OBS_U8, 84, 84, 1, 1.0f / 255.0f, 6, 0, 0.0f, 0.0f, 0) \
    X(FREEWAY_RENDER84,        env_minatar_freeway_render84_spec,        "MinAtar/Freeway-render84-v0",       7056, ENVINFO_OBS_U8, 84, 84, 1, 1.0f / 255.0f, 6, 0, 0.0f, 0.0f, 0) \
    X(SEAQUEST_RENDER84,       env_minatar_seaquest_render84_spec,       "MinAtar/Seaquest-render84-v0",      7056, ENVINFO_OBS_U8, 84, 84, 1, 1.0f / 255.0f, 6, 0, 0.0f, 0.0f, 0) \
    X(SPACE_INVADERS_RENDER84, env_minatar_space_invaders_render84_spec, "MinAtar/SpaceInvaders-render84-v0", 7056, ENVINFO_OBS_U8, 84, 84, 1, 1.0f / 255.0f, 6, 0, 0.0f, 0.0f, 0) \
    ENVINFO_MUJOCO_TABLE(X)
// MuJoCo: Gymnasium's v4 tasks (envs/env_mujoco.h) with their default options: the
// observation lengths of exclude_current_positions_from_observation = True and of Ant
// without contact forces, float64 in Gymnasium and float32 here; the Box of the model's
// actuator ctrlrange (every actuator the same); TimeLimit 1000. Each needs its MuJoCo
// model file, [env] model_xml (envinfo_is_mujoco).
#define ENVINFO_MUJOCO_TABLE(X)                                                                                                                \
    X(HALF_CHEETAH,   env_mujoco_half_cheetah_spec,    "HalfCheetah-v4",           17,   ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 6, -1.0f, 1.0f, 1000) \
    X(HOPPER,         env_mujoco_hopper_spec,          "Hopper-v4",                11,   ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 3, -1.0f, 1.0f, 1000) \
    X(WALKER2D,       env_mujoco_walker2d_spec,        "Walker2d-v4",              17,   ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 6, -1.0f, 1.0f, 1000) \
    X(ANT,            env_mujoco_ant_spec,             "Ant-v4",                   27,   ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 8, -1.0f, 1.0f, 1000) \
    X(INV_PENDULUM,   env_mujoco_inv_pendulum_spec,    "InvertedPendulum-v4",      4,    ENVINFO_OBS_F32, 0,  0,  0,  1.0f, 0, 1, -3.0f, 3.0f, 1000) \
    X(INV_DOUBLE_PENDULUM, env_mujoco_inv_double_pendulum_spec, "InvertedDoublePendulum-v4", 11, ENVINFO_OBS_F32, 0, 0, 0, 1.0f, 0, 1, -1.0f, 1.0f, 1000)
// clang-format on

// The rows' indices: ENVINFO_CARTPOLE, ..., and ENVINFO_COUNT rows in all.
#define ENVINFO_X_KEY(KEY, ...) ENVINFO_##KEY,
typedef enum { ENVINFO_TABLE(ENVINFO_X_KEY) ENVINFO_COUNT } envinfo_key;

// One row, without its spec (this header's users need not link it).
typedef struct {
    const char *id;          // Gymnasium id, e.g. "CartPole-v1"
    int obs_dim;             // observation length, in elements
    int obs_dtype;           // envinfo_obs_dtype: float32, or uint8 for MinAtar's frames
    int obs_h, obs_w, obs_c; // image shape, channels last (0, 0, 0: a vector)
    float obs_scale;         // what the network multiplies observations by
    int n_actions;           // discrete actions 0..n_actions-1; 0 for a continuous env
    int action_dim;          // continuous actions of this many floats; 0 for a discrete env
    float action_low;        // continuous: every component in [action_low, action_high]
    float action_high;
    int max_episode_steps; // truncation limit (Gymnasium TimeLimit; 0 = none)
} envinfo_t;

// The table, indexed by envinfo_key. Static, read-only.
extern const envinfo_t envinfo_table[ENVINFO_COUNT];

// Returns the row of id (exact, case-sensitive), or NULL when id is unknown or NULL.
// Thread-safe.
const envinfo_t *envinfo_find(const char *id);
// Comma-separated list of the known ids in table order, for error messages. Static storage.
const char *envinfo_known_ids(void);
// Bytes of one observation of row e (obs_dim elements of its dtype).
size_t envinfo_obs_bytes(const envinfo_t *e);
// 1 when row e is a MuJoCo task (a row of ENVINFO_MUJOCO_TABLE), whose model file is
// [env] model_xml; else 0 (also for NULL).
int envinfo_is_mujoco(const envinfo_t *e);

#endif
