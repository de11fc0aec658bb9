// check_nn_ref.h: an independent double-precision forward pass of the Q-network, shared by
// the gradient checks in check_nn.c and check_train.c (no suite of its own).
#ifndef APEX_CHECK_NN_REF_H
#define APEX_CHECK_NN_REF_H

#include "nn.h"

// q (B x A) in double from theta (num_params doubles in the nn_layout order) and obs
// (B rows of O elements of cfg->in_dtype, channels-last, times cfg->in_scale). Plain loops
// (conv2d as seven of them, on PyTorch's NCHW planes), one sample at a time, sharing nothing
// with nn.c or conv.c except the layout table.
void nnref_forward(double *q, const nn_config_t *cfg, const double *theta, const void *obs, int B);

// MLPs with the first layer's input rows given in double: x (B x (obs_dim + action_inputs)),
// the scaled observation then the action inputs, as nn.c's first layer reads them; q (B x A)
// as nnref_forward's (a bounded head's outputs mid + half tanh(z)). Written separately from
// nnref_forward's loops, so that inputs can be perturbed in double (input gradients).
void nnref_forward_rows(double *q, const nn_config_t *cfg, const double *theta, const double *x,
                        int B);
// A critic on observations (cfg's dtype and scale) and actions in double (B x action_inputs).
void nnref_forward_sa(double *q, const nn_config_t *cfg, const double *theta, const void *obs,
                      const double *actions, int B);

#endif
