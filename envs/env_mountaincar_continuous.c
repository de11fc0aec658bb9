// env_mountaincar_continuous.c: MountainCarContinuous-v0, transcribed from
// gymnasium/envs/classic_control/continuous_mountain_car.py (Continuous_MountainCarEnv,
// goal_velocity = 0), as Gymnasium computes it under numpy 1.x.
//
// The quirks kept, each of which changes numbers:
// - The state Gymnasium steps is float64 [position, velocity] after reset and float32 after
//   every step (step stores np.array([position, velocity], dtype=np.float32), which is also
//   the observation). So the first step of an episode runs on the double drawn by reset, and
//   every later one on float32 values; the arithmetic itself is float64 throughout (numpy
//   1.x promotes an np.float32 with a Python number to float64; numpy 2's NEP 50 would
//   compute in float32 after the first step). This spec keeps the state as doubles, stored
//   rounded to float32 after each step.
// - The force is the action clipped to [-1, 1], but the reward's control cost
//   -0.1 * a^2 uses the action as given: an action beyond the bounds moves the car as +-1
//   does and costs more.
// - Termination (the flag, at position >= 0.45 with velocity >= 0) is decided on the float64
//   values, before the state is rounded to float32; the reward of that step is 100 minus the
//   control cost.
// - The same inelastic left wall as MountainCar-v0: velocity set to 0 when the car is held
//   at -1.2 while moving left.
// The dynamics are clipped and cannot diverge, so terminated is 0 or 1, never the void 2.
#include "env.h"

#include "apex.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Constants (Continuous_MountainCarEnv.__init__).

#define MCC_MIN_ACTION -1.0
#define MCC_MAX_ACTION 1.0
#define MCC_MIN_POSITION -1.2
#define MCC_MAX_POSITION 0.6
#define MCC_MAX_SPEED 0.07
#define MCC_GOAL_POSITION 0.45 // 0.5 in MountainCar-v0
#define MCC_GOAL_VELOCITY 0    // an int in Gymnasium too
#define MCC_POWER 0.0015

enum { MCC_POSITION, MCC_VELOCITY, MCC_STATE_DIM };

// ---------------------------------------------------------------------------------------
// Spec functions

static void s_mcc_observe(const double *s, float *obs) {
    obs[0] = (float)s[MCC_POSITION];
    obs[1] = (float)s[MCC_VELOCITY];
}

static void s_mcc_reset(double *s, rng_t *rng, float *obs) {
    // np.array([np_random.uniform(low=-0.6, high=-0.4), 0]): a float64 state; the returned
    // observation is its float32 copy.
    s[MCC_POSITION] = -0.6 + (-0.4 - -0.6) * rng_uniform(rng);
    s[MCC_VELOCITY] = 0.0;
    s_mcc_observe(s, obs);
}

static void s_mcc_step(double *s, const float *action, float *obs, float *reward,
                       uint8_t *terminated) {
    double position = s[MCC_POSITION], velocity = s[MCC_VELOCITY];
    const double a0 = (double)action[0];
    // force = min(max(action[0], min_action), max_action): Python's built-ins, so a value
    // inside the bounds stays the float32 action (exact in double).
    double force = MCC_MIN_ACTION > a0 ? MCC_MIN_ACTION : a0;
    force = MCC_MAX_ACTION < force ? MCC_MAX_ACTION : force;

    // velocity += force * power - 0.0025 * math.cos(3 * position): the right-hand side is
    // evaluated first, then added.
    velocity += force * MCC_POWER - 0.0025 * cos(3 * position);
    if (velocity > MCC_MAX_SPEED) {
        velocity = MCC_MAX_SPEED;
    }
    if (velocity < -MCC_MAX_SPEED) {
        velocity = -MCC_MAX_SPEED;
    }
    position += velocity;
    if (position > MCC_MAX_POSITION) {
        position = MCC_MAX_POSITION;
    }
    if (position < MCC_MIN_POSITION) {
        position = MCC_MIN_POSITION;
    }
    if (position == MCC_MIN_POSITION && velocity < 0) {
        velocity = 0; // inelastic left wall
    }
    const int done = position >= MCC_GOAL_POSITION && velocity >= MCC_GOAL_VELOCITY;

    // reward = 0; if terminated: reward = 100.0; reward -= math.pow(action[0], 2) * 0.1,
    // with the unclipped action. 0 - x (not -x) keeps Python's +0.0 for a zero action.
    const double r = (done ? 100.0 : 0.0) - pow(a0, 2.0) * 0.1;

    // self.state = np.array([position, velocity], dtype=np.float32), also the observation.
    s[MCC_POSITION] = (double)(float)position;
    s[MCC_VELOCITY] = (double)(float)velocity;
    *reward = (float)r;
    *terminated = (uint8_t)done;
    s_mcc_observe(s, obs);
}

// The spec's untyped interface (env.h) over the typed functions above.
static void s_mcc_reset_v(void *s, rng_t *rng, void *obs) { s_mcc_reset(s, rng, obs); }
static void s_mcc_step_v(void *s, const float *a, void *obs, float *r, uint8_t *t) {
    s_mcc_step(s, a, obs, r, t);
}
static void s_mcc_observe_v(const void *s, void *obs) { s_mcc_observe(s, obs); }

const env_spec_t env_mountaincar_continuous_spec = {
    .info = &envinfo_table[ENVINFO_MOUNTAINCAR_CONTINUOUS],
    .state_dim = MCC_STATE_DIM,
    .state_bytes = MCC_STATE_DIM * sizeof(double),
    .reset = s_mcc_reset_v,
    .step_cont = s_mcc_step_v,
    .observe = s_mcc_observe_v,
};
