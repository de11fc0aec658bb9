// check_blas.c: blas_sgemm against the naive triple loop, on odd shapes and every transpose;
// blas_sgemm_ld against blas_sgemm.
#include "check_apex.h"

#include "blas.h"
#include "dnnconv.h"
#include "rng.h"
#include "xalloc.h"

#include <dlfcn.h>
#include <math.h>
#include <signal.h>
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

// ---------------------------------------------------------------------------------------
// The kernel choice (issue #32): feature sets in, a plan out, whatever CPU runs the test.

static cpu_features_t s_cpu(int avx, int avx2fma, int avx512, int bf16) {
    cpu_features_t f = {.sse3 = 1, .avx = avx, .avx2 = avx2fma, .fma = avx2fma};
    f.avx512f = f.avx512cd = f.avx512bw = f.avx512dq = f.avx512vl = avx512;
    f.avx512_bf16 = bf16;
    return f;
}

START_TEST(test_core_isa_and_fit) {
    ck_assert_int_eq(blas_core_isa("Prescott"), BLAS_ISA_SSE);
    ck_assert_int_eq(blas_core_isa("nehalem"), BLAS_ISA_SSE); // any case
    ck_assert_int_eq(blas_core_isa("Sandybridge"), BLAS_ISA_AVX);
    ck_assert_int_eq(blas_core_isa("Haswell"), BLAS_ISA_AVX2);
    ck_assert_int_eq(blas_core_isa("Zen"), BLAS_ISA_AVX2);
    ck_assert_int_eq(blas_core_isa("SkylakeX"), BLAS_ISA_AVX512);
    ck_assert_int_eq(blas_core_isa("Cooperlake"), BLAS_ISA_AVX512);
    ck_assert_int_eq(blas_core_isa("SapphireRapids"), BLAS_ISA_UNKNOWN); // not in 0.3.21
    ck_assert_int_eq(blas_core_isa(NULL), BLAS_ISA_UNKNOWN);
    cpu_features_t emr = s_cpu(1, 1, 1, 1), skx = s_cpu(1, 1, 1, 0), zen1 = s_cpu(1, 1, 0, 0),
                   snb = s_cpu(1, 0, 0, 0), old = s_cpu(0, 0, 0, 0);
    emr.amx_tile = emr.amx_bf16 = 1;
    ck_assert_str_eq(blas_core_for(&emr), "Cooperlake");
    ck_assert_str_eq(blas_core_for(&skx), "SkylakeX");
    ck_assert_str_eq(blas_core_for(&zen1), "Haswell");
    ck_assert_str_eq(blas_core_for(&snb), "Sandybridge");
    ck_assert_ptr_null(blas_core_for(&old));
    // AVX-512 needs all five parts (a CPU with F alone gets the AVX2 kernel).
    cpu_features_t knl = zen1;
    knl.avx512f = knl.avx512cd = 1;
    ck_assert_str_eq(blas_core_for(&knl), "Haswell");
}
END_TEST

