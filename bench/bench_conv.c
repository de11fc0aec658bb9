// bench_conv.c: where a conv body's forward+backward spends its time (not a test: timing).
//
//   build/bench/bench_conv [--threads N] [--runs R]
//
// Two bodies, uint8 observations as the replay stores them:
//   minatar  B = 512, 10x10x4 (0/1, scale 1) -> 16 3x3 s1
//   nature   B = 128, 84x84x4 (scale 1/255) -> 32 8x8 s4 -> 64 4x4 s2 -> 64 3x3 s1
// One step = conv forward of every layer, then conv_backward from a fixed dL/dout of the
// top layer down (din = NULL at the first layer). No ReLU: it is not this module's.
// Each quantity is the median over R windows of >= 30 ms: the whole step, the im2col calls
// alone, the col2im calls alone, and plain blas_sgemm calls of the step's exact shapes
// (same buffers, same beta). "other" = step - im2col - col2im - plain sgemm (bias fill, bias
// sums, and whatever the GEMMs lose inside the step). GFLOP/s count the step's GEMM FLOPs.
// Also times two alternative first-layer im2cols against conv_im2col_u8 (s_alt_transpose,
// s_alt_gather), the forward GEMM in the other orientation (s_alt_gemm), and what the first
// layer's backward saves by not computing dX (s_first_dx).
// Last, 1024^3 sgemm as the machine's large-GEMM rate in the same run. Takes ~3-4 s.
// Prints "BENCH conv.<body>.<what> <value> <unit>" lines and "#" lines per GEMM and layer.
// Not part of `make bench` (no peer to compare with yet); run it by hand.
#include "apex.h"
#include "blas.h"
#include "clock.h"
#include "conv.h"
#include "rng.h"
#include "xalloc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 3
#define MAX_RUNS 32
#define WINDOW_NS 30000000

typedef struct {
    const char *name;
    int B, n_layers;
    float scale;
    conv_shape_t s[MAX_LAYERS];
    uint8_t *obs;
    float *w[MAX_LAYERS], *b[MAX_LAYERS], *dw[MAX_LAYERS], *db[MAX_LAYERS];
    float *out[MAX_LAYERS], *col[MAX_LAYERS], *dout[MAX_LAYERS];
    float *dcol, *alt; // shared dcol scratch; the alternative's float copy of the batch
    float *outT;       // (N x OC) of the largest layer, for s_alt_gemm
} body_t;

static void s_fill_normal(float *x, size_t n, float scale, rng_t *r) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (float)rng_normal(r);
    }
}

static void s_body_init(body_t *bd, const char *name, int B, float scale, int c, int h, int w,
                        const int *spec, int n_layers, int binary, rng_t *r) {
    memset(bd, 0, sizeof *bd);
    bd->name = name, bd->B = B, bd->n_layers = n_layers, bd->scale = scale;
    size_t max_col = 0, max_act = 0;
    for (int l = 0; l < n_layers; l++) {
        conv_shape_t *s = &bd->s[l];
        int rc = conv_shape_init(s, c, h, w, spec[3 * l], spec[3 * l + 1], spec[3 * l + 2], NULL,
                                 0);
        if (rc != 0) {
            abort();
        }
        size_t nw = conv_num_params(s) - (size_t)s->c_out, col = conv_col_bytes(s, B);
        size_t act = conv_out_features(s) * (size_t)B * sizeof(float);
        bd->w[l] = xaligned_alloc(nw * sizeof(float));
        bd->b[l] = xaligned_alloc((size_t)s->c_out * sizeof(float));
        bd->dw[l] = xaligned_alloc(nw * sizeof(float));
        bd->db[l] = xaligned_alloc((size_t)s->c_out * sizeof(float));
        bd->out[l] = xaligned_alloc(act);
        bd->dout[l] = xaligned_alloc(act);
        bd->col[l] = xaligned_alloc(col);
        conv_init_random(bd->w[l], bd->b[l], s, r);
        s_fill_normal(bd->dout[l], act / sizeof(float), 1e-3f, r);
        max_col = l > 0 && col > max_col ? col : max_col;
        max_act = APEX_MAX(max_act, act);
        c = s->c_out, h = s->oh, w = s->ow;
    }
    size_t n_obs = conv_in_features(&bd->s[0]) * (size_t)B;
    bd->obs = xaligned_alloc(n_obs);
    for (size_t i = 0; i < n_obs; i++) {
        bd->obs[i] = binary ? (uint8_t)(rng_uniform_f(r) < 0.1f) : (uint8_t)rng_below(r, 256);
    }
    bd->dcol = xaligned_alloc(max_col ? max_col : sizeof(float));
    bd->alt = xaligned_alloc(n_obs * sizeof(float));
    bd->outT = xaligned_alloc(max_act);
}

