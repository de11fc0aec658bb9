// env_acrobot.c: Acrobot-v1, transcribed from gymnasium/envs/classic_control/acrobot.py
// (AcrobotEnv with book_or_nips = "book", torque_noise_max = 0).
//
// Gymnasium integrates the 4-state augmented with the torque, s_aug = [th1, th2, dth1, dth2,
// a], with one classical RK4 step over t = [0, dt]; _dsdt returns 0 for the torque's
// derivative, so a is the same in every stage and we keep it as a scalar. The RK4
// combination y0 + dt/6 * (k1 + 2 k2 + 2 k3 + k4) is evaluated in exactly that order.
// Every physical constant is 1.0 or 0.5 except g, so most of the products in _dsdt are exact;
// they are still written out in Gymnasium's order so the rounding matches where it is not.
#include "env.h"

#include "apex.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Constants (AcrobotEnv class attributes).

#define AB_DT 0.2               // [s] one env step
#define AB_L1 1.0               // LINK_LENGTH_1 [m]
#define AB_M1 1.0               // LINK_MASS_1 [kg]
#define AB_M2 1.0               // LINK_MASS_2 [kg]
#define AB_LC1 0.5              // LINK_COM_POS_1 [m]
#define AB_LC2 0.5              // LINK_COM_POS_2 [m]
#define AB_I1 1.0               // LINK_MOI
#define AB_I2 1.0               // LINK_MOI
#define AB_G 9.8                // [m/s^2]
#define AB_MAX_VEL_1 (4 * M_PI) // [rad/s]
#define AB_MAX_VEL_2 (9 * M_PI) // [rad/s]

enum { AB_TH1, AB_TH2, AB_DTH1, AB_DTH2, AB_STATE_DIM };

static const double s_avail_torque[3] = {-1.0, 0.0, +1.0};

// ---------------------------------------------------------------------------------------
// Dynamics

// AcrobotEnv._dsdt (book): d/dt of s (4 doubles) under torque a, written into ds.
static void s_acrobot_dsdt(double *ds, const double *s, double a) {
    double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    double d1 = AB_M1 * (AB_LC1 * AB_LC1) +
                AB_M2 * (AB_L1 * AB_L1 + AB_LC2 * AB_LC2 + 2 * AB_L1 * AB_LC2 * cos(theta2)) +
                AB_I1 + AB_I2;
    double d2 = AB_M2 * (AB_LC2 * AB_LC2 + AB_L1 * AB_LC2 * cos(theta2)) + AB_I2;
    double phi2 = AB_M2 * AB_LC2 * AB_G * cos(theta1 + theta2 - M_PI / 2.0);
    double phi1 = -AB_M2 * AB_L1 * AB_LC2 * (dtheta2 * dtheta2) * sin(theta2) -
                  2 * AB_M2 * AB_L1 * AB_LC2 * dtheta2 * dtheta1 * sin(theta2) +
                  (AB_M1 * AB_LC1 + AB_M2 * AB_L1) * AB_G * cos(theta1 - M_PI / 2) + phi2;
    // "book" variant: consistent with the java implementation and Sutton & Barto.
    double ddtheta2 =
        (a + d2 / d1 * phi1 - AB_M2 * AB_L1 * AB_LC2 * (dtheta1 * dtheta1) * sin(theta2) - phi2) /
        (AB_M2 * (AB_LC2 * AB_LC2) + AB_I2 - (d2 * d2) / d1);
    double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    ds[0] = dtheta1;
    ds[1] = dtheta2;
    ds[2] = ddtheta1;
    ds[3] = ddtheta2;
}

