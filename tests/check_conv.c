// check_conv.c: conv2d kernels (model/conv.c) against an independent direct convolution in
// double precision, their gradients against central differences of it, and a whole conv body
// against PyTorch (tests/fixtures/conv_torch.bin, written by gen_conv_torch.py) (STYLE S22).
//
// The reference works in PyTorch's NCHW order with plain loops; it shares nothing with
// conv.c but conv_shape_t's OH/OW. Layout helpers convert between NCHW (reference, torch)
// and conv.c's (C x H x W x B) activations, whose (features x B) reading is the flatten.
#include "check_apex.h"

#include "apex.h"
#include "blas.h"
#include "conv.h"
#include "cpu.h"
#include "rng.h"
#include "xalloc.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Float kernels vs the double reference or finite differences (which are exact for these
// losses up to double rounding where L is linear in the variable): float accumulation over
// at most a few thousand terms stays far inside this.
#define S_RTOL 1e-4
#define S_ATOL 1e-5

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

static conv_shape_t s_shape(int c_in, int h, int w, int c_out, int k, int stride) {
    conv_shape_t s;
    char why[128];
    ck_assert_msg(conv_shape_init(&s, c_in, h, w, c_out, k, stride, why, sizeof why) == APEX_OK,
                  "%s", why);
    return s;
}

static size_t s_nw(const conv_shape_t *s) { return (size_t)s->c_out * s->c_in * s->k * s->k; }

static float *s_scratch_alloc(const conv_shape_t *s, int B) {
    return xaligned_alloc(conv_scratch_bytes(s, B));
}

static conv_input_t s_in_f32(const float *x) { return (conv_input_t){x, 0, 1.0f}; }

// Positions per chunk the tests run every case with: the default (one chunk for these small
// shapes), and small ones that cut the runs of output rows at every place.
static const int s_chunks[] = {0, 1, 2, 3, 5};

// ----------------------------------------------------------------------------
// the reference (double, NCHW) and layout helpers

// out (B, OC, OH, OW) = conv(x (B, C, H, W)) + b: the direct 7-loop convolution.
static void s_ref_conv(double *out, const double *x, const double *w, const double *b,
                       const conv_shape_t *s, int B) {
    int C = s->c_in, H = s->h, W = s->w, k = s->k;
    for (int n = 0; n < B; n++) {
        for (int o = 0; o < s->c_out; o++) {
            for (int oy = 0; oy < s->oh; oy++) {
                for (int ox = 0; ox < s->ow; ox++) {
                    double acc = b[o];
                    for (int c = 0; c < C; c++) {
                        for (int i = 0; i < k; i++) {
                            for (int j = 0; j < k; j++) {
                                int y = oy * s->stride + i, x_ = ox * s->stride + j;
                                acc += w[((o * C + c) * k + i) * k + j] *
                                       x[((n * C + c) * H + y) * W + x_];
                            }
                        }
                    }
                    out[((n * s->c_out + o) * s->oh + oy) * s->ow + ox] = acc;
                }
            }
        }
    }
}

// conv.c's layout (C x HW x B) -> NCHW double.
static void s_chwb_to_nchw(double *dst, const float *src, int C, int HW, int B) {
    for (int c = 0; c < C; c++) {
        for (int p = 0; p < HW; p++) {
            for (int n = 0; n < B; n++) {
                dst[((size_t)n * C + c) * HW + p] = src[((size_t)c * HW + p) * B + n];
            }
        }
    }
}

// NCHW float (torch's order) -> conv.c's layout.
static void s_nchw_to_chwb(float *dst, const float *src, int C, int HW, int B) {
    for (int c = 0; c < C; c++) {
        for (int p = 0; p < HW; p++) {
            for (int n = 0; n < B; n++) {
                dst[((size_t)c * HW + p) * B + n] = src[((size_t)n * C + c) * HW + p];
            }
        }
    }
}

// Observation rows (B x H W C, channels-last) times scale -> NCHW double; and -> conv.c's
// (C x HW x B) float layout, computed as scale * (float)v exactly as the first layer does.
static void s_obs_to_nchw(double *dst, const uint8_t *obs, float scale, const conv_shape_t *s,
                          int B) {
    int C = s->c_in, HW = s->h * s->w;
    for (int n = 0; n < B; n++) {
        for (int p = 0; p < HW; p++) {
            for (int c = 0; c < C; c++) {
                dst[((size_t)n * C + c) * HW + p] = (double)scale *
                                                    obs[((size_t)n * HW + p) * C + c];
            }
        }
    }
}

static void s_obs_to_chwb(float *dst, const uint8_t *obs, float scale, const conv_shape_t *s,
                          int B) {
    int C = s->c_in, HW = s->h * s->w;
    for (int n = 0; n < B; n++) {
        for (int p = 0; p < HW; p++) {
            for (int c = 0; c < C; c++) {
                dst[((size_t)c * HW + p) * B + n] = scale *
                                                    (float)obs[((size_t)n * HW + p) * C + c];
            }
        }
    }
}

static double *s_to_double(const float *x, size_t n) {
    double *d = xmalloc(n * sizeof(double) + 1);
    for (size_t i = 0; i < n; i++) {
        d[i] = x[i];
    }
    return d;
}

static void s_relu(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i] > 0.0f ? src[i] : 0.0f;
    }
}

// d *= relu'(pre)
static void s_relu_mask(float *d, const float *pre, size_t n) {
    for (size_t i = 0; i < n; i++) {
        d[i] = pre[i] > 0.0f ? d[i] : 0.0f;
    }
}

// ----------------------------------------------------------------------------
// shapes: kernel 1, 2, 3, 4, 8; stride 1, 2, 4 (k < s too); C_in 1, 2, 3, 4; non-square
// inputs; windows that leave the last rows/columns unread; batch 1 and > 1.

typedef struct {
    int c_in, h, w, c_out, k, stride, B;
} s_case_t;

static const s_case_t s_cases[] = {
    {1, 5, 5, 2, 1, 1, 1},   {3, 6, 7, 2, 2, 2, 3},   {4, 7, 5, 3, 3, 1, 2},
    {1, 13, 10, 2, 8, 4, 2}, {3, 9, 9, 2, 3, 2, 1},   {4, 10, 10, 3, 3, 1, 4},
    {2, 8, 11, 3, 2, 4, 3},  {4, 12, 12, 2, 8, 4, 2}, {2, 5, 9, 2, 4, 1, 2},
};

static conv_shape_t s_case_shape(const s_case_t *c) {
    return s_shape(c->c_in, c->h, c->w, c->c_out, c->k, c->stride);
}

// ----------------------------------------------------------------------------

