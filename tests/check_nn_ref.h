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

#endif
