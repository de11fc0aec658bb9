// env.h: the environments an actor steps, and a vectorised lock-step wrapper (vecenv_t).
//
// What it does: reproduces Gymnasium's classic-control dynamics bit for bit where the platform
// allows it (CartPole-v1, Acrobot-v1, MountainCar-v0): the same constants, the same integrators
// and the same order of float64 operations as gymnasium/envs/classic_control/*.py, with the
// internal state in double precision (Gymnasium's Python floats / float64 arrays) and
// observations returned as float32 (Gymnasium's np.array(..., dtype=np.float32)). Time limits
// are the TimeLimit wrapper's: truncation after max_episode_steps (500, 500, 200).
// tests/fixtures/gen_env_trajectories.py is the independent reference it is checked against.
//
// What it deliberately does not do:
// - Reproduce Gymnasium's reset *streams*. Start states follow the same distributions
//   (CartPole U(-0.05, 0.05)^4, Acrobot U(-0.1, 0.1)^4 rounded to float32 as Gymnasium does,
//   MountainCar position U(-0.6, -0.4) and velocity 0) but are drawn from our rng_t
//   (xoshiro256**), not numpy's PCG64, so seeds do not correspond.
// - Use numpy's transcendental functions. Acrobot calls numpy.cos/sin; on CPUs with AVX-512
//   numpy 1.22+ computes them with SVML, which differs from glibc's sin/cos by up to an ulp.
//   We use libm, which is what Gymnasium computes on other CPUs (see the fixture generator).
// - Rendering, continuous actions, torque noise (Acrobot's torque_noise_max is 0 by default),
//   or anything allocated per step.
//
// Exactness depends on the compiler not contracting a*b+c into FMA: the Makefile builds with
// -std=c11, where GCC's default is -ffp-contract=off. Do not build env_*.c with -ffast-math.
#ifndef APEX_ENV_H
#define APEX_ENV_H

#include "rng.h"

#include <stddef.h>
#include <stdint.h>

// ---------------------------------------------------------------------------------------
// One environment: a spec (constants + functions) over a caller-owned state.
//
// The state of one environment is state_dim doubles laid out exactly like Gymnasium's
// env.unwrapped.state (CartPole [x, x_dot, theta, theta_dot]; Acrobot [theta1, theta2,
// dtheta1, dtheta2]; MountainCar [position, velocity]). That makes it plain data: it can be
// copied, compared, or set from a test fixture (env_set_state). The spec functions are pure
// functions of their arguments and thread-safe on distinct states.

#define ENV_MAX_OBS_DIM 8
#define ENV_MAX_STATE_DIM 8

typedef struct env_spec {
    const char *id;        // Gymnasium id, e.g. "CartPole-v1"
    int obs_dim;           // floats per observation
    int n_actions;         // actions are 0 .. n_actions-1
    int max_episode_steps; // TimeLimit: truncated once an episode has this many steps
    int state_dim;         // doubles per state
    // Draws a start state from rng into state (state_dim doubles) and writes its observation.
    void (*reset)(double *state, rng_t *rng, float *obs_out);
    // One Gymnasium step: advances state, writes the new observation, the reward and whether
    // the episode terminated (1) or not (0). action outside [0, n_actions) is a programming
    // error (asserted by callers that take actions from outside, such as vecenv_step).
    void (*step)(double *state, int32_t action, float *obs_out, float *reward, uint8_t *terminated);
    // Writes the observation of state (Gymnasium's _get_ob or np.array(state, float32)).
    void (*observe)(const double *state, float *obs_out);
    // Optional (may be NULL): step for n envs at once, states (n, state_dim), obs_out
    // (n, obs_dim), actions/rewards/terminated (n). Must give bit-identical results to n
    // calls of step; it exists only to be faster (vecenv_step prefers it).
    void (*step_batch)(double *states, int n, const int32_t *actions, float *obs_out,
                       float *rewards, uint8_t *terminated);
} env_spec_t;

// The three built-in specs. Code normally looks them up with env_find.
extern const env_spec_t env_cartpole_spec;
extern const env_spec_t env_acrobot_spec;
extern const env_spec_t env_mountaincar_spec;

// Returns the spec registered under id (exact, case-sensitive), or NULL if there is none.
// Thread-safe; the spec is static and never freed.
const env_spec_t *env_find(const char *id);
// Returns a static, comma-separated list of the known ids, for error messages and --help.
const char *env_known_ids(void);
// Sets state to the given values (state_dim doubles, Gymnasium layout) and writes the
// matching observation (obs_out may be NULL). For tests and replays of fixtures.
void env_set_state(const env_spec_t *spec, double *state, const double *values, float *obs_out);

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
    double *state;          // (n, state_dim)
    rng_t *rng;             // (n)
    float *obs;             // (n, obs_dim): the observation to act on next
    double *ep_return;      // (n) return of the running episode so far
    int32_t *ep_len;        // (n) steps of the running episode so far
    uint64_t steps;         // env steps taken by vecenv_step, summed over envs
    uint64_t episodes;      // episodes finished
    // Finished episodes since the last vecenv_drain_episodes, at most episodes_cap of them.
    // When full, further episodes are counted in episodes_dropped and not stored.
    vecenv_episode_t *done;
    int done_count;
    int done_cap;
    uint64_t episodes_dropped;
} vecenv_t;

// Allocates the arrays (aborts on OOM), seeds env i from (seed, RNG_ROLE_ENV, first_index + i)
// and resets every env, so v->obs holds n start observations. episodes_cap is the bound of
// the finished-episode buffer (at least n is sensible: each step can end n episodes).
void vecenv_init(vecenv_t *v, const env_spec_t *spec, int n, uint64_t seed, uint64_t first_index,
                 int episodes_cap);
// Frees the arrays. A zeroed or already finished vecenv_t is a no-op.
void vecenv_fini(vecenv_t *v);

// Steps every env i with actions[i]. Outputs, all (n) or (n, obs_dim), caller-allocated:
//   next_obs    the observation the step produced, the final one if the episode ended
//               (what an n-step target bootstraps from; never the reset observation)
//   rewards     the step's reward
//   terminated  1 if the MDP reached a terminal state
//   truncated   1 if the episode hit max_episode_steps (as with Gymnasium's TimeLimit, both
//               flags can be 1 on the same step; consumers give terminated priority)
// Envs whose episode ended are reset; afterwards v->obs holds, for every env, the
// observation to act on next (the reset observation where an episode ended). Finished
// episodes are appended to v->done. Asserts actions[i] in [0, n_actions).
void vecenv_step(vecenv_t *v, const int32_t *actions, float *next_obs, float *rewards,
                 uint8_t *terminated, uint8_t *truncated);

// Copies up to cap finished episodes (oldest first) into out, removes them from the buffer,
// and returns how many were copied.
int vecenv_drain_episodes(vecenv_t *v, vecenv_episode_t *out, int cap);

#endif