START_TEST(test_shape) {
    conv_shape_t s = s_shape(4, 84, 84, 32, 8, 4);
    ck_assert_int_eq(s.oh, 20);
    ck_assert_int_eq(s.ow, 20);
    ck_assert_uint_eq(conv_num_params(&s), 32 * 4 * 64 + 32);
    ck_assert_uint_eq(conv_in_features(&s), 84 * 84 * 4);
    ck_assert_uint_eq(conv_out_features(&s), 32 * 400);
    // Chunks of CONV_CHUNK_BYTES (64 KB) of col: 4 positions of K B = 256 x 16 floats, 64 of
    // 256 x 1; at least 1 (B = 128: one position of 128 KB).
    ck_assert_int_eq(conv_chunk_positions(&s, 16), 4);
    ck_assert_int_eq(conv_chunk_positions(&s, 1), 64);
    ck_assert_int_eq(conv_chunk_positions(&s, 128), 1);
    ck_assert_int_eq(conv_chunk_positions(&s, 4096), 1);
    ck_assert_uint_ge(conv_scratch_bytes(&s, 128), 256u * 128 * sizeof(float));
    ck_assert_uint_ge(conv_scratch_bytes(&s, 4096), 256u * 4096 * sizeof(float));
    s.chunk = 7;
    ck_assert_int_eq(conv_chunk_positions(&s, 128), 7);
    s.chunk = 1000;
    ck_assert_int_eq(conv_chunk_positions(&s, 128), 400); // at most P
    conv_shape_t tiny = s_shape(1, 4, 4, 1, 2, 1);        // K = 4, P = 9
    ck_assert_int_eq(conv_chunk_positions(&tiny, 1), 9);
    s = s_shape(2, 9, 7, 3, 4, 3); // floor: (9 - 4) / 3 + 1 = 2, (7 - 4) / 3 + 1 = 2
    ck_assert_int_eq(s.oh, 2);
    ck_assert_int_eq(s.ow, 2);
    s = s_shape(1, 3, 3, 1, 3, 5); // one window; the stride never applies
    ck_assert_int_eq(s.oh, 1);
    ck_assert_int_eq(s.ow, 1);
    char why[128] = "";
    ck_assert_int_eq(conv_shape_init(&s, 4, 10, 6, 16, 7, 1, why, sizeof why), APEX_EINVAL);
    ck_assert(strstr(why, "kernel") != NULL);
    ck_assert_int_eq(conv_shape_init(&s, 0, 10, 10, 16, 3, 1, NULL, 0), APEX_EINVAL);
    ck_assert_int_eq(conv_shape_init(&s, 4, 10, 10, 0, 3, 1, NULL, 0), APEX_EINVAL);
    ck_assert_int_eq(conv_shape_init(&s, 4, 10, 10, 16, 3, 0, NULL, 0), APEX_EINVAL);
    ck_assert_int_eq(conv_shape_init(&s, 4, 10, 10, 16, 0, 1, NULL, 0), APEX_EINVAL);
    ck_assert_int_eq(conv_shape_init(&s, 4096, 64, 64, 16, 64, 1, NULL, 0), APEX_EINVAL);
}
END_TEST

START_TEST(test_init_random) {
    conv_shape_t s = s_shape(4, 10, 10, 16, 3, 1);
    float w[16 * 36], b[16];
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_NET_INIT, 0);
    conv_init_random(w, b, &s, &r);
    double bound = 1.0 / 6.0, maxabs = 0; // 1/sqrt(4 * 3 * 3)
    for (size_t i = 0; i < APEX_ARRAY_LEN(w); i++) {
        maxabs = fmax(maxabs, fabs(w[i]));
    }
    for (int i = 0; i < 16; i++) {
        ck_assert(fabs(b[i]) <= bound);
    }
    ck_assert(maxabs <= bound && maxabs > 0.9 * bound);
}
END_TEST

// Inner-layer forward against the direct convolution, every shape and chunking; with relu
// set, exactly the ReLU of the output without.
START_TEST(test_forward_inner) {
    rng_t r;
    rng_init_stream(&r, 11, RNG_ROLE_TEST, 0);
    for (size_t t = 0; t < APEX_ARRAY_LEN(s_cases); t++) {
        const s_case_t *cs = &s_cases[t];
        conv_shape_t s = s_case_shape(cs);
        int B = cs->B, HW = s.h * s.w, OHW = s.oh * s.ow;
        size_t nin = conv_in_features(&s) * B, nout = conv_out_features(&s) * B;
        float *in = xmalloc(nin * sizeof(float)), *out = xmalloc(nout * sizeof(float));
        float *out_r = xmalloc(nout * sizeof(float)), *relu = xmalloc(nout * sizeof(float));
        float *w = xmalloc(s_nw(&s) * sizeof(float)), b[8];
        s_fill(in, nin, &r, 1.0f);
        conv_init_random(w, b, &s, &r);
        double *x = xmalloc(nin * sizeof(double)), *ref = xmalloc(nout * sizeof(double));
        double *got = xmalloc(nout * sizeof(double)), *wd = s_to_double(w, s_nw(&s));
        double *bd = s_to_double(b, (size_t)s.c_out);
        s_chwb_to_nchw(x, in, s.c_in, HW, B);
        s_ref_conv(ref, x, wd, bd, &s, B);
        conv_input_t cin = s_in_f32(in);
        for (size_t k = 0; k < APEX_ARRAY_LEN(s_chunks); k++) {
            s.chunk = s_chunks[k];
            float *scratch = s_scratch_alloc(&s, B);
            conv_forward(out, &cin, w, b, 0, &s, B, scratch);
            s_chwb_to_nchw(got, out, s.c_out, OHW, B);
            ck_assert_msg(check_close_d(got, ref, nout, S_RTOL, S_ATOL, "out"), "case %zu chunk %d",
                          t, s.chunk);
            conv_forward(out_r, &cin, w, b, 1, &s, B, scratch);
            s_relu(relu, out, nout);
            ck_assert_int_eq(memcmp(out_r, relu, nout * sizeof(float)), 0);
            xfree(scratch);
        }
        xfree(in), xfree(out), xfree(out_r), xfree(relu), xfree(w), xfree(x), xfree(ref);
        xfree(got), xfree(wd), xfree(bd);
    }
}
END_TEST

// L = sum c . out in double (NCHW), for the finite differences.
static double s_ref_loss(const conv_shape_t *s, const double *x, const double *w, const double *b,
                         const double *c, int B) {
    size_t n = conv_out_features(s) * B;
    double *out = xmalloc(n * sizeof(double)), L = 0;
    s_ref_conv(out, x, w, b, s, B);
    for (size_t i = 0; i < n; i++) {
        L += c[i] * out[i];
    }
    xfree(out);
    return L;
}

// Central difference of s_ref_loss in variable v[i] (one of x, w, b).
static double s_fd(double *v, size_t i, const conv_shape_t *s, const double *x, const double *w,
                   const double *b, const double *c, int B) {
    const double h = 1e-3; // L is linear in every single variable: any h is exact
    double keep = v[i];
    v[i] = keep + h;
    double lp = s_ref_loss(s, x, w, b, c, B);
    v[i] = keep - h;
    double lm = s_ref_loss(s, x, w, b, c, B);
    v[i] = keep;
    return (lp - lm) / (2 * h);
}

