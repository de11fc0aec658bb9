// conv.c: conv2d forward/backward as im2col + sgemm in chunks of output positions (see
// conv.h for the layouts and why). Dimension names: B = batch, C = C_in, OC = C_out, H x W
// input, OH x OW output, P = OH OW, k kernel, s stride, K = C k k (rows of a col chunk),
// N = P B (columns of the output), n = columns of one chunk.
#include "conv.h"

#include "apex.h"
#include "blas.h"
#include "cpu.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
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
    *s = (conv_shape_t){.c_in = c_in,
                        .h = h,
                        .w = w,
                        .c_out = c_out,
                        .k = k,
                        .stride = stride,
                        .oh = (h - k) / stride + 1,
                        .ow = (w - k) / stride + 1};
    return APEX_OK;
}

int conv_shape_frames(conv_shape_t *s, int frames, char *why, size_t why_len) {
    if (frames < 0 || (frames > 1 && (frames > s->c_in || s->c_in % frames != 0))) {
        if (why && why_len) {
            snprintf(why, why_len, "%d frames do not divide the %d input channels", frames,
                     s->c_in);
        }
        return APEX_EINVAL;
    }
    s->frames = frames;
    return APEX_OK;
}

// The plane-major position (c HW + p) of element j of an observation row: channels last
// (j = p C + c), or with F frames, frame-major (j = f HW (C/F) + p (C/F) + c', c = f C/F + c').
static inline size_t s_plane_pos(size_t j, size_t HW, size_t C, int frames) {
    if (frames <= 1) {
        return (j % C) * HW + j / C;
    }
    const size_t cf = C / (size_t)frames, fsz = HW * cf, f = j / fsz, jj = j % fsz;
    return (f * cf + jj % cf) * HW + jj / cf;
}

size_t conv_num_params(const conv_shape_t *s) {
    return (size_t)s->c_out * s->c_in * s->k * s->k + (size_t)s->c_out;
}

size_t conv_in_features(const conv_shape_t *s) { return (size_t)s->c_in * s->h * s->w; }

size_t conv_out_features(const conv_shape_t *s) { return (size_t)s->c_out * s->oh * s->ow; }

int conv_chunk_positions(const conv_shape_t *s, int B) {
    APEX_ASSERT(B >= 1);
    size_t per_position = (size_t)s->c_in * s->k * s->k * (size_t)B * sizeof(float);
    size_t n = s->chunk > 0 ? (size_t)s->chunk : CONV_CHUNK_BYTES / per_position;
    size_t P = (size_t)s->oh * s->ow;
    return (int)APEX_MAX(1, APEX_MIN(n, P));
}

// The scratch of one call, in floats, for batch B: col chunk (K x n), the chunk's output for
// two weight sets (2 OC x n), the stacked weights (2 OC x K) and dw^T (K x OC); each part
// starts on a 64-byte line.
typedef struct {
    float *col, *out, *w2, *dwt;
} s_scratch_t;

static size_t s_up16(size_t n) { return (n + 15) / 16 * 16; }

static size_t s_scratch_layout(const conv_shape_t *s, int B, float *base, s_scratch_t *out) {
    size_t K = (size_t)s->c_in * s->k * s->k, OC = (size_t)s->c_out;
    size_t n = (size_t)conv_chunk_positions(s, B) * (size_t)B;
    size_t sizes[4] = {s_up16(K * n), s_up16(2 * OC * n), s_up16(2 * OC * K), s_up16(K * OC)};
    float *parts[4];
    size_t total = 0;
    for (int i = 0; i < 4; i++) {
        parts[i] = base ? base + total : NULL;
        total += sizes[i];
    }
    if (out) {
        *out = (s_scratch_t){parts[0], parts[1], parts[2], parts[3]};
    }
    return total;
}

