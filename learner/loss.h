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
// A DPG critic's loss (train_dpg.h) is over one scalar Q(s, a) per transition: Huber through
// loss_huber_td with A = 1, or the squared error of TD3 and DDPG (loss_mse_td).
// What it does not do: the target y (nn.h), forward passes or optimizer steps (train.h).
// Pure functions.
#ifndef APEX_LOSS_H
#define APEX_LOSS_H

#include <stdint.h>

// Returns L; writes dq = dL/dq (B x A) and td = y - Q(s, a) (B). actions in [0, A);
// delta (the Huber threshold) > 0.
float loss_huber_td(float *dq, float *td, const float *q, const float *y, const int32_t *actions,
                    const float *is_weights, float delta, int B, int A);

// The IS-weighted squared TD error of a scalar Q (PyTorch's (w * (q - y) ** 2).mean(), TD3's
// and DDPG's critic loss; no 1/2): returns L = (1/B) sum_i w_i d_i^2 with d_i = y_i - q_i, and
// writes dq_i = dL/dq_i = -2 w_i d_i / B and td_i = d_i (all B).
float loss_mse_td(float *dq, float *td, const float *q, const float *y, const float *is_weights,
                  int B);

// prio (B) = |td| + priority_eps: the new priorities sent back to the replay server.
void loss_priorities(float *prio, const float *td, float priority_eps, int B);

#endif