// Inner-layer backward (dW, db, dX) against central differences, every shape. dw and db
// start at 0.5 to show that backward accumulates; din is filled with garbage first to show
// that it is overwritten. Every other chunking gives the same gradients up to rounding.
START_TEST(test_backward_inner_fd) {
    rng_t r;
    rng_init_stream(&r, 12, RNG_ROLE_TEST, 0);
    for (size_t t = 0; t < APEX_ARRAY_LEN(s_cases); t++) {
        const s_case_t *cs = &s_cases[t];
        conv_shape_t s = s_case_shape(cs);
        int B = cs->B, HW = s.h * s.w, OHW = s.oh * s.ow;
        size_t nin = conv_in_features(&s) * B, nout = conv_out_features(&s) * B, nw = s_nw(&s);
        float *in = xmalloc(nin * sizeof(float));
        float *dout = xmalloc(nout * sizeof(float)), *din = xmalloc(nin * sizeof(float));
        float *din2 = xmalloc(nin * sizeof(float)), *w = xmalloc(nw * sizeof(float));
        float *dw = xmalloc(nw * sizeof(float)), *dw2 = xmalloc(nw * sizeof(float)), b[8], db[8];
        float db2[8], *scratch = s_scratch_alloc(&s, B);
        s_fill(in, nin, &r, 1.0f);
        s_fill(dout, nout, &r, 1.0f);
        conv_init_random(w, b, &s, &r);
        for (size_t i = 0; i < nw; i++) {
            dw[i] = 0.5f;
        }
        for (int i = 0; i < s.c_out; i++) {
            db[i] = 0.5f;
        }
        for (size_t i = 0; i < nin; i++) {
            din[i] = NAN;
        }
        conv_input_t cin = s_in_f32(in);
        conv_backward(din, dw, db, dout, &cin, w, &s, B, scratch);

        double *x = xmalloc(nin * sizeof(double)), *c = xmalloc(nout * sizeof(double));
        double *wd = s_to_double(w, nw), *bd = s_to_double(b, (size_t)s.c_out);
        s_chwb_to_nchw(x, in, s.c_in, HW, B);
        s_chwb_to_nchw(c, dout, s.c_out, OHW, B);
        double *num = xmalloc((nin + nw + 8) * sizeof(double));
        double *ana = xmalloc((nin + nw + 8) * sizeof(double));
        for (size_t i = 0; i < nw; i++) {
            num[i] = s_fd(wd, i, &s, x, wd, bd, c, B);
            ana[i] = (double)dw[i] - 0.5;
        }
        ck_assert_msg(check_close_d(ana, num, nw, S_RTOL, S_ATOL, "dw"), "case %zu", t);
        for (int i = 0; i < s.c_out; i++) {
            num[i] = s_fd(bd, (size_t)i, &s, x, wd, bd, c, B);
            ana[i] = (double)db[i] - 0.5;
        }
        ck_assert_msg(check_close_d(ana, num, (size_t)s.c_out, S_RTOL, S_ATOL, "db"), "case %zu",
                      t);
        s_chwb_to_nchw(ana, din, s.c_in, HW, B);
        for (size_t i = 0; i < nin; i++) {
            num[i] = s_fd(x, i, &s, x, wd, bd, c, B);
        }
        ck_assert_msg(check_close_d(ana, num, nin, S_RTOL, S_ATOL, "dx"), "case %zu", t);

        for (size_t k = 1; k < APEX_ARRAY_LEN(s_chunks); k++) {
            conv_shape_t sk = s;
            sk.chunk = s_chunks[k];
            float *sc = s_scratch_alloc(&sk, B);
            for (size_t i = 0; i < nw; i++) {
                dw2[i] = 0.5f;
            }
            for (int i = 0; i < s.c_out; i++) {
                db2[i] = 0.5f;
            }
            conv_backward(din2, dw2, db2, dout, &cin, w, &sk, B, sc);
            ck_assert_msg(check_close_f(dw2, dw, nw, 1e-5, 1e-6, "dw"), "case %zu chunk %d", t,
                          sk.chunk);
            ck_assert_msg(check_close_f(db2, db, (size_t)s.c_out, 1e-5, 1e-6, "db"), "case %zu", t);
            ck_assert_msg(check_close_f(din2, din, nin, 1e-5, 1e-6, "dx"), "case %zu chunk %d", t,
                          sk.chunk);
            xfree(sc);
        }
        xfree(in), xfree(dout), xfree(din), xfree(din2), xfree(w), xfree(dw), xfree(dw2);
        xfree(scratch), xfree(x), xfree(c), xfree(wd), xfree(bd), xfree(num), xfree(ana);
    }
}
END_TEST

// The uint8 transposes (to scaled floats, and to bytes) work in blocks of 16 samples x 16 row
// bytes with element-wise leftovers: every element lands at [c][y][x][b], for batches and
// row lengths on both
// sides of the block edges (B = 1, 15, 16, 17, 40; H W C = 2 x 3 x 1 = 6, 4 x 4 x 1 = 16,
// 5 x 5 x 3 = 75, 10 x 10 x 4 = 400, 9 x 7 x 5 = 315), on random bytes of all 256 values.
START_TEST(test_transpose_u8_blocks) {
    rng_t r;
    rng_init_stream(&r, 29, RNG_ROLE_TEST, 0);
    static const int batches[] = {1, 15, 16, 17, 40};
    static const int shapes[][3] = {{2, 3, 1}, {4, 4, 1}, {5, 5, 3}, {10, 10, 4}, {9, 7, 5}};
    for (size_t si = 0; si < APEX_ARRAY_LEN(shapes); si++) {
        int h = shapes[si][0], w = shapes[si][1], C = shapes[si][2], HW = h * w;
        conv_shape_t s = s_shape(C, h, w, 2, 1, 1);
        for (size_t bi = 0; bi < APEX_ARRAY_LEN(batches); bi++) {
            int B = batches[bi];
            float scale = bi % 2 ? 1.0f : 1.0f / 255.0f;
            size_t n = conv_in_features(&s) * (size_t)B;
            // The byte transpose runs on two outputs prefilled 0x00 and 0xff: an element it
            // did not write keeps one of them and differs from obs there.
            uint8_t *obs = xmalloc(n), *tb0 = xmalloc(n), *tb1 = xmalloc(n);
            float *t = xmalloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) {
                obs[i] = (uint8_t)rng_below(&r, 256);
                t[i] = -1.0f; // every element must be written
            }
            conv_transpose_f32(t, obs, 1, scale, &s, B);
            memset(tb0, 0x00, n), memset(tb1, 0xff, n);
            conv_transpose_u8(tb0, obs, &s, B);
            conv_transpose_u8(tb1, obs, &s, B);
            for (int b = 0; b < B; b++) {
                for (int p = 0; p < HW; p++) {
                    for (int c = 0; c < C; c++) {
                        size_t src = ((size_t)b * HW + p) * C + c,
                               dst = ((size_t)c * HW + p) * B + b;
                        ck_assert_uint_eq(tb0[dst], obs[src]);
                        ck_assert_uint_eq(tb1[dst], obs[src]);
                        ck_assert_msg(t[dst] == scale * (float)obs[src],
                                      "shape %zu B %d: b %d p %d c %d: %g, want %g", si, B, b, p, c,
                                      (double)t[dst], (double)(scale * (float)obs[src]));
                    }
                }
            }
            xfree(obs), xfree(t), xfree(tb0), xfree(tb1);
        }
    }
}
END_TEST

