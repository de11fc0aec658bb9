// blas.h: the one matrix-product wrapper (STYLE S10) and its naive reference.
//
// Every GEMM in apex goes through blas_sgemm, a thin wrapper around OpenBLAS's
// cblas_sgemm over dense row-major matrices (leading dimensions are implied by the
// shapes), and blas_sgemm_ld for row-major views with explicit leading dimensions (conv.c's
// chunks of columns of a wider matrix). N == 1 is routed to cblas_sgemv, which avoids the GEMM
// packing overhead for single-column products (an actor with one environment).
// blas_sgemm_naive is a triple loop accumulating in double: the algorithmic reference the
// tests compare against (llm.c matmul_forward_naive). It is never used on a hot path.
// What it does not do: threading policy beyond blas_set_threads, or any other BLAS routine. Not thread-safe to change the thread count while GEMMs run.
#ifndef APEX_BLAS_H
#define APEX_BLAS_H

typedef enum { BLAS_NO_TRANS = 0, BLAS_TRANS = 1 } blas_trans;

// C (M x N) = alpha * op(A) * op(B) + beta * C, all row-major and dense.
// op(A) is M x K: A is stored M x K, or K x M when ta == BLAS_TRANS.
// op(B) is K x N: B is stored K x N, or N x K when tb == BLAS_TRANS.
// beta == 0 overwrites C (NaNs already in C do not propagate). Thread-safe for distinct C.
void blas_sgemm(float *c, const float *a, const float *b, float alpha, float beta, blas_trans ta,
                blas_trans tb, int M, int N, int K);

// Same as blas_sgemm on row-major views with leading dimensions (elements from one row to
// the next) lda, ldb, ldc of the matrices as stored: A's row length in memory is lda >= K
// (M when ta), B's ldb >= N (K when tb), C's ldc >= N.
void blas_sgemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                   float beta, blas_trans ta, blas_trans tb, int M, int N, int K);

// Same contract as blas_sgemm; triple loop with double accumulation. Test reference only.
void blas_sgemm_naive(float *c, const float *a, const float *b, float alpha, float beta,
                      blas_trans ta, blas_trans tb, int M, int N, int K);

// Number of threads OpenBLAS uses for every later call in this process (>= 1).
void blas_set_threads(int n);

#endif
