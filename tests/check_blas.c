// check_blas.c: blas_sgemm against the naive triple loop, on odd shapes and every transpose;
// blas_sgemm_ld against blas_sgemm.
#include "check_apex.h"

#include "blas.h"
#include "rng.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

// Fills n floats with uniform values in [-1, 1).
static void s_fill(float *x, size_t n, rng_t *r) {
    for (size_t i = 0; i < n; i++) {
        x[i] = 2.0f * rng_uniform_f(r) - 1.0f;
    }
}

// Runs both implementations on one shape and compares; sizes up to a few hundred.
static int s_compare(int M, int N, int K, blas_trans ta, blas_trans tb, float alpha, float beta,
                     rng_t *r) {
    float *a = xmalloc(sizeof(float) * (size_t)(M * K + 1));
    float *b = xmalloc(sizeof(float) * (size_t)(K * N + 1));
    float *c = xmalloc(sizeof(float) * (size_t)(M * N + 1));
    float *want = xmalloc(sizeof(float) * (size_t)(M * N + 1));
    s_fill(a, (size_t)M * K, r);
    s_fill(b, (size_t)K * N, r);
    s_fill(c, (size_t)M * N, r);
    for (int i = 0; i < M * N; i++) {
        want[i] = c[i];
    }
    if (beta == 0.0f) {
        for (int i = 0; i < M * N; i++) {
            c[i] = NAN; // beta 0 must overwrite, never read, C
        }
    }
    blas_sgemm(c, a, b, alpha, beta, ta, tb, M, N, K);
    blas_sgemm_naive(want, a, b, alpha, beta, ta, tb, M, N, K);
    // Float accumulation of K products of magnitude <= 1: error grows ~ sqrt(K) * 2^-24.
    int ok = check_close_f(c, want, (size_t)M * N, 1e-5, 1e-5 * sqrt((double)K + 1), "sgemm");
    xfree(a);
    xfree(b);
    xfree(c);
    xfree(want);
    return ok;
}

START_TEST(test_odd_shapes_all_transposes) {
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_TEST, 0);
    static const int shapes[][3] = {{1, 1, 1},   {3, 5, 7},   {17, 1, 33},  {1, 19, 4},
                                    {65, 31, 9}, {7, 130, 2}, {33, 64, 129}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int t = 0; t < 4; t++) {
            blas_trans ta = (t & 1) ? BLAS_TRANS : BLAS_NO_TRANS;
            blas_trans tb = (t & 2) ? BLAS_TRANS : BLAS_NO_TRANS;
            ck_assert_msg(
                s_compare(shapes[s][0], shapes[s][1], shapes[s][2], ta, tb, 1.0f, 0.0f, &r),
                "shape %d %d %d trans %d", shapes[s][0], shapes[s][1], shapes[s][2], t);
        }
    }
}
END_TEST

START_TEST(test_alpha_beta_accumulate) {
    // beta = 1 is how backward accumulates gradients (+=); alpha scales.
    rng_t r;
    rng_init_stream(&r, 2, RNG_ROLE_TEST, 0);
    for (int t = 0; t < 4; t++) {
        blas_trans ta = (t & 1) ? BLAS_TRANS : BLAS_NO_TRANS;
        blas_trans tb = (t & 2) ? BLAS_TRANS : BLAS_NO_TRANS;
        ck_assert(s_compare(9, 13, 11, ta, tb, 1.0f, 1.0f, &r));
        ck_assert(s_compare(9, 1, 11, ta, tb, -0.5f, 2.0f, &r));
        ck_assert(s_compare(9, 1, 11, ta, tb, 0.25f, 0.0f, &r)); // gemv path
    }
}
END_TEST

START_TEST(test_k_zero_scales_c) {
    float c[4] = {1, 2, 3, 4};
    float a[1] = {0}, b[1] = {0};
    blas_sgemm(c, a, b, 1.0f, 0.5f, BLAS_NO_TRANS, BLAS_NO_TRANS, 2, 2, 0);
    ck_assert_float_eq(c[0], 0.5f);
    ck_assert_float_eq(c[3], 2.0f);
}
END_TEST

// blas_sgemm_ld on views into wider matrices (pad columns of garbage that must stay as they
// are) against blas_sgemm on dense copies of the same views, every transpose, beta 0 and 1.
START_TEST(test_leading_dimensions) {
    rng_t r;
    rng_init_stream(&r, 3, RNG_ROLE_TEST, 0);
    enum { M = 7, N = 9, K = 5, PAD = 3 };
    for (int t = 0; t < 8; t++) {
        blas_trans ta = (t & 1) ? BLAS_TRANS : BLAS_NO_TRANS;
        blas_trans tb = (t & 2) ? BLAS_TRANS : BLAS_NO_TRANS;
        float beta = (t & 4) ? 1.0f : 0.0f;
        int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        int lda = ac + PAD, ldb = bc + PAD, ldc = N + PAD;
        float a[M * K], b[K * N], c[M * N], wa[(M + K) * (M + K + PAD)];
        float wb[(K + N) * (K + N + PAD)], wc[M * (N + PAD)], c0[M * (N + PAD)];
        s_fill(wa, (size_t)ar * lda, &r);
        s_fill(wb, (size_t)br * ldb, &r);
        s_fill(wc, (size_t)M * ldc, &r);
        memcpy(c0, wc, sizeof(float) * (size_t)M * ldc);
        for (int i = 0; i < ar; i++) {
            memcpy(a + i * ac, wa + i * lda, sizeof(float) * (size_t)ac);
        }
        for (int i = 0; i < br; i++) {
            memcpy(b + i * bc, wb + i * ldb, sizeof(float) * (size_t)bc);
        }
        for (int i = 0; i < M; i++) {
            memcpy(c + i * N, wc + i * ldc, sizeof(float) * N);
        }
        blas_sgemm(c, a, b, 1.0f, beta, ta, tb, M, N, K);
        blas_sgemm_ld(wc, ldc, wa, lda, wb, ldb, 1.0f, beta, ta, tb, M, N, K);
        for (int i = 0; i < M; i++) {
            ck_assert(check_close_f(wc + i * ldc, c + i * N, N, 1e-6, 1e-6, "sgemm_ld"));
            for (int j = N; j < ldc; j++) {
                ck_assert(wc[i * ldc + j] == c0[i * ldc + j]); // the pad is not written
            }
        }
    }
}
END_TEST

Suite *blas_suite(void) {
    Suite *s = suite_create("blas");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_odd_shapes_all_transposes);
    tcase_add_test(tc, test_alpha_beta_accumulate);
    tcase_add_test(tc, test_k_zero_scales_c);
    tcase_add_test(tc, test_leading_dimensions);
    suite_add_tcase(s, tc);
    return s;
}