// Frame-major rows ([env] frame_stack, conv_shape_t.frames = F): F frames of H W (C/F) back
// to back transpose to the same planes as the channels-last row holding the same tensor
// (pixel p's channel f C/F + c is frame f's channel c), in every path (bytes, bytes to
// floats, floats), for batches on both sides of the 16-sample blocks; a frame count that does
// not divide the channels is refused.
START_TEST(test_transpose_frames) {
    rng_t r;
    rng_init_stream(&r, 41, RNG_ROLE_TEST, 0);
    const int cases[][3] = {{2, 1, 3}, {4, 1, 20}, {2, 2, 17}, {3, 2, 5}}; // F, C/F, B
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int F = cases[k][0], CF = cases[k][1], B = cases[k][2], H = 5, W = 7;
        const int C = F * CF;
        conv_shape_t fm, cl;
        ck_assert_int_eq(conv_shape_init(&fm, C, H, W, 4, 3, 1, NULL, 0), APEX_OK);
        cl = fm;
        ck_assert_int_eq(conv_shape_frames(&fm, F, NULL, 0), APEX_OK);
        const size_t O = (size_t)H * W * C, HW = (size_t)H * W, n = O * (size_t)B;
        uint8_t *a = xmalloc(n), *b = xmalloc(n), *ta = xmalloc(n), *tb = xmalloc(n);
        float *fa = xmalloc(n * 4), *fb = xmalloc(n * 4), *ga = xmalloc(n * 4),
              *gb = xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) {
            a[i] = (uint8_t)(rng_next_u64(&r) >> 56);
        }
        // b: the same tensor channels last.
        for (int s = 0; s < B; s++) {
            for (int f = 0; f < F; f++) {
                for (size_t p = 0; p < HW; p++) {
                    for (int c = 0; c < CF; c++) {
                        size_t src = (size_t)s * O + (size_t)f * HW * CF + p * CF + c;
                        size_t dst = (size_t)s * O + p * C + (size_t)f * CF + c;
                        b[dst] = a[src];
                        fa[src] = (float)a[src] - 100.0f;
                        fb[dst] = fa[src];
                    }
                }
            }
        }
        conv_transpose_u8(ta, a, &fm, B);
        conv_transpose_u8(tb, b, &cl, B);
        ck_assert_msg(memcmp(ta, tb, n) == 0, "bytes, case %zu", k);
        conv_transpose_f32(ga, a, 1, 0.5f, &fm, B);
        conv_transpose_f32(gb, b, 1, 0.5f, &cl, B);
        ck_assert_msg(memcmp(ga, gb, n * 4) == 0, "bytes to floats, case %zu", k);
        conv_transpose_f32(ga, fa, 0, 2.0f, &fm, B);
        conv_transpose_f32(gb, fb, 0, 2.0f, &cl, B);
        ck_assert_msg(memcmp(ga, gb, n * 4) == 0, "floats, case %zu", k);
        xfree(a), xfree(b), xfree(ta), xfree(tb), xfree(fa), xfree(fb), xfree(ga), xfree(gb);
    }
    conv_shape_t s;
    char why[128] = "";
    ck_assert_int_eq(conv_shape_init(&s, 6, 5, 5, 4, 3, 1, NULL, 0), APEX_OK);
    ck_assert_int_eq(conv_shape_frames(&s, 4, why, sizeof why), APEX_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "4 frames do not divide the 6 input channels"));
    ck_assert_int_eq(conv_shape_frames(&s, 7, NULL, 0), APEX_EINVAL);
    ck_assert_int_eq(conv_shape_frames(&s, 3, NULL, 0), APEX_OK);
}
END_TEST

// First layer: the transposes put sample b's pixel (y, x, c) at [c][y][x][b]; uint8 rows and
// float32 rows holding the same values give the same bits, and so does the inner-layer entry
// on the same pixels moved to (C x HW x B) by hand; all agree with the direct convolution;
// backward with din = NULL gives dW, db (FD), for every chunking.
// The byte-to-float conversion on every vector width this CPU has (im2col uses the widest):
// each n from 0 to 70 (the 16- and 8-wide loops and their tails) at offsets 0-3, against the
// scalar expression bit for bit, and nothing written past n.
START_TEST(test_u8_to_f32_widths) {
    cpu_features_t f;
    cpu_detect(&f);
    int widths = f.avx512f ? 3 : f.avx2 ? 2 : 1;
    uint8_t src[80];
    float dst[80];
    for (int i = 0; i < 80; i++) {
        src[i] = (uint8_t)(i * 37 + 11);
    }
    const float scales[] = {1.0f, 1.0f / 255.0f, 0.37f};
    for (int w = 0; w < widths; w++) {
        for (size_t k = 0; k < APEX_ARRAY_LEN(scales); k++) {
            for (size_t n = 0; n <= 70; n++) {
                for (size_t off = 0; off < 4; off++) {
                    for (int i = 0; i < 80; i++) {
                        dst[i] = -1.0f;
                    }
                    conv_u8_to_f32(dst + off, src + off, scales[k], n, w);
                    for (size_t i = 0; i < 80; i++) {
                        float want = i >= off && i < off + n ? scales[k] * (float)src[i] : -1.0f;
                        ck_assert_msg(dst[i] == want, "width %d scale %g n %zu off %zu: [%zu] %g",
                                      w, (double)scales[k], n, off, i, (double)dst[i]);
                    }
                }
            }
        }
    }
    if (widths < 3) {
        fprintf(stderr, "check_conv: no AVX-512%s here: those widths not run\n",
                widths < 2 ? " or AVX2" : "");
    }
}
END_TEST

