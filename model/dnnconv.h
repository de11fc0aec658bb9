// dnnconv.h: a network's conv layers on oneDNN's convolution primitives ([run] blas_library =
// auto or onednn), the alternative to conv.c's im2col + sgemm for a whole body of conv2d -> ReLU
// layers at one batch size (issue #32: PyTorch's CPU convolutions are these primitives, and
// on AVX-512 they beat im2col + GEMM; docs/performance.md has the figures).
//
// What the caller sees is conv.h's contract at the body's edges and nothing inside:
//   input   the observation rows (B rows of H W C elements, channels last, or F frames back
//           to back: conv_shape_t.frames), uint8 or float, times a scale;
//   output  the top layer's (OC x OH x OW x B) feature-major flatten, post-ReLU, into the
//           caller's buffer (what nn.c's first linear layer reads);
//   backward  the top layer's dL/dout in that layout (with the top ReLU's mask applied, as
//           conv_backward takes it), and each layer's dw and db accumulated (+=) in PyTorch's
//           layouts (w: OC x C x k x k).
// Inside, the activations and their gradients stay in the layouts the primitives choose
// (blocked nChw16c on AVX-512), owned by the body, and the ReLUs between layers are applied
// there (forward: fused into the convolution; backward: the mask multiplied in place).
// Weights change every update, so each pass reorders them into the primitives' layouts
// (tens of thousands of floats: small beside the activations).
//
// Space to depth: a first layer whose kernel is a multiple of its stride (the Nature body's
// 8x8 stride-4 layer on 4 channels) runs as the equal convolution of kernel k/s, stride 1, on
// C s s channels of (OH - 1 + k/s) x (OW - 1 + k/s): channel (c s + dy) s + dx of pixel
// (y, x) is pixel (y s + dy, x s + dx) of channel c, and weight (o, c, i, j) is weight
// (o, (c s + i % s) s + j % s, i / s, j / s). Same products, same sums; oneDNN 2.6 has an
// AVX-512 backward-weights kernel for 64 channels but only an AVX2 one for 4 (at 4x its
// forward's time). A forward-only fp32 body keeps such a layer direct where oneDNN has a JIT
// kernel for it: forward, its kernel for few channels on plain nchw beats space to depth
// (the learner's two next-state passes: see s_direct_fast).
//
// Memory: everything (primitives, activations, gradients, reorder targets) is made by
// dnnconv_create for one batch size; the passes allocate nothing. Thread-safety: one body per
// thread (each has its own stream); bodies share the library's engine.
#ifndef APEX_DNNCONV_H
#define APEX_DNNCONV_H

#include "conv.h"

#include <stddef.h>

#define DNNCONV_MAX_LAYERS 8

// A body is made only for conv layers doing at least this many multiply-adds per sample per
// element of its input and output (sum over the layers of OH OW OC C k k, over C H W + the
// top's OC OH OW): its edges are memory-bound passes (the input written into the
// primitives' layout, the top output reordered into conv.h's) that conv.c does not make,
// its convolutions win in proportion to their work. Measured (bench_learner, B = 128/512,
// Intel Xeon 6/167, updates/s with [run] blas_library = onednn, body against conv.c): the
// MinAtar body (26) 62-66 against 137 in fp32, 203 against 257 in bf16; the 2013 DQN body of
// configs/minatar-breakout-pixels.ini (111) 50 against 36 and 92 against 71; the Nature
// body (247) 11.3 against 7.9 and 23.1 against 17.5. The bound sits between the first two
// (their geometric mean is 54); where exactly bodies start to win in between is not known.
#define DNNCONV_MIN_WORK 50
// That work for n layers (n >= 1): sum of OH OW OC C k k over C H W + the top's OC OH OW.
double dnnconv_work(const conv_shape_t *shapes, int n);

typedef struct dnnconv dnnconv_t;

