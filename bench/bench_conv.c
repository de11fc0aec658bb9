// bench_conv.c: where a conv body's forward+backward spends its time (not a test: timing).
//
//   build/bench/bench_conv [--threads N] [--runs R]
//
// Two bodies, uint8 observations as the replay stores them:
//   minatar  B = 512, 10x10x4 (0/1, scale 1) -> 16 3x3 s1
//   nature   B = 128, 84x84x4 (scale 1/255) -> 32 8x8 s4 -> 64 4x4 s2 -> 64 3x3 s1
// One step = the observations' transpose, conv_forward (bias + ReLU) of every layer, then
// conv_backward from a fixed dL/dout of the top layer down (din = NULL at the first layer;
// no ReLU mask: that is nn.c's). Each quantity is the median over R windows of >= 30 ms of
// the thread's CPU time (on a shared machine, wall time mostly measures the other tenants):
//   step, forward, backward; the first layer's forward for one weight set and for two
//   (conv_forward2, the learner's online and target networks on s'); the transpose; every
//   layer's chunked im2col alone; and plain blas_sgemm calls of the forward GEMMs on one
//   chunk (the cache-resident shape conv.c runs) next to the same product on the whole
//   batch at once (what the code did before chunking).
// GFLOP/s count the GEMM FLOPs: forward OC K N, dW OC K N, dcol (inner layers) OC K N, 2 per
// multiply-add. Last, 1024^3 sgemm as the machine's large-GEMM rate in the same run.
// Prints "BENCH conv.<body>.<what> <value> <unit>" lines and "#" lines per layer.
// Not part of `make bench` (no peer); run it by hand. Takes ~5 s.
#include "apex.h"
#include "bench_common.h"
#include "blas.h"
#include "conv.h"
#include "parse.h"
#include "rng.h"
#include "xalloc.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LAYERS 3
#define MAX_RUNS 32
#define WINDOW_NS 30000000

typedef struct {
    const char *name;
    int B, n_layers;
    float scale;
    conv_shape_t s[MAX_LAYERS];
    uint8_t *obs;
    float *t; // the first layer's input: the observations transposed, as nn.c does
    float *w[MAX_LAYERS], *b[MAX_LAYERS], *dw[MAX_LAYERS], *db[MAX_LAYERS];
    float *out[MAX_LAYERS], *dout[MAX_LAYERS], *out2; // out2: a second first-layer output
    float *scratch;
    float *big_a, *big_b, *big_c; // whole-batch operands for the plain GEMM comparison
} body_t;

static int64_t s_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void s_fill_normal(float *x, size_t n, float scale, rng_t *r) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (float)rng_normal(r);
    }
}

static void s_body_init(body_t *bd, const char *name, int B, float scale, int c, int h, int w,
                        const int *spec, int n_layers, int binary, rng_t *r) {
    memset(bd, 0, sizeof *bd);
    bd->name = name, bd->B = B, bd->n_layers = n_layers, bd->scale = scale;
    size_t scratch = 0, big = 0;
    for (int l = 0; l < n_layers; l++) {
        conv_shape_t *s = &bd->s[l];
        int rc = conv_shape_init(s, c, h, w, spec[3 * l], spec[3 * l + 1], spec[3 * l + 2], NULL,
                                 0);
        if (rc != 0) {
            abort();
        }
        size_t nw = conv_num_params(s) - (size_t)s->c_out;
        size_t act = conv_out_features(s) * (size_t)B * sizeof(float);
        size_t K = (size_t)s->c_in * s->k * s->k, N = (size_t)s->oh * s->ow * B;
        bd->w[l] = xaligned_alloc(nw * sizeof(float));
        bd->b[l] = xaligned_alloc((size_t)s->c_out * sizeof(float));
        bd->dw[l] = xaligned_alloc(nw * sizeof(float));
        bd->db[l] = xaligned_alloc((size_t)s->c_out * sizeof(float));
        bd->out[l] = xaligned_alloc(act);
        bd->dout[l] = xaligned_alloc(act);
        conv_init_random(bd->w[l], bd->b[l], s, r);
        s_fill_normal(bd->dout[l], act / sizeof(float), 1e-3f, r);
        scratch = APEX_MAX(scratch, conv_scratch_bytes(s, B));
        big = APEX_MAX(big, K * N);
        c = s->c_out, h = s->oh, w = s->ow;
    }
    size_t n_obs = conv_in_features(&bd->s[0]) * (size_t)B;
    bd->obs = xaligned_alloc(n_obs);
    bd->t = xaligned_alloc(n_obs * sizeof(float));
    for (size_t i = 0; i < n_obs; i++) {
        bd->obs[i] = binary ? (uint8_t)(rng_uniform_f(r) < 0.1f) : (uint8_t)rng_below(r, 256);
    }
    bd->out2 = xaligned_alloc(conv_out_features(&bd->s[0]) * (size_t)B * sizeof(float));
    bd->scratch = xaligned_alloc(scratch);
    bd->big_a = xaligned_alloc(big * sizeof(float));
    bd->big_b = xaligned_alloc(big * sizeof(float));
    bd->big_c = xaligned_alloc(big * sizeof(float));
}