size_t conv_scratch_bytes(const conv_shape_t *s, int max_batch) {
    APEX_ASSERT(max_batch >= 1);
    // The chunk's columns n(B) = B * max(1, floor(C / B)) are not monotonic in B: take the
    // largest over every batch up to max_batch (cheap: a loop over ints, at start-up).
    size_t most = 0;
    for (int B = 1; B <= max_batch; B++) {
        most = APEX_MAX(most, s_scratch_layout(s, B, NULL, NULL));
    }
    return most * sizeof(float);
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

// N = OH OW B, asserting that it fits a BLAS int; and K.
static void s_dims(const conv_shape_t *s, int B, int *K, int *N) {
    APEX_ASSERT(B >= 1 && s->oh >= 1 && s->ow >= 1);
    size_t n = (size_t)s->oh * s->ow * (size_t)B;
    APEX_ASSERT(n <= INT_MAX);
    *K = s->c_in * s->k * s->k;
    *N = (int)n;
}

// ----------------------------------------------------------------------------
// small contiguous kernels, on 4-float vectors (GCC/Clang vector extensions: SSE2 on
// x86-64, NEON on arm64). gcc -O2 vectorizes none of these loops by itself, a float sum is
// one long dependency chain without partial sums, and a scalar ReLU is a data-dependent
// branch that mispredicts on half the activations. Loads and stores go through memcpy, so
// any alignment is fine.

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef int16_t v8i16 __attribute__((vector_size(16)));
typedef uint8_t v16u8 __attribute__((vector_size(16)));

static inline v4f s_load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void s_store4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

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

// dst[0..16) = sc * (float)u: widened by unpacking against zero (SSE2 punpck, cvtdq2ps,
// mulps). The same values as the scalar expression.
static inline void s_cvt16(float *dst, v16u8 u, v4f sc) {
    const v16u8 z8 = {0};
    const v8i16 z16 = {0};
    v8i16 lo = (v8i16)__builtin_shuffle(
        u, z8, (v16u8){0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23});
    v8i16 hi = (v8i16)__builtin_shuffle(
        u, z8, (v16u8){8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31});
    v4i q[4] = {(v4i)__builtin_shuffle(lo, z16, (v8i16){0, 8, 1, 9, 2, 10, 3, 11}),
                (v4i)__builtin_shuffle(lo, z16, (v8i16){4, 12, 5, 13, 6, 14, 7, 15}),
                (v4i)__builtin_shuffle(hi, z16, (v8i16){0, 8, 1, 9, 2, 10, 3, 11}),
                (v4i)__builtin_shuffle(hi, z16, (v8i16){4, 12, 5, 13, 6, 14, 7, 15})};
    for (int k = 0; k < 4; k++) {
        s_store4(dst + 4 * k, __builtin_convertvector(q[k], v4f) * sc);
    }
}

#if defined(__x86_64__)
// The same conversion 16 (AVX-512) or 8 (AVX2) bytes per instruction: the first layer of a
// byte-input net converts every im2col element (Nature: 13 M per pass), and the SSE2 unpack
// chain above was 7-11 % of a Nature update on an Intel Xeon (bench/RESULTS.md). Exact
// either way: a byte converts to float exactly, and the product rounds once.
__attribute__((target("avx512f"))) static void s_u8_to_f32_avx512(float *dst, const uint8_t *src,
                                                                  float scale, size_t n) {
    const __m512 sc = _mm512_set1_ps(scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtepi32_ps(x), sc));
    }
    for (; i < n; i++) {
        dst[i] = scale * (float)src[i];
    }
}

__attribute__((target("avx2"))) static void s_u8_to_f32_avx2(float *dst, const uint8_t *src,
                                                             float scale, size_t n) {
    const __m256 sc = _mm256_set1_ps(scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtepi32_ps(x), sc));
    }
    for (; i < n; i++) {
        dst[i] = scale * (float)src[i];
    }
}

// 2 AVX-512, 1 AVX2, 0 neither: decided on the first call.
static int s_u8_width(void) {
    static atomic_int w = -1;
    int v = atomic_load_explicit(&w, memory_order_relaxed);
    if (v < 0) {
        cpu_features_t f;
        cpu_detect(&f);
        v = f.avx512f ? 2 : f.avx2 ? 1 : 0;
        atomic_store_explicit(&w, v, memory_order_relaxed);
    }
    return v;
}
#endif

// dst = scale * (float)src for n bytes, 16 at a time; width as conv_u8_to_f32's.
static void s_u8_to_f32_w(float *dst, const uint8_t *src, float scale, size_t n, int w) {
#if defined(__x86_64__)
    if (w == 2) {
        s_u8_to_f32_avx512(dst, src, scale, n);
        return;
    }
    if (w == 1) {
        s_u8_to_f32_avx2(dst, src, scale, n);
        return;
    }
#else
    (void)w;
#endif
    const v4f sc = {scale, scale, scale, scale};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16u8 u;
        memcpy(&u, src + i, sizeof u);
        s_cvt16(dst + i, u, sc);
    }
    for (; i < n; i++) {
        dst[i] = scale * (float)src[i];
    }
}

