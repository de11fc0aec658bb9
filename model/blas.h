// blas.h: the one matrix-product wrapper (STYLE S10) and its naive reference.
//
// Every GEMM in apex goes through blas_sgemm, a thin wrapper around OpenBLAS's
// cblas_sgemm (or oneDNN's dnnl_sgemm, [run] blas_library) over dense row-major matrices (leading dimensions are implied by the
// shapes), and blas_sgemm_ld for row-major views with explicit leading dimensions (conv.c's
// chunks of columns of a wider matrix). N == 1 is routed to cblas_sgemv, which avoids the GEMM
// packing overhead for single-column products (an actor with one environment). A network's
// products go through blas_gemm_with, which is blas_sgemm in fp32 and another GEMM of the same
// contract when the learner runs in bfloat16 ([learner] precision, model/bf16.h).
// blas_sgemm_naive is a triple loop accumulating in double: the algorithmic reference the
// tests compare against (llm.c matmul_forward_naive). It is never used on a hot path.
// What it does not do: threading policy beyond blas_set_threads, or any other BLAS routine. Not thread-safe to change the thread count while GEMMs run.
#ifndef APEX_BLAS_H
#define APEX_BLAS_H

#include <stddef.h>

#include "cpu.h"

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

// A GEMM with blas_sgemm_ld's contract: blas_sgemm_ld itself, or model/bf16.h's bf16_gemm_ld.
typedef void (*blas_gemm_fn)(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                             float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                             int K);

// The products of a network whose precision is a choice (model/nn.h's nn_state_set_gemm,
// [learner] precision): blas_sgemm's dense contract computed by gemm with the implied leading
// dimensions. gemm NULL or blas_sgemm_ld is fp32 and calls blas_sgemm itself, its N == 1
// route to sgemv included, so the results are bit for bit those of a direct blas_sgemm call.
// Thread-safe as gemm is.
void blas_gemm_with(blas_gemm_fn gemm, float *c, const float *a, const float *b, float alpha,
                    float beta, blas_trans ta, blas_trans tb, int M, int N, int K);

// Same contract as blas_sgemm; triple loop with double accumulation. Test reference only.
void blas_sgemm_naive(float *c, const float *a, const float *b, float alpha, float beta,
                      blas_trans ta, blas_trans tb, int M, int N, int K);

// Number of threads OpenBLAS uses for every later call in this process (>= 1).
void blas_set_threads(int n);

// [run] blas_library: which library computes blas_sgemm's and blas_sgemm_ld's products (the
// N == 1 sgemv route stays OpenBLAS's) and a conv net's layers. "auto" (the default): the
// products on OpenBLAS, the conv layers on oneDNN's convolution primitives where Debian's
// libdnnl2 loads (dlopen: not a run-time dependency) and a network does enough work for
// them (model/dnnconv.h), else on im2col + OpenBLAS, said once at info level; "openblas":
// everything on OpenBLAS, oneDNN not loaded; "onednn": oneDNN's dnnl_sgemm for the products
// too, checked against the naive reference (blas_verify) before it is used, and a library
// that does not load is an error. oneDNN's OpenMP threads start at threads (OMP_NUM_THREADS
// is set for it) and follow blas_set_threads. Why the products stay OpenBLAS's by default:
// oneDNN's sgemm was ahead at every learner shape on two CPUs but not on a third (Emerald
// Rapids at 1024^3), while its convolutions beat im2col wherever measured
// (docs/performance.md). Call once at start-up, before any product. Returns 0, or -1 with
// why in err (n bytes: an unknown name, a library that does not load or fails its check)
// and OpenBLAS still in use. convs: whether this process will build a network whose conv
// layers oneDNN's primitives would run (nn_run_wants_conv_body); under "auto", 0 loads no
// oneDNN at all (an MLP's or MinAtar's daemons map no libdnnl or libgomp, and their children,
// a Python env among them, inherit no OMP_NUM_THREADS); "onednn" loads it either way. Under
// "auto" with threads > 1 and a conv body to run, oneDNN's sgemm takes the products too (as
// "onednn"): two libraries' thread pools on the same cores cost more than OpenBLAS's
// products gain.
int blas_use_library(const char *name, int threads, int convs, char *err, size_t n);
// The same for oneDNN from soname (tests name one that does not exist).
int blas_use_onednn_at(const char *soname, int threads, char *err, size_t n);
// "auto" with oneDNN from soname: 0 whether it loads or not.
int blas_use_auto_at(const char *soname, int threads, int convs);
// "OpenBLAS" or "oneDNN": the library computing the products.
const char *blas_library(void);
int blas_get_threads(void);