static void s_body_fini(body_t *bd) {
    for (int l = 0; l < bd->n_layers; l++) {
        xfree(bd->w[l]), xfree(bd->b[l]), xfree(bd->dw[l]), xfree(bd->db[l]);
        xfree(bd->out[l]), xfree(bd->dout[l]), xfree(bd->col[l]);
    }
    xfree(bd->obs), xfree(bd->dcol), xfree(bd->alt), xfree(bd->outT);
}

// ----------------------------------------------------------------------------
// the timed operations

static void s_step(body_t *bd) {
    int B = bd->B, top = bd->n_layers - 1;
    conv_forward_u8(bd->out[0], bd->col[0], bd->obs, bd->w[0], bd->b[0], bd->scale, &bd->s[0], B);
    for (int l = 1; l <= top; l++) {
        conv_forward(bd->out[l], bd->col[l], bd->out[l - 1], bd->w[l], bd->b[l], &bd->s[l], B);
    }
    // dout[top] stays fixed; dout[l - 1] is overwritten by layer l's din.
    for (int l = top; l >= 0; l--) {
        conv_backward(l ? bd->dout[l - 1] : NULL, bd->dcol, bd->dw[l], bd->db[l], bd->dout[l],
                      bd->col[l], bd->w[l], &bd->s[l], B);
    }
}

// im2col of every layer; ns[l] += the time of layer l's.
static void s_im2col_all(body_t *bd, int64_t *ns) {
    for (int l = 0; l < bd->n_layers; l++) {
        int64_t t0 = clock_now_ns();
        if (l == 0) {
            conv_im2col_u8(bd->col[0], bd->obs, bd->scale, &bd->s[0], bd->B);
        } else {
            conv_im2col(bd->col[l], bd->out[l - 1], &bd->s[l], bd->B);
        }
        ns[l] += clock_now_ns() - t0;
    }
}

// col2im of every layer above the first; ns[l] += the time of layer l's.
static void s_col2im_all(body_t *bd, int64_t *ns) {
    for (int l = 1; l < bd->n_layers; l++) {
        int64_t t0 = clock_now_ns();
        conv_col2im(bd->dout[l - 1], bd->dcol, &bd->s[l], bd->B);
        ns[l] += clock_now_ns() - t0;
    }
}

// GEMM g of the step: 3 per layer (forward NN, dW NT, dcol TN); dcol only above layer 0.
static int s_gemm_count(const body_t *bd) { return 3 * bd->n_layers; }

static double s_gemm_flops(const body_t *bd, int g) {
    const conv_shape_t *s = &bd->s[g / 3];
    if (g / 3 == 0 && g % 3 == 2) {
        return 0;
    }
    return 2.0 * s->c_out * s->c_in * s->k * s->k * s->oh * s->ow * bd->B;
}

static void s_gemm(body_t *bd, int g) {
    int l = g / 3;
    const conv_shape_t *s = &bd->s[l];
    int K = s->c_in * s->k * s->k, N = s->oh * s->ow * bd->B, M = s->c_out;
    if (g % 3 == 0) {
        blas_sgemm(bd->out[l], bd->w[l], bd->col[l], 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, M, N,
                   K);
    } else if (g % 3 == 1) {
        blas_sgemm(bd->dw[l], bd->dout[l], bd->col[l], 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_TRANS, M, K,
                   N);
    } else if (l > 0) {
        blas_sgemm(bd->dcol, bd->w[l], bd->dout[l], 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, K, N, M);
    }
}

// Two alternative first-layer im2cols, measured against conv_im2col_u8 (which transposes one
// image row of the batch at a time into an L2-sized scratch and copies col rows from it).
// ALT_TRANSPOSE: transpose the whole batch into a scaled float (C x H W B) copy (bd->alt,
// 4 bytes per obs byte), then the inner-layer im2col from it.
static void s_alt_transpose(body_t *bd) {
    const conv_shape_t *s = &bd->s[0];
    size_t B = (size_t)bd->B, hw = (size_t)s->h * s->w, C = (size_t)s->c_in, O = hw * C;
    for (size_t c = 0; c < C; c++) {
        for (size_t p = 0; p < hw; p++) {
            float *dst = bd->alt + (c * hw + p) * B;
            const uint8_t *src = bd->obs + p * C + c;
            for (size_t b = 0; b < B; b++) {
                dst[b] = bd->scale * (float)src[b * O];
            }
        }
    }
    conv_im2col(bd->col[0], bd->alt, s, bd->B);
}

