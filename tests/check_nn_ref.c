// check_nn_ref.c: the double-precision reference forward (see check_nn_ref.h).
#include "check_nn_ref.h"

#include "apex.h"

#include <string.h>

void nnref_forward(double *q, const nn_config_t *cfg, const double *theta, const float *obs,
                   int B) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int nt = nn_layout(cfg, t);
    int A = cfg->n_actions;
    double x[NNREF_MAX_WIDTH], y[NNREF_MAX_WIDTH];
    for (int j = 0; j < B; j++) {
        int in_dim = cfg->obs_dim;
        APEX_ASSERT(in_dim <= NNREF_MAX_WIDTH);
        for (int k = 0; k < in_dim; k++) {
            x[k] = obs[(size_t)j * in_dim + k];
        }
        for (int l = 0; l < nt / 2; l++) {
            const double *w = theta + t[2 * l].offset, *b = theta + t[2 * l + 1].offset;
            int out_dim = t[2 * l].rows, last = l == nt / 2 - 1;
            APEX_ASSERT(out_dim <= NNREF_MAX_WIDTH);
            for (int i = 0; i < out_dim; i++) {
                double acc = b[i];
                for (int k = 0; k < in_dim; k++) {
                    acc += w[i * in_dim + k] * x[k];
                }
                y[i] = last ? acc : (acc > 0 ? acc : 0); // ReLU on hidden layers only
            }
            memcpy(x, y, sizeof(double) * (size_t)out_dim);
            in_dim = out_dim;
        }
        // x holds the head output: [V, A_0..A_{A-1}] (dueling) or [A_0..].
        double mean = 0;
        for (int a = 0; a < A; a++) {
            mean += x[a + cfg->dueling];
        }
        mean /= A;
        for (int a = 0; a < A; a++) {
            q[j * A + a] = cfg->dueling ? x[0] + x[a + 1] - mean : x[a];
        }
    }
}
