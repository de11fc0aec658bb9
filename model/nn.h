// nn.h: the Q-network, a short sequence of layers over one flat parameter array:
//
//   [conv2d -> ReLU] x n_conv -> flatten -> [linear -> ReLU] x n_hidden -> linear head
//   -> dueling (Q = V + A - mean(A)) or plain Q
//
// and, for continuous actions (the DPG trainer, learner/train_dpg.h), the same MLP as
//   a deterministic policy mu(s):  ... -> linear head -> out = mid + half tanh(z), each of the
//                                  A outputs in its bounds [low, high] (out_bounded), and
//   a critic Q(s, a):              the first linear layer reads the observation followed by
//                                  action_inputs floats (PyTorch's Linear(O + A, H) on
//                                  torch.cat([s, a], 1)) -> ... -> a scalar head (A = 1,
//                                  no dueling).
// A critic's gradient with respect to its action inputs (nn_backward_input) is what the
// policy's update backpropagates through the critic (dQ/da).
//
// forward and backward over flat float arrays, on OpenBLAS through blas.h (conv2d as
// im2col + sgemm, model/conv.h; or, where oneDNN loads ([run] blas_library = auto or
// onednn), on oneDNN's convolution primitives, model/dnnconv.h), or with the products'
// inputs rounded to bfloat16 for a learner that asks for it (nn_state_set_gemm). With
// n_conv = 0 it is the MLP apex always had, with the same parameter layout, so MLP
// checkpoints and fixtures of earlier builds still apply.
//
// Shapes (defined once): B = batch, O = obs_dim = in_h in_w in_c, H = a hidden width,
// A = n_actions, P = head width (1 + A with dueling, else A), F = the flattened features.
//
// Input: observations as the replay stores them, one row of O elements per sample,
// channels-last [y][x][c], float32 or uint8 (in_dtype), multiplied by in_scale on the way
// in (MinAtar's 0/1 frames: 1; Atari-style frames: 1/255; classic control: 1). A vector
// observation is 1 x 1 x O. A conv net transposes the rows into the first layer's
// (C x H x W x B) input in the state: scaled floats, or for uint8 rows whose float copy
// would exceed 1 MB (Atari-sized frames) the bytes themselves, which im2col converts and
// scales (nn.c says why); an MLP reads float32 rows in place and converts uint8 or scaled
// rows into a scratch of the state first.
//
// Split (STYLE S9, llama2.c):
//   nn_config_t  values only: input shape, dtype and scale, conv layers, hidden sizes,
//                dueling.
//   nn_params_t  ONE contiguous, 64-byte aligned float array of num_params floats, with
//                named views carved by the layout table, in PyTorch's layouts: conv weight
//                (OC x C x k x k), linear weight (out x in), each followed by its bias, in
//                layer order (conv1, ..., fc1, ..., head). Gradients, optimizer moments and
//                the target network use the same layout, so a target sync, serialisation or
//                broadcast is one memcpy and an optimizer is one loop. num_params equals
//                PyTorch's parameter count for the same network (the MinAtar DQN body on 4
//                channels with 6 actions: 132 566; with dueling's value row: 132 695).
//   nn_state_t   activations and scratch for up to max_batch samples, allocated once by
//                nn_state_init. nn_forward / nn_backward never allocate.
//
// Activation layout: feature-major. Every activation is a (features x B) row-major matrix,
// the batch being the GEMM's N dimension. A conv layer's output (OC x OH x OW x B) read as a
// matrix is (OC OH OW) x B with row f = c OH OW + y OW + x, which is PyTorch's flatten of
// NCHW: the flatten is no operation at all (conv.h explains the choice).
//   linear forward   h = W h_prev + b            sgemm NN, M = out, N = B, K = in
//   linear backward  dW += dh h_prev^T           sgemm NT, M = out, N = in, K = B
//                    dh_prev = W^T dh            sgemm TN, M = in, N = B, K = out
// An MLP's observations arrive batch-major (B x O) and are consumed in place by a
// transposed operand (W_0 obs^T); only q (B x A) is written back batch-major.
// Why feature-major (measured in earlier sessions, bench/RESULTS.md): OpenBLAS runs both
// layouts alike on this project's machines, feature-major is never the slower one, and it
// keeps every per-feature loop (bias fill, ReLU, its mask, bias gradient) contiguous and
// branch-free; for an actor's small batch the long dimension stays M = H.
//
// What it does not do: losses (learner/loss.h), optimizers (optim.h), threading, pooling,
// padding, action inputs or bounded outputs on conv nets (MLPs only). Thread-safety: params
// are read-only during forward/backward, so many threads may share one nn_params_t; an
// nn_state_t belongs to one thread.
#ifndef APEX_NN_H
#define APEX_NN_H