static void s_u8_to_f32(float *dst, const uint8_t *src, float scale, size_t n) {
#if defined(__x86_64__)
    s_u8_to_f32_w(dst, src, scale, n, s_u8_width());
#else
    s_u8_to_f32_w(dst, src, scale, n, 0);
#endif
}

void conv_u8_to_f32(float *dst, const uint8_t *src, float scale, size_t n, int width) {
    if (width < 0) {
        s_u8_to_f32(dst, src, scale, n);
    } else {
        s_u8_to_f32_w(dst, src, scale, n, width);
    }
}

// dst = src + bias, then max(., 0) as a mask when relu (lanes with x > 0 keep their bits,
// the rest become +0), for n floats.
static void s_bias_relu(float *dst, const float *src, float bias, int relu, size_t n) {
    const v4f vb = {bias, bias, bias, bias}, zero = {0, 0, 0, 0};
    size_t i = 0;
    if (relu) {
        for (; i + 4 <= n; i += 4) {
            v4f v = s_load4(src + i) + vb;
            s_store4(dst + i, (v4f)((v4i)v & (v4i)(v > zero)));
        }
        for (; i < n; i++) {
            float v = src[i] + bias;
            dst[i] = v > 0.0f ? v : 0.0f;
        }
        return;
    }
    for (; i + 4 <= n; i += 4) {
        s_store4(dst + i, s_load4(src + i) + vb);
    }
    for (; i < n; i++) {
        dst[i] = src[i] + bias;
    }
}

// ----------------------------------------------------------------------------
// the first layer's input: B rows of (H W C) -> (C x H x W x B)
//
// Each element is read once with the sample stride (H W C) and written once; the B reads of
// one (y, x, c) touch B cache lines that the next 63 elements of the row reuse.

// The transpose of a 16 x 16 block of bytes: on return r[j][i] is what r[i][j] was. Four
// rounds of interleaves (bytes, pairs, quads, halves), each one SSE2 punpck per vector.
static inline void s_transpose16(v16u8 r[16]) {
    const v16u8 lo8 = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23},
                hi8 = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    const v8i16 lo16 = {0, 8, 1, 9, 2, 10, 3, 11}, hi16 = {4, 12, 5, 13, 6, 14, 7, 15};
    const v4i lo32 = {0, 4, 1, 5}, hi32 = {2, 6, 3, 7};
    typedef int64_t v2i64 __attribute__((vector_size(16)));
    const v2i64 lo64 = {0, 2}, hi64 = {1, 3};
    v16u8 a[16], b[16], c[16];
    // a[k]: rows 2k, 2k+1 interleaved, columns 0-7 (k < 8) or 8-15 (k >= 8).
    for (int k = 0; k < 8; k++) {
        a[k] = __builtin_shuffle(r[2 * k], r[2 * k + 1], lo8);
        a[k + 8] = __builtin_shuffle(r[2 * k], r[2 * k + 1], hi8);
    }
    // b[h * 8 + q * 4 + k]: rows 4k..4k+3, columns 8h + 4q .. + 3, 4 bytes per column.
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 4; k++) {
            v8i16 x = (v8i16)a[h * 8 + 2 * k], y = (v8i16)a[h * 8 + 2 * k + 1];
            b[h * 8 + k] = (v16u8)__builtin_shuffle(x, y, lo16);
            b[h * 8 + 4 + k] = (v16u8)__builtin_shuffle(x, y, hi16);
        }
    }
    // c[g * 4 + m]: columns 4g + 2 (m & 1) and the next one, rows 8 (m >> 1) .. + 7, eight
    // bytes each, as the four row quads of group g (columns 4g..4g+3) combine two by two.
    for (int g = 0; g < 4; g++) {
        const v16u8 *q = &b[g * 4]; // rows 0-3, 4-7, 8-11, 12-15 of columns 4g..4g+3
        c[g * 4 + 0] = (v16u8)__builtin_shuffle((v4i)q[0], (v4i)q[1], lo32); // cols 0,1 rows 0-7
        c[g * 4 + 1] = (v16u8)__builtin_shuffle((v4i)q[0], (v4i)q[1], hi32); // cols 2,3 rows 0-7
        c[g * 4 + 2] = (v16u8)__builtin_shuffle((v4i)q[2], (v4i)q[3], lo32); // cols 0,1 rows 8-15
        c[g * 4 + 3] = (v16u8)__builtin_shuffle((v4i)q[2], (v4i)q[3], hi32); // cols 2,3 rows 8-15
    }
    // r[4g + j]: column 4g + j, rows 0-7 then 8-15.
    for (int g = 0; g < 4; g++) {
        const v16u8 *q = &c[g * 4];
        r[4 * g + 0] = (v16u8)__builtin_shuffle((v2i64)q[0], (v2i64)q[2], lo64);
        r[4 * g + 1] = (v16u8)__builtin_shuffle((v2i64)q[0], (v2i64)q[2], hi64);
        r[4 * g + 2] = (v16u8)__builtin_shuffle((v2i64)q[1], (v2i64)q[3], lo64);
        r[4 * g + 3] = (v16u8)__builtin_shuffle((v2i64)q[1], (v2i64)q[3], hi64);
    }
}