static void s_body_fini(body_t *bd) {
    for (int l = 0; l < bd->n_layers; l++) {
        xfree(bd->w[l]), xfree(bd->b[l]), xfree(bd->dw[l]), xfree(bd->db[l]);
        xfree(bd->out[l]), xfree(bd->dout[l]);
    }
    xfree(bd->obs), xfree(bd->t), xfree(bd->out2), xfree(bd->scratch);
    xfree(bd->big_a), xfree(bd->big_b), xfree(bd->big_c);
}

static conv_input_t s_input(const body_t *bd, int l) {
    return (conv_input_t){l == 0 ? bd->t : bd->out[l - 1], 0, 1.0f};
}

// ----------------------------------------------------------------------------
// the timed operations

typedef enum {
    OP_STEP,
    OP_FORWARD,
    OP_BACKWARD,
    OP_FIRST1,     // first layer, one weight set
    OP_FIRST2,     // first layer, two weight sets (conv_forward2)
    OP_TRANSPOSE,  // the observations' transpose
    OP_IM2COL,     // every layer's chunked im2col; per layer in pieces
    OP_GEMM_CHUNK, // each layer's forward GEMM on one chunk x chunks; per layer in pieces
    OP_GEMM_WHOLE, // the same product on the whole batch at once; per layer in pieces
    OP_COUNT
} op_t;

static void s_forward(body_t *bd) {
    conv_transpose_f32(bd->t, bd->obs, 1, bd->scale, &bd->s[0], bd->B);
    for (int l = 0; l < bd->n_layers; l++) {
        conv_input_t in = s_input(bd, l);
        conv_forward(bd->out[l], &in, bd->w[l], bd->b[l], 1, &bd->s[l], bd->B, bd->scratch);
    }
}

static void s_backward(body_t *bd) {
    // dout[top] stays fixed; dout[l - 1] is overwritten by layer l's din.
    for (int l = bd->n_layers - 1; l >= 0; l--) {
        conv_input_t in = s_input(bd, l);
        conv_backward(l ? bd->dout[l - 1] : NULL, bd->dw[l], bd->db[l], bd->dout[l], &in, bd->w[l],
                      &bd->s[l], bd->B, bd->scratch);
    }
}

static void s_op(body_t *bd, op_t op, int64_t *ns) {
    const int B = bd->B;
    if (op == OP_STEP) {
        s_forward(bd);
        s_backward(bd);
    } else if (op == OP_FORWARD) {
        s_forward(bd);
    } else if (op == OP_BACKWARD) {
        s_backward(bd);
    } else if (op == OP_FIRST1 || op == OP_FIRST2) {
        conv_input_t in = s_input(bd, 0);
        if (op == OP_FIRST1) {
            conv_forward(bd->out[0], &in, bd->w[0], bd->b[0], 1, &bd->s[0], B, bd->scratch);
        } else { // the same weights twice: the cost does not depend on the values
            conv_forward2(bd->out[0], bd->out2, &in, bd->w[0], bd->b[0], bd->w[0], bd->b[0], 1,
                          &bd->s[0], B, bd->scratch);
        }
    } else if (op == OP_TRANSPOSE) {
        conv_transpose_f32(bd->t, bd->obs, 1, bd->scale, &bd->s[0], B);
    } else {
        for (int l = 0; l < bd->n_layers; l++) {
            const conv_shape_t *s = &bd->s[l];
            int P = s->oh * s->ow, pc = conv_chunk_positions(s, B), K = s->c_in * s->k * s->k;
            conv_input_t in = s_input(bd, l);
            int64_t t0 = s_cpu_ns();
            if (op == OP_IM2COL) {
                for (int p0 = 0; p0 < P; p0 += pc) {
                    conv_im2col(bd->scratch, &in, s, B, p0, APEX_MIN(p0 + pc, P));
                }
            } else if (op == OP_GEMM_CHUNK) {
                for (int p0 = 0; p0 < P; p0 += pc) {
                    int n = (APEX_MIN(p0 + pc, P) - p0) * B;
                    blas_sgemm(bd->big_c, bd->w[l], bd->big_a, 1.0f, 0.0f, BLAS_NO_TRANS,
                               BLAS_NO_TRANS, s->c_out, n, K);
                }
            } else {
                blas_sgemm(bd->big_c, bd->w[l], bd->big_a, 1.0f, 1.0f, BLAS_NO_TRANS, BLAS_NO_TRANS,
                           s->c_out, P * B, K);
            }
            ns[l] += s_cpu_ns() - t0;
        }
    }
}

// ----------------------------------------------------------------------------
// timing