// ALT_GATHER: gather every col entry straight from the observation rows (stride H W C), i.e.
// convert each obs byte about k^2 / s^2 times; loops (oy, i) outermost so that one image row
// of the batch is the working set.
static void s_alt_gather(body_t *bd) {
    const conv_shape_t *s = &bd->s[0];
    const size_t sample = conv_in_features(s), Bz = (size_t)bd->B;
    const size_t N = (size_t)s->oh * s->ow * Bz;
    for (int oy = 0; oy < s->oh; oy++) {
        for (int i = 0; i < s->k; i++) {
            size_t y_off = (size_t)(oy * s->stride + i) * s->w * s->c_in;
            for (int c = 0; c < s->c_in; c++) {
                for (int j = 0; j < s->k; j++) {
                    size_t r = ((size_t)c * s->k + i) * s->k + j;
                    float *dst = bd->col[0] + r * N + (size_t)oy * s->ow * Bz;
                    for (int ox = 0; ox < s->ow; ox++, dst += Bz) {
                        const uint8_t *src = bd->obs + y_off +
                                             (size_t)(ox * s->stride + j) * s->c_in + c;
                        for (size_t b = 0; b < Bz; b++) {
                            dst[b] = bd->scale * (float)src[b * sample];
                        }
                    }
                }
            }
        }
    }
}

// The forward GEMM in the other orientation, out^T (N x OC) = col^T W^T (sgemm TT, into
// bd->outT), then transposed into out (OC x N) with the bias added, in blocks of 64 columns
// so that the (64 x OC) block read stays in L1. Timed only to see whether the chosen
// orientation (M = OC) costs GEMM speed, and what getting the chosen layout back costs.
static void s_alt_gemm(body_t *bd, int l, int64_t *ns_gemm, int64_t *ns_transpose) {
    const conv_shape_t *s = &bd->s[l];
    int K = s->c_in * s->k * s->k, N = s->oh * s->ow * bd->B, OC = s->c_out;
    int64_t t0 = clock_now_ns();
    blas_sgemm(bd->outT, bd->col[l], bd->w[l], 1.0f, 0.0f, BLAS_TRANS, BLAS_TRANS, N, OC, K);
    int64_t t1 = clock_now_ns();
    for (size_t n0 = 0; n0 < (size_t)N; n0 += 64) {
        size_t n1 = APEX_MIN(n0 + 64, (size_t)N);
        for (size_t oc = 0; oc < (size_t)OC; oc++) {
            float *dst = bd->out[l] + oc * N, bias = bd->b[l][oc];
            for (size_t n = n0; n < n1; n++) {
                dst[n] = bd->outT[n * OC + oc] + bias;
            }
        }
    }
    *ns_gemm += t1 - t0;
    *ns_transpose += clock_now_ns() - t1;
}

// What the first layer's backward skips with din = NULL: the dcol GEMM (into col[0], whose
// values do not matter here) and the col2im into a float copy of the batch (bd->alt).
static void s_first_dx(body_t *bd) {
    const conv_shape_t *s = &bd->s[0];
    int K = s->c_in * s->k * s->k, N = s->oh * s->ow * bd->B;
    blas_sgemm(bd->col[0], bd->w[0], bd->dout[0], 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, K, N,
               s->c_out);
    conv_col2im(bd->alt, bd->col[0], s, bd->B);
}

// ----------------------------------------------------------------------------
// timing

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef enum {
    OP_STEP,
    OP_IM2COL,
    OP_COL2IM,
    OP_SGEMM,
    OP_ALT_TRANSPOSE,
    OP_ALT_GATHER,
    OP_ALT_GEMM,
    OP_FIRST_DX,
    OP_COUNT
} op_t;

#define MAX_PIECES (3 * MAX_LAYERS)