START_TEST(test_plan) {
    cpu_features_t emr = s_cpu(1, 1, 1, 1), zen1 = s_cpu(1, 1, 0, 0), snb = s_cpu(1, 0, 0, 0);
    blas_plan_t p;
    // Emerald Rapids: OpenBLAS falls back to Prescott; apex switches to Cooperlake.
    blas_plan(&emr, "Prescott", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    ck_assert_str_eq(p.core, "Cooperlake");
    // An unset or empty variable is no variable.
    blas_plan(&emr, "Prescott", "", "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    // The same with the user's OPENBLAS_CORETYPE: respected, a warning with the remedy.
    blas_plan(&emr, "Prescott", "Prescott", "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(p.warn);
    ck_assert_ptr_nonnull(strstr(p.why, "unset OPENBLAS_CORETYPE"));
    // An AVX2 kernel on an AVX-512 CPU the user asked for: kept, with a warning naming the
    // better core (not "far": within 2x).
    blas_plan(&emr, "Haswell", "Haswell", "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(p.warn);
    ck_assert_ptr_nonnull(strstr(p.why, "allows Cooperlake. ---> HINT"));
    // What the CPU allows, asked for by the variable: no warning.
    blas_plan(&zen1, "Haswell", "Haswell", "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(!p.warn);
    // OpenBLAS already runs what fits (or its own tuned core of the same instruction set).
    blas_plan(&emr, "Cooperlake", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(!p.warn);
    blas_plan(&zen1, "Zen", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    // An AVX2 CPU left on SSE; an AVX CPU left on SSE.
    blas_plan(&zen1, "Prescott", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    ck_assert_str_eq(p.core, "Haswell");
    blas_plan(&snb, "Nehalem", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    ck_assert_str_eq(p.core, "Sandybridge");
    // A core name OpenBLAS did not report (it ignored a bad OPENBLAS_CORETYPE) is below all.
    blas_plan(&zen1, "Unknown", NULL, "auto", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    // [run] blas_kernel = openblas: kept, and a warning when far below.
    blas_plan(&emr, "Prescott", NULL, "openblas", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(p.warn);
    ck_assert_ptr_nonnull(strstr(p.why, "far above it"));
    blas_plan(&snb, "Prescott", NULL, "openblas", &p);
    ck_assert(p.warn); // below the CPU's AVX, if not far
    ck_assert_ptr_null(strstr(p.why, "far above it"));
    blas_plan(&snb, "Sandybridge", NULL, "openblas", &p);
    ck_assert(!p.warn);
    // A core named in the config runs, over the variable too; one the CPU cannot run does not.
    blas_plan(&emr, "Cooperlake", "Cooperlake", "Sandybridge", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_SWITCH);
    ck_assert_str_eq(p.core, "Sandybridge");
    blas_plan(&emr, "sandybridge", NULL, "Sandybridge", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(!p.warn);
    blas_plan(&zen1, "Zen", NULL, "SkylakeX", &p);
    ck_assert_int_eq(p.kind, BLAS_PLAN_KEEP);
    ck_assert(p.warn);
    ck_assert_ptr_nonnull(strstr(p.why, "AVX-512"));
}
END_TEST

// blas_verify passes OpenBLAS's GEMM and catches a wrong one.
static void s_wrong_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                         float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                         int K) {
    blas_sgemm_ld(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
    if (M > 16 && N > 16) {
        c[(size_t)16 * ldc + 16] += 1e-3f; // a kernel's edge tile off by a little
    }
}

static void s_ignores_beta(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                           float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                           int K) {
    (void)beta;
    blas_sgemm_ld(c, ldc, a, lda, b, ldb, alpha, 0.0f, ta, tb, M, N, K);
}

START_TEST(test_verify) {
    char why[256] = "";
    ck_assert_msg(blas_verify(blas_sgemm_ld, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(blas_verify(s_wrong_gemm, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "C[16][16]"));
    ck_assert_int_eq(blas_verify(s_ignores_beta, why, sizeof why), -1);
    // The kernel OpenBLAS runs is one apex knows.
    ck_assert_int_ne(blas_core_isa(blas_core()), BLAS_ISA_UNKNOWN);
}
END_TEST

static void s_sigill_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                          float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                          int K) {
    (void)c, (void)ldc, (void)a, (void)lda, (void)b, (void)ldb, (void)alpha, (void)beta;
    (void)ta, (void)tb, (void)M, (void)N, (void)K;
    raise(SIGILL); // as a kernel with instructions the CPU lacks would
}

START_TEST(test_verify_survives_sigill) {
    char why[256] = "";
    ck_assert_int_eq(blas_verify(s_sigill_gemm, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "SIGILL"));
    ck_assert_int_eq(blas_verify(blas_sgemm_ld, why, sizeof why), 0); // and the handler is gone
}
END_TEST

// [run] blas_library: an unknown name and a library that does not load are refused with the
// remedy, OpenBLAS still computing; oneDNN, where Debian's libdnnl2 is installed (the test
// set-up installs it; CI=true fails without it), computes products that pass the reference
// check (blas_verify through blas_sgemm_ld) and blas_sgemm's dense form, and says so.
START_TEST(test_library) {
    char err[512];
    ck_assert_int_eq(blas_use_library("openblas", 1, 1, err, sizeof err), 0);
    ck_assert_str_eq(blas_library(), "OpenBLAS");
    ck_assert_int_eq(blas_use_library("mkl", 1, 1, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "'mkl' is not auto, openblas or onednn"));
    ck_assert_int_eq(blas_use_onednn_at("/nonexistent/libdnnl.so.2", 1, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "cannot load /nonexistent/libdnnl.so.2") &&
                      strstr(err, "apt-get install libdnnl2"),
                  "%s", err);
    ck_assert_str_eq(blas_library(), "OpenBLAS");
    if (blas_use_library("onednn", 1, 1, err, sizeof err) != 0) {
        const char *ci = getenv("CI");
        ck_assert_msg(!ci || strcmp(ci, "true") != 0, "CI without oneDNN: %s", err);
        fprintf(stderr, "check_blas: %s: oneDNN not tested\n", err);
        return;
    }
    ck_assert_str_eq(blas_library(), "oneDNN");
    char bad[256];
    ck_assert_msg(blas_verify(blas_sgemm_ld, bad, sizeof bad) == 0, "%s", bad);
    float a[6 * 5], b[5 * 4], c[6 * 4], want[6 * 4];
    for (int i = 0; i < 30; i++) {
        a[i] = (float)(i % 7) - 3.0f;
    }
    for (int i = 0; i < 20; i++) {
        b[i] = (float)(i % 5) * 0.5f;
    }
    blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, 6, 4, 5);
    blas_sgemm_naive(want, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, 6, 4, 5);
    for (int i = 0; i < 24; i++) {
        ck_assert_float_eq(c[i], want[i]); // small integers and halves: exact either way
    }
#ifndef __SANITIZE_ADDRESS__
    // Not under ASan: LeakSanitizer's exit check cannot stop libgomp's idle worker threads
    // (a fatal error of the tool, not a leak), and two threads start them.
    blas_set_threads(2); // OpenMP's count follows, and products still check
    ck_assert_msg(blas_verify(blas_sgemm_ld, bad, sizeof bad) == 0, "%s", bad);
#endif
}
END_TEST

// [run] blas_library = auto (the default): a oneDNN that does not load is no error (OpenBLAS
// computes everything, conv layers by im2col); one that loads runs the conv layers' primitives
// (dnnconv_enabled: nn_state_init makes bodies) while OpenBLAS keeps the products, and
// onednn afterwards moves the products too. openblas loads nothing, nor does auto for a run
// with no conv body to run (convs 0).
START_TEST(test_library_auto) {
    char err[512];
    ck_assert_int_eq(blas_use_library("openblas", 1, 1, err, sizeof err), 0);
    ck_assert(!dnnconv_enabled());
    ck_assert_ptr_null(dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD)); // nothing loaded
    // the environment as it was, set or not (OMP_NUM_THREADS is set for a library that loads)
    setenv("OMP_NUM_THREADS", "7", 1);
    ck_assert_int_eq(blas_use_auto_at("/nonexistent/libdnnl.so.2", 3, 1), 0);
    ck_assert_str_eq(blas_library(), "OpenBLAS");
    ck_assert(!dnnconv_enabled());
    ck_assert_str_eq(getenv("OMP_NUM_THREADS"), "7");
    unsetenv("OMP_NUM_THREADS");
    ck_assert_int_eq(blas_use_auto_at("/nonexistent/libdnnl.so.2", 3, 1), 0);
    ck_assert_ptr_null(getenv("OMP_NUM_THREADS"));
    // a run whose network has no conv layers for oneDNN (convs 0): nothing loaded, even where
    // the library would load, and the environment untouched
    ck_assert_int_eq(blas_use_library("auto", 1, 0, err, sizeof err), 0);
    ck_assert(!dnnconv_enabled());
    ck_assert_ptr_null(dlopen("libdnnl.so.2", RTLD_NOW | RTLD_NOLOAD));
    ck_assert_ptr_null(getenv("OMP_NUM_THREADS"));
    ck_assert_int_eq(blas_use_library("auto", 1, 1, err, sizeof err), 0);
    ck_assert_str_eq(blas_library(), "OpenBLAS");
    if (!dnnconv_enabled()) { // libdnnl2 missing, or a build without oneDNN's header
        const char *ci = getenv("CI");
        ck_assert_msg(!ci || strcmp(ci, "true") != 0, "CI without oneDNN's convolutions");
        fprintf(stderr, "check_blas: auto without oneDNN's convolutions: not tested\n");
        return;
    }
    char bad[256];
    ck_assert_msg(blas_verify(blas_sgemm_ld, bad, sizeof bad) == 0, "%s", bad);
    ck_assert_int_eq(blas_use_library("onednn", 1, 1, err, sizeof err), 0);
    ck_assert_str_eq(blas_library(), "oneDNN");
    ck_assert(dnnconv_enabled());
}
END_TEST

// auto at more than one thread with a conv body to run: oneDNN's sgemm computes the products
// too (one thread pool), checked against the reference as for onednn.
START_TEST(test_library_auto_threads) {
#ifdef __SANITIZE_ADDRESS__
    // (LeakSanitizer's exit check cannot stop libgomp's idle workers: see test_library.)
    fprintf(stderr, "check_blas: auto at 2 threads: not under ASan\n");
#else
    char err[512];
    ck_assert_int_eq(blas_use_library("auto", 2, 1, err, sizeof err), 0);
    if (!dnnconv_enabled()) {
        const char *ci = getenv("CI");
        ck_assert_msg(!ci || strcmp(ci, "true") != 0, "CI without oneDNN's convolutions");
        fprintf(stderr, "check_blas: auto without oneDNN's convolutions: not tested\n");
        return;
    }
    ck_assert_str_eq(blas_library(), "oneDNN");
    char bad[256];
    ck_assert_msg(blas_verify(blas_sgemm_ld, bad, sizeof bad) == 0, "%s", bad);
#endif
}
END_TEST

Suite *blas_suite(void) {
    Suite *s = suite_create("blas");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_odd_shapes_all_transposes);
    tcase_add_test(tc, test_alpha_beta_accumulate);
    tcase_add_test(tc, test_k_zero_scales_c);
    tcase_add_test(tc, test_leading_dimensions);
    tcase_add_test(tc, test_core_isa_and_fit);
    tcase_add_test(tc, test_plan);
    tcase_add_test(tc, test_verify);
    tcase_add_test(tc, test_verify_survives_sigill);
    tcase_add_test(tc, test_library);
    tcase_add_test(tc, test_library_auto);
    tcase_add_test(tc, test_library_auto_threads);
    suite_add_tcase(s, tc);
    return s;
}
