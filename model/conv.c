// conv.c: conv2d forward/backward as im2col + sgemm (see conv.h for the layouts and why).
// Dimension names: B = batch, C = C_in, OC = C_out, H x W input, OH x OW output, k kernel,
// s stride, K = C k k (rows of the col matrix), N = OH OW B (its columns).
#include "conv.h"

#include "apex.h"
#include "blas.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// Bounds that keep every product used as a BLAS int well inside INT_MAX.
#define CONV_MAX_CHANNELS 4096
#define CONV_MAX_SIDE 4096
#define CONV_MAX_K_ROWS (1 << 20) // C k k

// ----------------------------------------------------------------------------
// shapes

int conv_shape_init(conv_shape_t *s, int c_in, int h, int w, int c_out, int k, int stride,
                    char *why, size_t why_len) {
    const char *msg = NULL;
    memset(s, 0, sizeof *s);
    if (c_in < 1 || c_in > CONV_MAX_CHANNELS || c_out < 1 || c_out > CONV_MAX_CHANNELS) {
        msg = "channels must be in [1, 4096]";
    } else if (h < 1 || h > CONV_MAX_SIDE || w < 1 || w > CONV_MAX_SIDE) {
        msg = "input height and width must be in [1, 4096]";
    } else if (k < 1 || k > h || k > w) {
        msg = "kernel must be in [1, min(height, width)] (no padding)";
    } else if (stride < 1 || stride > CONV_MAX_SIDE) {
        msg = "stride must be in [1, 4096]";
    } else if ((size_t)c_in * k * k > CONV_MAX_K_ROWS) {
        msg = "c_in * kernel^2 must be at most 2^20";
    }
    if (msg) {
        if (why && why_len) {
            snprintf(why, why_len, "%s", msg);
        }
        return APEX_EINVAL;
    }
    *s = (conv_shape_t){c_in, h, w, c_out, k, stride, (h - k) / stride + 1, (w - k) / stride + 1};
    return APEX_OK;
}

size_t conv_num_params(const conv_shape_t *s) {
    return (size_t)s->c_out * s->c_in * s->k * s->k + (size_t)s->c_out;
}

size_t conv_in_features(const conv_shape_t *s) { return (size_t)s->c_in * s->h * s->w; }

size_t conv_out_features(const conv_shape_t *s) { return (size_t)s->c_out * s->oh * s->ow; }

size_t conv_col_bytes(const conv_shape_t *s, int max_batch) {
    APEX_ASSERT(max_batch >= 1);
    // K N floats of col, then one transposed image row (C W B) for the first-layer entries.
    size_t per_sample = (size_t)s->c_in * s->k * s->k * s->oh * s->ow + (size_t)s->c_in * s->w;
    return per_sample * (size_t)max_batch * sizeof(float);
}

void conv_init_random(float *w, float *b, const conv_shape_t *s, rng_t *rng) {
    // PyTorch Conv2d.reset_parameters: kaiming_uniform(a=sqrt(5)) on W is
    // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = C k k, and the bias uses the same bound.
    size_t fan_in = (size_t)s->c_in * s->k * s->k;
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < fan_in * (size_t)s->c_out; i++) {
        w[i] = bound * (2.0f * rng_uniform_f(rng) - 1.0f);
    }
    for (int i = 0; i < s->c_out; i++) {
        b[i] = bound * (2.0f * rng_uniform_f(rng) - 1.0f);
    }
}

// (K, N) of the col matrix for batch B, asserting that N fits a BLAS int.
static void s_col_dims(const conv_shape_t *s, int B, int *K, int *N) {
    APEX_ASSERT(B >= 1 && s->oh >= 1 && s->ow >= 1);
    size_t n = (size_t)s->oh * s->ow * (size_t)B;
    APEX_ASSERT(n <= INT_MAX);
    *K = s->c_in * s->k * s->k;
    *N = (int)n;
}

// ----------------------------------------------------------------------------
// small contiguous kernels (4-float vectors, as in nn.c: gcc -O2 vectorizes none of these
// loops by itself, and a float sum is one long dependency chain without partial sums)

typedef float v4f __attribute__((vector_size(16)));

static inline v4f s_load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void s_store4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

static void s_fill(float *x, float value, size_t n) {
    const v4f v = {value, value, value, value};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s_store4(x + i, v);
    }
    for (; i < n; i++) {
        x[i] = value;
    }
}

