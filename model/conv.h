// conv.h: conv2d layers for the Q-network's convolutional body: forward and backward as
// im2col + sgemm through blas.h, in chunks of output positions small enough to stay in the
// cache, over flat float arrays, with caller-provided scratch.
//
// Shapes (defined once): B = batch, C = C_in, OC = C_out, H x W the input (non-square is
// fine), k the (square) kernel, s the stride, no padding, OH = (H - k) / s + 1 and
// OW = (W - k) / s + 1 (floor: like PyTorch, rows and columns no window reaches are ignored),
// K = C k k, P = OH OW output positions, N = P B.
//
// Parameters: PyTorch's Conv2d layout. w is (OC x C x k x k) row-major, i.e. an (OC x K)
// matrix whose row index within an output channel is r = (c k + i) k + j; b is (OC). A layer
// owns conv_num_params = OC K + OC floats, w then b (the state_dict order).
//
// Layouts:
//   layer input   (C x H x W x B) row-major, the batch innermost: in[c][(y W + x) B + b].
//                 An inner layer's input is the previous layer's output (floats). The first
//                 layer's is the observations, which arrive as B rows of H W C elements,
//                 channels-last [y][x][c] (as the replay stores them), transposed into this
//                 layout once per pass: conv_transpose_f32 converts uint8 or float rows to
//                 scaled floats (what nn.c does: each element is converted once, not once
//                 per window reading it, k^2 / s^2 times), conv_transpose_u8 keeps bytes
//                 (1/4 of the memory; im2col converts and scales them). conv_input_t names
//                 which.
//   output        (OC x OH x OW x B) row-major: out[oc][(y OW + x) B + b].
//   col (scratch) (K x n) row-major for a chunk of output positions [p0, p1), n = (p1 - p0)
//                 B: col[r][(p - p0) B + b] holds pixel (c, oy s + i, ox s + j) of sample b
//                 at position p = oy OW + ox.
// forward   per chunk: col = im2col(in); out[:, chunk] = relu?(w col + b)
//                                                        sgemm NN, M = OC, N = n, K = K
// backward  per chunk: col = im2col(in) (again); dw^T += col dout[:, chunk]^T
//                                                        sgemm NT, M = K, N = OC, K = n
//           db += row sums of dout; and for an inner layer
//           dcol = w^T dout[:, chunk];  din[chunk's pixels] += col2im(dcol)
//                                                        sgemm TN, M = K, N = n, K = OC
//
// Why this output layout: the columns of col, hence of out, run (y, x, b) with the batch
// innermost. Read as a matrix, out is (OC OH OW) x B with row index f = oc OH OW + y OW + x,
// which is exactly PyTorch's flatten of NCHW (x.view(B, -1)) stored feature-major: the
// (features x B) matrix nn.c's linear layers consume. The flatten after the last conv layer
// is therefore no operation at all, and ReLU, its mask and the bias are contiguous loops.
// im2col is cheap in this layout too: every col entry group (r, p) is B contiguous elements
// of the input, and with stride 1 the positions of one output row are one contiguous run.
//
// Why chunks: a whole-batch col is large (tens of MB for the Nature body's first layer) and
// its GEMMs have a short side (M = OC), so OpenBLAS would pack each col element from memory
// for only OC columns of work; a chunk of about CONV_CHUNK_BYTES is still in the cache from
// im2col. So nothing of size N x K exists: forward works chunk by chunk, adds the bias and
// applies the ReLU while the chunk's output is in the cache (no bias fill, no separate ReLU
// pass), and backward recomputes each chunk's im2col from the input, which it needs anyway,
// instead of keeping col from forward. The weight gradient is accumulated transposed
// (M = K, N = OC: faster than M = OC on chunks) into scratch and added to dw at the end.
// Two weight sets on the same input (the learner's online and target networks on s') share
// each chunk's im2col and run as one GEMM with the two (OC x K) matrices stacked, M = 2 OC
// (conv_forward2): the short side doubles. What each of these bought, and how the chunk size
// was chosen, is measured in docs/performance.md ("Conv networks").
//
// Backward of the first layer: pass din = NULL. The observations are not trained, so the
// dcol GEMM and the col2im scatter are skipped.
//
// Precision: the three GEMMs run in fp32 (blas_sgemm, blas_sgemm_ld) unless the shape names
// another GEMM of the same contract (conv_shape_t.gemm: a learner in bfloat16, [learner]
// precision); everything else (im2col, bias, ReLU, sums) stays fp32 either way.
//
// Memory: the input (kept by the caller between forward and backward), the output, and
// conv_scratch_bytes of scratch per call, which every layer of a network may share (one
// thread). Nothing here allocates.
//
// What it does not do: padding, dilation, groups, non-square kernels, pooling, threading.
// Thread-safety: every function is reentrant; threads need distinct outputs and scratch.
// Products of dimensions are size_t; shapes are bounded by conv_shape_init so that N fits a
// BLAS int for any batch with OH OW B <= INT_MAX (asserted).
#ifndef APEX_CONV_H
#define APEX_CONV_H

