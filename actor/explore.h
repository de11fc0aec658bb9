// explore.h: Ape-X's per-environment epsilon schedule and epsilon-greedy action selection.
//
// Ape-X (Horgan et al. 2018, sec. 4) gives each of the N environments of a run a fixed
// epsilon, eps_i = eps^(1 + alpha * i / (N - 1)), i = 0 .. N-1, with eps = 0.4 and alpha = 7:
// env 0 explores with 0.4 and env N-1 with 0.4^8 ~ 0.00066. i is the env's global index over
// all actors (actor_index * envs_per_actor + env_index), N = num_actors * envs_per_actor.
//
// Continuous actions (DPG): the same schedule gives each env a Gaussian noise scale,
// sigma_i = sigma^(1 + alpha * i / (N - 1)) (explore_epsilon with [actor] noise_sigma and
// noise_alpha), and an action is a = clip(mu(s) + sigma_i * half * z, low, high) per
// component, half = (high - low) / 2, z ~ N(0, 1) (explore_gaussian). sigma is a fraction of
// the half range, so one value means the same in every env; with sigma 0 the action is
// mu(s) exactly. Optionally the noise is an Ornstein-Uhlenbeck process per env instead
// (explore_ou, [actor] noise_theta < 1), DDPG's choice for physical control.
//
// What it does not do: anneal epsilon over time (Ape-X keeps it fixed), or compute Q-values.
// Pure functions; thread-safe except for the caller's rng_t.
#ifndef APEX_EXPLORE_H
#define APEX_EXPLORE_H

#include "rng.h"

#include <stdint.h>

#define EXPLORE_EPS_BASE_DEFAULT 0.4
#define EXPLORE_EPS_ALPHA_DEFAULT 7.0
// Continuous actions: env 0 adds noise of 0.4 half ranges, the last env 0.4^8 ~ 0.00066.
#define EXPLORE_NOISE_SIGMA_DEFAULT 0.4
#define EXPLORE_NOISE_ALPHA_DEFAULT 7.0

// eps_i for global env index i of n_total (0 <= i < n_total). n_total == 1 gives eps_base
// (the formula's i / (N - 1) would divide by zero). Asserts the index range.
double explore_epsilon(int64_t i, int64_t n_total, double eps_base, double eps_alpha);
// Fills eps_out[k] = explore_epsilon(first_index + k, n_total, ...) for k < n_local: the
// epsilons of one actor's envs.
void explore_epsilons(float *eps_out, int n_local, int64_t first_index, int64_t n_total,
                      double eps_base, double eps_alpha);

// Epsilon-greedy over a (B, A) row-major Q matrix: for row b, with probability eps[b] a
// uniform random action, otherwise nn_argmax of the row (nn.h: ties to the lowest index, NaNs
// never win). Draws one uniform per row, and
// a second only when exploring, so a run is reproducible from the rng state.
void explore_select(int32_t *actions_out, const float *q, const float *eps, int B, int A,
                    rng_t *rng);

// Gaussian exploration over a (B, D) row-major matrix of policy outputs mu: for row b and
// component j, out[b, j] = clip(mu[b, j] + sigma[b] * half_j * z, low[j], high[j]) with
// half_j = (high[j] - low[j]) / 2 and z = rng_normal(rng), one draw per component, and only
// when sigma[b] > 0 (sigma 0: out = mu clipped, no draw; mu of an out_bounded policy is
// already in the bounds). A non-finite mu (weights that overflow) gives the bounds' middle,
// so an action is always finite and in the bounds. out and mu may be the same array.
void explore_gaussian(float *out, const float *mu, const float *sigma, int B, int D,
                      const float *low, const float *high, rng_t *rng);

// Ornstein-Uhlenbeck exploration (DDPG, Lillicrap et al. 2016: theta 0.15), temporally
// correlated noise for physical control: per row b and component j a state x (B x D, the
// caller's, zero at an episode's start) moves as
//   x <- (1 - theta) x + sigma[b] z,  z = rng_normal(rng)   (dt = 1, mean 0)
// and out = clip(mu + half_j x, low, high), as explore_gaussian's. sigma is the innovation's
// scale, DDPG's convention: x's stationary deviation is sigma / sqrt(theta (2 - theta)), 2.6
// sigma at theta 0.15. theta = 1 makes x white noise, Gaussian exploration (the actor calls
// explore_gaussian then, whose rounding it keeps bit for bit). sigma[b] = 0: x = 0, no draw.
// theta in (0, 1].
void explore_ou(float *out, double *x, const float *mu, const float *sigma, double theta, int B,
                int D, const float *low, const float *high, rng_t *rng);

#endif
