// nn.h: the Q-network. An MLP with ReLU hidden layers and an optional dueling head,
// forward and backward over flat float arrays, on OpenBLAS through blas.h.
//
// Shapes (defined once): B = batch, O = obs_dim, H = a hidden width, A = n_actions,
// P = head width (1 + A with dueling, else A).
//
// Split (STYLE S9, llama2.c):
//   nn_config_t  values only: sizes and dueling.
//   nn_params_t  ONE contiguous, 64-byte aligned float array of num_params floats, with
//                named views (layer[l].w, layer[l].b) carved by the layout table. Gradients,
//                Adam/RMSProp moments and the target network use the same layout, so a target
//                sync, serialisation or broadcast is one memcpy and an optimizer is one loop.
//   nn_state_t   activations and scratch for up to max_batch samples, allocated once by
//                nn_state_init. nn_forward / nn_backward never allocate.
//
// Parameter layout, in order: for each hidden layer l = 0..n_hidden-1, W_l (H_l x in_l,
// PyTorch nn.Linear (out, in) row-major) then b_l (H_l); then the head W (P x H_last) and
// b (P). With dueling, head row 0 is the value stream and rows 1..A the advantage stream
// (Q = V + A - mean(A)), so the two streams are one GEMM. num_params equals PyTorch's
// parameter count for the same network (4-256-256-dueling(2): 67,843).
//
// Activation layout: feature-major. Every activation is stored (features x B) row-major,
// i.e. the batch is the GEMM's N (column) dimension:
//   forward   h_l  = W_l h_{l-1} + b_l         sgemm NN, M = H_l, N = B, K = in_l
//   backward  dW_l += dh_l h_{l-1}^T           sgemm NT, M = H_l, N = in_l, K = B
//             dh_{l-1} = W_l^T dh_l            sgemm TN, M = in_l, N = B, K = H_l
// The observations arrive batch-major (B x O, as they come off the wire) and are consumed
// in place by a transposed operand (W_0 obs^T), so nothing is transposed or copied on
// input; only q (B x A) is written back batch-major. Bias add is a contiguous row fill
// followed by sgemm with beta = 1, bias gradients are contiguous row sums, and ReLU masks
// are contiguous.
// Why feature-major: the project's reference measurement had OpenBLAS 0.3.21 (1 thread) at
// ~9.7 GFLOP/s for the batch-major 512x256 . 256x256 product but ~31 for the feature-major
// one with N = B (and ~36 for 1024^3). On this machine (AMD EPYC, AVX-512, with
// OPENBLAS_CORETYPE=Haswell) `build/bench/bench_learner` (BENCH sgemm.layout.* lines,
// best of 5 windows, quiet machine) measures both layouts alike: forward, dW and dX
// products for B = 512, H = 256 or 512 all run at 98-107 GFLOP/s, as does 1024^3 (~105);
// we could not reproduce the gap (under load from concurrent builds every variant drops
// to 40-80 GFLOP/s, noisily). Feature-major is kept because it is never the slower one, it keeps every per-feature loop (bias fill,
// ReLU, ReLU mask, bias gradient) contiguous and branch-free, and for an actor's small
// batch (B = 64) the long dimension stays M = H, which the kernels like (feature-major
// 102 GFLOP/s vs batch-major 94 at B = 64, H = 512). What does cost time is elsewhere:
// the head GEMM (M = 1 + A rows) runs at 15-55 GFLOP/s, and a branchy scalar ReLU cost a
// quarter of an update before the elementwise kernels were made branch-free (nn.c).
//
// What it does not do: losses (learner/loss.h), optimizers (optim.h), threading.
// Thread-safety: params are read-only during forward/backward, so many threads may share
// one nn_params_t; an nn_state_t belongs to one thread.
#ifndef APEX_NN_H
#define APEX_NN_H

#include "rng.h"

#include <stddef.h>
#include <stdint.h>

#define NN_MAX_HIDDEN 4
#define NN_MAX_LAYERS (NN_MAX_HIDDEN + 1) // hidden layers plus the head
#define NN_MAX_TENSORS (2 * NN_MAX_LAYERS)

typedef struct {
    int obs_dim;               // O
    int n_actions;             // A
    int n_hidden;              // 1..NN_MAX_HIDDEN
    int hidden[NN_MAX_HIDDEN]; // H_l; entries past n_hidden are ignored
    int dueling;               // 0 or 1
} nn_config_t;

// One linear layer's views into the flat array. w is (out_dim x in_dim) row-major.
typedef struct {
    float *w;
    float *b;
    int in_dim;
    int out_dim;
} nn_linear_t;

