// conv.h: conv2d layers for the Q-network's convolutional body: forward and backward as
// im2col + sgemm through blas.h, over flat float arrays, with caller-provided scratch.
//
// Shapes (defined once): B = batch, C = C_in, OC = C_out, H x W the input (non-square is
// fine), k the (square) kernel, s the stride, no padding, OH = (H - k) / s + 1 and
// OW = (W - k) / s + 1 (floor: like PyTorch, rows and columns no window reaches are ignored),
// K = C k k, N = OH OW B.
//
// Parameters: PyTorch's Conv2d layout. w is (OC x C x k x k) row-major, i.e. an (OC x K)
// matrix whose row index within an output channel is r = (c k + i) k + j; b is (OC). A layer
// owns conv_num_params = OC K + OC floats, w then b (the state_dict order).
//
// Layouts:
//   observations (first layer)  B rows of H W C elements each, channels-last [y][x][c]
//                               (as the replay stores them), uint8 or float32; the layer
//                               multiplies by a per-environment scale (MinAtar's 0/1
//                               frames: 1; Atari frames: 1/255) while it builds col.
//   activations (conv outputs)  (OC x OH x OW x B) row-major: out[oc][(y OW + x) B + b].
//   col (scratch)               (K x N) row-major: col[r][(oy OW + ox) B + b] holds pixel
//                               (c, oy s + i, ox s + j) of sample b.
// forward   col = im2col(in);  out = w col + b           sgemm NN, M = OC, N = N, K = K
// backward  dw += dout col^T;  db += row sums of dout    sgemm NT, M = OC, N = K, K = N
//           dcol = w^T dout;   din = col2im(dcol)        sgemm TN, M = K, N = N, K = OC
//
// Why this output layout: the columns of col, hence of out, run (y, x, b) with the batch
// innermost. Read as a matrix, out is (OC OH OW) x B with row index f = oc OH OW + y OW + x,
// which is exactly PyTorch's flatten of NCHW (x.view(B, -1)) stored feature-major: the
// (features x B) matrix nn.c's linear layers consume. The flatten after the last conv layer
// is therefore no operation at all, and ReLU, its mask and the bias fill are contiguous
// loops over one array (nn.c's elementwise kernels apply unchanged). The next layer's im2col
// is cheap in this layout too: every col entry group (r, oy, ox) is B contiguous floats of
// the input, and with stride 1 the OW groups of one (r, oy) are one contiguous copy of OW B
// floats (col2im is the same loop with +=). The GEMM's speed does not depend on the column
// order (same M, N, K either way); the batch-outer alternative (b, y, x) would make the
// inner-layer copies strided for s > 1 and need a transpose at the flatten.
// The first layer's im2col is the one strided access: its input is B observation rows
// (stride H W C). It works one image row y at a time: the row of every sample is
// transposed, converted and scaled into a (C x W x B) float scratch (one image row of the
// batch, 172 KB for the Nature body at B = 128, so it stays in L2), and the col rows of all
// windows that read row y are copied out of it like an inner layer's. Each observation
// element is converted once, and no float copy of the whole batch exists; the scratch is
// the tail of the col buffer (included in conv_col_bytes). Measured against the two
// alternatives (bench_conv, B as below): gathering every col entry straight from the rows
// converts each element ~k^2/s^2 times and is 1.3-1.5x (Nature) to 2x (MinAtar) slower;
// transposing the whole batch into a float copy first is 1.1x slower and needs 4 bytes per
// observation byte more memory.
//
// Backward of the first layer: pass din = NULL. The observations are not trained, so the
// dcol GEMM and the col2im scatter are skipped. That matters: for the Nature body's first
// layer (the largest col matrix) they would add 13-17 ms to a 73-84 ms step (B = 128), for
// the MinAtar body 0.8 ms to a 1.7-1.9 ms step (B = 512).
//
// Memory: col is K N floats per layer plus the first-layer row scratch (conv_col_bytes;
// Nature body at B = 128: 52.6, 21.6 and 14.7 MB). forward writes col and backward reads it,
// so each layer keeps its own col from forward to backward; the dcol scratch of
// conv_backward may be shared by all layers, and may even be the layer's own col (backward
// reads col only before writing dcol). Nothing here allocates.
//
// Measured (bench/bench_conv.c, 1 thread, OpenBLAS 0.3.21 SkylakeX kernel on a 2-core
// Intel Xeon (AVX-512) VM, where 1024^3 sgemm runs at 170-200 GFLOP/s), forward + backward:
//   MinAtar body, B = 512, 10x10x4 -> 16 3x3 s1: 1.7-1.9 ms, of which im2col 0.26-0.34,
//     GEMMs ~1.3 (the same products alone: 57-60 GFLOP/s; the whole step: 40-44 GFLOP/s).
//   Nature body, B = 128, 84x84x4 -> 32 8x8 s4 -> 64 4x4 s2 -> 64 3x3 s1: 73-84 ms, of which
//     im2col 11-12 (first layer 7.4-8.0), col2im 2.3-2.4, GEMMs 58-64 (alone: 80-88 GFLOP/s;
//     the whole step: 61-70 GFLOP/s).
// The GEMMs are the cost, and the ones with a short side run slowest: the forward products
// (M = OC = 16..64) at 53-85 GFLOP/s, the first layers' dW (N = 36 or 256, K = N huge) at
// 46 and 70-85, the inner layers' dW and dcol at 107-134. Computing out^T = col^T W^T
// instead (M = N) runs the forward at 75-95 GFLOP/s but needs a transpose back to this
// layout, which nets ~4 ms of a Nature step and loses on the MinAtar body: not done.
//
// What it does not do: padding, dilation, groups, non-square kernels, ReLU (nn.c's kernels
// fit the layout), pooling, threading. Thread-safety: every function is reentrant; threads
// need distinct outputs and scratch. Products of dimensions are size_t; shapes are bounded
// by conv_shape_init so that N fits a BLAS int for any batch with OH OW B <= INT_MAX
// (asserted).
#ifndef APEX_CONV_H
#define APEX_CONV_H

