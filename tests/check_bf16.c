// check_bf16.c: model/bf16.h. bf16_round against hand-computed roundings and against the
// definition (the nearer of the two bfloat16 neighbours, ties to the even one); bf16_gemm_ld
// against a double-precision sum of the rounded inputs' products on shapes that cross every
// edge of its blocking (rows past 12 and 192, columns past 32, k odd and past 256), both
// transposes, alpha and beta, leading dimensions, beta 0 over NaNs, and two threads at once.
// The kernel tests need AVX512_BF16: on a CPU without it they say so and check only that the
// kernel is reported unsupported (the selection logic, with any feature set, runs anywhere).
#include "check_apex.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bf16.h"
#include "cpu.h"
#include "rng.h"
#include "xalloc.h"

static float s_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t s_to_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

START_TEST(test_round_cases) {
    ck_assert_float_eq(bf16_round(1.0f), 1.0f);
    ck_assert_float_eq(bf16_round(1.0f + 0x1p-9f), 1.0f);           // below half an ulp (2^-7)
    ck_assert_float_eq(bf16_round(1.0f + 0x1p-8f), 1.0f);           // a tie: to the even 1.0
    ck_assert_float_eq(bf16_round(1.0f + 0x3p-8f), 1.0f + 0x1p-6f); // a tie: up to the even
    ck_assert_float_eq(bf16_round(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f); // past the tie
    ck_assert_float_eq(bf16_round(-3.0f), -3.0f);
    ck_assert_float_eq(bf16_round(0.1f), 0.10009765625f);                // 0x3DCCCCCD -> 0x3DCD
    ck_assert_float_eq(bf16_round(3.0e38f), s_from_bits(0x7f62u << 16)); // 0x7F61B1E6: up
    ck_assert_float_eq(bf16_round(3.4e38f), INFINITY); // past the largest bf16: rounds to inf
    ck_assert_float_eq(bf16_round(INFINITY), INFINITY);
    ck_assert_float_eq(bf16_round(-INFINITY), -INFINITY);
    ck_assert(isnan(bf16_round(NAN)));
    ck_assert(isnan(bf16_round(s_from_bits(0x7f800001u)))); // a NaN whose payload is cut
    ck_assert_uint_eq(s_to_bits(bf16_round(-0.0f)), 0x80000000u);
}
END_TEST

// The definition, in double: a bfloat16 is a float with 16 zero low bits; of the two around x,
// the nearer, and on a tie the one whose last kept bit is 0.
START_TEST(test_round_definition) {
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_TEST, 0);
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rng_next_u32(&r);
        if (i % 4 == 0) {
            u = (u & 0xffff0000u) | 0x8000u; // ties
        }
        float x = s_from_bits(u);
        if (!isfinite(x) || fabsf(x) >= 3.38e38f) {
            continue;
        }
        float lo = s_from_bits(u & 0xffff0000u); // toward zero
        float hi = s_from_bits((u & 0xffff0000u) + 0x10000u);
        double dlo = fabs((double)x - lo), dhi = fabs((double)x - hi);
        float want = dlo < dhi ? lo : dhi < dlo ? hi : ((u >> 16) & 1u) ? hi : lo;
        ck_assert_msg(s_to_bits(bf16_round(x)) == s_to_bits(want), "x = %a: %a, want %a", (double)x,
                      (double)bf16_round(x), (double)want);
    }
}
END_TEST

START_TEST(test_supported_by_features) {
    cpu_features_t f = {0};
    ck_assert_int_eq(bf16_gemm_supported(&f), 0);
    f.avx512f = f.avx512bw = f.avx512vl = 1;
    ck_assert_int_eq(bf16_gemm_supported(&f), 0); // AVX-512 without BF16 (Skylake-X)
    f.avx512_bf16 = 1;
    ck_assert_int_eq(bf16_gemm_supported(&f), 1); // Cooper Lake, Sapphire Rapids, Zen 4/5
    f.avx512vl = 0;
    ck_assert_int_eq(bf16_gemm_supported(&f), 0);
}
END_TEST