START_TEST(test_first_layer) {
    rng_t r;
    rng_init_stream(&r, 13, RNG_ROLE_TEST, 0);
    const float scales[] = {1.0f, 1.0f / 255.0f, 0.37f};
    for (size_t t = 0; t < APEX_ARRAY_LEN(s_cases); t++) {
        const s_case_t *cs = &s_cases[t];
        conv_shape_t s = s_case_shape(cs);
        int B = cs->B, OHW = s.oh * s.ow, HW = s.h * s.w, C = s.c_in;
        float scale = scales[t % APEX_ARRAY_LEN(scales)];
        size_t nin = conv_in_features(&s) * B, nout = conv_out_features(&s) * B, nw = s_nw(&s);
        uint8_t *obs = xmalloc(nin), *t_u8 = xmalloc(nin);
        float *obs_f = xmalloc(nin * sizeof(float)), *in = xmalloc(nin * sizeof(float));
        float *t_f32 = xmalloc(nin * sizeof(float));
        float *o_u8 = xmalloc(nout * sizeof(float)), *o_f32 = xmalloc(nout * sizeof(float));
        float *o_in = xmalloc(nout * sizeof(float)), *w = xmalloc(nw * sizeof(float)), b[8];
        for (size_t i = 0; i < nin; i++) {
            obs[i] = (uint8_t)rng_below(&r, 256);
            obs_f[i] = (float)obs[i];
        }
        conv_transpose_u8(t_u8, obs, &s, B);
        conv_transpose_f32(t_f32, obs_f, 0, scale, &s, B);
        for (int n = 0; n < B; n++) {
            for (int p = 0; p < HW; p++) {
                for (int c = 0; c < C; c++) {
                    size_t src = ((size_t)n * HW + p) * C + c, dst = ((size_t)c * HW + p) * B + n;
                    ck_assert_uint_eq(t_u8[dst], obs[src]);
                    ck_assert(t_f32[dst] == scale * obs_f[src]);
                }
            }
        }
        conv_init_random(w, b, &s, &r);
        conv_input_t in_u8 = {t_u8, 1, scale}, in_f32 = s_in_f32(t_f32), in_hand = s_in_f32(in);
        s_obs_to_chwb(in, obs, scale, &s, B);
        double *x = xmalloc(nin * sizeof(double)), *ref = xmalloc(nout * sizeof(double));
        double *got = xmalloc(nout * sizeof(double)), *wd = s_to_double(w, nw);
        double *bd = s_to_double(b, (size_t)s.c_out);
        s_obs_to_nchw(x, obs, scale, &s, B);
        s_ref_conv(ref, x, wd, bd, &s, B);
        float *dout = xmalloc(nout * sizeof(float)), *dw = xmalloc(nw * sizeof(float)), db[8];
        s_fill(dout, nout, &r, 1.0f);
        double *c = xmalloc(nout * sizeof(double)), *num = xmalloc((nw + 8) * sizeof(double));
        double *ana = xmalloc((nw + 8) * sizeof(double));
        s_chwb_to_nchw(c, dout, s.c_out, OHW, B);
        for (size_t i = 0; i < nw; i++) {
            num[i] = s_fd(wd, i, &s, x, wd, bd, c, B);
        }
        for (int i = 0; i < s.c_out; i++) {
            num[nw + i] = s_fd(bd, (size_t)i, &s, x, wd, bd, c, B);
        }
        for (size_t k = 0; k < APEX_ARRAY_LEN(s_chunks); k++) {
            s.chunk = s_chunks[k];
            float *scratch = s_scratch_alloc(&s, B);
            conv_forward(o_u8, &in_u8, w, b, 0, &s, B, scratch);
            conv_forward(o_f32, &in_f32, w, b, 0, &s, B, scratch);
            conv_forward(o_in, &in_hand, w, b, 0, &s, B, scratch);
            ck_assert_int_eq(memcmp(o_u8, o_f32, nout * sizeof(float)), 0);
            ck_assert_int_eq(memcmp(o_u8, o_in, nout * sizeof(float)), 0);
            s_chwb_to_nchw(got, o_u8, s.c_out, OHW, B);
            ck_assert_msg(check_close_d(got, ref, nout, S_RTOL, S_ATOL, "out"), "case %zu chunk %d",
                          t, s.chunk);
            // Backward of the first layer: dout = c, no din.
            memset(dw, 0, nw * sizeof(float));
            memset(db, 0, sizeof db);
            conv_backward(NULL, dw, db, dout, &in_u8, w, &s, B, scratch);
            for (size_t i = 0; i < nw; i++) {
                ana[i] = dw[i];
            }
            for (int i = 0; i < s.c_out; i++) {
                ana[nw + i] = db[i];
            }
            ck_assert_msg(check_close_d(ana, num, nw + s.c_out, S_RTOL, S_ATOL, "dw,db"),
                          "case %zu chunk %d", t, s.chunk);
            xfree(scratch);
        }
        xfree(obs), xfree(t_u8), xfree(obs_f), xfree(in), xfree(t_f32), xfree(o_u8);
        xfree(o_f32), xfree(o_in), xfree(w), xfree(x), xfree(ref), xfree(got), xfree(wd);
        xfree(bd), xfree(dout), xfree(dw), xfree(c), xfree(num), xfree(ana);
    }
}
END_TEST

// A batch's columns are independent: each sample run alone (B = 1) gives its slice of the
// batched run (each output is one dot product over K; the GEMM's kernel may differ with the
// shape, so up to rounding).
START_TEST(test_batch_independent) {
    rng_t r;
    rng_init_stream(&r, 14, RNG_ROLE_TEST, 0);
    conv_shape_t s = s_shape(3, 11, 9, 4, 3, 2);
    enum { B = 5 };
    size_t O = conv_in_features(&s), F = conv_out_features(&s);
    uint8_t obs[B * 11 * 9 * 3], t_b[B * 11 * 9 * 3], t_1[11 * 9 * 3];
    float w[4 * 27], b[4], out[B * 4 * 5 * 4], one[4 * 5 * 4];
    float *scratch = s_scratch_alloc(&s, B);
    for (size_t i = 0; i < B * O; i++) {
        obs[i] = (uint8_t)rng_below(&r, 256);
    }
    conv_init_random(w, b, &s, &r);
    conv_transpose_u8(t_b, obs, &s, B);
    conv_input_t in_b = {t_b, 1, 1.0f / 255.0f}, in_1 = {t_1, 1, 1.0f / 255.0f};
    conv_forward(out, &in_b, w, b, 1, &s, B, scratch);
    for (int n = 0; n < B; n++) {
        conv_transpose_u8(t_1, obs + n * O, &s, 1);
        conv_forward(one, &in_1, w, b, 1, &s, 1, scratch);
        for (size_t f = 0; f < F; f++) {
            ck_assert_float_eq_tol(one[f], out[f * B + n], 1e-6);
        }
    }
    xfree(scratch);
}
END_TEST

// Two weight sets on one input (conv_forward2) give what two conv_forward calls give, for
// every shape and chunking, with and without ReLU. Equal up to float rounding, not bit for
// bit: a GEMM of M = 2 OC may block and order each output's K products differently from
// one of M = OC (OpenBLAS's Haswell kernel does: 1.8e-7 apart on an output of 0.028 in case
// 5, K = 36 products of |x| <= 1 and |w| <= 1/6), so the bound is ulps of the products' sum
// of magnitudes (~1.5 there), not of the output.
START_TEST(test_forward2) {
    rng_t r;
    rng_init_stream(&r, 16, RNG_ROLE_TEST, 0);
    for (size_t t = 0; t < APEX_ARRAY_LEN(s_cases); t++) {
        const s_case_t *cs = &s_cases[t];
        conv_shape_t s = s_case_shape(cs);
        int B = cs->B;
        size_t nin = conv_in_features(&s) * B, nout = conv_out_features(&s) * B, nw = s_nw(&s);
        uint8_t *t_u8 = xmalloc(nin);
        float *wa = xmalloc(nw * sizeof(float)), *wb = xmalloc(nw * sizeof(float)), ba[8], bb[8];
        float *oa = xmalloc(nout * sizeof(float)), *ob = xmalloc(nout * sizeof(float));
        float *ra = xmalloc(nout * sizeof(float)), *rb = xmalloc(nout * sizeof(float));
        for (size_t i = 0; i < nin; i++) {
            t_u8[i] = (uint8_t)rng_below(&r, 256);
        }
        conv_init_random(wa, ba, &s, &r);
        conv_init_random(wb, bb, &s, &r);
        conv_input_t in = {t_u8, 1, 1.0f / 255.0f};
        for (size_t k = 0; k < APEX_ARRAY_LEN(s_chunks); k++) {
            s.chunk = s_chunks[k];
            float *scratch = s_scratch_alloc(&s, B);
            for (int relu = 0; relu <= 1; relu++) {
                conv_forward2(oa, ob, &in, wa, ba, wb, bb, relu, &s, B, scratch);
                conv_forward(ra, &in, wa, ba, relu, &s, B, scratch);
                conv_forward(rb, &in, wb, bb, relu, &s, B, scratch);
                ck_assert_msg(check_close_f(oa, ra, nout, 1e-6, 1e-6, "a"), "case %zu", t);
                ck_assert_msg(check_close_f(ob, rb, nout, 1e-6, 1e-6, "b"), "case %zu", t);
            }
            xfree(scratch);
        }
        xfree(t_u8), xfree(wa), xfree(wb), xfree(oa), xfree(ob), xfree(ra), xfree(rb);
    }
}
END_TEST