// uint8 rows to (C x H x W x B), as scaled floats (f32 = 1: t is float *) or as the bytes
// themselves (t is uint8_t *), in blocks of 16 row bytes x 16 samples: the 16 samples' bytes
// are loaded as vectors, transposed in registers, and each source byte's 16 samples leave
// as 16 contiguous elements. Row bytes outer, samples inner: the 16 output rows of a block
// of bytes are written front to back, and the B source lines read for it (8 KB at B = 128)
// serve the next three blocks from L1. (Samples outer wrote one line per 512 bytes all
// over the output, and took 1.5x the element-wise loop's time.) The element-wise loop this
// replaces read one byte per sample stride and converted it alone: Nature's 128 x 28 224
// bytes took 2.3-2.4 ms, twice per update. Leftover samples (B mod 16) and row bytes
// (H W C mod 16) go element-wise.
static void s_transpose_u8(void *t, int f32, const uint8_t *obs, float scale, const conv_shape_t *s,
                           int B) {
    const size_t O = conv_in_features(s), HW = (size_t)s->h * s->w, C = (size_t)s->c_in;
    const size_t Bz = (size_t)B, B16 = Bz / 16 * 16, O16 = O / 16 * 16;
    const v4f sc = {scale, scale, scale, scale};
    float *tf = t;
    uint8_t *tb = t;
    for (size_t j = 0; j < O16; j += 16) {
        size_t row[16]; // the output rows of source bytes j .. j + 15, in elements
        for (size_t i = 0; i < 16; i++) {
            row[i] = s_plane_pos(j + i, HW, C, s->frames) * Bz;
        }
        for (size_t b = 0; b < B16; b += 16) {
            v16u8 r[16];
            for (int i = 0; i < 16; i++) {
                memcpy(&r[i], obs + (b + (size_t)i) * O + j, sizeof r[i]);
            }
            s_transpose16(r);
            for (int i = 0; i < 16; i++) {
                if (f32) {
                    s_cvt16(tf + row[i] + b, r[i], sc);
                } else {
                    memcpy(tb + row[i] + b, &r[i], sizeof r[i]);
                }
            }
        }
    }
    // The rest: samples B16.. for every byte, and bytes O16.. for the blocked samples.
    for (size_t j = 0; j < O; j++) {
        size_t d = s_plane_pos(j, HW, C, s->frames) * Bz;
        for (size_t b = j < O16 ? B16 : 0; b < Bz; b++) {
            if (f32) {
                tf[d + b] = scale * (float)obs[b * O + j];
            } else {
                tb[d + b] = obs[b * O + j];
            }
        }
    }
}

void conv_transpose_u8(uint8_t *t, const uint8_t *obs, const conv_shape_t *s, int B) {
    s_transpose_u8(t, 0, obs, 1.0f, s, B);
}

void conv_relu_mask(float *dx, const float *act, size_t n) {
    const v4f zero = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4f a, g;
        memcpy(&a, act + i, sizeof a);
        memcpy(&g, dx + i, sizeof g);
        g = (v4f)((v4i)g & (v4i)(a > zero));
        memcpy(dx + i, &g, sizeof g);
    }
    for (; i < n; i++) {
        dx[i] = act[i] > 0.0f ? dx[i] : 0.0f;
    }
}

