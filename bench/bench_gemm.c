// bench_gemm.c: single-precision GEMM rate of every BLAS on this machine, side by side
// (issue #32): apex's (OpenBLAS with the kernel blas_startup chose), BLIS (Debian's
// libblis, which dispatches on CPU features) and oneDNN (Debian's libdnnl, the library
// PyTorch's CPU convolutions use), each loaded if installed (dlopen, so that neither is a
// build dependency and BLIS's cblas symbols cannot shadow OpenBLAS's).
//
//   build/bench/bench_gemm [--size N] [--threads T] [--windows W] [--window S] [--kernel K]
//
// --kernel is [run] blas_kernel (auto, openblas or a core name): the same choice every apex
// daemon makes at start-up, so the process restarts itself when it picks another core.
// Each window runs N^3 products for S seconds with every library in turn (interleaved, so
// that a noisy moment on a shared machine hits all of them); the BENCH value is the median
// over W windows:
//   BENCH sgemm.<N> <GFLOP/s>           apex's, what the daemons run
//   BENCH sgemm.<N>.blis <GFLOP/s>      (when libblis.so.4 loads)
//   BENCH sgemm.<N>.onednn <GFLOP/s>    (when libdnnl.so.2 loads)
//   BENCH sgemm.<N>.vs_best <ratio>     apex's / the best of all (goal >= 0.9)
// and, on a CPU with AVX512_BF16 and with --threads 1 (the kernel has one), apex's bfloat16
// GEMM (model/bf16.h: inputs rounded to bf16, fp32 sums) in the same windows, not in vs_best
// (it computes something else):
//   BENCH bf16gemm.<N> <GFLOP/s>            the kernel bf16_gemm_ld picks (AMX where there is)
//   BENCH bf16gemm.<N>.vs_sgemm <ratio>  against apex's sgemm above (at --threads)
//   BENCH bf16gemm.<N>.avx512 <GFLOP/s>     on an AMX CPU, the AVX512_BF16 kernel too
#define LOG_MODULE "bench"
#include "apex.h"
#include "bench_common.h"
#include "bf16.h"
#include "blas.h"
#include "log.h"
#include "parse.h"
#include "xalloc.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*s_gemm)(void *lib, int n, const float *a, const float *b, float *c);

// BLIS's typed API (blis.h): bli_sgemm(transa, transb, m, n, k, alpha, a, rs_a, cs_a, b, rs_b,
// cs_b, beta, c, rs_c, cs_c), strides in elements; BLIS_NO_TRANSPOSE is 0.
typedef void (*s_bli_sgemm_fn)(int, int, long, long, long, const float *, const float *, long, long,
                               const float *, long, long, const float *, float *, long, long);
// oneDNN's BLAS-like GEMM (dnnl.h): row-major, dnnl_sgemm(transa, transb, M, N, K, alpha, A,
// lda, B, ldb, beta, C, ldc).
typedef int (*s_dnnl_sgemm_fn)(char, char, long, long, long, float, const float *, long,
                               const float *, long, float, float *, long);

typedef struct {
    const char *name;
    void *fn;
    s_gemm call;
    double rates[64];
} s_lib;

