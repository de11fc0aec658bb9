// env_mountaincar.c: MountainCar-v0, transcribed from
// gymnasium/envs/classic_control/mountain_car.py (MountainCarEnv, goal_velocity = 0).
//
// Deterministic dynamics on [position, velocity]; the only quirks worth knowing are the order
// of the clips and the inelastic left wall (velocity set to 0 when the car hits -1.2 while
// moving left). Reward is -1 on every step, the one reaching the goal included.
#include "env.h"

#include "apex.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Constants (MountainCarEnv.__init__).

#define MC_MIN_POSITION -1.2
#define MC_MAX_POSITION 0.6
#define MC_MAX_SPEED 0.07
#define MC_GOAL_POSITION 0.5
#define MC_GOAL_VELOCITY 0.0
#define MC_FORCE 0.001
#define MC_GRAVITY 0.0025

enum { MC_POSITION, MC_VELOCITY, MC_STATE_DIM };

// np.clip(x, lo, hi) for non-NaN x: min(max(x, lo), hi).
static double s_clip(double x, double lo, double hi) {
    double y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

// ---------------------------------------------------------------------------------------
// Spec functions

static void s_mountaincar_observe(const double *s, float *obs) {
    obs[0] = (float)s[MC_POSITION];
    obs[1] = (float)s[MC_VELOCITY];
}

static void s_mountaincar_reset(double *s, rng_t *rng, float *obs) {
    // np.array([np_random.uniform(low=-0.6, high=-0.4), 0])
    s[MC_POSITION] = -0.6 + (-0.4 - -0.6) * rng_uniform(rng);
    s[MC_VELOCITY] = 0.0;
    s_mountaincar_observe(s, obs);
}

static void s_mountaincar_step(double *s, int32_t action, float *obs, float *reward,
                               uint8_t *terminated) {
    double position = s[MC_POSITION], velocity = s[MC_VELOCITY];
    // velocity += (action - 1) * force + cos(3 * position) * (-gravity): the right-hand side
    // is summed first, then added to velocity.
    velocity += (double)(action - 1) * MC_FORCE + cos(3 * position) * (-MC_GRAVITY);
    velocity = s_clip(velocity, -MC_MAX_SPEED, MC_MAX_SPEED);
    position += velocity;
    position = s_clip(position, MC_MIN_POSITION, MC_MAX_POSITION);
    if (position == MC_MIN_POSITION && velocity < 0) {
        velocity = 0; // inelastic left wall
    }
    s[MC_POSITION] = position;
    s[MC_VELOCITY] = velocity;
    *terminated = (uint8_t)(position >= MC_GOAL_POSITION && velocity >= MC_GOAL_VELOCITY);
    *reward = -1.0f;
    s_mountaincar_observe(s, obs);
}

// The spec's untyped interface (env.h) over the typed functions above.
static void s_mountaincar_reset_v(void *s, rng_t *rng, void *obs) {
    s_mountaincar_reset(s, rng, obs);
}
static void s_mountaincar_step_v(void *s, int32_t a, void *obs, float *r, uint8_t *t) {
    s_mountaincar_step(s, a, obs, r, t);
}
static void s_mountaincar_observe_v(const void *s, void *obs) { s_mountaincar_observe(s, obs); }

const env_spec_t env_mountaincar_spec = {
    .info = &envinfo_table[ENVINFO_MOUNTAINCAR],
    .state_dim = MC_STATE_DIM,
    .state_bytes = MC_STATE_DIM * sizeof(double),
    .reset = s_mountaincar_reset_v,
    .step = s_mountaincar_step_v,
    .observe = s_mountaincar_observe_v,
};