#include "blas.h"
#include "conv.h"
#include "rng.h"

#include <stddef.h>
#include <stdint.h>

#define NN_MAX_CONV 4
#define NN_MAX_HIDDEN 4
#define NN_MAX_LAYERS (NN_MAX_CONV + NN_MAX_HIDDEN + 1) // layers with parameters
#define NN_MAX_TENSORS (2 * NN_MAX_LAYERS)
#define NN_MAX_BOUNDED 64 // outputs of a bounded (policy) head: MuJoCo's largest is 17

typedef enum { NN_INPUT_F32 = 0, NN_INPUT_U8 = 1 } nn_input_dtype; // = config's obs dtypes

typedef struct {
    int filters; // OC
    int kernel;  // k (square)
    int stride;  // s
} nn_conv_t;

typedef struct {
    int obs_dim;    // O = in_h in_w in_c (for a vector observation: its length)
    int in_h, in_w; // 0, 0: a vector observation (1 x 1 x obs_dim)
    int in_c;       // 0: obs_dim
    int in_frames;  // 0 or 1: one HxWxC image, channels last; F > 1: F frames of in_c / F
                    // channels each, frame-major ([env] frame_stack, actor/framestack.h):
                    // input channel f (in_c / F) + c is channel c of frame f
    int in_dtype;   // nn_input_dtype
    float in_scale; // multiplies every input element; 0 means 1
    int n_conv;     // 0..NN_MAX_CONV
    nn_conv_t conv[NN_MAX_CONV];
    int n_actions;             // A
    int n_hidden;              // 1..NN_MAX_HIDDEN
    int hidden[NN_MAX_HIDDEN]; // H_l; entries past n_hidden are ignored
    int dueling;               // 0 or 1
    // Continuous control (all zero for a Q-network). MLPs only (n_conv = 0).
    int action_inputs; // a critic: float32 inputs appended to the observation at the first
                       // layer (the action, never scaled); 0..CONFIG_MAX_ACTIONS
    int out_bounded;   // a policy: 1 = out_a = mid_a + half_a tanh(z_a) with mid = (low +
                       // high) / 2, half = (high - low) / 2; needs dueling 0, A <= 64
    float out_low[NN_MAX_BOUNDED];  // with out_bounded: each output's bounds, finite,
    float out_high[NN_MAX_BOUNDED]; // low < high (entries past n_actions are ignored)
} nn_config_t;

// The views of one layer with parameters (conv or linear) into the flat array. w is
// (out_dim x in_dim) row-major: for a conv layer out_dim = OC and in_dim = C k k (the
// PyTorch (OC, C, k, k) tensor read as a matrix).
typedef struct {
    float *w;
    float *b;
    int in_dim;
    int out_dim;
} nn_linear_t;

// A network whose parameters are not in one array (ZeRO stage 3, learner/train.c: each rank
// holds a shard, and the parameters a pass needs are all-gathered just before it uses them):
// the passes ask for them in blocks of rows, fetch(arg, layer, block, dir, &row0), which
// returns rows [row0, row0 + out_dim) of the layer's w (out_dim x in_dim, contiguous) and of
// its b as an nn_linear_t of out_dim rows. The fetcher chooses the blocks (how many rows;
// a conv layer is always one block of every row): a pass asks for block 0, 1, ... until the
// rows are covered. dir says what comes next: +1 a forward pass (then the next block, or
// block 0 of layer + 1), -1 a backward pass (the next block, or block 0 of layer - 1, but
// never layer 0: backward needs no dh_prev of the first layer, so it never asks for it), so
// a fetcher may bring that ahead. A block is valid until the next fetch on the same network:
// a pass never uses two of one network at once. Blocks of rows keep a fetcher's buffers
// independent of the largest layer: a linear layer's output rows are independent in
// forward, dW's rows too, and backward's dh_prev is summed over the blocks.
typedef const nn_linear_t *(*nn_fetch_fn)(void *arg, int layer, int block, int dir, int *row0);