// One window of op: returns ms per call, and ms per call of each layer's piece.
static double s_window(body_t *bd, op_t op, double *piece_ms) {
    int64_t t0 = s_cpu_ns(), t;
    int64_t ns[MAX_LAYERS] = {0};
    int iters = 0;
    do {
        s_op(bd, op, ns);
        iters++;
    } while ((t = s_cpu_ns() - t0) < WINDOW_NS);
    for (int l = 0; l < MAX_LAYERS; l++) {
        piece_ms[l] = (double)ns[l] * 1e-6 / iters;
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
    int64_t t0 = s_cpu_ns();
    int reps = 0;
    do {
        blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
        reps++;
    } while (s_cpu_ns() - t0 < WINDOW_NS);
    double s = (double)(s_cpu_ns() - t0) * 1e-9;
    xfree(a), xfree(b), xfree(c);
    return 2.0 * n * (double)n * n * reps / s * 1e-9;
}

static double s_layer_flops(const body_t *bd, int l) {
    const conv_shape_t *s = &bd->s[l];
    return 2.0 * s->c_out * s->c_in * s->k * s->k * s->oh * s->ow * bd->B;
}

static void s_bench_body(body_t *bd, int runs, const char *tsuffix) {
    double ms[OP_COUNT][MAX_RUNS], pms[OP_COUNT][MAX_LAYERS][MAX_RUNS], one[MAX_LAYERS];
    s_op(bd, OP_STEP, NULL); // warm-up: first touch of every buffer
    for (int r = 0; r < runs; r++) {
        for (int op = 0; op < OP_COUNT; op++) {
            ms[op][r] = s_window(bd, (op_t)op, one);
            for (int l = 0; l < MAX_LAYERS; l++) {
                pms[op][l][r] = one[l];
            }
        }
    }
    double med[OP_COUNT], step_flops = 0;
    for (int op = 0; op < OP_COUNT; op++) {
        med[op] = bench_median(ms[op], runs);
    }
    const char *n = bd->name;
    for (int l = 0; l < bd->n_layers; l++) {
        const conv_shape_t *s = &bd->s[l];
        double f = s_layer_flops(bd, l), chunk = bench_median(pms[OP_GEMM_CHUNK][l], runs);
        double whole = bench_median(pms[OP_GEMM_WHOLE][l], runs);
        int pc = conv_chunk_positions(s, bd->B), K = s->c_in * s->k * s->k;
        step_flops += f * (l == 0 ? 2 : 3);
        printf("# conv.%s layer %d: K=%d OC=%d, %d positions of %d per chunk (col %.0f KB); "
               "im2col %.3f ms; forward GEMM on chunks %.3f ms (%.1f GFLOP/s), on the whole "
               "batch %.3f ms (%.1f GFLOP/s)\n",
               n, l, K, s->c_out, pc, s->oh * s->ow, (double)K * pc * bd->B * 4 / 1024,
               bench_median(pms[OP_IM2COL][l], runs), chunk, f / (chunk * 1e-3) * 1e-9, whole,
               f / (whole * 1e-3) * 1e-9);
    }
    printf("BENCH conv.%s%s.step_ms %.3f ms\n", n, tsuffix, med[OP_STEP]);
    printf("BENCH conv.%s%s.forward_ms %.3f ms\n", n, tsuffix, med[OP_FORWARD]);
    printf("BENCH conv.%s%s.backward_ms %.3f ms\n", n, tsuffix, med[OP_BACKWARD]);
    printf("BENCH conv.%s%s.step_gflops %.1f GFLOP/s\n", n, tsuffix,
           step_flops / (med[OP_STEP] * 1e-3) * 1e-9);
    printf("BENCH conv.%s%s.first_forward_ms %.3f ms\n", n, tsuffix, med[OP_FIRST1]);
    printf("BENCH conv.%s%s.first_forward2_ms %.3f ms\n", n, tsuffix, med[OP_FIRST2]);
    printf("BENCH conv.%s%s.transpose_ms %.3f ms\n", n, tsuffix, med[OP_TRANSPOSE]);
    printf("BENCH conv.%s%s.im2col_ms %.3f ms\n", n, tsuffix, med[OP_IM2COL]);
}

int main(int argc, char **argv) {
    // The kernel every apex daemon would run here ([run] blas_kernel = auto): it may start
    // the benchmark again with another one.
    blas_startup(argv, "auto");
    int threads = 1, runs = 5;
    for (int i = 1; i < argc; i += 2) {
        int *dst = strcmp(argv[i], "--threads") == 0 ? &threads
                   : strcmp(argv[i], "--runs") == 0  ? &runs
                                                     : NULL;
        int64_t v;
        if (!dst || i + 1 >= argc || parse_int64(argv[i + 1], INT_MIN, INT_MAX, &v) != 0) {
            fprintf(stderr, "usage: %s [--threads N] [--runs R]\n", argv[0]);
            return 2;
        }
        *dst = (int)v;
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
    printf("# bench_conv: threads %d, %d windows of >= %d ms CPU time, OPENBLAS_CORETYPE=%s\n",
           threads, runs, WINDOW_NS / 1000000, ct ? ct : "(unset)");
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