// One window of op: returns ms per call, and writes ms per call of each piece to piece_ms:
// per GEMM for OP_SGEMM; per layer for OP_IM2COL and OP_COL2IM; for OP_ALT_GEMM the GEMM of
// layer l at l and its transpose at MAX_LAYERS + l; zeros otherwise.
static double s_window(body_t *bd, op_t op, double *piece_ms) {
    int64_t t0 = clock_now_ns(), t;
    int64_t ns[MAX_PIECES] = {0};
    int iters = 0;
    do {
        if (op == OP_STEP) {
            s_step(bd);
        } else if (op == OP_IM2COL) {
            s_im2col_all(bd, ns);
        } else if (op == OP_COL2IM) {
            s_col2im_all(bd, ns);
        } else if (op == OP_ALT_TRANSPOSE) {
            s_alt_transpose(bd);
        } else if (op == OP_ALT_GATHER) {
            s_alt_gather(bd);
        } else if (op == OP_ALT_GEMM) {
            for (int l = 0; l < bd->n_layers; l++) {
                s_alt_gemm(bd, l, &ns[l], &ns[MAX_LAYERS + l]);
            }
        } else if (op == OP_FIRST_DX) {
            s_first_dx(bd);
        } else {
            for (int g = 0; g < s_gemm_count(bd); g++) {
                int64_t g0 = clock_now_ns();
                s_gemm(bd, g);
                ns[g] += clock_now_ns() - g0;
            }
        }
        iters++;
    } while ((t = clock_now_ns() - t0) < WINDOW_NS);
    for (int g = 0; g < MAX_PIECES; g++) {
        piece_ms[g] = (double)ns[g] * 1e-6 / iters;
    }
    return (double)t * 1e-6 / iters;
}

// 1024^3 sgemm, one window: GFLOP/s (the machine's large-GEMM rate in this run).
static double s_sgemm_1024(void) {
    const int n = 1024;
    size_t nn = (size_t)n * n;
    float *a = xaligned_alloc(nn * sizeof(float)), *b = xaligned_alloc(nn * sizeof(float));
    float *c = xaligned_alloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 13) * 0.01f, b[i] = (float)(i % 7) * 0.01f;
    }
    blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n); // warm-up
    int64_t t0 = clock_now_ns();
    int reps = 0;
    do {
        blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
        reps++;
    } while (clock_now_ns() - t0 < WINDOW_NS);
    double s = (double)(clock_now_ns() - t0) * 1e-9;
    xfree(a), xfree(b), xfree(c);
    return 2.0 * n * (double)n * n * reps / s * 1e-9;
}

