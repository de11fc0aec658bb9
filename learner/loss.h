// loss.h: the Ape-X learner's loss on a batch of Q-values, as plain kernels over flat arrays.
//
// Double-DQN n-step target (van Hasselt et al. 2016; Ape-X eq. for the learner):
//   y_i = R_i + disc_i * Q_target(s'_i, argmax_a Q_online(s'_i, a))
// with R_i the n-step discounted return and disc_i = gamma^n, or 0 when the episode ended
// inside the n steps (then y_i = R_i: a terminal does not bootstrap). y is computed by
// nn_double_dqn_targets (model/nn.h), the one copy of the formula, which the actors'
// initial priorities use too.
// TD error d_i = y_i - Q_online(s_i, a_i). Loss (Huber with threshold k = [learner]
// huber_delta, PyTorch's HuberLoss(delta = k); at k = 1 also smooth_l1_loss; importance-
// weighted, averaged over the batch):
//   L = (1/B) sum_i w_i * huber(d_i),  huber(d) = d^2/2 if |d| <= k else k (|d| - k/2)
//   dL/dQ(s_i, a_i) = -(w_i / B) * clamp(d_i, -k, k), zero for the other actions.
// The target is treated as a constant (no gradient through y).
// What it does not do: the target y (nn.h), forward passes or optimizer steps (train.h).
// Pure functions.
#ifndef APEX_LOSS_H
#define APEX_LOSS_H

#include <stdint.h>

// Returns L; writes dq = dL/dq (B x A) and td = y - Q(s, a) (B). actions in [0, A);
// delta (the Huber threshold) > 0.
float loss_huber_td(float *dq, float *td, const float *q, const float *y, const int32_t *actions,
                    const float *is_weights, float delta, int B, int A);

// prio (B) = |td| + priority_eps: the new priorities sent back to the replay server.
void loss_priorities(float *prio, const float *td, float priority_eps, int B);

#endif
