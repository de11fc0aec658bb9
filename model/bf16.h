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
// Two kernels: AVX512_BF16's vdpbf16ps (Zen 4/5, Cooper Lake), and AMX's tdpbf16ps (Sapphire
// Rapids and later, where vdpbf16ps runs at fp32 FMA's rate and gains nothing; see
// docs/performance.md), chosen once per process by bf16_gemm_kernel.
// What it does not do: anything on a CPU without AVX512_BF16 (bf16_gemm_supported says so; calling
// bf16_gemm_ld there is a programming error, asserted). Thread-safe: each thread packs into
// its own buffers, allocated on its first call and grown only when a larger product comes.
#ifndef APEX_BF16_H
#define APEX_BF16_H

#include "blas.h"
#include "cpu.h"

// 1 when f has what the kernels run on: AVX512 F, BW, VL and AVX512_BF16, saved by the OS.
int bf16_gemm_supported(const cpu_features_t *f);

typedef enum {
    BF16_KERNEL_NONE = 0, // no AVX512_BF16: bf16 is not available
    BF16_KERNEL_AVX512,   // vdpbf16ps, 12 x 32 blocks of C in zmm registers
    BF16_KERNEL_AMX,      // tdpbf16ps, 32 x 32 blocks of C in four tiles
} bf16_kernel;

// The kernel for feature set f: AMX when f has AMX tiles and AMX-BF16 and the operating
// system granted this process the tile state (amx_granted), else AVX512_BF16, else none.
bf16_kernel bf16_kernel_for(const cpu_features_t *f, int amx_granted);

// 1 when k is slower than the fp32 sgemm it would replace on a CPU with features f, as far as
// measured: AVX512_BF16's kernel on an Intel CPU with AMX (Sapphire Rapids: 0.64x; the tiles
// were not granted). The learner warns then.
int bf16_kernel_slow(const cpu_features_t *f, bf16_kernel k);

// "AMX", "AVX512_BF16" or "none", for logs.
const char *bf16_kernel_name(bf16_kernel k);

// The kernel bf16_gemm_ld runs in this process, decided on the first call (which asks Linux
// for AMX's tile state where the CPU has AMX).
bf16_kernel bf16_gemm_kernel(void);

// blas_sgemm_ld's contract (a blas_gemm_fn) with op(A) and op(B) rounded to bfloat16 and the
// products summed in fp32: C (M x N, row stride ldc) = alpha * op(A) op(B) + beta * C;
// beta == 0 overwrites C (NaNs in C do not propagate).
void bf16_gemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                  float beta, blas_trans ta, blas_trans tb, int M, int N, int K);

// bf16_gemm_ld on a given kernel (tests and benchmarks): k must be AVX512_BF16 where
// bf16_gemm_kernel is not NONE, or AMX where bf16_gemm_kernel is AMX.
void bf16_gemm_ld_on(bf16_kernel k, float *c, int ldc, const float *a, int lda, const float *b,
                     int ldb, float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                     int K);

// x rounded to the nearest bfloat16 (ties to even), as a float: what the kernel's conversion
// gives a normal number. NaN stays NaN; infinities stay.
float bf16_round(float x);

#endif