// Takes oneDNN's convolution entry points from the library handle blas.c loaded (dlopen of
// libdnnl.so.2) and creates the engine: 0, or -1 with the reason in why (an older library
// without them: convolutions stay conv.c's). Called once, by blas.c ([run] blas_library =
// auto or onednn).
int dnnconv_load(void *handle, char *why, size_t n);
// 1 when built with oneDNN's header (libdnnl-dev); 0: every body is refused, and blas.c's
// auto does not load the library at all.
int dnnconv_built(void);
// 1 when loaded and enabled: nn_state_init then builds bodies.
int dnnconv_enabled(void);
// Tests: 0 makes nn_state_init build no body (conv.c's path, in the same process); 2 builds
// bodies without the gather table, the 4x4 patches and the vector plain path
// (dnnconv_input_path "reorder" where it would be "gather", "plain" where it would be "plain,
// by vectors"); 1 (dnnconv_load's) is the product.
void dnnconv_set_enabled(int mode);
// Tests: lets dnnconv_create make bodies it otherwise refuses (conv.c runs instead), so that
// small shapes and the layouts only oneDNN's reference loops take are checked too: what is
// an OR of DNNCONV_ACCEPT_SMALL (below DNNCONV_MIN_WORK) and DNNCONV_ACCEPT_REF (a pass on
// the reference loops, "ref:any": correct for any layout but ~100x slower); 0: the product.
#define DNNCONV_ACCEPT_SMALL 1
#define DNNCONV_ACCEPT_REF 2
void dnnconv_accept_any(int what);

// A body of n conv2d -> ReLU layers (n in [1, DNNCONV_MAX_LAYERS], shapes as nn.c made them,
// each the next one's input) for batches of exactly B. NULL, with the reason in why, when the
// library is not loaded, the layers do too little work (DNNCONV_MIN_WORK) or oneDNN has no
// fast primitive for a pass. bf16: the learner's [learner]
// precision = bf16 on oneDNN: the convolutions read bfloat16 inputs and weights (rounded to
// nearest even from the fp32 ones) and sum in fp32, as apex's bf16 GEMM does; unlike it,
// the activations between the layers and their gradients are stored in bfloat16 too (what
// PyTorch's autocast does), and the weight gradient is fp32. The edges stay fp32. train 0
// makes a forward-only body (an actor's, the evaluator's, the learner's target network): no
// backward primitives or gradient memory, and its reference-loop check covers the forward.
dnnconv_t *dnnconv_create(const conv_shape_t *shapes, int n, int B, int bf16, int train, char *why,
                          size_t why_len);
void dnnconv_free(dnnconv_t *d);
int dnnconv_batch(const dnnconv_t *d);
int dnnconv_bf16(const dnnconv_t *d);
// "s2d" when the first layer runs as space to depth, else "direct".
const char *dnnconv_first_layer(const dnnconv_t *d);
// Whether b's first layer can read a's input (dnnconv_forward's input_of): bodies of one
// batch whose first layers read one layout (a train body and a forward-only one of the same
// network may not: space to depth against direct).
int dnnconv_same_input(const dnnconv_t *a, const dnnconv_t *b);
// How dnnconv_input writes the first layer's input: "plain" (forward reads nchw floats, which the
// loops write), "plain, by vectors" (the same from byte frames with each channel a plane or 4
// channels last, by AVX-512 conversions), "gather" (straight into forward's blocked layout through
// a table of where each element comes from), "4x4 patches" (byte frames of a 4x4 space to depth,
// read a patch row at a time; float rows still take the gather) or "reorder" (nchw floats, then
// oneDNN's reorder).
const char *dnnconv_input_path(const dnnconv_t *d);
// The implementation oneDNN chose for layer l's pass (0 forward, 1 backward weights, 2
// backward data; NULL where there is none), e.g. "jit:avx512_core".
const char *dnnconv_impl(const dnnconv_t *d, int l, int pass);

// The first layer's input from B = dnnconv_batch(d) observation rows (see above), times
// scale. obs is read during the call only.
void dnnconv_input(dnnconv_t *d, const void *obs, int obs_u8, float scale);
// Layer l's forward (layers in order, after dnnconv_input): relu(w * in + b) from layer l - 1's
// output, or for l = 0 from the input of d, or of input_of when not NULL (a body of the same shapes
// that took the input and reads it in d's layout, dnnconv_same_input: the learner's online and
// target networks on s'; d's backward then cannot run). w (OC x C x k x k) and b are read during
// the call only. top: the output in conv.h's layout, written when l is the last layer (NULL
// otherwise).
void dnnconv_forward(dnnconv_t *d, int l, const float *w, const float *b, const dnnconv_t *input_of,
                     float *top);
// Layer l's backward (a train body; layers from the top down, after the forwards): dtop, for the
// last layer only, is dL/dout in conv.h's layout (mask applied); dw += and db += the gradient; w is
// the layer's weights (forward's values), needed for l > 0 only (NULL for l = 0). For l > 0 it
// leaves dL/d(layer l - 1's output), masked by its ReLU, inside the body for layer l - 1.
void dnnconv_backward(dnnconv_t *d, int l, const float *dtop, const float *w, float *dw, float *db);

#endif