// ----------------------------------------------------------------------------
// a chain: conv1 -> ReLU -> conv2 -> ReLU -> flatten -> linear (A outputs), L = sum c . q.
// first = 1: conv1 is the first-layer entry on uint8 rows (no dX); first = 0: the inner
// entry on a float (C x HW x B) input, whose gradient is checked too.

typedef struct {
    conv_shape_t s1, s2;
    int A, B, first;
    float scale;
    size_t n1, n2, F; // weights of conv1, conv2; flattened features after conv2
} s_chain_t;

static s_chain_t s_chain(int first, int B, int c, int h, int w, int c1, int k1, int st1, int c2,
                         int k2, int st2, int A) {
    s_chain_t ch = {.A = A, .B = B, .first = first, .scale = first ? 1.0f / 255.0f : 1.0f};
    ch.s1 = s_shape(c, h, w, c1, k1, st1);
    ch.s2 = s_shape(c1, ch.s1.oh, ch.s1.ow, c2, k2, st2);
    ch.n1 = s_nw(&ch.s1), ch.n2 = s_nw(&ch.s2), ch.F = conv_out_features(&ch.s2);
    return ch;
}

// theta = [w1, b1, w2, b2, wl (A x F), bl (A)]
static size_t s_chain_params(const s_chain_t *ch) {
    return ch->n1 + ch->s1.c_out + ch->n2 + ch->s2.c_out + (size_t)ch->A * ch->F + ch->A;
}

// The double reference: x is NCHW; returns L = sum_{n,a} c[n * A + a] q[n][a].
static double s_chain_ref(const s_chain_t *ch, const double *th, const double *x, const double *c) {
    const double *w1 = th, *b1 = w1 + ch->n1, *w2 = b1 + ch->s1.c_out, *b2 = w2 + ch->n2;
    const double *wl = b2 + ch->s2.c_out, *bl = wl + (size_t)ch->A * ch->F;
    int B = ch->B;
    size_t h1n = conv_out_features(&ch->s1) * B, h2n = ch->F * B;
    double *h1 = xmalloc(h1n * sizeof(double)), *h2 = xmalloc(h2n * sizeof(double)), L = 0;
    s_ref_conv(h1, x, w1, b1, &ch->s1, B);
    for (size_t i = 0; i < h1n; i++) {
        h1[i] = h1[i] > 0 ? h1[i] : 0;
    }
    s_ref_conv(h2, h1, w2, b2, &ch->s2, B);
    for (size_t i = 0; i < h2n; i++) {
        h2[i] = h2[i] > 0 ? h2[i] : 0;
    }
    for (int n = 0; n < B; n++) {
        for (int a = 0; a < ch->A; a++) {
            double q = bl[a];
            for (size_t f = 0; f < ch->F; f++) { // PyTorch's flatten of NCHW: row n, column f
                q += wl[a * ch->F + f] * h2[n * ch->F + f];
            }
            L += c[n * ch->A + a] * q;
        }
    }
    xfree(h1), xfree(h2);
    return L;
}

// The chain through conv.c: q (A x B) from obs (first) or in, then g += dL/dtheta and (not
// first) din = dL/din for dL/dq = dq (A x B). Linear layer and ReLUs as nn.c does them.
static void s_chain_run(float *q, float *g, float *din, const s_chain_t *ch, const float *th,
                        const uint8_t *obs, const float *in, const float *dq) {
    const conv_shape_t *s1 = &ch->s1, *s2 = &ch->s2;
    int B = ch->B, A = ch->A, F = (int)ch->F;
    size_t h1n = conv_out_features(s1) * B, h2n = ch->F * B;
    const float *w1 = th, *b1 = w1 + ch->n1, *w2 = b1 + s1->c_out, *b2 = w2 + ch->n2;
    const float *wl = b2 + s2->c_out, *bl = wl + (size_t)A * F;
    float *gw1 = g, *gb1 = gw1 + ch->n1, *gw2 = gb1 + s1->c_out, *gb2 = gw2 + ch->n2;
    float *gwl = gb2 + s2->c_out, *gbl = gwl + (size_t)A * F;
    float *pre1 = xmalloc(h1n * sizeof(float)), *h1 = xmalloc(h1n * sizeof(float));
    float *pre2 = xmalloc(h2n * sizeof(float)), *h2 = xmalloc(h2n * sizeof(float));
    float *dh1 = xmalloc(h1n * sizeof(float)), *dh2 = xmalloc(h2n * sizeof(float));
    size_t nin = conv_in_features(s1) * B;
    uint8_t *t_obs = xmalloc(nin);
    float *scratch = xaligned_alloc(APEX_MAX(conv_scratch_bytes(s1, B), conv_scratch_bytes(s2, B)));
    // Forward: the conv2 output, read as (F x B), is the linear layer's input as it is.
    conv_input_t in1 = s_in_f32(in);
    if (ch->first) {
        conv_transpose_u8(t_obs, obs, s1, B);
        in1 = (conv_input_t){t_obs, 1, ch->scale};
    }
    conv_forward(pre1, &in1, w1, b1, 0, s1, B, scratch);
    s_relu(h1, pre1, h1n);
    conv_input_t in2 = s_in_f32(h1);
    conv_forward(pre2, &in2, w2, b2, 0, s2, B, scratch);
    s_relu(h2, pre2, h2n);
    for (int a = 0; a < A; a++) {
        for (int n = 0; n < B; n++) {
            q[a * B + n] = bl[a];
        }
    }
    blas_sgemm(q, wl, h2, 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, A, B, F);
    // Backward.
    blas_sgemm(gwl, dq, h2, 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_TRANS, A, F, B);
    for (int a = 0; a < A; a++) {
        for (int n = 0; n < B; n++) {
            gbl[a] += dq[a * B + n];
        }
    }
    blas_sgemm(dh2, wl, dq, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, F, B, A);
    s_relu_mask(dh2, pre2, h2n);
    conv_backward(dh1, gw2, gb2, dh2, &in2, w2, s2, B, scratch);
    s_relu_mask(dh1, pre1, h1n);
    conv_backward(ch->first ? NULL : din, gw1, gb1, dh1, &in1, w1, s1, B, scratch);
    xfree(pre1), xfree(h1), xfree(pre2), xfree(h2), xfree(dh1), xfree(dh2), xfree(t_obs);
    xfree(scratch);
}

