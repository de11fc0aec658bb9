// explore.h: Ape-X's per-environment epsilon schedule and epsilon-greedy action selection.
//
// Ape-X (Horgan et al. 2018, sec. 4) gives each of the N environments of a run a fixed
// epsilon, eps_i = eps^(1 + alpha * i / (N - 1)), i = 0 .. N-1, with eps = 0.4 and alpha = 7:
// env 0 explores with 0.4 and env N-1 with 0.4^8 ~ 0.00066. i is the env's global index over
// all actors (actor_index * envs_per_actor + env_index), N = num_actors * envs_per_actor.
//
// What it does not do: anneal epsilon over time (Ape-X keeps it fixed), or compute Q-values.
// Pure functions; thread-safe except for the caller's rng_t.
#ifndef APEX_EXPLORE_H
#define APEX_EXPLORE_H

#include "rng.h"

#include <stdint.h>

#define EXPLORE_EPS_BASE_DEFAULT 0.4
#define EXPLORE_EPS_ALPHA_DEFAULT 7.0

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

#endif