static void s_bench_body(body_t *bd, int runs, const char *tsuffix) {
    double ms[OP_COUNT][MAX_RUNS], pms[OP_COUNT][MAX_PIECES][MAX_RUNS], one[MAX_PIECES];
    s_step(bd); // warm-up: first touch of every buffer
    for (int r = 0; r < runs; r++) {
        for (int op = 0; op < OP_COUNT; op++) {
            ms[op][r] = s_window(bd, (op_t)op, one);
            for (int g = 0; g < MAX_PIECES; g++) {
                pms[op][g][r] = one[g];
            }
        }
    }
    double med[OP_COUNT], flops = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        med[op] = s_median(ms[op], runs);
    }
    const char *n = bd->name;
    for (int g = 0; g < s_gemm_count(bd); g++) {
        double f = s_gemm_flops(bd, g), m = s_median(pms[OP_SGEMM][g], runs);
        flops += f;
        if (f > 0) {
            const conv_shape_t *s = &bd->s[g / 3];
            int K = s->c_in * s->k * s->k, N = s->oh * s->ow * bd->B;
            static const char *kind[3] = {"fwd NN", "dW NT", "dcol TN"};
            printf("# conv.%s layer %d %-7s M=%d N=%d K=%d: %.3f ms, %.1f GFLOP/s\n", n, g / 3,
                   kind[g % 3], g % 3 == 2 ? K : s->c_out, g % 3 == 1 ? K : N,
                   g % 3 == 0   ? K
                   : g % 3 == 1 ? N
                                : s->c_out,
                   m, f / (m * 1e-3) * 1e-9);
        }
    }
    for (int l = 0; l < bd->n_layers; l++) {
        const conv_shape_t *s = &bd->s[l];
        double f = 2.0 * s->c_out * s->c_in * s->k * s->k * s->oh * s->ow * bd->B;
        double m = s_median(pms[OP_ALT_GEMM][l], runs);
        double tr = s_median(pms[OP_ALT_GEMM][MAX_LAYERS + l], runs);
        printf("# conv.%s layer %d fwd as out^T = col^T W^T (TT, M=N, N=OC): %.3f ms, %.1f "
               "GFLOP/s; + transpose to (OC x N) with bias %.3f ms\n",
               n, l, m, f / (m * 1e-3) * 1e-9, tr);
    }
    for (int l = 0; l < bd->n_layers; l++) {
        double col_mb = (double)conv_col_bytes(&bd->s[l], bd->B) / 1e6;
        printf("# conv.%s layer %d im2col %.3f ms, col2im %.3f ms (col %.1f MB)\n", n, l,
               s_median(pms[OP_IM2COL][l], runs), s_median(pms[OP_COL2IM][l], runs), col_mb);
    }
    double other = med[OP_STEP] - med[OP_IM2COL] - med[OP_COL2IM] - med[OP_SGEMM];
    printf("BENCH conv.%s%s.step_ms %.3f ms\n", n, tsuffix, med[OP_STEP]);
    printf("BENCH conv.%s%s.im2col_ms %.3f ms\n", n, tsuffix, med[OP_IM2COL]);
    printf("BENCH conv.%s%s.col2im_ms %.3f ms\n", n, tsuffix, med[OP_COL2IM]);
    printf("BENCH conv.%s%s.sgemm_plain_ms %.3f ms\n", n, tsuffix, med[OP_SGEMM]);
    printf("BENCH conv.%s%s.other_ms %.3f ms\n", n, tsuffix, other);
    printf("BENCH conv.%s%s.step_gflops %.1f GFLOP/s\n", n, tsuffix,
           flops / (med[OP_STEP] * 1e-3) * 1e-9);
    printf("BENCH conv.%s%s.sgemm_plain_gflops %.1f GFLOP/s\n", n, tsuffix,
           flops / (med[OP_SGEMM] * 1e-3) * 1e-9);
    printf("BENCH conv.%s%s.sgemm_share %.1f %%\n", n, tsuffix,
           100.0 * med[OP_SGEMM] / med[OP_STEP]);
    printf("BENCH conv.%s%s.first_im2col_ms %.3f ms\n", n, tsuffix,
           s_median(pms[OP_IM2COL][0], runs));
    printf("BENCH conv.%s%s.first_im2col_alt_transpose_ms %.3f ms\n", n, tsuffix,
           med[OP_ALT_TRANSPOSE]);
    printf("BENCH conv.%s%s.first_im2col_alt_gather_ms %.3f ms\n", n, tsuffix, med[OP_ALT_GATHER]);
    printf("BENCH conv.%s%s.first_dx_skipped_ms %.3f ms\n", n, tsuffix, med[OP_FIRST_DX]);
}

static int s_parse_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < INT_MIN || v > INT_MAX) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv) {
    int threads = 1, runs = 5;
    for (int i = 1; i < argc; i += 2) {
        int *dst = strcmp(argv[i], "--threads") == 0 ? &threads
                   : strcmp(argv[i], "--runs") == 0  ? &runs
                                                     : NULL;
        if (!dst || i + 1 >= argc || s_parse_int(argv[i + 1], dst) != 0) {
            fprintf(stderr, "usage: %s [--threads N] [--runs R]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1 || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench_conv: need threads >= 1 and 1 <= runs <= %d\n", MAX_RUNS);
        return 2;
    }
    blas_set_threads(threads);
    char tsuffix[16] = "";
    if (threads != 1) {
        snprintf(tsuffix, sizeof tsuffix, ".t%d", threads);
    }
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("# bench_conv: threads %d, %d windows of >= %d ms, OPENBLAS_CORETYPE=%s\n", threads,
           runs, WINDOW_NS / 1000000, ct ? ct : "(unset)");
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_TEST, 0);
    body_t bd;
    static const int minatar[] = {16, 3, 1}, nature[] = {32, 8, 4, 64, 4, 2, 64, 3, 1};
    s_body_init(&bd, "minatar", 512, 1.0f, 4, 10, 10, minatar, 1, 1, &r);
    s_bench_body(&bd, runs, tsuffix);
    s_body_fini(&bd);
    s_body_init(&bd, "nature", 128, 1.0f / 255.0f, 4, 84, 84, nature, 3, 0, &r);
    s_bench_body(&bd, runs, tsuffix);
    s_body_fini(&bd);
    printf("BENCH conv.sgemm_1024%s %.1f GFLOP/s\n", tsuffix, s_sgemm_1024());
    return 0;
}