// L and every gradient of the chain against the double reference and central differences
// of it: all parameters, and the input too unless it is the uint8 observations.
static void s_chain_check(const s_chain_t *ch, rng_t *r) {
    const conv_shape_t *s1 = &ch->s1, *s2 = &ch->s2;
    int B = ch->B, A = ch->A;
    size_t P = s_chain_params(ch), nin = conv_in_features(s1) * B;
    float *th = xmalloc(P * sizeof(float)), *g = xcalloc(P, sizeof(float));
    conv_init_random(th, th + ch->n1, s1, r);
    conv_init_random(th + ch->n1 + s1->c_out, th + ch->n1 + s1->c_out + ch->n2, s2, r);
    s_fill(th + P - (ch->F + 1) * A, (ch->F + 1) * A, r, 0.5f); // wl, bl
    uint8_t *obs = xmalloc(nin);
    float *in = xmalloc(nin * sizeof(float)), *din = xmalloc(nin * sizeof(float));
    for (size_t i = 0; i < nin; i++) {
        obs[i] = (uint8_t)rng_below(r, 256);
    }
    s_fill(in, nin, r, 1.0f);
    float *q = xmalloc((size_t)A * B * sizeof(float)), *dq = xmalloc((size_t)A * B * sizeof(float));
    double *c = xmalloc((size_t)B * A * sizeof(double));
    for (int n = 0; n < B; n++) {
        for (int a = 0; a < A; a++) {
            dq[a * B + n] = 2.0f * rng_uniform_f(r) - 1.0f; // feature-major (A x B)
            c[n * A + a] = dq[a * B + n];
        }
    }
    s_chain_run(q, g, din, ch, th, obs, in, dq);

    // The reference on the same float parameters and inputs, in double.
    double *thd = s_to_double(th, P), *x = xmalloc(nin * sizeof(double)), L = 0;
    if (ch->first) {
        s_obs_to_nchw(x, obs, ch->scale, s1, B);
    } else {
        s_chwb_to_nchw(x, in, s1->c_in, s1->h * s1->w, B);
    }
    for (int n = 0; n < B; n++) {
        for (int a = 0; a < A; a++) {
            L += c[n * A + a] * q[a * B + n];
        }
    }
    double Lref = s_chain_ref(ch, thd, x, c);
    ck_assert_msg(fabs(L - Lref) <= 1e-5 * (1 + fabs(Lref)), "L %.9g vs %.9g", L, Lref);
    const double h = 1e-6; // L is piecewise linear: exact unless a ReLU kink is within h
    size_t n_checked = ch->first ? P : P + nin;
    double *num = xmalloc((P + nin) * sizeof(double)), *ana = xmalloc((P + nin) * sizeof(double));
    for (size_t i = 0; i < n_checked; i++) {
        double *v = i < P ? &thd[i] : &x[i - P], keep = *v;
        *v = keep + h;
        double lp = s_chain_ref(ch, thd, x, c);
        *v = keep - h;
        double lm = s_chain_ref(ch, thd, x, c);
        *v = keep;
        num[i] = (lp - lm) / (2 * h);
        ana[i] = i < P ? g[i] : 0;
    }
    if (!ch->first) {
        s_chwb_to_nchw(ana + P, din, s1->c_in, s1->h * s1->w, B);
    }
    ck_assert_msg(check_close_d(ana, num, n_checked, S_RTOL, S_ATOL, "chain grads"),
                  "chain first=%d", ch->first);
    xfree(th), xfree(g), xfree(obs), xfree(in), xfree(din), xfree(q), xfree(dq), xfree(c);
    xfree(thd), xfree(x), xfree(num), xfree(ana);
}

START_TEST(test_chain_fd) {
    rng_t r;
    rng_init_stream(&r, 15, RNG_ROLE_TEST, 0);
    // inner entry with dX: 3x9x8 -> 4 k3 s2 (4x3) -> 3 k2 s1 (3x2) -> 18 -> 2
    s_chain_t a = s_chain(0, 3, 3, 9, 8, 4, 3, 2, 3, 2, 1, 2);
    s_chain_check(&a, &r);
    // first-layer entry on uint8 rows (scale 1/255): 2x10x12 -> 4 k4 s2 (4x5) -> 5 k3 s1 (2x3)
    s_chain_t b = s_chain(1, 2, 2, 10, 12, 4, 4, 2, 5, 3, 1, 3);
    s_chain_check(&b, &r);
    // batch 1, kernel 8 stride 4 then kernel 1: 1x16x12 -> 3 k8 s4 (3x2) -> 2 k1 s1 -> 12 -> 4
    s_chain_t d = s_chain(1, 1, 1, 16, 12, 3, 8, 4, 2, 1, 1, 4);
    s_chain_check(&d, &r);
}
END_TEST

// ----------------------------------------------------------------------------
// the PyTorch fixture

typedef struct {
    char name[33];
    uint32_t dtype, count; // dtype 0 float32, 1 uint8, 2 int32
    const uint8_t *data;
} s_rec_t;

typedef struct {
    uint8_t *buf;
    int n;
    s_rec_t rec[64];
} s_fix_t;

static uint32_t s_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

// Loads tests/fixtures/conv_torch.bin (relative to the repo root where make runs, or to
// $APEX_SRC_DIR) and indexes its records.
static void s_fix_load(s_fix_t *f) {
    const char *root = getenv("APEX_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/conv_torch.bin", root && *root ? root : ".");
    FILE *fp = fopen(path, "rb");
    ck_assert_msg(fp != NULL, "cannot open %s (run from the repo root or set APEX_SRC_DIR)", path);
    ck_assert_int_eq(fseek(fp, 0, SEEK_END), 0);
    long len = ftell(fp);
    ck_assert(len > 12);
    rewind(fp);
    f->buf = xmalloc((size_t)len);
    ck_assert_uint_eq(fread(f->buf, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    ck_assert_int_eq(memcmp(f->buf, "APXCONV1", 8), 0);
    uint32_t n = s_le32(f->buf + 8);
    ck_assert_uint_le(n, APEX_ARRAY_LEN(f->rec));
    size_t off = 12;
    for (uint32_t i = 0; i < n; i++) {
        s_rec_t *r = &f->rec[i];
        ck_assert_uint_le(off + 40, (size_t)len);
        memcpy(r->name, f->buf + off, 32);
        r->name[32] = 0;
        r->dtype = s_le32(f->buf + off + 32);
        r->count = s_le32(f->buf + off + 36);
        r->data = f->buf + off + 40;
        ck_assert_uint_le(r->dtype, 2);
        off += 40 + (size_t)r->count * (r->dtype == 1 ? 1 : 4);
        ck_assert_uint_le(off, (size_t)len);
    }
    ck_assert_uint_eq(off, (size_t)len);
    f->n = (int)n;
    const uint32_t one = 1;
    uint8_t first_byte;
    memcpy(&first_byte, &one, 1);
    ck_assert_msg(first_byte == 1, "the fixture reader assumes a little-endian host");
}

static const s_rec_t *s_fix_get(const s_fix_t *f, const char *net, const char *what,
                                uint32_t dtype) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", net, what);
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->rec[i].name, name) == 0) {
            ck_assert_uint_eq(f->rec[i].dtype, dtype);
            return &f->rec[i];
        }
    }
    ck_abort_msg("fixture has no record %s", name);
    return NULL;
}

// A float32 or int32 record copied out (the data is not aligned); checks the count.
static void *s_fix_copy(const s_fix_t *f, const char *net, const char *what, uint32_t dtype,
                        size_t count) {
    const s_rec_t *r = s_fix_get(f, net, what, dtype);
    ck_assert_uint_eq(r->count, count);
    void *p = xmalloc(count * 4 + 4);
    memcpy(p, r->data, count * 4);
    return p;
}