// AMX only with its tiles, AMX-BF16, AVX512_BF16 for the packing, and the OS's grant.
START_TEST(test_kernel_by_features) {
    cpu_features_t f = {0};
    ck_assert_int_eq(bf16_kernel_for(&f, 1), BF16_KERNEL_NONE);
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512_bf16 = 1;
    ck_assert_int_eq(bf16_kernel_for(&f, 1), BF16_KERNEL_AVX512); // Zen 4/5, Cooper Lake
    f.amx_tile = f.amx_bf16 = 1;
    ck_assert_int_eq(bf16_kernel_for(&f, 1), BF16_KERNEL_AMX);    // Sapphire/Emerald Rapids
    ck_assert_int_eq(bf16_kernel_for(&f, 0), BF16_KERNEL_AVX512); // Linux said no
    f.amx_bf16 = 0;
    ck_assert_int_eq(bf16_kernel_for(&f, 1), BF16_KERNEL_AVX512); // tiles for int8 only
    f.amx_bf16 = 1;
    f.avx512_bf16 = 0;
    ck_assert_int_eq(bf16_kernel_for(&f, 1), BF16_KERNEL_NONE);
    // Slower than fp32: only AVX512_BF16's kernel on an AMX CPU (tiles not granted).
    f.avx512_bf16 = 1;
    ck_assert_int_eq(bf16_kernel_slow(&f, BF16_KERNEL_AVX512), 1);
    ck_assert_int_eq(bf16_kernel_slow(&f, BF16_KERNEL_AMX), 0);
    f.amx_tile = f.amx_bf16 = 0;
    ck_assert_int_eq(bf16_kernel_slow(&f, BF16_KERNEL_AVX512), 0); // Zen 4/5: 1.6x
    ck_assert_str_eq(bf16_kernel_name(BF16_KERNEL_AMX), "AMX");
    ck_assert_str_eq(bf16_kernel_name(BF16_KERNEL_AVX512), "AVX512_BF16");
    ck_assert_str_eq(bf16_kernel_name(BF16_KERNEL_NONE), "none");
    // This process: the kernel it chose is one its CPU allows.
    cpu_detect(&f);
    bf16_kernel k = bf16_gemm_kernel();
    ck_assert(k == bf16_kernel_for(&f, 0) || k == bf16_kernel_for(&f, 1));
    fprintf(stderr, "check_bf16: this process's kernel: %s\n", bf16_kernel_name(k));
}
END_TEST

static int s_have_bf16(void) {
    cpu_features_t f;
    cpu_detect(&f);
    if (!bf16_gemm_supported(&f)) {
        char d[256];
        cpu_describe(&f, d, sizeof d);
        fprintf(stderr, "check_bf16: this CPU (%s) has no AVX512_BF16: kernel not run\n", d);
        return 0;
    }
    return 1;
}

static void s_fill(float *x, size_t n, rng_t *r) {
    for (size_t i = 0; i < n; i++) {
        x[i] = 2.0f * rng_uniform_f(r) - 1.0f;
    }
}

// One product against the reference; returns 0 and fails the test on a mismatch.
static void s_compare_on(bf16_kernel kern, int M, int N, int K, blas_trans ta, blas_trans tb,
                         float alpha, float beta, int pad, uint64_t seed) {
    rng_t r;
    rng_init_stream(&r, seed, RNG_ROLE_TEST, 0);
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + pad, ldb = bc + pad, ldc = N + pad;
    float *a = xmalloc(sizeof(float) * (size_t)ar * lda);
    float *b = xmalloc(sizeof(float) * (size_t)br * ldb);
    float *c = xmalloc(sizeof(float) * (size_t)M * ldc);
    float *c0 = xmalloc(sizeof(float) * (size_t)M * ldc);
    s_fill(a, (size_t)ar * lda, &r);
    s_fill(b, (size_t)br * ldb, &r);
    s_fill(c0, (size_t)M * ldc, &r);
    memcpy(c, c0, sizeof(float) * (size_t)M * ldc);
    if (beta == 0.0f) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                c[(size_t)i * ldc + j] = NAN; // must be overwritten, never read
            }
        }
    }
    bf16_gemm_ld_on(kern, c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double s = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double x = bf16_round(ta ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k]);
                double y = bf16_round(tb ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j]);
                s += x * y;
                mag += fabs(x * y);
            }
            double cij = c0[(size_t)i * ldc + j];
            double want = alpha * s + (beta == 0.0f ? 0.0 : beta * cij);
            // fp32 accumulation of K exact products, then the alpha/beta step.
            double tol = (K + 4) * 0x1p-24 * (fabs(alpha) * mag + fabs(beta * cij)) + 1e-30;
            double got = c[(size_t)i * ldc + j];
            ck_assert_msg(fabs(got - want) <= tol,
                          "%s: M %d N %d K %d ta %d tb %d alpha %g beta %g pad %d: C[%d][%d] = "
                          "%.9g, want %.9g (tol %.3g)",
                          bf16_kernel_name(kern), M, N, K, ta, tb, alpha, beta, pad, i, j, got,
                          want, tol);
        }
        for (int j = N; j < ldc; j++) { // the padding is not C's: untouched
            ck_assert(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j]);
        }
    }
    xfree(a);
    xfree(b);
    xfree(c);
    xfree(c0);
}