void conv_transpose_f32(float *t, const void *obs, int obs_u8, float scale, const conv_shape_t *s,
                        int B) {
    if (obs_u8) {
        s_transpose_u8(t, 1, obs, scale, s, B);
        return;
    }
    const size_t O = conv_in_features(s), HW = (size_t)s->h * s->w, C = (size_t)s->c_in;
    for (size_t j = 0; j < O; j++) {
        float *dst = t + s_plane_pos(j, HW, C, s->frames) * (size_t)B;
        const float *src = (const float *)obs + j;
        for (size_t b = 0; b < (size_t)B; b++) {
            dst[b] = scale * src[b * O];
        }
    }
}

// ----------------------------------------------------------------------------
// im2col / col2im of a chunk of output positions
//
// col row r = (c k + i) k + j (the PyTorch weight order within one output channel), column
// (p - p0) B + b, value = input pixel (c, oy s + i, ox s + j) of sample b, p = oy OW + ox.
// The positions of one output row in the chunk form a run: with stride 1 its pixels are
// adjacent in the input (one copy of run B elements), otherwise one copy of B per position.

// Copies n elements of the input at element offset off into dst as floats.
static inline void s_take(float *dst, const conv_input_t *in, size_t off, size_t n) {
    if (in->u8) {
        s_u8_to_f32(dst, (const uint8_t *)in->data + off, in->scale, n);
    } else {
        memcpy(dst, (const float *)in->data + off, n * sizeof(float));
    }
}

void conv_im2col(float *col, const conv_input_t *in, const conv_shape_t *s, int B, int p0, int p1) {
    const int P = s->oh * s->ow;
    APEX_ASSERT(B >= 1 && 0 <= p0 && p0 < p1 && p1 <= P);
    const size_t Bz = (size_t)B, plane = (size_t)s->h * s->w * Bz, st = (size_t)s->stride;
    float *dst = col;
    for (int c = 0; c < s->c_in; c++) {
        for (int i = 0; i < s->k; i++) {
            for (int j = 0; j < s->k; j++) { // row r = (c k + i) k + j: dst walks rows in order
                for (int p = p0; p < p1;) {
                    int oy = p / s->ow, ox = p % s->ow, run = APEX_MIN(s->ow - ox, p1 - p);
                    size_t off = (size_t)c * plane +
                                 ((size_t)(oy * s->stride + i) * s->w + ox * st + j) * Bz;
                    if (s->stride == 1) {
                        s_take(dst, in, off, (size_t)run * Bz);
                        dst += (size_t)run * Bz;
                    } else {
                        for (int q = 0; q < run; q++, dst += Bz) {
                            s_take(dst, in, off + (size_t)q * st * Bz, Bz);
                        }
                    }
                    p += run;
                }
            }
        }
    }
}

