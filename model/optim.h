// optim.h: optimizers over one flat parameter array (the nn_params_t layout, STYLE S9),
// and global gradient-norm clipping.
//
// Adam (PyTorch torch.optim.Adam semantics, no weight decay, no amsgrad), step t from 1:
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   theta -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Centered RMSProp (Ape-X / DQN, TensorFlow RMSPropOptimizer(centered=True), momentum 0):
//   ms = rho ms + (1-rho) g^2;  mg = rho mg + (1-rho) g
//   theta -= lr g / sqrt(ms - mg^2 + eps)
// with Ape-X's rho = 0.95, eps = 1.5e-7, lr = 0.00025 / 4. Note eps sits INSIDE the sqrt
// (TF), unlike Adam. Moments start at zero (PyTorch / Keras); TF1's RMSPropOptimizer
// started ms at ones, which only damps the first few hundred steps.
//
// Both moments live in two arrays of num_params floats laid out like the parameters:
// Adam's m, v; RMSProp's mg (in m), ms (in v). What it does not do: weight decay,
// schedules, per-tensor options. Not thread-safe; one optim_t per learner. A learner group's
// rank steps only its shard: an optim_t of n = the shard's length, given the shard's slices
// of the parameters and the (averaged) gradient.
#ifndef APEX_OPTIM_H
#define APEX_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { OPTIM_ADAM = 0, OPTIM_RMSPROP = 1 } optim_kind;

typedef struct {
    optim_kind kind;
    float lr;
    float adam_beta1; // 0.9
    float adam_beta2; // 0.999
    float adam_eps;   // 1e-8 (PyTorch default)
    float rms_decay;  // rho, 0.95
    float rms_eps;    // 1.5e-7, inside the sqrt
} optim_config_t;

typedef struct {
    optim_config_t cfg;
    size_t n;     // floats in params, grads, m, v
    int64_t step; // updates applied so far (Adam's t after the next step is step+1)
    float *m;     // Adam first moment / RMSProp mean gradient mg
    float *v;     // Adam second moment / RMSProp mean square ms
} optim_t;

// Defaults for kind: Adam lr 1e-4 (the torch peer's), betas 0.9 / 0.999, eps 1e-8;
// RMSProp lr 0.00025 / 4, rho 0.95, eps 1.5e-7 (Ape-X). Both sets of fields are filled.
void optim_config_default(optim_config_t *cfg, optim_kind kind);
// "adam" / "rmsprop" -> kind; returns 0, or -1 for anything else.
int optim_parse_kind(const char *s, optim_kind *out);
const char *optim_kind_name(optim_kind kind);

// Allocates zeroed moments for n parameters (64-byte aligned). optim_fini: no-op if zeroed.
void optim_init(optim_t *o, const optim_config_t *cfg, size_t n);
void optim_fini(optim_t *o);
// An optimizer over moments the caller owns (n floats each at m and v, zeroed by the caller):
// several optimizers over slices of one flat array (the DPG trainer's policy and critics).
// Never optim_fini a view.
void optim_view(optim_t *o, const optim_config_t *cfg, size_t n, float *m, float *v);

// One update of params (n floats) from grads, then step++. grads is not modified.
void optim_step(optim_t *o, float *params, const float *grads);

// Global L2 norm clipping (torch.nn.utils.clip_grad_norm_): when ||g|| > max_norm, scales
// g by max_norm / (||g|| + 1e-6). Returns the norm before clipping (summed in double).
// max_norm <= 0 disables clipping but still returns the norm.
float optim_clip_grad_norm(float *grads, size_t n, float max_norm);
// The two halves of optim_clip_grad_norm, for a norm summed over the shards of a learner
// group (ZeRO, learner/group.h): the sum of squares of grads[0..n) (in double), and the
// scaling by max_norm / (norm + 1e-6) when norm > max_norm > 0. With the shards' sums
// added up, the clip is the one a single learner applies to the whole gradient.
double optim_sum_squares(const float *grads, size_t n);
void optim_clip_scale(float *grads, size_t n, double norm, float max_norm);

#endif
