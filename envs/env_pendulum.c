// env_pendulum.c: Pendulum-v1, transcribed from gymnasium/envs/classic_control/pendulum.py
// (PendulumEnv with g = 10.0), as Gymnasium computes it under numpy 1.x.
//
// The state is [theta, theta_dot] in float64 (PendulumEnv.state, an np.array of two floats),
// theta measured from upright and never wrapped: it grows without bound as the pendulum
// spins, and only the cost normalises it (angle_normalize). The observation is
// float32(cos theta, sin theta, theta_dot). Rewards are -cost, a float64 in Gymnasium,
// reported here rounded to float; the episode never terminates (TimeLimit truncates it at
// 200 steps). Pendulum cannot diverge: theta_dot is clipped to +-8 every step, so
// terminated is always 0, never the void 2.
//
// numpy 1.x promotion: the action u is an np.float32 after np.clip, and every expression it
// enters with a Python number (u**2, 3.0 * u) is evaluated in float64 (numpy 2's NEP 50
// would keep u**2 and 0.001 * u**2 in float32: a different reward). np.sin/np.cos are
// libm's here, as numpy 1.25-1.26 computes them on every CPU and numpy 1.22-1.24 does without
// AVX-512 (with AVX-512 their SVML differs by an ulp; see
// tests/fixtures/gen_env_cont_trajectories.py). x**2 on a float64 is pow(x, 2.0).
#include "env.h"

#include "apex.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Constants (PendulumEnv.__init__, g = 10.0).

#define PD_MAX_SPEED 8 // an int in Gymnasium too: np.clip(newthdot, -8, 8)
#define PD_MAX_TORQUE 2.0
#define PD_DT 0.05
#define PD_G 10.0
#define PD_M 1.0
#define PD_L 1.0

enum { PD_THETA, PD_THETA_DOT, PD_STATE_DIM };

// np.clip(x, lo, hi) for non-NaN x: min(max(x, lo), hi).
static double s_clip(double x, double lo, double hi) {
    double y = x < lo ? lo : x;
    return y > hi ? hi : y;
}

// angle_normalize(x) = ((x + np.pi) % (2 * np.pi)) - np.pi, with numpy's (and Python's)
// float modulo: fmod, moved into [0, 2 pi) when its sign differs from the divisor's, and
// +0.0 for an exact multiple (npy_divmod).
static double s_angle_normalize(double x) {
    const double a = x + M_PI, b = 2 * M_PI;
    double mod = fmod(a, b);
    if (mod != 0.0) {
        if ((b < 0) != (mod < 0)) {
            mod += b;
        }
    } else {
        mod = copysign(0.0, b);
    }
    return mod - M_PI;
}

// ---------------------------------------------------------------------------------------
// Spec functions

static void s_pendulum_observe(const double *s, float *obs) {
    // np.array([np.cos(theta), np.sin(theta), thetadot], dtype=np.float32)
    obs[0] = (float)cos(s[PD_THETA]);
    obs[1] = (float)sin(s[PD_THETA]);
    obs[2] = (float)s[PD_THETA_DOT];
}

static void s_pendulum_reset(double *s, rng_t *rng, float *obs) {
    // np_random.uniform(low=-high, high=high) with high = [np.pi, 1.0]: elementwise
    // low + (high - low) * u, theta first.
    s[PD_THETA] = -M_PI + (M_PI - -M_PI) * rng_uniform(rng);
    s[PD_THETA_DOT] = -1.0 + (1.0 - -1.0) * rng_uniform(rng);
    s_pendulum_observe(s, obs);
}

static void s_pendulum_step(double *s, const float *action, float *obs, float *reward,
                            uint8_t *terminated) {
    const double th = s[PD_THETA], thdot = s[PD_THETA_DOT];
    // u = np.clip(u, -max_torque, max_torque)[0]: a float32 array clipped in float32 (the
    // bounds are exact in float32), so u is a float32 value, used in float64 from here on.
    const float uf = action[0] < -(float)PD_MAX_TORQUE  ? -(float)PD_MAX_TORQUE
                     : action[0] > (float)PD_MAX_TORQUE ? (float)PD_MAX_TORQUE
                                                        : action[0];
    const double u = (double)uf;
    // costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2), on the old state.
    const double costs = pow(s_angle_normalize(th), 2.0) + 0.1 * pow(thdot, 2.0) +
                         0.001 * pow(u, 2.0);
    // newthdot = thdot + (3 * g / (2 * l) * np.sin(th) + 3.0 / (m * l**2) * u) * dt
    double newthdot = thdot +
                      (3 * PD_G / (2 * PD_L) * sin(th) + 3.0 / (PD_M * pow(PD_L, 2.0)) * u) * PD_DT;
    newthdot = s_clip(newthdot, -PD_MAX_SPEED, PD_MAX_SPEED);
    // The new velocity moves theta (semi-implicit Euler); theta is not wrapped.
    const double newth = th + newthdot * PD_DT;
    s[PD_THETA] = newth;
    s[PD_THETA_DOT] = newthdot;
    *reward = (float)-costs;
    *terminated = 0;
    s_pendulum_observe(s, obs);
}

// The spec's untyped interface (env.h) over the typed functions above.
static void s_pendulum_reset_v(void *s, rng_t *rng, void *obs) { s_pendulum_reset(s, rng, obs); }
static void s_pendulum_step_v(void *s, const float *a, void *obs, float *r, uint8_t *t) {
    s_pendulum_step(s, a, obs, r, t);
}
static void s_pendulum_observe_v(const void *s, void *obs) { s_pendulum_observe(s, obs); }

const env_spec_t env_pendulum_spec = {
    .info = &envinfo_table[ENVINFO_PENDULUM],
    .state_dim = PD_STATE_DIM,
    .state_bytes = PD_STATE_DIM * sizeof(double),
    .reset = s_pendulum_reset_v,
    .step_cont = s_pendulum_step_v,
    .observe = s_pendulum_observe_v,
};
