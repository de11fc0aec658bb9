// bf16.h: a GEMM in bfloat16 with fp32 accumulation, for CPUs with AVX512_BF16 (issue #32).
//
// [learner] precision = bf16 is to run the learner's products with their inputs rounded to
// bfloat16 (8 bits of mantissa) and their sums kept in fp32, the master weights and the
// optimizer state staying fp32: the mixed precision PyTorch's autocast gives on CPU. Debian's
// OpenBLAS 0.3.21 has no sbgemm and oneDNN 2.6's BLAS-like API has no bf16 GEMM, so apex has
// its own: vdpbf16ps (AVX512_BF16: 32 products of bf16 pairs summed into 16 fp32 lanes, twice
// fp32 FMA's products per instruction) over panels packed per call, 12 rows x 32 columns of
// C in registers. The conversion is round to nearest even (vcvtne2ps2bf16), and vdpbf16ps
// treats denormal inputs as zero and flushes denormal results, so results differ from fp32
// by the rounding of the inputs, not by its summation: bf16_round is the scalar reference the
// tests use.
// What it does not do: AMX tiles (a CPU with AMX has AVX512_BF16 too, and this kernel runs
// there), or anything on a CPU without AVX512_BF16 (bf16_gemm_supported says so; calling
// bf16_gemm_ld there is a programming error, asserted). Thread-safe: each thread packs into
// its own buffers, allocated on its first call and grown only when a larger product comes.
#ifndef APEX_BF16_H
#define APEX_BF16_H

#include "blas.h"
#include "cpu.h"

// 1 when f has what the kernel runs on: AVX512 F, BW, VL and AVX512_BF16, saved by the OS.
int bf16_gemm_supported(const cpu_features_t *f);

// blas_sgemm_ld's contract (a blas_gemm_fn) with op(A) and op(B) rounded to bfloat16 and the
// products summed in fp32: C (M x N, row stride ldc) = alpha * op(A) op(B) + beta * C;
// beta == 0 overwrites C (NaNs in C do not propagate).
void bf16_gemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                  float beta, blas_trans ta, blas_trans tb, int M, int N, int K);

// x rounded to the nearest bfloat16 (ties to even), as a float: what the kernel's conversion
// gives a normal number. NaN stays NaN; infinities stay.
float bf16_round(float x);

#endif