typedef struct {
    float *data; // num_params floats, 64-byte aligned, owned; NULL for a fetched network
    size_t num_params;
    int n_layers;                     // n_conv + n_hidden + 1; layer[n_layers - 1] is the head
    nn_linear_t layer[NN_MAX_LAYERS]; // w, b NULL for a fetched network (dims only)
    size_t off[NN_MAX_LAYERS];        // each layer's w in the flat layout (b follows w)
    nn_fetch_fn fetch;                // NULL: layer[] holds the parameters (nn_params_fetched)
    void *fetch_arg;
} nn_params_t;

// One row of the layout table: where a named tensor lives in the flat array.
typedef struct {
    const char *name; // "conv1.w", "conv1.b", ..., "fc1.w", "fc1.b", ..., "head.w", "head.b"
    size_t offset;    // in floats from data
    int rows;
    int cols; // 1 for biases; C k k for conv weights
} nn_tensor_t;

// What nn_forward runs, as data: the layer sequence (flatten between the last conv and the
// first linear layer). Filled by nn_state_init from the config.
typedef enum { NN_CONV2D, NN_RELU, NN_FLATTEN, NN_LINEAR, NN_DUELING } nn_layer_kind;

typedef struct {
    nn_config_t cfg;
    int max_batch;
    int train;                      // keeps what nn_backward needs (see nn_state_init)
    int batch;                      // B of the last nn_forward
    const void *obs;                // borrowed: the obs of the last nn_forward (B x O)
    conv_shape_t conv[NN_MAX_CONV]; // each conv layer's shapes
    int n_features;                 // F: inputs of the first linear layer
    float *act[NN_MAX_LAYERS];      // each layer's output (post-ReLU but the head's),
                                    // (out features x max_batch); act[n_layers-1] = head
    void *in_t;                     // conv nets: the first layer's input, the observations
                                    // transposed (conv.h), kept for nn_backward: scaled
                                    // floats, or the bytes themselves when in_t_u8
    int in_t_u8;                    // set by each forward: in_t holds uint8 (see nn.c)
    float *scratch;                 // conv nets: conv.h's scratch, shared by the layers
    float *in_f32;                  // MLP: observations as scaled float32 (B x O), or with
                                    // action inputs the first layer's rows [obs, action]
                                    // (B x (O + action_inputs)); NULL for conv nets
    float *grad[2];                 // ping-pong dL/dh buffers, (max features x max_batch)
    float *dhead;                   // dL/d(head output), (P x max_batch)
    float *q;                       // scratch q (max_batch x A) for helpers
    float *block;                   // the single allocation behind all of the above
    size_t block_bytes;
    blas_gemm_fn gemm; // every product of the passes on this state; NULL: fp32
                       // (nn_state_set_gemm)
    // Conv nets where oneDNN loads ([run] blas_library = auto or onednn): the conv layers on
    // oneDNN's primitives (model/dnnconv.h) for batches of max_batch, in the precision of the
    // state's GEMM (nn_state_set_gemm makes a bfloat16 body for bf16_gemm_ld); other batches
    // take conv.c's path. NULL: conv.c always (no oneDNN, too little work, no fast kernel).
    struct dnnconv *dnn;
    int dnn_pass;                    // the last forward ran on dnn (nn_backward follows it)
    const struct dnnconv *dnn_in_of; // that forward's first layer read this body's input
} nn_state_t;

// The network a run's config describes ([env] shape, dtype and scale, [network]): the one
// place that builds it, for the actor, the learner and the evaluator alike. With continuous
// actions ([env] action_dim > 0) that is DPG's policy: action_dim outputs, out_bounded in the
// run's [env] action_low/action_high, no dueling (its critics: nn_critic_config).
struct apex_config_s;
void nn_config_from_run(nn_config_t *out, const struct apex_config_s *run);
// 1 when the run's network (nn_config_from_run) has conv layers that do enough work for a
// oneDNN body (dnnconv_work >= DNNCONV_MIN_WORK: the Atari bodies, not MinAtar's), the
// network every daemon of the run builds (a DPG policy or critic is an MLP): blas_use_library's
// convs, so that auto loads oneDNN only where it will run.
int nn_run_wants_conv_body(const struct apex_config_s *run);
// The same rule for any network (the benchmarks').
int nn_wants_conv_body(const nn_config_t *net);
// The critic Q(s, a) of a DPG policy: the same input and hidden sizes, action_inputs = the
// policy's n_actions, one unbounded scalar output, no dueling.
void nn_critic_config(nn_config_t *out, const nn_config_t *policy);
// Floats of the weights message a run's learner publishes and its actors and evaluator take:
// the Q-network (nn_num_params of nn_config_from_run); with continuous actions the policy
// then its first critic, [ mu | Q_1 ] (train_dpg.h's layout prefix), so that the actors
// compute initial priorities with their own copy of the critic, as Ape-X DPG's do.
size_t nn_run_weights_params(const struct apex_config_s *run);