// Compares got (n floats) with record <net>.<key><l>; an activation (os != NULL) is
// recorded in NCHW and compared in conv.c's (C x OH OW x B) order. Tolerance:
// |got - want| <= 1e-4 |want| + 1e-5 max|want| over the tensor.
static void s_torch_cmp(const s_fix_t *f, const char *net, const char *key, int l, const float *got,
                        size_t n, const conv_shape_t *os, int B) {
    char name[16], what[64];
    snprintf(name, sizeof name, "%s%d", key, l);
    snprintf(what, sizeof what, "%s.%s", net, name);
    float *want = s_fix_copy(f, net, name, 0, n);
    if (os) {
        float *nchw = want;
        want = xmalloc(n * sizeof(float));
        s_nchw_to_chwb(want, nchw, os->c_out, os->oh * os->ow, B);
        xfree(nchw);
    }
    double maxabs = 0;
    for (size_t i = 0; i < n; i++) {
        maxabs = fmax(maxabs, fabs(want[i]));
    }
    ck_assert_msg(maxabs > 0, "%s is all zeros", what);
    ck_assert_msg(check_close_f(got, want, n, 1e-4, 1e-5 * maxabs, what), "%s differs from PyTorch",
                  what);
    xfree(want);
}

// Runs fixture net `net` through conv.c (each layer Conv2d -> ReLU, uint8 rows or the same
// values as float32 rows) and compares every pre-ReLU output and every dW, db with PyTorch.
static void s_torch_net(const char *net, int as_f32) {
    s_fix_t f;
    s_fix_load(&f);
    const s_rec_t *sh = s_fix_get(&f, net, "shape", 2);
    ck_assert_uint_ge(sh->count, 5);
    int32_t *d = s_fix_copy(&f, net, "shape", 2, sh->count);
    int B = d[0], H = d[1], W = d[2], C = d[3], nl = d[4];
    ck_assert(nl >= 1 && nl <= 4 && sh->count == 5u + 3u * nl);
    float *scale = s_fix_copy(&f, net, "scale", 0, 1);
    const s_rec_t *obs = s_fix_get(&f, net, "obs", 1);
    ck_assert_uint_eq(obs->count, (size_t)B * H * W * C);
    float *obs_f = xmalloc(obs->count * sizeof(float));
    for (size_t i = 0; i < obs->count; i++) {
        obs_f[i] = (float)obs->data[i];
    }
    conv_shape_t s[4];
    float *w[4], *b[4], *pre[4], *act[4], *dw[4], *db[4], *dact[4];
    size_t max_scratch = 0;
    for (int l = 0; l < nl; l++) {
        s[l] = s_shape(C, H, W, d[5 + 3 * l], d[6 + 3 * l], d[7 + 3 * l]);
        char key[16];
        snprintf(key, sizeof key, "w%d", l);
        w[l] = s_fix_copy(&f, net, key, 0, s_nw(&s[l]));
        snprintf(key, sizeof key, "b%d", l);
        b[l] = s_fix_copy(&f, net, key, 0, (size_t)s[l].c_out);
        size_t n = conv_out_features(&s[l]) * B;
        pre[l] = xmalloc(n * sizeof(float)), act[l] = xmalloc(n * sizeof(float));
        dact[l] = xmalloc(n * sizeof(float));
        dw[l] = xcalloc(s_nw(&s[l]), sizeof(float)), db[l] = xcalloc((size_t)s[l].c_out, 4);
        max_scratch = APEX_MAX(max_scratch, conv_scratch_bytes(&s[l], B));
        C = s[l].c_out, H = s[l].oh, W = s[l].ow;
    }
    float *scratch = xaligned_alloc(max_scratch);
    void *t_obs = xmalloc(obs->count * sizeof(float));
    conv_input_t in[4];
    if (as_f32) {
        conv_transpose_f32(t_obs, obs_f, 0, *scale, &s[0], B);
        in[0] = s_in_f32(t_obs);
    } else {
        conv_transpose_u8(t_obs, obs->data, &s[0], B);
        in[0] = (conv_input_t){t_obs, 1, *scale};
    }
    for (int l = 0; l < nl; l++) {
        if (l > 0) {
            in[l] = s_in_f32(act[l - 1]);
        }
        conv_forward(pre[l], &in[l], w[l], b[l], 0, &s[l], B, scratch);
        s_relu(act[l], pre[l], conv_out_features(&s[l]) * B);
    }
    // g is dL/d flatten(relu(last)) as PyTorch's (B x F); ours is its transpose (F x B),
    // which is what the (C x OH OW x B) layout is: flatten is the identity here.
    int top = nl - 1;
    size_t F = conv_out_features(&s[top]);
    float *g = s_fix_copy(&f, net, "g", 0, F * B);
    for (size_t i = 0; i < F; i++) {
        for (int n = 0; n < B; n++) {
            dact[top][i * B + n] = g[(size_t)n * F + i];
        }
    }
    for (int l = top; l >= 0; l--) {
        s_relu_mask(dact[l], pre[l], conv_out_features(&s[l]) * B);
        conv_backward(l ? dact[l - 1] : NULL, dw[l], db[l], dact[l], &in[l], w[l], &s[l], B,
                      scratch);
    }
    for (int l = 0; l < nl; l++) {
        s_torch_cmp(&f, net, "out", l, pre[l], conv_out_features(&s[l]) * B, &s[l], B);
        s_torch_cmp(&f, net, "dw", l, dw[l], s_nw(&s[l]), NULL, B);
        s_torch_cmp(&f, net, "db", l, db[l], (size_t)s[l].c_out, NULL, B);
    }
    for (int l = 0; l < nl; l++) {
        xfree(w[l]), xfree(b[l]), xfree(pre[l]), xfree(act[l]), xfree(dact[l]);
        xfree(dw[l]), xfree(db[l]);
    }
    xfree(scratch), xfree(t_obs), xfree(g), xfree(d), xfree(scale), xfree(obs_f), xfree(f.buf);
}

START_TEST(test_torch_minatar) {
    s_torch_net("minatar", 0);
    s_torch_net("minatar", 1);
}
END_TEST

START_TEST(test_torch_nature) {
    s_torch_net("nature", 0);
    s_torch_net("nature", 1);
}
END_TEST

// ----------------------------------------------------------------------------
// asserts

START_TEST(test_batch_zero_aborts) {
    conv_shape_t s = s_shape(1, 4, 4, 1, 2, 1);
    float in[16] = {0}, out[9], scratch[4096], w[4] = {0}, b[1] = {0};
    conv_input_t cin = s_in_f32(in);
    conv_forward(out, &cin, w, b, 0, &s, 0, scratch);
}
END_TEST

Suite *conv_suite(void) {
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_shape);
    tcase_add_test(tc, test_init_random);
    tcase_add_test(tc, test_forward_inner);
    tcase_add_test(tc, test_backward_inner_fd);
    tcase_add_test(tc, test_u8_to_f32_widths);
    tcase_add_test(tc, test_first_layer);
    tcase_add_test(tc, test_transpose_u8_blocks);
    tcase_add_test(tc, test_transpose_frames);
    tcase_add_test(tc, test_batch_independent);
    tcase_add_test(tc, test_forward2);
    tcase_add_test(tc, test_chain_fd);
    tcase_add_test(tc, test_torch_minatar);
    tcase_add_test(tc, test_torch_nature);
    tcase_add_test_raise_signal(tc, test_batch_zero_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
