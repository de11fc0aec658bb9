// env.h: the environments an actor steps, and a vectorised lock-step wrapper (vecenv_t).
//
// What it does: reproduces Gymnasium's classic-control dynamics bit for bit where the platform
// allows it (CartPole-v1, Acrobot-v1, MountainCar-v0, and the continuous-action Pendulum-v1
// and MountainCarContinuous-v0): the same constants, the same integrators and the same order
// of float64 operations as gymnasium/envs/classic_control/*.py, with the internal state in
// double precision (Gymnasium's Python floats / float64 arrays) and observations returned as
// float32 (Gymnasium's np.array(..., dtype=np.float32)). Time limits are the TimeLimit
// wrapper's: truncation after max_episode_steps (500, 500, 200, 200, 999).
// tests/fixtures/gen_env_trajectories.py is the independent reference the discrete three are
// checked against (a line-by-line transcription); the continuous two are checked against
// trajectories of Gymnasium's own pendulum.py and continuous_mountain_car.py, run by
// tests/fixtures/gen_env_cont_trajectories.py. Exact means: every float64 state value, every
// float32 observation and every reward (Gymnasium's float64 rounded to the float reported)
// bit for bit, and the terminated flags, on every recorded step.
// - Continuous envs are exact to Gymnasium under numpy 1.x promotion (an np.float32 action
//   meeting a Python number computes in float64; numpy 2's NEP 50 keeps some of it in
//   float32 and gives other numbers), with libm's sin/cos. Their quirks are kept:
//   Pendulum's theta is never wrapped and its cost uses the clipped torque;
//   MountainCarContinuous's state is float32 after every step (the first step of an episode
//   runs on reset's float64), its goal test is on the float64 values before that rounding,
//   and its reward charges the unclipped action. Each spec's file lists what it keeps.
//
// What it deliberately does not do:
// - Reproduce Gymnasium's reset *streams*. Start states follow the same distributions
//   (CartPole U(-0.05, 0.05)^4, Acrobot U(-0.1, 0.1)^4 rounded to float32 as Gymnasium does,
//   MountainCar and MountainCarContinuous position U(-0.6, -0.4) and velocity 0, Pendulum
//   theta U(-pi, pi) and theta_dot U(-1, 1)) but are drawn from our rng_t (xoshiro256**),
//   not numpy's PCG64, so seeds do not correspond.
// - Use numpy's transcendental functions. Acrobot and Pendulum call numpy.cos/sin; on CPUs
//   with AVX-512 numpy 1.22-1.24 computes them with SVML, which differs from glibc's sin/cos
//   by up to an ulp. We use libm, which is what Gymnasium computes on other CPUs (and with
//   numpy 1.25-1.26, which turned that SIMD path off, on all; see the fixture generators).
// - Clip continuous actions in vecenv (each spec does what its Gymnasium env does with them),
//   rendering, torque noise (Acrobot's torque_noise_max is 0 by default), or anything
//   allocated per step.
//
// Exactness depends on the compiler not contracting a*b+c into FMA: the Makefile builds with
// -std=c11, where GCC's default is -ffp-contract=off. Do not build env_*.c with -ffast-math.
#ifndef APEX_ENV_H
#define APEX_ENV_H

#include "envinfo.h"
#include "rng.h"

#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------------------------------
// One environment: a spec (its row of the env table + functions) over a caller-owned state.
//
// The state of one environment is state_bytes of plain data. For the classic-control envs it
// is state_dim doubles laid out exactly like Gymnasium's env.unwrapped.state (CartPole [x,
// x_dot, theta, theta_dot]; Acrobot [theta1, theta2, dtheta1, dtheta2]; MountainCar and
// MountainCarContinuous [position, velocity]; Pendulum [theta, theta_dot]); for MinAtar a
// minatar_t (the game and its numpy RandomState). That makes it plain data: it can be
// copied, compared, or set from a test fixture
// (env_set_state, classic envs). The spec functions are pure functions of their arguments
// and thread-safe on distinct states. The exception is MuJoCo (env_mujoco.h): its state is
// a small struct that owns a MuJoCo mjData made by its first reset, so it must not be
// copied (the copies would step and free one simulation) and is released by spec->fini.
//
// A spec's id and dimensions are its row of the env table (envinfo.h), spec->info, and are
// written nowhere else: observations are info->obs_dim elements of info->obs_dtype (float32
// for classic control, uint8 for MinAtar's 0/1 frames and its rendered 84 x 84 gray ones),
// channels-last [y][x][c] for images (obs_h x obs_w x obs_c; 0 x 0 x 0 for a vector), and
// enter the network multiplied by info->obs_scale; actions are 0 .. info->n_actions-1 (a
// discrete env) or info->action_dim floats, nominally in [info->action_low,
// info->action_high] (a continuous one).