// Two reference bodies as values, for tests and benchmarks that need a known network (a
// run's network comes from its config: nn_config_from_run, configs/minatar-*.ini):
//   MinAtar's DQN (Young & Tian 2019): uint8 10x10xin_c frames of 0/1 (scale 1) -> conv 16
//     3x3 s1 -> fc 128 -> head (PyTorch's count for in_c 4, 6 actions: 132 566 parameters);
//   the Nature DQN (Mnih et al. 2015): uint8 84x84x4 frames (scale 1/255) -> conv 32 8x8 s4,
//     64 4x4 s2, 64 3x3 s1 -> fc 512 -> head.
// dueling: 0 or 1, as nn_config_t's.
nn_config_t nn_config_minatar(int in_c, int n_actions, int dueling);
nn_config_t nn_config_nature(int n_actions, int dueling);

// Returns 0 when cfg is usable, else APEX_EINVAL with the reason written to why (may be
// NULL): shapes in range, every conv layer fits its input (kernel <= input side), action
// inputs and bounded outputs only on MLPs, bounds finite with low < high.
int nn_config_check(const nn_config_t *cfg, char *why, size_t why_len);
// Writes the network for logs and shape-mismatch errors, e.g. "10x10x4 u8*1 -c16k3s1-128-
// dueling(6)" or "4-256-256-dueling(2)" (an MLP on float32 vectors, as earlier builds); a
// critic "17+a6-256-256-1", a policy "17-256-256-tanh(6)".
void nn_config_format(const nn_config_t *cfg, char *buf, size_t len);
// 1 when the two configs have the same parameters (input shape, action inputs, layers,
// actions, dueling; the input's dtype and scale and the output bounds change values, not
// shapes, and are not compared).
int nn_config_equal(const nn_config_t *a, const nn_config_t *b);
// Head width P: 1 + A with dueling, A without.
int nn_head_dim(const nn_config_t *cfg);
// Input channels and sides (a vector observation: 1 x 1 x obs_dim).
void nn_input_shape(const nn_config_t *cfg, int *h, int *w, int *c);

// Floats in the flat parameter array for cfg.
size_t nn_num_params(const nn_config_t *cfg);
// Fills out[NN_MAX_TENSORS] with the layout table and returns the number of rows.
int nn_layout(const nn_config_t *cfg, nn_tensor_t *out);
// FLOPs of one sample's forward pass (2 per multiply-add of every GEMM), for benchmarks.
double nn_forward_flops(const nn_config_t *cfg);

// Allocates a zeroed parameter array for cfg (asserts nn_config_check). Free with
// nn_params_fini, which is a no-op on a zeroed struct. Also used for gradients.
void nn_params_init(nn_params_t *p, const nn_config_t *cfg);
void nn_params_fini(nn_params_t *p);
// The layout of cfg over nn_num_params(cfg) floats at data, which the caller owns (several
// networks in one flat array: the DPG trainer's policy and critics). Never nn_params_fini
// a view: data is not its to free.
void nn_params_view(nn_params_t *p, const nn_config_t *cfg, float *data);
// The layout of cfg without parameters: the passes fetch each layer through fetch(arg, ...)
// (nn_fetch_fn). Only nn_forward, nn_forward_pair and nn_backward_pieces take such a network
// (asserted elsewhere); nothing to free.
void nn_params_fetched(nn_params_t *p, const nn_config_t *cfg, nn_fetch_fn fetch, void *arg);
// Floats of layer l's w and b together (out_dim (in_dim + 1)), from p->off[l].
size_t nn_layer_floats(const nn_params_t *p, int l);
// PyTorch's default inits: nn.Linear and nn.Conv2d weights and biases uniform in
// +-1/sqrt(fan_in) (fan_in = in, or C k k). nn_params_init_random is
// nn_layer_init_random_part on each layer in order over the whole array; a caller holding a
// part of it (a ZeRO stage 3 shard) draws every value of layer l of p's layout (data not
// read) and keeps those at flat offsets [lo, hi) in dst[offset - lo]: the same values, and
// the rng left where a whole init leaves it.
void nn_params_init_random(nn_params_t *p, rng_t *rng);
void nn_layer_init_random_part(const nn_params_t *p, int l, rng_t *rng, float *dst, size_t lo,
                               size_t hi);
