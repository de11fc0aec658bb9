// check_nn_ref.c: the double-precision reference forward (see check_nn_ref.h).
#include "check_nn_ref.h"

#include "apex.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

// Element k of observation row j, as the network sees it: float32 or uint8, times the scale.
static double s_input(const nn_config_t *cfg, const void *obs, int j, int k) {
    double scale = cfg->in_scale != 0.0f ? cfg->in_scale : 1.0;
    size_t i = (size_t)j * cfg->obs_dim + k;
    double v = cfg->in_dtype == NN_INPUT_U8 ? ((const uint8_t *)obs)[i] : ((const float *)obs)[i];
    return v * scale;
}

// ----------------------------------------------------------------------------
// MLPs on given first-layer rows (a critic's [s, a], or any input to differentiate)

void nnref_forward_rows(double *q, const nn_config_t *cfg, const double *theta, const double *x_in,
                        int B) {
    APEX_ASSERT(cfg->n_conv == 0);
    nn_tensor_t t[NN_MAX_TENSORS];
    int nt = nn_layout(cfg, t), A = cfg->n_actions, W = cfg->obs_dim + cfg->action_inputs;
    size_t cap = (size_t)W;
    for (int l = 0; l < nt / 2; l++) {
        cap = APEX_MAX(cap, (size_t)t[2 * l].rows);
    }
    double *x = xmalloc(cap * sizeof(double)), *y = xmalloc(cap * sizeof(double));
    for (int j = 0; j < B; j++) {
        memcpy(x, x_in + (size_t)j * W, (size_t)W * sizeof(double));
        int in_dim = W;
        for (int l = 0; l < nt / 2; l++) {
            const double *wt = theta + t[2 * l].offset, *b = theta + t[2 * l + 1].offset;
            int out_dim = t[2 * l].rows, last = l == nt / 2 - 1;
            for (int i = 0; i < out_dim; i++) {
                double acc = b[i];
                for (int k = 0; k < in_dim; k++) {
                    acc += wt[(size_t)i * in_dim + k] * x[k];
                }
                y[i] = last ? acc : (acc > 0 ? acc : 0);
            }
            memcpy(x, y, sizeof(double) * (size_t)out_dim);
            in_dim = out_dim;
        }
        for (int a = 0; a < A; a++) {
            double v = x[a + cfg->dueling], mean = 0;
            if (cfg->out_bounded) {
                double lo = cfg->out_low[a], hi = cfg->out_high[a];
                v = (hi + lo) / 2 + (hi - lo) / 2 * tanh(x[a]);
            } else if (cfg->dueling) {
                for (int k = 0; k < A; k++) {
                    mean += x[k + 1];
                }
                v = x[0] + x[a + 1] - mean / A;
            }
            q[(size_t)j * A + a] = v;
        }
    }
    xfree(x);
    xfree(y);
}

void nnref_forward_sa(double *q, const nn_config_t *cfg, const double *theta, const void *obs,
                      const double *actions, int B) {
    int O = cfg->obs_dim, A_in = cfg->action_inputs, W = O + A_in;
    double *x = xmalloc((size_t)B * W * sizeof(double));
    for (int j = 0; j < B; j++) {
        for (int k = 0; k < O; k++) {
            x[(size_t)j * W + k] = s_input(cfg, obs, j, k);
        }
        for (int k = 0; k < A_in; k++) {
            x[(size_t)j * W + O + k] = actions[(size_t)j * A_in + k];
        }
    }
    nnref_forward_rows(q, cfg, theta, x, B);
    xfree(x);
}

// ----------------------------------------------------------------------------
// any network on observations

void nnref_forward(double *q, const nn_config_t *cfg, const double *theta, const void *obs, int B) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int nt = nn_layout(cfg, t);
    int A = cfg->n_actions;
    int h, w, c;
    nn_input_shape(cfg, &h, &w, &c);
    size_t cap = (size_t)cfg->obs_dim;
    for (int l = 0; l < nt / 2; l++) {
        cap = APEX_MAX(cap, (size_t)t[2 * l].rows * (size_t)h * (size_t)w);
        cap = APEX_MAX(cap, (size_t)t[2 * l].rows);
    }
    double *x = xmalloc(cap * sizeof(double)), *y = xmalloc(cap * sizeof(double));
    for (int j = 0; j < B; j++) {
        // x: channel-major (c, y, x) planes, PyTorch's NCHW for one sample (the observation
        // rows are channels-last: element (yy, xx, cc) is at (yy w + xx) c + cc).
        int H = h, W = w, C = c;
        for (int yy = 0; yy < H; yy++) {
            for (int xx = 0; xx < W; xx++) {
                for (int cc = 0; cc < C; cc++) {
                    x[((size_t)cc * H + yy) * W + xx] = s_input(cfg, obs, j,
                                                                (yy * W + xx) * C + cc);
                }
            }
        }
        int l = 0;
        for (; l < cfg->n_conv; l++) { // conv2d, no padding, then ReLU: seven loops
            const double *wt = theta + t[2 * l].offset, *b = theta + t[2 * l + 1].offset;
            int OC = cfg->conv[l].filters, k = cfg->conv[l].kernel, s = cfg->conv[l].stride;
            int OH = (H - k) / s + 1, OW = (W - k) / s + 1;
            for (int oc = 0; oc < OC; oc++) {
                for (int oy = 0; oy < OH; oy++) {
                    for (int ox = 0; ox < OW; ox++) {
                        double acc = b[oc];
                        for (int cc = 0; cc < C; cc++) {
                            for (int i = 0; i < k; i++) {
                                for (int jj = 0; jj < k; jj++) {
                                    acc += wt[((size_t)(oc * C + cc) * k + i) * k + jj] *
                                           x[((size_t)cc * H + oy * s + i) * W + ox * s + jj];
                                }
                            }
                        }
                        y[((size_t)oc * OH + oy) * OW + ox] = acc > 0 ? acc : 0;
                    }
                }
            }
            H = OH, W = OW, C = OC;
            memcpy(x, y, sizeof(double) * (size_t)C * H * W);
        }
        // flatten (c, y, x), as x.view(B, -1) on NCHW; then the linear layers.
        int in_dim = C * H * W;
        for (; l < nt / 2; l++) {
            const double *wt = theta + t[2 * l].offset, *b = theta + t[2 * l + 1].offset;
            int out_dim = t[2 * l].rows, last = l == nt / 2 - 1;
            for (int i = 0; i < out_dim; i++) {
                double acc = b[i];
                for (int k = 0; k < in_dim; k++) {
                    acc += wt[(size_t)i * in_dim + k] * x[k];
                }
                y[i] = last ? acc : (acc > 0 ? acc : 0); // ReLU on hidden layers only
            }
            memcpy(x, y, sizeof(double) * (size_t)out_dim);
            in_dim = out_dim;
        }
        // x holds the head output: [V, A_0..A_{A-1}] (dueling) or [A_0..].
        if (cfg->out_bounded) { // a policy: mid + half tanh(z), bounds read in double
            for (int a = 0; a < A; a++) {
                double lo = cfg->out_low[a], hi = cfg->out_high[a];
                q[j * A + a] = (hi + lo) / 2 + (hi - lo) / 2 * tanh(x[a]);
            }
            continue;
        }
        double mean = 0;
        for (int a = 0; a < A; a++) {
            mean += x[a + cfg->dueling];
        }
        mean /= A;
        for (int a = 0; a < A; a++) {
            q[j * A + a] = cfg->dueling ? x[0] + x[a + 1] - mean : x[a];
        }
    }
    xfree(x);
    xfree(y);
}