#define ENV_MAX_OBS_DIM 7056 // elements: a rendered MinAtar frame, 84 x 84 (the grids: <= 1000)
#define ENV_MAX_STATE_DIM 8  // doubles of a classic-control state
#define ENV_MAX_STATE_BYTES 4096

typedef struct env_spec {
    const envinfo_t *info; // its row of the env table: id, observation, actions, time limit
    int state_dim;         // doubles per state for env_set_state (classic control), else 0
    size_t state_bytes;    // bytes of one state
    // Optional (may be NULL): called once per env before its first reset, with the env's own
    // stream (MinAtar seeds its numpy RandomState from it; its resets then draw from that).
    void (*seed)(void *state, rng_t *rng);
    // Starts an episode (drawing from rng where the env's start state is random) and writes
    // its first observation.
    void (*reset)(void *state, rng_t *rng, void *obs_out);
    // One Gymnasium step of a discrete env (NULL for a continuous one): advances state,
    // writes the new observation, the reward and whether the episode terminated (1) or not
    // (0). action outside [0, n_actions) is a programming error (asserted by callers that
    // take actions from outside, such as vecenv_step).
    void (*step)(void *state, int32_t action, void *obs_out, float *reward, uint8_t *terminated);
    // One Gymnasium step of a continuous env (info->action_dim > 0; NULL for a discrete one):
    // action holds action_dim floats, which the env treats as Gymnasium's does (Pendulum and
    // MountainCarContinuous clip them to their bounds; MuJoCo clamps them to the actuators'
    // ctrlrange), and must be finite (callers clip exploration noise into the bounds). A step
    // whose state stops being finite (a diverging simulation) reports terminated = 2: the
    // episode is void, and the caller resets the env without folding the step.
    void (*step_cont)(void *state, const float *action, void *obs_out, float *reward,
                      uint8_t *terminated);
    // Writes the observation of state (Gymnasium's _get_ob or np.array(state, float32)).
    void (*observe)(const void *state, void *obs_out);
    // Optional (may be NULL): releases what the state owns outside itself (MuJoCo's mjData),
    // leaving it zeroed; a zeroed state is a no-op. vecenv_fini calls it for every env.
    void (*fini)(void *state);
    // Optional (may be NULL): step for n envs at once, states (n, state_bytes), obs_out
    // (n, obs), actions/rewards/terminated (n). Must give bit-identical results to n calls of
    // step; it exists only to be faster (vecenv_step prefers it).
    void (*step_batch)(void *states, int n, const int32_t *actions, void *obs_out, float *rewards,
                       uint8_t *terminated);
} env_spec_t;

// Bytes of one observation of spec.
size_t env_obs_bytes(const env_spec_t *spec);

// The built-in specs, one per row of ENVINFO_TABLE and named there (env_cartpole_spec,
// env_acrobot_spec, env_mountaincar_spec, env_pendulum_spec,
// env_mountaincar_continuous_spec, env_minatar_<game>_spec, env_minatar_<game>_render84_spec,
// env_mujoco_<task>_spec). Code normally looks them up with env_find.
#define ENV_X_DECLARE(KEY, spec, ...) extern const env_spec_t spec;
ENVINFO_TABLE(ENV_X_DECLARE)
// The MinAtar game behind one of those specs (minatar.h), or NULL for any other spec: the
// game of MinAtar/<Game>-v0 and of MinAtar/<Game>-render84-v0 alike (whose state is the same
// minatar_t; only the observations differ, minatar_render.h).
struct minatar_game;
const struct minatar_game *env_minatar_game(const env_spec_t *spec);

// Returns the spec of the table row whose id is id (exact, case-sensitive), or NULL if there
// is none (or id is NULL). Thread-safe; the spec is static and never freed. The list of
// known ids, for messages, is envinfo_known_ids().
const env_spec_t *env_find(const char *id);
// Sets a classic-control state to the given values (state_dim doubles, Gymnasium layout) and
// writes the matching observation (obs_out may be NULL). For tests and replays of fixtures.
void env_set_state(const env_spec_t *spec, void *state, const double *values, void *obs_out);

// ---------------------------------------------------------------------------------------
// vecenv_t: n environments of one spec stepped in lock step, with auto-reset.
//
// Plain data (STYLE S2): the caller owns the struct, vecenv_init allocates its arrays once,
// vecenv_fini frees them; vecenv_step allocates nothing. Env i draws its resets from its own
// stream rng_init_stream(seed, RNG_ROLE_ENV, first_index + i), where first_index is the
// global index of env 0 over the whole run (actor_index * envs_per_actor), so a run is
// reproducible env by env. Not thread-safe: one vecenv_t per thread.

// One finished episode (terminated or truncated).
typedef struct {
    double ret;  // undiscounted sum of rewards
    int32_t len; // steps in the episode
    int32_t env; // local env index 0 .. n-1
} vecenv_episode_t;