static void s_apex(void *fn, int n, const float *a, const float *b, float *c) {
    (void)fn;
    blas_sgemm(c, a, b, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
}

static void s_bf16(void *fn, int n, const float *a, const float *b, float *c) {
    (void)fn;
    bf16_gemm_ld(c, n, a, n, b, n, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS, n, n, n);
}

static void s_bf16_avx512(void *fn, int n, const float *a, const float *b, float *c) {
    (void)fn;
    bf16_gemm_ld_on(BF16_KERNEL_AVX512, c, n, a, n, b, n, 1.0f, 0.0f, BLAS_NO_TRANS, BLAS_NO_TRANS,
                    n, n, n);
}

static void s_blis(void *fn, int n, const float *a, const float *b, float *c) {
    static const float one = 1.0f, zero = 0.0f;
    ((s_bli_sgemm_fn)fn)(0, 0, n, n, n, &one, a, n, 1, b, n, 1, &zero, c, n, 1);
}

static void s_onednn(void *fn, int n, const float *a, const float *b, float *c) {
    ((s_dnnl_sgemm_fn)fn)('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
}

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// GFLOP/s of lib's products for about `seconds`.
static double s_window(const s_lib *lib, int n, const float *a, const float *b, float *c,
                       double seconds) {
    lib->call(lib->fn, n, a, b, c); // warm: packing buffers, threads
    int reps = 0;
    double t0 = s_now(), t;
    do {
        lib->call(lib->fn, n, a, b, c);
        reps++;
    } while ((t = s_now()) - t0 < seconds);
    return 2.0 * n * (double)n * n * reps / (t - t0) / 1e9;
}

static void *s_sym(const char *lib, const char *sym) {
    // RTLD_LOCAL: BLIS also exports cblas_* and must not take OpenBLAS's place.
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    void *f = h ? dlsym(h, sym) : NULL;
    printf("# %s: %s\n", lib, f ? "loaded" : (h ? "no such symbol" : dlerror()));
    return f;
}

int main(int argc, char **argv) {
    int n = 1024, threads = 1, windows = 5;
    double window = 1.0;
    const char *kernel = "auto";
    for (int i = 1; i + 1 < argc; i += 2) {
        int64_t v;
        if (strcmp(argv[i], "--size") == 0 && parse_int64(argv[i + 1], 1, 8192, &v) == 0) {
            n = (int)v;
        } else if (strcmp(argv[i], "--threads") == 0 && parse_int64(argv[i + 1], 1, 64, &v) == 0) {
            threads = (int)v;
        } else if (strcmp(argv[i], "--windows") == 0 && parse_int64(argv[i + 1], 1, 64, &v) == 0) {
            windows = (int)v;
        } else if (strcmp(argv[i], "--window") == 0) {
            window = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--kernel") == 0) {
            kernel = argv[i + 1];
        } else {
            fprintf(stderr,
                    "usage: %s [--size N] [--threads T] [--windows W] [--window S] "
                    "[--kernel auto|openblas|CORE]\n",
                    argv[0]);
            return 2;
        }
    }
    blas_startup(argv, kernel);
    printf("# apex: OpenBLAS core %s\n", blas_core());
    blas_set_threads(threads);
    // Each library on the same thread count (read at load, or by their own calls).
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    setenv("BLIS_NUM_THREADS", t, 1);
    setenv("OMP_NUM_THREADS", t, 1);
    s_lib libs[5] = {{.name = "apex", .call = s_apex}};
    int n_libs = 1;
    cpu_features_t f;
    cpu_detect(&f);
    int bf16 = bf16_gemm_supported(&f) && threads == 1;
    printf("# apex bf16 GEMM: %s\n", bf16 ? bf16_kernel_name(bf16_gemm_kernel())
                                     : bf16_gemm_supported(&f) ? "one thread only: not run"
                                                               : "no AVX512_BF16 on this CPU");
    if ((libs[n_libs].fn = s_sym("libblis.so.4", "bli_sgemm"))) {
        libs[n_libs].name = "blis", libs[n_libs++].call = s_blis;
    }
    if ((libs[n_libs].fn = s_sym("libdnnl.so.2", "dnnl_sgemm"))) {
        libs[n_libs].name = "onednn", libs[n_libs++].call = s_onednn;
    }
    int bf16_at = -1; // after the sgemm libraries: vs_best is theirs
    if (bf16) {
        bf16_at = n_libs;
        libs[n_libs].name = "bf16", libs[n_libs++].call = s_bf16;
        if (bf16_gemm_kernel() == BF16_KERNEL_AMX) {
            libs[n_libs].name = "bf16.avx512", libs[n_libs++].call = s_bf16_avx512;
        }
    }
    size_t nn = (size_t)n * n;
    float *a = xaligned_alloc(nn * sizeof(float)), *b = xaligned_alloc(nn * sizeof(float)),
          *c = xaligned_alloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
        b[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    for (int w = 0; w < windows; w++) {
        for (int l = 0; l < n_libs; l++) {
            libs[l].rates[w] = s_window(&libs[l], n, a, b, c, window);
        }
    }
    double best = 0.0, apex = 0.0;
    for (int l = 0; l < n_libs; l++) {
        double r = bench_median(libs[l].rates, windows);
        printf("# %s: median %.1f, min %.1f, max %.1f GFLOP/s over %d windows of %.1f s, "
               "%d thread(s)\n",
               libs[l].name, r, libs[l].rates[0], libs[l].rates[windows - 1], windows, window,
               threads);
        if (l == bf16_at) {
            printf("BENCH bf16gemm.%d %.1f GFLOP/s\n", n, r);
            printf("BENCH bf16gemm.%d.vs_sgemm %.3f ratio\n", n, apex > 0 ? r / apex : 0.0);
            continue;
        }
        if (bf16_at >= 0 && l > bf16_at) {
            printf("BENCH bf16gemm.%d.avx512 %.1f GFLOP/s\n", n, r);
            continue;
        }
        if (l == 0) {
            printf("BENCH sgemm.%d %.1f GFLOP/s\n", n, r);
            apex = r;
        } else {
            printf("BENCH sgemm.%d.%s %.1f GFLOP/s\n", n, libs[l].name, r);
        }
        best = r > best ? r : best;
    }
    printf("BENCH sgemm.%d.vs_best %.3f ratio\n", n, best > 0 ? apex / best : 0.0);
    free(a);
    free(b);
    free(c);
    return 0;
}