// Every kernel this process can run (AVX512_BF16's, and AMX's where the CPU and Linux give
// it), the one bf16_gemm_ld picks by itself included.
static void s_compare(int M, int N, int K, blas_trans ta, blas_trans tb, float alpha, float beta,
                      int pad, uint64_t seed) {
    s_compare_on(BF16_KERNEL_AVX512, M, N, K, ta, tb, alpha, beta, pad, seed);
    if (bf16_gemm_kernel() == BF16_KERNEL_AMX) {
        s_compare_on(BF16_KERNEL_AMX, M, N, K, ta, tb, alpha, beta, pad, seed);
    }
}

START_TEST(test_gemm_edges) {
    if (!s_have_bf16()) {
        return;
    }
    static const int sizes[] = {1, 2, 11, 12, 13, 16, 31, 32, 33, 67};
    uint64_t seed = 1;
    for (int t = 0; t < 4; t++) {
        blas_trans ta = (t & 1) ? BLAS_TRANS : BLAS_NO_TRANS;
        blas_trans tb = (t & 2) ? BLAS_TRANS : BLAS_NO_TRANS;
        for (size_t m = 0; m < APEX_ARRAY_LEN(sizes); m++) {
            for (size_t n = 0; n < APEX_ARRAY_LEN(sizes); n += 3) {
                int K = sizes[(m + n) % APEX_ARRAY_LEN(sizes)];
                s_compare(sizes[m], sizes[n], K, ta, tb, 1.0f, 0.0f, 0, seed++);
                s_compare(sizes[n], sizes[m], K + 1, ta, tb, -0.5f, 2.0f, 3, seed++);
            }
        }
    }
}
END_TEST

// Past the blocking: rows over MC (192), k over KC (256), odd k in the last block.
START_TEST(test_gemm_blocks) {
    if (!s_have_bf16()) {
        return;
    }
    s_compare(200, 70, 513, BLAS_NO_TRANS, BLAS_NO_TRANS, 1.0f, 0.0f, 0, 11);
    s_compare(197, 65, 300, BLAS_TRANS, BLAS_NO_TRANS, 0.25f, 1.0f, 1, 12);
    s_compare(13, 100, 257, BLAS_NO_TRANS, BLAS_TRANS, 1.0f, -1.0f, 0, 13);
    s_compare(385, 33, 512, BLAS_TRANS, BLAS_TRANS, 2.0f, 0.5f, 2, 14);
    s_compare(4, 5, 0, BLAS_NO_TRANS, BLAS_NO_TRANS, 1.0f, 0.5f, 0, 15); // K 0: C = beta C
}
END_TEST

static void *s_thread(void *arg) {
    int id = *(int *)arg;
    for (int i = 0; i < 3; i++) {
        s_compare(60 + 7 * id, 90 - 5 * id, 280 + id, id ? BLAS_TRANS : BLAS_NO_TRANS,
                  BLAS_NO_TRANS, 1.0f, 0.0f, 0, 100 + (uint64_t)(10 * id + i));
    }
    return NULL;
}

// Each thread packs into its own buffers: two at once, of different shapes, are both right.
START_TEST(test_gemm_threads) {
    if (!s_have_bf16()) {
        return;
    }
    pthread_t t[2];
    int ids[2] = {0, 1};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_create(&t[i], NULL, s_thread, &ids[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(t[i], NULL), 0);
    }
}
END_TEST

Suite *bf16_suite(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_round_cases);
    tcase_add_test(tc, test_round_definition);
    tcase_add_test(tc, test_supported_by_features);
    tcase_add_test(tc, test_kernel_by_features);
    tcase_add_test(tc, test_gemm_edges);
    tcase_add_test(tc, test_gemm_blocks);
    tcase_add_test(tc, test_gemm_threads);
    suite_add_tcase(s, tc);
    return s;
}