// ---------------------------------------------------------------------------------------
// The kernel (issue #32): OpenBLAS chooses its kernels once, when the library loads, from a
// table of CPU models; on a model it does not know it falls back to a generic core (on Intel's
// Emerald Rapids its SSE3 "Prescott", 3-8x below the CPU). apex chooses by what the CPU can do
// (model/cpu.h) instead: a daemon whose OpenBLAS runs a core of a lower instruction set than
// the CPU allows starts itself again (execv of /proc/self/exe, same pid and arguments) with
// OPENBLAS_CORETYPE set to the core that fits, checks that core's GEMMs against the naive
// reference (a core that crashes with SIGILL or computes wrong results is dropped, and the
// daemon goes on with OpenBLAS's own choice), and logs which kernel runs and why. A user's
// OPENBLAS_CORETYPE is respected (some set it on purpose: a kernel that misbehaves on a CPU),
// with a warning and the remedy when it is far below what the CPU allows. The choice can be
// made explicit: [run] blas_kernel = auto | openblas | <core name>.

// Instruction sets of OpenBLAS's SGEMM kernels, in order.
typedef enum {
    BLAS_ISA_UNKNOWN = 0,
    BLAS_ISA_SSE,    // Prescott, Core2, Penryn, Nehalem, Atom, Barcelona, Opteron, ...
    BLAS_ISA_AVX,    // Sandybridge, Bulldozer, Piledriver
    BLAS_ISA_AVX2,   // Haswell, Zen, Steamroller, Excavator (FMA)
    BLAS_ISA_AVX512, // SkylakeX, Cooperlake
} blas_isa;

// The instruction set of an OpenBLAS core name (openblas_get_corename()'s spelling, any case);
// BLAS_ISA_UNKNOWN for a name this build does not know.
blas_isa blas_core_isa(const char *core);
// The core of Debian's OpenBLAS 0.3.21 (DYNAMIC_ARCH) that fits the CPU's features best:
// "Cooperlake" (AVX-512 with BF16), "SkylakeX" (AVX-512 F/CD/BW/DQ/VL), "Haswell" (AVX2 + FMA),
// "Sandybridge" (AVX), or NULL (nothing better than what OpenBLAS finds by itself).
const char *blas_core_for(const cpu_features_t *f);

typedef enum {
    BLAS_PLAN_KEEP,   // run with the kernel OpenBLAS loaded
    BLAS_PLAN_SWITCH, // start again with OPENBLAS_CORETYPE = core
} blas_plan_kind;

typedef struct {
    blas_plan_kind kind;
    const char *core; // SWITCH: the core to run
    int warn;         // KEEP: the kernel is far below the CPU (a warning, with the remedy)
    char why[320];    // for the log: what runs, and why
} blas_plan_t;

// The decision, as a pure function of its inputs (tests give it any CPU): f, the CPU's
// features; current, the core OpenBLAS loaded; user_env, OPENBLAS_CORETYPE as the user set it
// (NULL: unset); configured, [run] blas_kernel: "auto" (switch to blas_core_for(f) when the
// current core's instruction set is below it, unless the user set OPENBLAS_CORETYPE),
// "openblas" (keep OpenBLAS's choice), or a core name (run it; it wins over the variable).
// "Far below" (warn): an SSE or AVX kernel on a CPU with AVX2 and FMA.
void blas_plan(const cpu_features_t *f, const char *current, const char *user_env,
               const char *configured, blas_plan_t *out);

// Runs the plan at a daemon's start (before any other thread exists): may not return (it
// execs itself, argv as main received it); after such a restart, checks the chosen core
// (blas_verify) and logs the kernel line. configured: [run] blas_kernel.
void blas_startup(char **argv, const char *configured);

// The core OpenBLAS runs ("Haswell", ...), static storage.
const char *blas_core(void);

// Checks gemm against blas_sgemm_naive on shapes that exercise every kernel edge (1..67 rows
// and columns, both transposes, alpha and beta, leading dimensions), catching SIGILL. Returns
// 0, or -1 with what failed in why. gemm has blas_sgemm_ld's contract.
int blas_verify(blas_gemm_fn gemm, char *why, size_t n);

#endif
