// loss.h: the Ape-X learner's loss on a batch of Q-values, as plain kernels over flat arrays.
//
// Double-DQN n-step target (van Hasselt et al. 2016; Ape-X eq. for the learner):
//   y_i = R_i + disc_i * Q_target(s'_i, argmax_a Q_online(s'_i, a))
// with R_i the n-step discounted return and disc_i = gamma^n, or 0 when the episode ended
// inside the n steps (then y_i = R_i: a terminal does not bootstrap).
// TD error delta_i = y_i - Q_online(s_i, a_i). Loss (Huber with delta = 1, i.e. PyTorch
// smooth_l1_loss(beta = 1), importance-weighted, averaged over the batch):
//   L = (1/B) sum_i w_i * huber(delta_i),  huber(d) = d^2/2 if |d| <= 1 else |d| - 1/2
//   dL/dQ(s_i, a_i) = -(w_i / B) * clamp(delta_i, -1, 1), zero for the other actions.
// The target is treated as a constant (no gradient through y).
// What it does not do: forward passes or optimizer steps (train.h). Pure functions.
#ifndef APEX_LOSS_H
#define APEX_LOSS_H

#include <stdint.h>

// y (B) from q_next_online and q_next_target (both B x A) for the batch.
void loss_double_dqn_targets(float *y, const float *q_next_online, const float *q_next_target,
                             const float *rewards, const float *discounts, int B, int A);

// Returns L; writes dq = dL/dq (B x A) and td = y - Q(s, a) (B). actions in [0, A).
float loss_huber_td(float *dq, float *td, const float *q, const float *y, const int32_t *actions,
                    const float *is_weights, int B, int A);

// prio (B) = |td| + priority_eps: the new priorities sent back to the replay server.
void loss_priorities(float *prio, const float *td, float priority_eps, int B);

#endif