// Sum of n floats with eight partial sums.
static float s_sum(const float *x, size_t n) {
    v4f a0 = {0, 0, 0, 0}, a1 = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 += s_load4(x + i);
        a1 += s_load4(x + i + 4);
    }
    a0 += a1;
    float sum = (a0[0] + a0[1]) + (a0[2] + a0[3]);
    for (; i < n; i++) {
        sum += x[i];
    }
    return sum;
}

// dst += src for n floats.
static void s_add(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s_store4(dst + i, s_load4(dst + i) + s_load4(src + i));
    }
    for (; i < n; i++) {
        dst[i] += src[i];
    }
}

// ----------------------------------------------------------------------------
// im2col / col2im
//
// col (K x N): row r = (c k + i) k + j (the PyTorch weight order within one output channel),
// column n = (oy OW + ox) B + b, value = input pixel (c, oy s + i, ox s + j) of sample b.

// First layer, in two steps per image row y: (1) transpose row y of every sample into the
// scratch t (C x W x B floats, scaled; the B-strided gather happens here, once per obs
// element), then (2) copy the col rows of every window row (oy, i) with oy s + i = y from t
// as contiguous runs of B floats (OW B with stride 1), like the inner-layer im2col. t is one
// image row of the batch (172 KB for the Nature body at B = 128), so it stays in L2 between
// the two steps. Gathering straight into col converts every obs element about k^2 / s^2
// times instead of once: 1.3-1.5x (Nature body) to 2x (MinAtar body) slower (bench_conv).
static void s_transpose_row(float *t, const void *obs, int is_u8, float scale, int y,
                            const conv_shape_t *s, int B) {
    const size_t sample = conv_in_features(s), Bz = (size_t)B, C = (size_t)s->c_in;
    const size_t row = (size_t)y * s->w * C;
    for (size_t c = 0; c < C; c++) {
        for (size_t x = 0; x < (size_t)s->w; x++) {
            float *dst = t + (c * s->w + x) * Bz;
            size_t off = row + x * C + c;
            if (is_u8) {
                const uint8_t *src = (const uint8_t *)obs + off;
                for (size_t b = 0; b < Bz; b++) {
                    dst[b] = scale * (float)src[b * sample];
                }
            } else {
                const float *src = (const float *)obs + off;
                for (size_t b = 0; b < Bz; b++) {
                    dst[b] = scale * src[b * sample];
                }
            }
        }
    }
}

static void s_im2col_obs(float *col, const void *obs, int is_u8, float scale, const conv_shape_t *s,
                         int B) {
    int K, N;
    s_col_dims(s, B, &K, &N);
    const size_t Bz = (size_t)B, seg = (size_t)s->ow * Bz;
    float *t = col + (size_t)K * N; // the row scratch lives after col (conv_col_bytes)
    for (int y = 0; y < s->h; y++) {
        int transposed = 0;
        for (int i = 0; i < s->k; i++) {
            int d = y - i, oy = d / s->stride;
            if (d < 0 || d % s->stride != 0 || oy >= s->oh) {
                continue; // no window row (oy, i) reads image row y
            }
            if (!transposed) {
                s_transpose_row(t, obs, is_u8, scale, y, s, B);
                transposed = 1;
            }
            for (int c = 0; c < s->c_in; c++) {
                for (int j = 0; j < s->k; j++) {
                    size_t r = ((size_t)c * s->k + i) * s->k + j;
                    float *dst = col + r * N + (size_t)oy * seg;
                    const float *src = t + ((size_t)c * s->w + j) * Bz;
                    if (s->stride == 1) {
                        memcpy(dst, src, seg * sizeof(float));
                        continue;
                    }
                    for (int ox = 0; ox < s->ow; ox++) {
                        memcpy(dst + (size_t)ox * Bz, src + (size_t)ox * s->stride * Bz,
                               Bz * sizeof(float));
                    }
                }
            }
        }
    }
}

void conv_im2col_u8(float *col, const uint8_t *obs, float scale, const conv_shape_t *s, int B) {
    s_im2col_obs(col, obs, 1, scale, s, B);
}

void conv_im2col_f32(float *col, const float *obs, float scale, const conv_shape_t *s, int B) {
    s_im2col_obs(col, obs, 0, scale, s, B);
}