void conv_col2im_add(float *din, const float *dcol, const conv_shape_t *s, int B, int p0, int p1) {
    const int P = s->oh * s->ow;
    APEX_ASSERT(B >= 1 && 0 <= p0 && p0 < p1 && p1 <= P);
    const size_t Bz = (size_t)B, plane = (size_t)s->h * s->w * Bz, st = (size_t)s->stride;
    const float *src = dcol;
    for (int c = 0; c < s->c_in; c++) {
        for (int i = 0; i < s->k; i++) {
            for (int j = 0; j < s->k; j++) {
                for (int p = p0; p < p1;) {
                    int oy = p / s->ow, ox = p % s->ow, run = APEX_MIN(s->ow - ox, p1 - p);
                    float *dst = din + (size_t)c * plane +
                                 ((size_t)(oy * s->stride + i) * s->w + ox * st + j) * Bz;
                    if (s->stride == 1) {
                        s_add(dst, src, (size_t)run * Bz);
                        src += (size_t)run * Bz;
                    } else {
                        for (int q = 0; q < run; q++, src += Bz) {
                            s_add(dst + (size_t)q * st * Bz, src, Bz);
                        }
                    }
                    p += run;
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// forward / backward

// The forward of n_w weight sets stacked in w (n_w OC x K): per chunk, im2col, one GEMM
// into the chunk's output scratch, and bias (+ ReLU) while copying it out to outs[net].
static void s_forward(float *const *outs, const float *const *biases, int n_w, const float *w,
                      const conv_input_t *in, int relu, const conv_shape_t *s, int B,
                      const s_scratch_t *sc) {
    int K, N;
    s_dims(s, B, &K, &N);
    const int P = s->oh * s->ow, pc = conv_chunk_positions(s, B), OC = s->c_out;
    for (int p0 = 0; p0 < P; p0 += pc) {
        int p1 = APEX_MIN(p0 + pc, P), n = (p1 - p0) * B;
        conv_im2col(sc->col, in, s, B, p0, p1);
        blas_gemm_with(s->gemm, sc->out, w, sc->col, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS,
                       n_w * OC, n, K);
        for (int net = 0; net < n_w; net++) {
            for (int oc = 0; oc < OC; oc++) {
                s_bias_relu(outs[net] + (size_t)oc * N + (size_t)p0 * B,
                            sc->out + ((size_t)net * OC + oc) * n, biases[net][oc], relu,
                            (size_t)n);
            }
        }
    }
}

void conv_forward(float *out, const conv_input_t *in, const float *w, const float *b, int relu,
                  const conv_shape_t *s, int B, float *scratch) {
    s_scratch_t sc;
    s_scratch_layout(s, B, scratch, &sc);
    float *outs[1] = {out};
    const float *biases[1] = {b};
    s_forward(outs, biases, 1, w, in, relu, s, B, &sc);
}

void conv_forward2(float *out_a, float *out_b, const conv_input_t *in, const float *w_a,
                   const float *b_a, const float *w_b, const float *b_b, int relu,
                   const conv_shape_t *s, int B, float *scratch) {
    s_scratch_t sc;
    s_scratch_layout(s, B, scratch, &sc);
    size_t nw = (size_t)s->c_out * s->c_in * s->k * s->k;
    memcpy(sc.w2, w_a, nw * sizeof(float));
    memcpy(sc.w2 + nw, w_b, nw * sizeof(float));
    float *outs[2] = {out_a, out_b};
    const float *biases[2] = {b_a, b_b};
    s_forward(outs, biases, 2, sc.w2, in, relu, s, B, &sc);
}

void conv_backward(float *din, float *dw, float *db, const float *dout, const conv_input_t *in,
                   const float *w, const conv_shape_t *s, int B, float *scratch) {
    int K, N;
    s_dims(s, B, &K, &N);
    s_scratch_t sc;
    s_scratch_layout(s, B, scratch, &sc);
    const int P = s->oh * s->ow, pc = conv_chunk_positions(s, B), OC = s->c_out;
    const blas_gemm_fn gemm = s->gemm ? s->gemm : blas_sgemm_ld;
    for (int oc = 0; oc < OC; oc++) {
        db[oc] += s_sum(dout + (size_t)oc * N, (size_t)N);
    }
    if (din) {
        memset(din, 0, conv_in_features(s) * (size_t)B * sizeof(float));
    }
    for (int p0 = 0; p0 < P; p0 += pc) {
        int p1 = APEX_MIN(p0 + pc, P), n = (p1 - p0) * B;
        const float *dchunk = dout + (size_t)p0 * B; // (OC x n) with row stride N
        conv_im2col(sc.col, in, s, B, p0, p1);
        // dW^T (K x OC) += col (K x n) dout_chunk^T: sgemm NT, the first chunk overwrites.
        gemm(sc.dwt, OC, sc.col, n, dchunk, N, 1.0f, p0 == 0 ? 0.0f : 1.0f, BLAS_NO_TRANS,
             BLAS_TRANS, K, OC, n);
        if (din) {
            // dCol (K x n) = W^T (K x OC) dout_chunk (OC x n): sgemm TN into the col chunk,
            // whose last reader was the dW product; then scatter it back to pixels.
            gemm(sc.col, n, w, K, dchunk, N, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, K, n, OC);
            conv_col2im_add(din, sc.col, s, B, p0, p1);
        }
    }
    for (int oc = 0; oc < OC; oc++) {
        for (int r = 0; r < K; r++) {
            dw[(size_t)oc * K + r] += sc.dwt[(size_t)r * OC + oc];
        }
    }
}