typedef struct {
    const env_spec_t *spec; // borrowed, static
    int n;                  // number of environments
    size_t obs_bytes;       // env_obs_bytes(spec)
    uint8_t *state;         // (n, state_bytes)
    rng_t *rng;             // (n)
    uint8_t *obs;           // (n, obs_bytes): the observation to act on next
    uint8_t *final_obs;     // (n, obs_bytes): row i is env i's final observation when its
                            // last step ended the episode; stale otherwise (vecenv_step)
    double *ep_return;      // (n) return of the running episode so far
    int32_t *ep_len;        // (n) steps of the running episode so far
    uint64_t steps;         // env steps taken by vecenv_step(_cont), summed over envs; void
                            // steps (vecenv_step_cont) are not counted
    uint64_t episodes;      // episodes finished (a void step's cut episode is not one)
    uint64_t void_steps;    // vecenv_step_cont steps a spec reported void (terminated 2)
    // Finished episodes since the last vecenv_drain_episodes, at most episodes_cap of them.
    // When full, further episodes are counted in episodes_dropped and not stored.
    vecenv_episode_t *done;
    int done_count;
    int done_cap;
    uint64_t episodes_dropped;
} vecenv_t;

// Allocates the arrays (aborts on OOM), seeds env i from (seed, RNG_ROLE_ENV, first_index + i)
// (spec->seed, if any, then draws its own seed from that stream) and resets every env, so
// v->obs holds n start observations. episodes_cap is the bound of
// the finished-episode buffer (at least n is sensible: each step can end n episodes).
void vecenv_init(vecenv_t *v, const env_spec_t *spec, int n, uint64_t seed, uint64_t first_index,
                 int episodes_cap);
// Releases every env (spec->fini, where the spec has one) and frees the arrays. A zeroed or
// already finished vecenv_t is a no-op.
void vecenv_fini(vecenv_t *v);

// Steps every env i with actions[i]. Outputs, all (n), caller-allocated:
//   rewards     the step's reward
//   terminated  1 if the MDP reached a terminal state
//   truncated   1 if the episode hit max_episode_steps (as with Gymnasium's TimeLimit, both
//               flags can be 1 on the same step; consumers give terminated priority)
// The observations stay in vecenv, where the step writes them (no copy of the whole vector,
// which was a tenth of a MinAtar step): afterwards v->obs holds, for every env, the
// observation to act on next, and the observation the step produced (what an n-step target
// bootstraps from; never the reset observation) is vecenv_next_obs(v, i, ended):
//   - an env whose episode went on: its row of v->obs (the two are the same observation);
//   - an env whose episode ended (terminated[i] || truncated[i]): its row of v->final_obs,
//     the final observation; it was reset, and v->obs holds its reset observation.
// Rows of v->final_obs of envs that did not end are stale. Both arrays are overwritten by
// the next vecenv_step: a caller that needs an observation longer copies it. Finished
// episodes are appended to v->done. Asserts actions[i] in [0, n_actions) and that the spec
// is discrete (a continuous one steps with vecenv_step_cont).
void vecenv_step(vecenv_t *v, const int32_t *actions, float *rewards, uint8_t *terminated,
                 uint8_t *truncated);

// vecenv_step for a continuous spec: env i takes the action_dim floats actions[i * action_dim
// ...] (actions (n, action_dim)), which vecenv passes on as they are (no clipping: the spec
// does what its Gymnasium env does with actions beyond the bounds). Outputs and auto-reset
// as vecenv_step's, plus void_step (n; may be NULL): a step the spec reported void
// (terminated 2: its state stopped being finite) has void_step[i] = 1, terminated[i] =
// truncated[i] = 0 and rewards[i] = 0; the env was reset (v->obs holds its reset
// observation), the step is not counted in v->steps nor in the episode's length, the cut
// episode is not reported, and there is no next observation for it (the row of
// v->final_obs is stale): a caller drops what it holds of that episode. v->void_steps
// counts such steps. Asserts that the spec is continuous and every action finite.
void vecenv_step_cont(vecenv_t *v, const float *actions, float *rewards, uint8_t *terminated,
                      uint8_t *truncated, uint8_t *void_step);

// The observation env i's last vecenv_step produced, given whether that step ended its
// episode (terminated[i] || truncated[i]): a row of v->final_obs or of v->obs (see above).
static inline const void *vecenv_next_obs(const vecenv_t *v, int i, int ended) {
    return (ended ? v->final_obs : v->obs) + (size_t)i * v->obs_bytes;
}

// Copies up to cap finished episodes (oldest first) into out, removes them from the buffer,
// and returns how many were copied.
int vecenv_drain_episodes(vecenv_t *v, vecenv_episode_t *out, int cap);

#endif