// dst = src (one memcpy); both must have the same layout.
void nn_params_copy(nn_params_t *dst, const nn_params_t *src);
// Sets every float to 0 (gradients before a backward pass).
void nn_params_zero(nn_params_t *p);

// Allocates activations and scratch for up to max_batch samples. train marks a state that
// nn_backward will be called on (the learner's online(s) pass); it costs no memory: a conv
// net keeps its layers' inputs (the activations and the transposed observations) in every
// state, and conv.c recomputes each chunk's im2col in backward. nn_state_fini: no-op when
// zeroed.
void nn_state_init(nn_state_t *s, const nn_config_t *cfg, int max_batch, int train);
// The bytes nn_state_init allocates for cfg and max_batch (before xalloc's rounding).
size_t nn_state_bytes(const nn_config_t *cfg, int max_batch);
void nn_state_fini(nn_state_t *s);
// The GEMM every forward and backward pass on s runs its products on, conv layers' included
// ([learner] precision, learner/train.h). NULL (nn_state_init's) or blas_sgemm_ld: fp32,
// blas_sgemm and blas_sgemm_ld as always, bit for bit; bf16_gemm_ld (model/bf16.h): inputs
// rounded to bfloat16, fp32 sums. Only the products change: the parameters, gradients,
// activations and every other operation stay fp32. Set it between passes, not during one.
void nn_state_set_gemm(nn_state_t *s, blas_gemm_fn gemm);

// q_out (B x A, row-major) = Q(obs) for obs (B rows of O elements of cfg.in_dtype),
// 1 <= B <= max_batch; a bounded network's q_out is its outputs, mid + half tanh(z), each
// within [low, high]. Keeps activations and a pointer to obs in s: obs must stay unchanged
// until nn_backward. Not for a network with action inputs (nn_forward_sa).
void nn_forward(nn_state_t *s, const nn_params_t *p, const void *obs, int B, float *q_out);
// A critic's forward (cfg.action_inputs > 0): the first layer reads row j as [obs_j scaled,
// actions_j], actions (B x action_inputs, row-major float32). The rows are copied into the
// state (s->in_f32), so obs and actions may change right after the call.
void nn_forward_sa(nn_state_t *s, const nn_params_t *p, const void *obs, const float *actions,
                   int B, float *q_out);
// Two networks with the same config (the learner's online and target parameters) on the
// same observations: qa = Q_a(obs) on sa, qb = Q_b(obs) on sb, the values two nn_forward
// calls give. For a conv net the first layer reads the observations once: one transpose, one
// im2col per chunk and one GEMM with both weight matrices stacked (conv_forward2), or on
// oneDNN one input that both bodies read; an MLP runs the two passes. Keeps in each state what nn_forward keeps. Both states must have the
// same GEMM (nn_state_set_gemm; asserted): the stacked product is one call.
void nn_forward_pair(nn_state_t *sa, const nn_params_t *pa, nn_state_t *sb, const nn_params_t *pb,
                     const void *obs, int B, float *qa, float *qb);
// Accumulates (+=) into grads the gradient of a loss L given dq = dL/dq (B x A) for the
// batch of the last nn_forward (or nn_forward_sa) on s (a train state) with the same p. A
// bounded network's dq is the gradient with respect to its outputs (the tanh and the
// scaling are backpropagated here). Does not compute dL/dobs.
void nn_backward(nn_state_t *s, const nn_params_t *p, nn_params_t *grads, const float *dq, int B);
// The gradient with respect to the first layer's inputs instead, no parameter gradients:
// accumulates (+=) into din (B x n, row-major) dL/dx_c for columns c in [col0, col0 + n) of
// the first layer's input rows (the scaled observation, then the action inputs: a critic's
// dQ/da is col0 = obs_dim, n = action_inputs). MLPs only; same conditions as nn_backward.
void nn_backward_input(nn_state_t *s, const nn_params_t *p, const float *dq, int B, int col0, int n,
                       float *din);

