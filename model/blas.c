// blas.c: cblas_sgemm wrapper and the naive reference next to it (STYLE S10).
#include "blas.h"

#include "apex.h"

#include <cblas.h>
#include <stddef.h>

void blas_sgemm(float *c, const float *a, const float *b, float alpha, float beta, blas_trans ta,
                blas_trans tb, int M, int N, int K) {
    APEX_ASSERT(M >= 0 && N >= 0 && K >= 0);
    if (M == 0 || N == 0) {
        return;
    }
    // Row-major leading dimensions of the stored (not the transposed) matrices.
    int lda = ta == BLAS_TRANS ? M : K;
    int ldb = tb == BLAS_TRANS ? K : N;
    if (N == 1 && beta == 0.0f && K > 0) {
        // A single column: C = alpha op(A) b. Whether b is stored K x 1 or 1 x K it is the
        // same K contiguous floats, so tb does not matter. gemv skips GEMM's packing.
        // (beta == 0 must not read C; sgemv with beta 0 does not, by the BLAS contract.)
        cblas_sgemv(CblasRowMajor, ta == BLAS_TRANS ? CblasTrans : CblasNoTrans,
                    ta == BLAS_TRANS ? K : M, ta == BLAS_TRANS ? M : K, alpha, a, lda, b, 1, 0.0f,
                    c, 1);
        return;
    }
    if (K == 0) {
        // BLAS leaves C alone for alpha*0; we still honour beta.
        for (size_t i = 0; i < (size_t)M * N; i++) {
            c[i] = beta == 0.0f ? 0.0f : beta * c[i];
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta == BLAS_TRANS ? CblasTrans : CblasNoTrans,
                tb == BLAS_TRANS ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda, b, ldb, beta,
                c, N);
}

void blas_sgemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                   float beta, blas_trans ta, blas_trans tb, int M, int N, int K) {
    APEX_ASSERT(M >= 0 && N >= 0 && K >= 0);
    APEX_ASSERT(lda >= (ta == BLAS_TRANS ? M : K) && ldb >= (tb == BLAS_TRANS ? K : N) && ldc >= N);
    if (M == 0 || N == 0) {
        return;
    }
    if (K == 0) {
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                float *x = c + (size_t)i * ldc + j;
                *x = beta == 0.0f ? 0.0f : beta * *x;
            }
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta == BLAS_TRANS ? CblasTrans : CblasNoTrans,
                tb == BLAS_TRANS ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda, b, ldb, beta,
                c, ldc);
}

void blas_sgemm_naive(float *c, const float *a, const float *b, float alpha, float beta,
                      blas_trans ta, blas_trans tb, int M, int N, int K) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) {
                float av = ta == BLAS_TRANS ? a[(size_t)k * M + i] : a[(size_t)i * K + k];
                float bv = tb == BLAS_TRANS ? b[(size_t)j * K + k] : b[(size_t)k * N + j];
                acc += (double)av * bv;
            }
            size_t ij = (size_t)i * N + j;
            double prev = beta == 0.0f ? 0.0 : (double)beta * c[ij];
            c[ij] = (float)(alpha * acc + prev);
        }
    }
}

// OpenBLAS's own knob: OPENBLAS_NUM_THREADS is read only at load time, so the daemons and
// benchmarks set the count explicitly from their config.
void blas_set_threads(int n) {
    APEX_ASSERT(n >= 1);
    openblas_set_num_threads(n);
}