// Inner layer: in is (C x H x W x B). Each (r, oy, ox) is a copy of B contiguous floats, and
// with stride 1 the OW of them for one (r, oy) are adjacent in both arrays: one copy of OW B.
// c outermost: one input channel plane (H W B floats) is the working set of k k rows.
void conv_im2col(float *col, const float *in, const conv_shape_t *s, int B) {
    int K, N;
    s_col_dims(s, B, &K, &N);
    const size_t Bz = (size_t)B, plane = (size_t)s->h * s->w * Bz, seg = (size_t)s->ow * Bz;
    float *dst = col;
    for (int c = 0; c < s->c_in; c++) {
        for (int i = 0; i < s->k; i++) {
            for (int j = 0; j < s->k; j++) { // row r = (c k + i) k + j: dst walks rows in order
                for (int oy = 0; oy < s->oh; oy++) {
                    const float *src = in + c * plane + (size_t)(oy * s->stride + i) * s->w * Bz +
                                       (size_t)j * Bz;
                    if (s->stride == 1) {
                        memcpy(dst, src, seg * sizeof(float));
                        dst += seg;
                        continue;
                    }
                    for (int ox = 0; ox < s->ow; ox++, dst += Bz) {
                        memcpy(dst, src + (size_t)ox * s->stride * Bz, Bz * sizeof(float));
                    }
                }
            }
        }
    }
}

// The adjoint of conv_im2col: din = 0, then every col entry is added back to its pixel.
// Pixels no window covers (when (H - k) % s != 0, or k < s) keep gradient 0.
void conv_col2im(float *din, const float *dcol, const conv_shape_t *s, int B) {
    int K, N;
    s_col_dims(s, B, &K, &N);
    const size_t Bz = (size_t)B, plane = (size_t)s->h * s->w * Bz, seg = (size_t)s->ow * Bz;
    memset(din, 0, (size_t)s->c_in * plane * sizeof(float));
    const float *src = dcol;
    for (int c = 0; c < s->c_in; c++) {
        for (int i = 0; i < s->k; i++) {
            for (int j = 0; j < s->k; j++) {
                for (int oy = 0; oy < s->oh; oy++) {
                    float *dst = din + c * plane + (size_t)(oy * s->stride + i) * s->w * Bz +
                                 (size_t)j * Bz;
                    if (s->stride == 1) {
                        s_add(dst, src, seg);
                        src += seg;
                        continue;
                    }
                    for (int ox = 0; ox < s->ow; ox++, src += Bz) {
                        s_add(dst + (size_t)ox * s->stride * Bz, src, Bz);
                    }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// forward / backward

// out (OC x N) = w (OC x K) col (K x N) + b: rows filled with the bias, then sgemm NN, beta 1.
static void s_forward_gemm(float *out, const float *col, const float *w, const float *b,
                           const conv_shape_t *s, int B) {
    int K, N;
    s_col_dims(s, B, &K, &N);
    for (int oc = 0; oc < s->c_out; oc++) {
        s_fill(out + (size_t)oc * N, b[oc], (size_t)N);
    }
    blas_sgemm(out, w, col, 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, s->c_out, N, K);
}

void conv_forward_u8(float *out, float *col, const uint8_t *obs, const float *w, const float *b,
                     float scale, const conv_shape_t *s, int B) {
    conv_im2col_u8(col, obs, scale, s, B);
    s_forward_gemm(out, col, w, b, s, B);
}

void conv_forward_f32(float *out, float *col, const float *obs, const float *w, const float *b,
                      float scale, const conv_shape_t *s, int B) {
    conv_im2col_f32(col, obs, scale, s, B);
    s_forward_gemm(out, col, w, b, s, B);
}

void conv_forward(float *out, float *col, const float *in, const float *w, const float *b,
                  const conv_shape_t *s, int B) {
    conv_im2col(col, in, s, B);
    s_forward_gemm(out, col, w, b, s, B);
}

void conv_backward(float *din, float *dcol, float *dw, float *db, const float *dout,
                   const float *col, const float *w, const conv_shape_t *s, int B) {
    int K, N;
    s_col_dims(s, B, &K, &N);
    // dW (OC x K) += dOut (OC x N) col^T: sgemm NT. This is the last read of col, so dcol
    // may be the same buffer.
    blas_sgemm(dw, dout, col, 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_TRANS, s->c_out, K, N);
    for (int oc = 0; oc < s->c_out; oc++) {
        db[oc] += s_sum(dout + (size_t)oc * N, (size_t)N);
    }
    if (!din) {
        return; // first layer: the observations are not trained
    }
    // dCol (K x N) = W^T (K x OC) dOut (OC x N): sgemm TN; then scatter it back to pixels.
    blas_sgemm(dcol, w, dout, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, K, N, s->c_out);
    conv_col2im(din, dcol, s, B);
}
