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

void explore_gaussian(float *out, const float *mu, const float *sigma, int B, int D,
                      const float *low, const float *high, rng_t *rng) {
    APEX_ASSERT(D > 0);
    for (int b = 0; b < B; b++) {
        const double s = (double)sigma[b];
        for (int j = 0; j < D; j++) {
            const size_t k = (size_t)b * (size_t)D + (size_t)j;
            const double lo = (double)low[j], hi = (double)high[j];
            double a = (double)mu[k];
            if (!isfinite(a)) {
                a = 0.5 * (lo + hi);
            }
            if (s > 0.0) {
                a += s * 0.5 * (hi - lo) * rng_normal(rng);
            }
            // In double, then to float: the rounded value can still pass a bound by an ulp.
            float f = (float)(a < lo ? lo : a > hi ? hi : a);
            out[k] = f < low[j] ? low[j] : f > high[j] ? high[j] : f;
        }
    }
}
