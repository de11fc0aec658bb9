// explore.c: Ape-X epsilon schedule and epsilon-greedy selection.
#include "explore.h"

#include "apex.h"
#include "nn.h"

#include <math.h>

// ---------------------------------------------------------------------------------------
// Schedule

double explore_epsilon(int64_t i, int64_t n_total, double eps_base, double eps_alpha) {
    APEX_ASSERT(n_total >= 1 && i >= 0 && i < n_total);
    if (n_total == 1) {
        return eps_base; // a single env gets the base epsilon, not 0/0
    }
    // Ape-X eq. (sec. 4.1): eps_i = eps^(1 + alpha * i / (N - 1))
    // The exponent grows linearly in i from 1 to 1 + alpha, so epsilon falls geometrically
    // from eps_base to eps_base^(1 + alpha): a few envs explore a lot, most explore little.
    double exponent = 1.0 + eps_alpha * (double)i / (double)(n_total - 1);
    return pow(eps_base, exponent);
}

// float: the per-env epsilon is only compared with a uniform draw and reported in stats.
void explore_epsilons(float *eps_out, int n_local, int64_t first_index, int64_t n_total,
                      double eps_base, double eps_alpha) {
    for (int k = 0; k < n_local; k++) {
        eps_out[k] = (float)explore_epsilon(first_index + k, n_total, eps_base, eps_alpha);
    }
}

// ---------------------------------------------------------------------------------------
// Selection

void explore_select(int32_t *actions_out, const float *q, const float *eps, int B, int A,
                    rng_t *rng) {
    APEX_ASSERT(A > 0);
    for (int b = 0; b < B; b++) {
        const float *row = q + (size_t)b * (size_t)A; // (B, A) row-major
        // u < eps (not <=) so eps = 0 is exactly greedy; rng_below keeps the random action
        // unbiased for any A (no modulo bias).
        if (rng_uniform(rng) < (double)eps[b]) {
            actions_out[b] = (int32_t)rng_below(rng, (uint32_t)A);
        } else {
            actions_out[b] = nn_argmax(row, A);
        }
    }
}

// mu(s) as a double to add noise to: a non-finite one (weights that overflow) is the bounds'
// middle.
static double s_mu(float mu, float low, float high) {
    return isfinite(mu) ? (double)mu : 0.5 * ((double)low + (double)high);
}

// a clipped to [low, high] in double, then to float: the rounded value can still pass a
// bound by an ulp, hence the second clip.
static float s_clip(double a, float low, float high) {
    const double lo = (double)low, hi = (double)high;
    float f = (float)(a < lo ? lo : a > hi ? hi : a);
    return f < low ? low : f > high ? high : f;
}

void explore_gaussian(float *out, const float *mu, const float *sigma, int B, int D,
                      const float *low, const float *high, rng_t *rng) {
    APEX_ASSERT(D > 0);
    for (int b = 0; b < B; b++) {
        const double s = (double)sigma[b];
        for (int j = 0; j < D; j++) {
            const size_t k = (size_t)b * (size_t)D + (size_t)j;
            double a = s_mu(mu[k], low[j], high[j]);
            if (s > 0.0) {
                a += s * 0.5 * ((double)high[j] - (double)low[j]) * rng_normal(rng);
            }
            out[k] = s_clip(a, low[j], high[j]);
        }
    }
}

void explore_ou(float *out, double *x, const float *mu, const float *sigma, double theta, int B,
                int D, const float *low, const float *high, rng_t *rng) {
    APEX_ASSERT(D > 0 && theta > 0.0 && theta <= 1.0);
    for (int b = 0; b < B; b++) {
        const double s = (double)sigma[b];
        for (int j = 0; j < D; j++) {
            const size_t k = (size_t)b * (size_t)D + (size_t)j;
            // sigma 0 draws nothing (as explore_gaussian) and holds no noise.
            x[k] = s > 0.0 ? (1.0 - theta) * x[k] + s * rng_normal(rng) : 0.0;
            double a = s_mu(mu[k], low[j], high[j]);
            out[k] = s_clip(a + 0.5 * ((double)high[j] - (double)low[j]) * x[k], low[j], high[j]);
        }
    }
}