#include "blas.h"
#include "rng.h"

#include <stddef.h>
#include <stdint.h>

// The col chunk a forward or backward call aims for: at least one position (K B floats).
// 64 KB: one position at the learners' batches, where OpenBLAS's AVX-512 kernels multiply
// without packing (docs/performance.md, "The GEMM-rate goal on the Zen 4").
#define CONV_CHUNK_BYTES (64 * 1024)

// One conv2d layer's dimensions; a plain value filled by conv_shape_init.
typedef struct {
    int c_in, h, w;       // C, H, W of the input
    int c_out, k, stride; // OC, kernel side, stride
    int oh, ow;           // OH, OW (derived)
    int chunk;            // positions per chunk; 0 (conv_shape_init's) = from CONV_CHUNK_BYTES.
                          // Tests set small values to cut runs at every place.
    int frames;           // a first layer's rows: 0 or 1 channels last (H W C); F > 1: F
                          // frames of H W (C / F) back to back (conv_transpose_*); 0 from
                          // conv_shape_init
    blas_gemm_fn gemm;    // the layer's three products: NULL (conv_shape_init's) is fp32,
                          // blas_sgemm and blas_sgemm_ld as ever; bf16_gemm_ld for a learner in
                          // bfloat16 (nn_state_set_gemm sets a network's layers)
} conv_shape_t;

// A layer's input, (C x H x W x B): floats, or bytes that enter col multiplied by scale.
typedef struct {
    const void *data;
    int u8;      // 1: uint8 elements (the first layer's transposed observations), 0: float
    float scale; // multiplies uint8 elements; ignored for floats
} conv_input_t;

// Fills *s (OH, OW included) and returns APEX_OK, or APEX_EINVAL with the reason written to
// why (may be NULL): channels in [1, 4096], H and W in [1, 4096], 1 <= k <= min(H, W),
// stride in [1, 4096], C k k <= 2^20. The next layer's input is (c_out, oh, ow).
int conv_shape_init(conv_shape_t *s, int c_in, int h, int w, int c_out, int k, int stride,
                    char *why, size_t why_len);
// A first layer's observation rows as F frames (conv_shape_t.frames): APEX_OK, or APEX_EINVAL
// with the reason when F is not 0, 1 or a divisor of C in [2, C].
int conv_shape_frames(conv_shape_t *s, int frames, char *why, size_t why_len);
// Floats of the layer's parameters: OC C k k weights then OC biases.
size_t conv_num_params(const conv_shape_t *s);
// C H W: elements of one sample's input.
size_t conv_in_features(const conv_shape_t *s);
// OC OH OW: rows of the layer's feature-major output (the next linear layer's in_dim).
size_t conv_out_features(const conv_shape_t *s);
// Output positions per chunk for batch B: s->chunk if set, else CONV_CHUNK_BYTES / (4 K B),
// at least 1, at most P.
int conv_chunk_positions(const conv_shape_t *s, int B);
// Bytes of the scratch of conv_forward, conv_forward2 and conv_backward for batches up to
// max_batch: a col chunk, the chunk's output for two weight sets, the stacked weights and
// the transposed weight gradient.
size_t conv_scratch_bytes(const conv_shape_t *s, int max_batch);
// PyTorch's Conv2d default init: w and b uniform in +-1/sqrt(C k k).
void conv_init_random(float *w, float *b, const conv_shape_t *s, rng_t *rng);

