// check_nn_ref.h: an independent double-precision forward pass of the Q-network, shared by
// the gradient checks in check_nn.c and check_train.c (no suite of its own).
#ifndef APEX_CHECK_NN_REF_H
#define APEX_CHECK_NN_REF_H

#include "nn.h"

// Widest layer the reference handles (stack buffers).
#define NNREF_MAX_WIDTH 64

// q (B x A) in double from theta (num_params doubles in the nn_layout order) and obs
// (B x O). Plain loops, batch-major, sharing nothing with nn.c except the layout table.
void nnref_forward(double *q, const nn_config_t *cfg, const double *theta, const float *obs, int B);

#endif