#include "rng.h"

#include <stddef.h>
#include <stdint.h>

// One conv2d layer's dimensions; a plain value filled by conv_shape_init.
typedef struct {
    int c_in, h, w;       // C, H, W of the input
    int c_out, k, stride; // OC, kernel side, stride
    int oh, ow;           // OH, OW (derived)
} conv_shape_t;

// Fills *s (OH, OW included) and returns APEX_OK, or APEX_EINVAL with the reason written to
// why (may be NULL): channels in [1, 4096], H and W in [1, 4096], 1 <= k <= min(H, W),
// stride in [1, 4096], C k k <= 2^20. The next layer's input is (c_out, oh, ow).
int conv_shape_init(conv_shape_t *s, int c_in, int h, int w, int c_out, int k, int stride,
                    char *why, size_t why_len);
// Floats of the layer's parameters: OC C k k weights then OC biases.
size_t conv_num_params(const conv_shape_t *s);
// C H W: floats (or bytes) of one sample's input.
size_t conv_in_features(const conv_shape_t *s);
// OC OH OW: rows of the layer's feature-major output (the next linear layer's in_dim).
size_t conv_out_features(const conv_shape_t *s);
// Bytes of the col buffer for batches up to max_batch: K N floats of col plus C W B floats
// of the first-layer entries' row scratch. Also enough for a dcol scratch.
size_t conv_col_bytes(const conv_shape_t *s, int max_batch);
// PyTorch's Conv2d default init: w and b uniform in +-1/sqrt(C k k).
void conv_init_random(float *w, float *b, const conv_shape_t *s, rng_t *rng);

// First layer: out (OC x OH OW B) from obs (B rows of H W C, channels-last, uint8 or
// float32) times scale. col (conv_col_bytes for some max_batch >= B) is written and must
// stay unchanged until conv_backward. 1 <= B; out, col and obs must not overlap.
void conv_forward_u8(float *out, float *col, const uint8_t *obs, const float *w, const float *b,
                     float scale, const conv_shape_t *s, int B);
void conv_forward_f32(float *out, float *col, const float *obs, const float *w, const float *b,
                      float scale, const conv_shape_t *s, int B);
// Inner layer: out (OC x OH OW B) from in (C x H W B), the previous conv layer's output
// (after its ReLU). col as above.
void conv_forward(float *out, float *col, const float *in, const float *w, const float *b,
                  const conv_shape_t *s, int B);

// Given dout = dL/dout (OC x OH OW B) and the col of the last forward of this layer with
// the same B: dw += dout col^T and db += row sums of dout (accumulated, as nn_backward).
// If din is not NULL, also overwrites din (C x H W B) with dL/din, using dcol (conv_col_bytes
// of scratch, may be col itself) on the way; the caller applies the previous ReLU's mask.
// din = NULL for the first layer: that skips the dcol GEMM and the col2im scatter.
void conv_backward(float *din, float *dcol, float *dw, float *db, const float *dout,
                   const float *col, const float *w, const conv_shape_t *s, int B);

// The pieces of the above, exposed for the benchmark's time split and for tests.
// col (K x OH OW B) from observation rows (first layer) or from a (C x H W B) activation.
void conv_im2col_u8(float *col, const uint8_t *obs, float scale, const conv_shape_t *s, int B);
void conv_im2col_f32(float *col, const float *obs, float scale, const conv_shape_t *s, int B);
void conv_im2col(float *col, const float *in, const conv_shape_t *s, int B);
// din (C x H W B) = the adjoint of conv_im2col applied to dcol (overwrites din).
void conv_col2im(float *din, const float *dcol, const conv_shape_t *s, int B);

#endif