// Gymnasium's rk4(derivs, y0, [0, dt]) for one interval, in place on y (4 doubles).
static void s_acrobot_rk4(double *y, double a) {
    const double dt = AB_DT - 0; // t[1] - t[0], with t[0] the int 0
    const double dt2 = dt / 2.0;
    double k1[4], k2[4], k3[4], k4[4], tmp[4];
    s_acrobot_dsdt(k1, y, a);
    for (int j = 0; j < 4; j++) {
        tmp[j] = y[j] + dt2 * k1[j];
    }
    s_acrobot_dsdt(k2, tmp, a);
    for (int j = 0; j < 4; j++) {
        tmp[j] = y[j] + dt2 * k2[j];
    }
    s_acrobot_dsdt(k3, tmp, a);
    for (int j = 0; j < 4; j++) {
        tmp[j] = y[j] + dt * k3[j];
    }
    s_acrobot_dsdt(k4, tmp, a);
    for (int j = 0; j < 4; j++) {
        y[j] = y[j] + dt / 6.0 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j]);
    }
}

// Gymnasium's wrap(x, m, M): shift by whole periods into [m, M] (loops, not fmod, so the
// rounding of x - diff matches).
static double s_wrap(double x, double m, double M) {
    double diff = M - m;
    while (x > M) {
        x = x - diff;
    }
    while (x < m) {
        x = x + diff;
    }
    return x;
}

// Gymnasium's bound(x, m, M) = min(max(x, m), M).
static double s_bound(double x, double m, double M) {
    double lo = x < m ? m : x; // Python max(x, m) returns x unless m > x
    return M < lo ? M : lo;    // Python min(lo, M) returns lo unless M < lo
}

// ---------------------------------------------------------------------------------------
// Spec functions

static void s_acrobot_observe(const double *s, float *obs) {
    obs[0] = (float)cos(s[AB_TH1]);
    obs[1] = (float)sin(s[AB_TH1]);
    obs[2] = (float)cos(s[AB_TH2]);
    obs[3] = (float)sin(s[AB_TH2]);
    obs[4] = (float)s[AB_DTH1];
    obs[5] = (float)s[AB_DTH2];
}

static void s_acrobot_reset(double *s, rng_t *rng, float *obs) {
    // np_random.uniform(-0.1, 0.1, size=(4,)).astype(np.float32): Gymnasium stores the start
    // state rounded to float32 (the first step then promotes it to float64 again).
    for (int i = 0; i < AB_STATE_DIM; i++) {
        s[i] = (double)(float)(-0.1 + (0.1 - -0.1) * rng_uniform(rng));
    }
    s_acrobot_observe(s, obs);
}

static void s_acrobot_step(double *s, int32_t action, float *obs, float *reward,
                           uint8_t *terminated) {
    s_acrobot_rk4(s, s_avail_torque[action]);
    s[AB_TH1] = s_wrap(s[AB_TH1], -M_PI, M_PI);
    s[AB_TH2] = s_wrap(s[AB_TH2], -M_PI, M_PI);
    s[AB_DTH1] = s_bound(s[AB_DTH1], -AB_MAX_VEL_1, AB_MAX_VEL_1);
    s[AB_DTH2] = s_bound(s[AB_DTH2], -AB_MAX_VEL_2, AB_MAX_VEL_2);
    // _terminal: the tip is more than one link length above the pivot.
    uint8_t term = (uint8_t)(-cos(s[AB_TH1]) - cos(s[AB_TH2] + s[AB_TH1]) > 1.0);
    *terminated = term;
    *reward = term ? 0.0f : -1.0f;
    s_acrobot_observe(s, obs);
}

// The spec's untyped interface (env.h) over the typed functions above.
static void s_acrobot_reset_v(void *s, rng_t *rng, void *obs) { s_acrobot_reset(s, rng, obs); }
static void s_acrobot_step_v(void *s, int32_t a, void *obs, float *r, uint8_t *t) {
    s_acrobot_step(s, a, obs, r, t);
}
static void s_acrobot_observe_v(const void *s, void *obs) { s_acrobot_observe(s, obs); }

const env_spec_t env_acrobot_spec = {
    .info = &envinfo_table[ENVINFO_ACROBOT],
    .state_dim = AB_STATE_DIM,
    .state_bytes = AB_STATE_DIM * sizeof(double),
    .reset = s_acrobot_reset_v,
    .step = s_acrobot_step_v,
    .observe = s_acrobot_observe_v,
};