typedef struct {
    float *data; // num_params floats, 64-byte aligned, owned
    size_t num_params;
    int n_layers; // n_hidden + 1; layer[n_layers - 1] is the head
    nn_linear_t layer[NN_MAX_LAYERS];
} nn_params_t;

// One row of the layout table: where a named tensor lives in the flat array.
typedef struct {
    const char *name; // "fc1.w", "fc1.b", ..., "head.w", "head.b"; static storage
    size_t offset;    // in floats from data
    int rows;
    int cols; // 1 for biases
} nn_tensor_t;

typedef struct {
    nn_config_t cfg;
    int max_batch;
    int batch;                 // B of the last nn_forward
    const float *obs;          // borrowed: the obs of the last nn_forward (B x O)
    float *act[NN_MAX_HIDDEN]; // post-ReLU hidden activations, (H_l x max_batch)
    float *head;               // head output, (P x max_batch): [V; A] or A
    float *grad[2];            // ping-pong dL/dh buffers, (H_max x max_batch)
    float *dhead;              // dL/d(head output), (P x max_batch)
    float *q;                  // scratch q (max_batch x A) for helpers
    float *block;              // the single allocation behind all of the above
} nn_state_t;

// Returns 0 when cfg is usable, else APEX_EINVAL with the reason written to why.
int nn_config_check(const nn_config_t *cfg, char *why, size_t why_len);
// Writes "O-H1-H2-dueling(A)" or "O-H1-H2-A" (for logs and shape-mismatch errors).
void nn_config_format(const nn_config_t *cfg, char *buf, size_t len);
// 1 when the two configs describe the same network (ignores unused hidden[] entries).
int nn_config_equal(const nn_config_t *a, const nn_config_t *b);
// Head width P: 1 + A with dueling, A without.
int nn_head_dim(const nn_config_t *cfg);

// Floats in the flat parameter array for cfg.
size_t nn_num_params(const nn_config_t *cfg);
// Fills out[NN_MAX_TENSORS] with the layout table and returns the number of rows.
int nn_layout(const nn_config_t *cfg, nn_tensor_t *out);

// Allocates a zeroed parameter array for cfg (asserts nn_config_check). Free with
// nn_params_fini, which is a no-op on a zeroed struct. Also used for gradients.
void nn_params_init(nn_params_t *p, const nn_config_t *cfg);
void nn_params_fini(nn_params_t *p);
// PyTorch nn.Linear default init: every weight and bias uniform in +-1/sqrt(fan_in).
void nn_params_init_random(nn_params_t *p, rng_t *rng);
// dst = src (one memcpy); both must have the same layout.
void nn_params_copy(nn_params_t *dst, const nn_params_t *src);
// Sets every float to 0 (gradients before a backward pass).
void nn_params_zero(nn_params_t *p);

// Allocates activations for up to max_batch samples. nn_state_fini: no-op when zeroed.
void nn_state_init(nn_state_t *s, const nn_config_t *cfg, int max_batch);
void nn_state_fini(nn_state_t *s);

// q_out (B x A, row-major) = Q(obs) for obs (B x O, row-major), 1 <= B <= max_batch.
// Keeps activations and a pointer to obs in s: obs must stay unchanged until nn_backward.
void nn_forward(nn_state_t *s, const nn_params_t *p, const float *obs, int B, float *q_out);
// Accumulates (+=) into grads the gradient of a loss L given dq = dL/dq (B x A) for the
// batch of the last nn_forward on s with the same p. Does not compute dL/dobs.
void nn_backward(nn_state_t *s, const nn_params_t *p, nn_params_t *grads, const float *dq, int B);

// Index of the largest of q[0..A-1] (A >= 1); the first one on ties (as torch.argmax), and
// NaNs never win (an all-NaN row gives 0). The one argmax of apex: actors' greedy actions,
// the evaluator, double DQN's action selection and the actors' priorities.
int nn_argmax(const float *q, int A);

// Actor-side initial priorities with ONE network (the actor's copy), for B transitions:
//   prio_out[i] = |R_i + disc_i * max_a Q(s'_i, a) - Q(s_i, a_i)| + priority_eps
// (double DQN with online == target reduces to max). disc_i = 0 marks a terminal and
// does not bootstrap. Two batched forward passes on s; B <= max_batch. Actions in [0, A).
void nn_td_priorities(float *prio_out, nn_state_t *s, const nn_params_t *p, const float *obs,
                      const int32_t *actions, const float *rewards, const float *discounts,
                      const float *next_obs, float priority_eps, int B);

#endif