// The first layer's input from B observation rows (H W C elements each, channels-last; with
// s->frames = F > 1, F frames of H W (C / F) each, frame f's channel c being plane f C/F + c):
// t (C x H x W x B) = obs as bytes (use with conv_input_t {t, 1, scale}), or, from uint8
// (obs_u8 = 1) or float rows, times scale as floats ({t, 0, 1}). t holds
// conv_in_features(s) B elements and must not overlap obs.
void conv_transpose_u8(uint8_t *t, const uint8_t *obs, const conv_shape_t *s, int B);

// dst = scale * (float)src for n bytes: the conversion im2col runs for a byte input, on the
// widest vector unit of this CPU (width -1), or on a given one (tests: 0 SSE2, 1 AVX2, 2
// AVX-512; the caller checks the CPU has it). The same bits on every width.
void conv_u8_to_f32(float *dst, const uint8_t *src, float scale, size_t n, int width);
void conv_transpose_f32(float *t, const void *obs, int obs_u8, float scale, const conv_shape_t *s,
                        int B);

// out (OC x OH OW B) = w * in + b, then max(., 0) when relu is set. scratch: at least
// conv_scratch_bytes(s, B) bytes, 64-byte aligned for speed. 1 <= B; out must not overlap
// in or scratch.
void conv_forward(float *out, const conv_input_t *in, const float *w, const float *b, int relu,
                  const conv_shape_t *s, int B, float *scratch);
// Two weight sets on one input: out_a from (w_a, b_a) and out_b from (w_b, b_b), the same
// values as two conv_forward calls (each output is the same dot product over K), with one
// im2col per chunk and one GEMM of M = 2 OC.
void conv_forward2(float *out_a, float *out_b, const conv_input_t *in, const float *w_a,
                   const float *b_a, const float *w_b, const float *b_b, int relu,
                   const conv_shape_t *s, int B, float *scratch);

// Given dout = dL/dout (OC x OH OW B, the gradient before this layer's ReLU, i.e. with the
// mask applied by the caller) and the input of the forward pass (unchanged since):
// dw += dout col^T and db += row sums of dout (accumulated, as nn_backward). If din is not
// NULL, also overwrites din (C x H W B) with dL/din; the caller applies the previous ReLU's
// mask. din = NULL for the first layer skips the dcol GEMM and the col2im scatter.
void conv_backward(float *din, float *dw, float *db, const float *dout, const conv_input_t *in,
                   const float *w, const conv_shape_t *s, int B, float *scratch);

// dx *= relu'(pre) where act = relu(pre) (act > 0 exactly when pre > 0): the ReLU's backward
// for n elements in any layout both share, branch-free. nn.c's layers and the oneDNN bodies'
// (model/dnnconv.c) masks; a NaN act masks (as the forward's ReLU made it 0 anyway).
void conv_relu_mask(float *dx, const float *act, size_t n);

// The pieces of the above, exposed for the benchmark's time split and for tests.
// col (K x (p1 - p0) B) for output positions [p0, p1) of in; 0 <= p0 < p1 <= OH OW.
void conv_im2col(float *col, const conv_input_t *in, const conv_shape_t *s, int B, int p0, int p1);
// The adjoint: din (C x H W B) += every entry of dcol (K x (p1 - p0) B) at its pixel.
void conv_col2im_add(float *din, const float *dcol, const conv_shape_t *s, int B, int p0, int p1);

#endif