// The gradient of nn_backward without a full-size gradient array (ZeRO stage 2, learner/
// train.c): computed piece by piece into buf, layer by layer from the head down, and handed to
// done(arg, piece, offset, n) as soon as piece[0..n) holds the gradient of parameters
// [offset, offset + n) of the flat array, which nothing later in the pass adds to. A piece
// is a conv layer's w and b, or a block of whole rows of a linear layer's w (the last block
// with the bias when it fits), at most capacity floats; buf is reused after done returns.
// The pieces cover [0, num_params) exactly once, in the same order on every call.
typedef void (*nn_piece_fn)(void *arg, const float *piece, size_t offset, size_t n);
typedef struct {
    float *buf;      // capacity floats, owned by the caller
    size_t capacity; // >= nn_piece_min(cfg)
    nn_piece_fn done;
    void *arg;
} nn_pieces_t;
// The smallest capacity nn_backward_pieces works with: the largest conv layer (w and b),
// and the widest row or bias of a linear layer.
size_t nn_piece_min(const nn_config_t *cfg);
// Like nn_backward, but the gradient goes to pieces (overwritten, not accumulated).
void nn_backward_pieces(nn_state_t *s, const nn_params_t *p, const nn_pieces_t *pieces,
                        const float *dq, int B);

// Index of the largest of q[0..A-1] (A >= 1); the first one on ties (as torch.argmax), and
// NaNs never win (an all-NaN row gives 0). The one argmax of apex: actors' greedy actions,
// the evaluator, double DQN's action selection and the actors' priorities.
int nn_argmax(const float *q, int A);

// The n-step double-DQN target (van Hasselt et al. 2016; Ape-X's learner), for B transitions
// with Q-values of s' from the online and the target network (both B x A, batch-major):
//   y[i] = R_i + disc_i * Q_target(s'_i, argmax_a Q_online(s'_i, a))
// with R_i the n-step discounted return and disc_i = gamma^n, or 0 when the episode ended
// inside the n steps: then y[i] = R_i exactly, whatever Q_target(s'_i) holds (even a NaN or
// an Inf of an untrained net). The one formula of apex: the learner's loss (train.c) and the
// actors' initial priorities (nn_td_priorities, with online == target) both call it.
void nn_double_dqn_targets(float *y, const float *q_next_online, const float *q_next_target,
                           const float *rewards, const float *discounts, int B, int A);

// Actor-side initial priorities with ONE network (the actor's copy), for B transitions:
//   prio_out[i] = |y_i - Q(s_i, a_i)| + priority_eps, y from nn_double_dqn_targets
// with online == target, where double DQN reduces to R_i + disc_i * max_a Q(s'_i, a).
// disc_i = 0 marks a terminal and does not bootstrap. Two batched forward passes on s;
// B <= max_batch. Actions in [0, A).
void nn_td_priorities(float *prio_out, nn_state_t *s, const nn_params_t *p, const void *obs,
                      const int32_t *actions, const float *rewards, const float *discounts,
                      const void *next_obs, float priority_eps, int B);

// The same for DPG (Horgan et al. 2018: the actors' priorities from their copy of the
// critic), with the actor's policy mu and critic Q (nn_critic_config of mu's config), each
// with its own state (max_batch >= B):
//   prio_out[i] = |y_i - Q(s_i, a_i)| + priority_eps,  y_i = R_i + disc_i Q(s'_i, mu(s'_i))
// and y_i = R_i exactly at a terminal (disc_i = 0), as train_dpg.h's targets with the online
// networks standing for the targets, one critic and no target smoothing. actions: (B x A)
// float32, row-major. Three batched forward passes.
void nn_dpg_td_priorities(float *prio_out, nn_state_t *s_mu, const nn_params_t *mu, nn_state_t *s_q,
                          const nn_params_t *q, const void *obs, const float *actions,
                          const float *rewards, const float *discounts, const void *next_obs,
                          float priority_eps, int B);

#endif
