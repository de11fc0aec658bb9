// env_cartpole.c: CartPole-v1, transcribed from gymnasium/envs/classic_control/cartpole.py
// (CartPoleEnv.step with kinematics_integrator = "euler").
//
// Every expression below keeps the Python source's operand order, because float64 addition
// and multiplication are not associative and the aim is bit-level agreement: e.g.
// `self.polemass_length * theta_dot**2 * sintheta` is (pml * theta_dot^2) * sintheta.
// x**2 on a float is pow(x, 2.0), which glibc rounds correctly, i.e. equal to x*x.
#include "env.h"

#include "apex.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Constants, derived the way CartPoleEnv.__init__ derives them (so total_mass is the double
// 0.1 + 1.0, not the literal 1.1).

#define CP_GRAVITY 9.8
#define CP_MASSCART 1.0
#define CP_MASSPOLE 0.1
#define CP_TOTAL_MASS (CP_MASSPOLE + CP_MASSCART)
#define CP_LENGTH 0.5 // actually half the pole's length [m]
#define CP_POLEMASS_LENGTH (CP_MASSPOLE * CP_LENGTH)
#define CP_FORCE_MAG 10.0 // [N]
#define CP_TAU 0.02       // seconds between state updates
// Angle at which the episode terminates: 12 degrees, computed as Gymnasium does.
#define CP_THETA_THRESHOLD_RAD (12 * 2 * M_PI / 360)
#define CP_X_THRESHOLD 2.4 // [m]

enum { CP_X, CP_X_DOT, CP_THETA, CP_THETA_DOT, CP_STATE_DIM };

// ---------------------------------------------------------------------------------------

static void s_cartpole_observe(const double *s, float *obs) {
    // np.array(self.state, dtype=np.float32): round-to-nearest, as a C cast does.
    for (int i = 0; i < CP_STATE_DIM; i++) {
        obs[i] = (float)s[i];
    }
}

static void s_cartpole_reset(double *s, rng_t *rng, float *obs) {
    // np_random.uniform(low=-0.05, high=0.05, size=(4,)): low + (high - low) * u.
    for (int i = 0; i < CP_STATE_DIM; i++) {
        s[i] = -0.05 + (0.05 - -0.05) * rng_uniform(rng);
    }
    s_cartpole_observe(s, obs);
}

// Everything in step after cos/sin, which the caller computes: splitting it out lets the
// batch version issue the libm calls for many envs back to back, so the long dependency
// chain below (two divisions deep) of one env overlaps with the next env's.
static inline void s_cartpole_advance(double *s, int32_t action, double sintheta, double costheta,
                                      float *obs, float *reward, uint8_t *terminated) {
    double x = s[CP_X], x_dot = s[CP_X_DOT], theta = s[CP_THETA], theta_dot = s[CP_THETA_DOT];
    double force = action == 1 ? CP_FORCE_MAG : -CP_FORCE_MAG;

    // https://coneural.org/florian/papers/05_cart_pole.pdf, in Gymnasium's operand order.
    double temp = (force + CP_POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / CP_TOTAL_MASS;
    double thetaacc =
        (CP_GRAVITY * sintheta - costheta * temp) /
        (CP_LENGTH * (4.0 / 3.0 - CP_MASSPOLE * (costheta * costheta) / CP_TOTAL_MASS));
    double xacc = temp - CP_POLEMASS_LENGTH * thetaacc * costheta / CP_TOTAL_MASS;

    // Explicit Euler: positions advance with the *old* velocities.
    x = x + CP_TAU * x_dot;
    x_dot = x_dot + CP_TAU * xacc;
    theta = theta + CP_TAU * theta_dot;
    theta_dot = theta_dot + CP_TAU * thetaacc;

    s[CP_X] = x;
    s[CP_X_DOT] = x_dot;
    s[CP_THETA] = theta;
    s[CP_THETA_DOT] = theta_dot;
    *terminated = (uint8_t)(x < -CP_X_THRESHOLD || x > CP_X_THRESHOLD ||
                            theta < -CP_THETA_THRESHOLD_RAD || theta > CP_THETA_THRESHOLD_RAD);
    // Reward 1 on every step, the terminating one included. (Gymnasium gives 0 for steps
    // *after* termination, which our callers never take: they reset first.)
    *reward = 1.0f;
    s_cartpole_observe(s, obs);
}

static void s_cartpole_step(double *s, int32_t action, float *obs, float *reward,
                            uint8_t *terminated) {
    double theta = s[CP_THETA];
    s_cartpole_advance(s, action, sin(theta), cos(theta), obs, reward, terminated);
}

// Chunk of envs whose sin/cos are computed ahead of the arithmetic (stack arrays).
#define CP_BATCH_CHUNK 32

static void s_cartpole_step_batch(double *states, int n, const int32_t *actions, float *obs,
                                  float *rewards, uint8_t *terminated) {
    double sn[CP_BATCH_CHUNK], cs[CP_BATCH_CHUNK];
    for (int i0 = 0; i0 < n; i0 += CP_BATCH_CHUNK) {
        const int m = APEX_MIN(CP_BATCH_CHUNK, n - i0);
        double *s = states + (size_t)i0 * CP_STATE_DIM;
        for (int k = 0; k < m; k++) {
            double theta = s[(size_t)k * CP_STATE_DIM + CP_THETA];
            sn[k] = sin(theta); // GCC fuses the pair into one sincos call
            cs[k] = cos(theta);
        }
        for (int k = 0; k < m; k++) {
            const size_t i = (size_t)(i0 + k);
            s_cartpole_advance(states + i * CP_STATE_DIM, actions[i], sn[k], cs[k],
                               obs + i * CP_STATE_DIM, &rewards[i], &terminated[i]);
        }
    }
}

// The spec's untyped interface (env.h) over the typed functions above.
static void s_cartpole_reset_v(void *s, rng_t *rng, void *obs) { s_cartpole_reset(s, rng, obs); }
static void s_cartpole_step_v(void *s, int32_t a, void *obs, float *r, uint8_t *t) {
    s_cartpole_step(s, a, obs, r, t);
}
static void s_cartpole_observe_v(const void *s, void *obs) { s_cartpole_observe(s, obs); }
static void s_cartpole_step_batch_v(void *s, int n, const int32_t *a, void *obs, float *r,
                                    uint8_t *t) {
    s_cartpole_step_batch(s, n, a, obs, r, t);
}

const env_spec_t env_cartpole_spec = {
    .info = &envinfo_table[ENVINFO_CARTPOLE],
    .state_dim = CP_STATE_DIM,
    .state_bytes = CP_STATE_DIM * sizeof(double),
    .reset = s_cartpole_reset_v,
    .step = s_cartpole_step_v,
    .observe = s_cartpole_observe_v,
    .step_batch = s_cartpole_step_batch_v,
};
