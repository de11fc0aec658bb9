// blas.c: cblas_sgemm wrapper and the naive reference next to it (STYLE S10); the kernel
// OpenBLAS runs (issue #32).
#define LOG_MODULE "blas"
#include "blas.h"

#include "dnnconv.h"

#include "apex.h"
#include "log.h"

#include <cblas.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

// [run] blas_library = onednn: oneDNN's sgemm, row-major like apex's products (dnnl.h's
// dnnl_sgemm; dnnl_dim_t is int64_t, dnnl_success 0). NULL: OpenBLAS's cblas_sgemm.
typedef int (*s_dnnl_sgemm_fn)(char ta, char tb, int64_t M, int64_t N, int64_t K, float alpha,
                               const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                               float *c, int64_t ldc);
static s_dnnl_sgemm_fn s_dnnl;
static void (*s_omp_set_num_threads)(int); // oneDNN's threads are OpenMP's (libgomp)

static void s_dnnl_gemm(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                        float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                        int K) {
    // The arguments are valid by the callers' asserts: a failure is a broken library.
    int st = s_dnnl(ta == BLAS_TRANS ? 'T' : 'N', tb == BLAS_TRANS ? 'T' : 'N', M, N, K, alpha, a,
                    lda, b, ldb, beta, c, ldc);
    APEX_ASSERT(st == 0);
}

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
    if (s_dnnl) {
        s_dnnl_gemm(c, N, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
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
    if (s_dnnl) {
        s_dnnl_gemm(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
        return;
    }
    cblas_sgemm(CblasRowMajor, ta == BLAS_TRANS ? CblasTrans : CblasNoTrans,
                tb == BLAS_TRANS ? CblasTrans : CblasNoTrans, M, N, K, alpha, a, lda, b, ldb, beta,
                c, ldc);
}

void blas_gemm_with(blas_gemm_fn gemm, float *c, const float *a, const float *b, float alpha,
                    float beta, blas_trans ta, blas_trans tb, int M, int N, int K) {
    // fp32 stays on blas_sgemm rather than blas_sgemm_ld: their results differ where
    // blas_sgemm takes sgemv (N == 1, beta 0), and fp32 must not change (blas.h).
    if (!gemm || gemm == blas_sgemm_ld) {
        blas_sgemm(c, a, b, alpha, beta, ta, tb, M, N, K);
        return;
    }
    gemm(c, N, a, ta == BLAS_TRANS ? M : K, b, tb == BLAS_TRANS ? K : N, alpha, beta, ta, tb, M, N,
         K);
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
    if (s_omp_set_num_threads) {
        s_omp_set_num_threads(n);
    }
}

// ---------------------------------------------------------------------------------------
// The library

const char *blas_library(void) { return s_dnnl ? "oneDNN" : "OpenBLAS"; }

static void *s_dnnl_handle; // libdnnl, once loaded ([run] blas_library = onednn or auto)
static int s_dnnl_convs;    // its convolution primitives run the conv bodies (dnnconv_load)

// dlopen of oneDNN, its OpenMP threads starting at threads. Once per process: the library
// stays loaded (never closed: dnnconv.c and s_omp_set_num_threads hold its entry points), and
// later calls get it whatever soname and threads they pass (blas_set_threads changes the
// count). NULL with why in err, and OMP_NUM_THREADS as it was.
static void *s_dnnl_open(const char *soname, int threads, char *err, size_t n) {
    if (s_dnnl_handle) {
        return s_dnnl_handle;
    }
    // libgomp reads OMP_NUM_THREADS when it loads, and it loads with oneDNN: each thread that
    // runs a product starts from this count, not from every core ([learner] threads rules).
    const char *was = getenv("OMP_NUM_THREADS");
    char *old = was ? strdup(was) : NULL, t[16];
    snprintf(t, sizeof t, "%d", threads);
    setenv("OMP_NUM_THREADS", t, 1);
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(err, n, "cannot load %s (%s)", soname, dlerror());
        if (old) {
            setenv("OMP_NUM_THREADS", old, 1);
        } else {
            unsetenv("OMP_NUM_THREADS");
        }
    }
    free(old);
    s_dnnl_handle = h;
    return h;
}

// oneDNN's convolution primitives for the conv bodies (model/dnnconv.h), once; a library
// without them is said at warn (onednn) or info level (auto, the default: not the user's ask).
static void s_load_convs(void *h, int warn) {
    char why[128];
    if (s_dnnl_convs) {
        return;
    }
    if (dnnconv_load(h, why, sizeof why) != 0) {
        if (warn) {
            log_warn("%s: conv layers stay on im2col + sgemm", why);
        } else {
            log_info("%s: conv layers stay on im2col + sgemm", why);
        }
        return;
    }
    s_dnnl_convs = 1;
}

// oneDNN's sgemm (from h, loaded from soname) for every product from here on, checked against
// the naive reference first. 0, or -1 with why in err and the products still OpenBLAS's.
static int s_dnnl_products(void *h, const char *soname, int threads, char *err, size_t n) {
    s_dnnl_sgemm_fn f = (s_dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm");
    void (*set)(int) = (void (*)(int))dlsym(h, "omp_set_num_threads");
    if (!f) {
        snprintf(err, n, "%s has no dnnl_sgemm", soname);
        return -1;
    }
    s_dnnl = f; // every product from here on, the check's included
    char bad[256];
    if (blas_verify(blas_sgemm_ld, bad, sizeof bad) != 0) {
        s_dnnl = NULL;
        snprintf(err, n, "%s failed the start-up check (%s)", soname, bad);
        return -1; // h stays open: a library that ran may have left threads behind
    }
    s_omp_set_num_threads = set;
    if (set) {
        set(threads);
    }
    return 0;
}

int blas_use_onednn_at(const char *soname, int threads, char *err, size_t n) {
    APEX_ASSERT(threads >= 1);
    if (s_dnnl) {
        return 0;
    }
    char why[400];
    void *h = s_dnnl_open(soname, threads, why, sizeof why);
    if (!h) {
        snprintf(err, n,
                 "[run] blas_library = onednn: %s. ---> HINT: install Debian's libdnnl2 (apt-get "
                 "install libdnnl2), or set [run] blas_library = openblas",
                 why);
        return -1;
    }
    if (s_dnnl_products(h, soname, threads, why, sizeof why) != 0) {
        snprintf(err, n,
                 "[run] blas_library = onednn: %s. ---> HINT: set [run] blas_library = openblas",
                 why);
        return -1; // h stays open (s_dnnl_open)
    }
    log_info("oneDNN's sgemm (%s) computes the products, checked at start-up; %d thread(s)", soname,
             threads);
    // and its convolution primitives the conv layers (model/dnnconv.h), where nn.c can
    s_load_convs(h, 1);
    return 0;
}

int blas_use_auto_at(const char *soname, int threads, int convs) {
    APEX_ASSERT(threads >= 1);
    if (!convs) {
        log_info("[run] blas_library = auto: OpenBLAS computes everything (this run's network "
                 "has no conv layers that oneDNN's primitives would run faster); oneDNN not "
                 "loaded");
        return 0;
    }
    if (!dnnconv_built()) { // nothing here would call it: load nothing
        log_info("[run] blas_library = auto: built without oneDNN's header (libdnnl-dev): "
                 "OpenBLAS computes the products and the conv layers (im2col)");
        return 0;
    }
    char why[400];
    void *h = s_dnnl_open(soname, threads, why, sizeof why);
    if (!h) {
        log_info("[run] blas_library = auto: %s; OpenBLAS computes the products and the "
                 "conv layers (im2col). ---> HINT: apt-get install libdnnl2 for oneDNN's "
                 "convolutions (the Atari networks' learner ~1.4x)",
                 why);
        return 0;
    }
    void (*set)(int) = (void (*)(int))dlsym(h, "omp_set_num_threads");
    if (set && !s_omp_set_num_threads) {
        s_omp_set_num_threads = set;
        set(threads);
    }
    s_load_convs(h, 0);
    if (s_dnnl_convs && !s_dnnl && threads > 1) {
        // Two thread pools, OpenBLAS's and OpenMP's, on the same cores wait on each other
        // between calls: the Nature learner at 2 threads ran 12.6-15.3 updates/s with
        // OpenBLAS's products against 22.5-23.3 with oneDNN's (AMD Zen 5; about its own
        // 1-thread 15.05), 15.2 against 18.9 on an Intel Xeon. So oneDNN's sgemm takes the
        // products too, checked as for onednn; one that fails leaves them OpenBLAS's.
        char e[400];
        if (s_dnnl_products(h, soname, threads, e, sizeof e) == 0) {
            log_info("[run] blas_library = auto at %d threads: oneDNN computes the products "
                     "(its sgemm, %s, checked at start-up) and the conv layers of networks that "
                     "do enough work, one thread pool (OpenMP's) for the whole update",
                     threads, soname);
            return 0;
        }
        log_warn("[run] blas_library = auto at %d threads: %s: OpenBLAS keeps the products, and "
                 "its threads and oneDNN's share the cores (slower than one library's). ---> "
                 "HINT: set [run] blas_library = openblas",
                 threads, e);
    }
    if (s_dnnl_convs && !s_dnnl) { // (after onednn in the same process its line said it all)
        log_info("OpenBLAS computes the products; oneDNN's convolution primitives (%s) the conv "
                 "layers of networks that do enough work per element (the Atari bodies)",
                 soname);
    }
    return 0;
}

int blas_use_library(const char *name, int threads, int convs, char *err, size_t n) {
    if (strcasecmp(name, "openblas") == 0) {
        return 0;
    }
    if (strcasecmp(name, "onednn") == 0) {
        return blas_use_onednn_at("libdnnl.so.2", threads, err, n);
    }
    if (strcasecmp(name, "auto") == 0) {
        return blas_use_auto_at("libdnnl.so.2", threads, convs);
    }
    snprintf(err, n, "[run] blas_library: '%s' is not auto, openblas or onednn", name);
    return -1;
}

int blas_get_threads(void) { return openblas_get_num_threads(); }

// ---------------------------------------------------------------------------------------
// The kernel

// Every core of Debian's OpenBLAS 0.3.21 DYNAMIC_ARCH build (the names openblas_get_corename
// prints and OPENBLAS_CORETYPE takes), by the instruction set of its SGEMM kernel.
static const struct {
    const char *name;
    blas_isa isa;
} s_cores[] = {
    {"Katmai", BLAS_ISA_SSE},        {"Coppermine", BLAS_ISA_SSE},  {"Northwood", BLAS_ISA_SSE},
    {"Prescott", BLAS_ISA_SSE},      {"Banias", BLAS_ISA_SSE},      {"Core2", BLAS_ISA_SSE},
    {"Penryn", BLAS_ISA_SSE},        {"Dunnington", BLAS_ISA_SSE},  {"Nehalem", BLAS_ISA_SSE},
    {"Atom", BLAS_ISA_SSE},          {"Athlon", BLAS_ISA_SSE},      {"Opteron", BLAS_ISA_SSE},
    {"Opteron_SSE3", BLAS_ISA_SSE},  {"Barcelona", BLAS_ISA_SSE},   {"Bobcat", BLAS_ISA_SSE},
    {"Nano", BLAS_ISA_SSE},          {"Sandybridge", BLAS_ISA_AVX}, {"Bulldozer", BLAS_ISA_AVX},
    {"Piledriver", BLAS_ISA_AVX},    {"Steamroller", BLAS_ISA_AVX}, {"Haswell", BLAS_ISA_AVX2},
    {"Zen", BLAS_ISA_AVX2},          {"Excavator", BLAS_ISA_AVX2},  {"SkylakeX", BLAS_ISA_AVX512},
    {"Cooperlake", BLAS_ISA_AVX512},
};

blas_isa blas_core_isa(const char *core) {
    for (size_t i = 0; core && i < sizeof s_cores / sizeof s_cores[0]; i++) {
        if (strcasecmp(core, s_cores[i].name) == 0) {
            return s_cores[i].isa;
        }
    }
    return BLAS_ISA_UNKNOWN;
}

const char *blas_core_for(const cpu_features_t *f) {
    if (cpu_has_avx512(f)) {
        return f->avx512_bf16 ? "Cooperlake" : "SkylakeX";
    }
    if (f->avx2 && f->fma) {
        return "Haswell";
    }
    return f->avx ? "Sandybridge" : NULL;
}

static const char *const s_isa_names[] = {"an unknown instruction set", "SSE", "AVX", "AVX2+FMA",
                                          "AVX-512"};

void blas_plan(const cpu_features_t *f, const char *current, const char *user_env,
               const char *configured, blas_plan_t *out) {
    memset(out, 0, sizeof *out);
    out->kind = BLAS_PLAN_KEEP;
    const char *best = blas_core_for(f);
    blas_isa cur = blas_core_isa(current), top = best ? blas_core_isa(best) : BLAS_ISA_UNKNOWN;
    int far_below = f->avx2 && f->fma && cur < BLAS_ISA_AVX2;
    const char *named = configured && strcmp(configured, "auto") != 0 &&
                                strcmp(configured, "openblas") != 0
                            ? configured
                            : NULL;
    if (named && strcasecmp(named, current) == 0) {
        snprintf(out->why, sizeof out->why, "%s (%s), set by [run] blas_kernel", current,
                 s_isa_names[cur]);
        return;
    }
    if (named && blas_core_isa(named) > top) {
        out->warn = 1;
        snprintf(out->why, sizeof out->why,
                 "%s (%s): [run] blas_kernel = %s needs %s, which this CPU does not have; "
                 "---> HINT: set [run] blas_kernel = auto",
                 current, s_isa_names[cur], named, s_isa_names[blas_core_isa(named)]);
        return;
    }
    if (named) {
        out->kind = BLAS_PLAN_SWITCH;
        out->core = named;
        snprintf(out->why, sizeof out->why, "%s (%s), set by [run] blas_kernel", named,
                 s_isa_names[blas_core_isa(named)]);
        return;
    }
    // Kept below the CPU's best (by the variable or by "openblas"): a warning with the remedy.
    // Below AVX2 on an AVX2 CPU the gap is 2-8x; an AVX2 kernel on an AVX-512 CPU ran at half
    // the AVX-512 kernel's 1024^3 rate on a Zen 5 (bench/RESULTS.md), about the same on a
    // Zen 4 (whose AVX-512 units are 256 bits wide): worth a line, the user decides.
    int below = best && cur < top;
    if (configured && strcmp(configured, "openblas") == 0) {
        out->warn = below;
        snprintf(out->why, sizeof out->why, "%s (%s), %s ([run] blas_kernel = openblas)%s%s%s%s",
                 current, s_isa_names[cur],
                 user_env && *user_env ? "as OPENBLAS_CORETYPE asks" : "OpenBLAS's own choice",
                 below ? "; this CPU allows " : "", below ? best : "",
                 below && far_below ? ", far above it" : "",
                 below ? ". ---> HINT: [run] blas_kernel = auto" : "");
        return;
    }
    if (user_env && *user_env) {
        out->warn = below;
        snprintf(out->why, sizeof out->why,
                 "%s (%s), as OPENBLAS_CORETYPE=%s in the environment asks%s%s%s%s", current,
                 s_isa_names[cur], user_env, below ? "; this CPU allows " : "", below ? best : "",
                 below && far_below ? ", far above it" : "",
                 below ? ". ---> HINT: unset OPENBLAS_CORETYPE (apex then chooses by the CPU's "
                         "features)"
                       : "");
        return;
    }
    if (best && cur < top) {
        out->kind = BLAS_PLAN_SWITCH;
        out->core = best;
        snprintf(out->why, sizeof out->why,
                 "%s (%s), chosen by apex for this CPU instead of OpenBLAS's own %s (%s)", best,
                 s_isa_names[top], current, s_isa_names[cur]);
        return;
    }
    snprintf(out->why, sizeof out->why, "%s (%s), OpenBLAS's own choice", current,
             s_isa_names[cur]);
}

const char *blas_core(void) { return openblas_get_corename(); }

// ---- checking a kernel

static sigjmp_buf s_ill_jmp;
static void s_on_sigill(int sig) {
    (void)sig;
    siglongjmp(s_ill_jmp, 1);
}

// Deterministic values in [-1, 1) (an LCG: no rng_t here, the model layer has none).
static void s_fill(float *x, size_t n, uint32_t *state) {
    for (size_t i = 0; i < n; i++) {
        *state = *state * 1664525u + 1013904223u;
        x[i] = (float)((double)(*state >> 8) / (double)(1u << 24) * 2.0 - 1.0);
    }
}

// One product against a double reference with leading dimensions; 0 or -1 with why.
static int s_check_one(blas_gemm_fn gemm, int M, int N, int K, blas_trans ta, blas_trans tb,
                       float alpha, float beta, float *buf, char *why, size_t n) {
    int lda = (ta == BLAS_TRANS ? M : K) + 3, ldb = (tb == BLAS_TRANS ? K : N) + 2, ldc = N + 1;
    int ar = ta == BLAS_TRANS ? K : M, br = tb == BLAS_TRANS ? N : K;
    float *a = buf, *b = a + (size_t)ar * lda, *c = b + (size_t)br * ldb, *c0 = c + (size_t)M * ldc;
    uint32_t st = (uint32_t)(M * 131 + N * 17 + K);
    s_fill(a, (size_t)ar * lda, &st);
    s_fill(b, (size_t)br * ldb, &st);
    s_fill(c, (size_t)M * ldc, &st);
    memcpy(c0, c, (size_t)M * ldc * sizeof(float));
    gemm(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            double acc = 0.0, mag = 0.0;
            for (int k = 0; k < K; k++) {
                double av = ta == BLAS_TRANS ? a[(size_t)k * lda + i] : a[(size_t)i * lda + k];
                double bv = tb == BLAS_TRANS ? b[(size_t)j * ldb + k] : b[(size_t)k * ldb + j];
                acc += av * bv;
                mag += fabs(av * bv);
            }
            double want = alpha * acc + (beta == 0.0f ? 0.0 : beta * c0[(size_t)i * ldc + j]);
            double tol = 1e-5 * (fabs(alpha) * mag + fabs(beta)) + 1e-6;
            double got = c[(size_t)i * ldc + j];
            if (!(fabs(got - want) <= tol)) {
                snprintf(why, n, "%dx%dx%d%s%s: C[%d][%d] = %.9g, want %.9g", M, N, K,
                         ta == BLAS_TRANS ? " A^T" : "", tb == BLAS_TRANS ? " B^T" : "", i, j, got,
                         want);
                return -1;
            }
        }
    }
    return 0;
}

int blas_verify(blas_gemm_fn gemm, char *why, size_t n) {
    // Edges of every kernel's blocking: 1, odd sizes, just past multiples of 8 and 16 (the
    // vector widths), and one size past a small cache block.
    static const int shapes[][3] = {{1, 1, 1},    {1, 7, 5},    {3, 1, 9},    {5, 3, 1},
                                    {17, 16, 15}, {16, 33, 31}, {33, 31, 64}, {67, 65, 3},
                                    {8, 129, 40}, {64, 96, 257}};
    size_t max = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        size_t M = (size_t)shapes[s][0], N = (size_t)shapes[s][1], K = (size_t)shapes[s][2];
        size_t need = (M + K) * (K + M + 3) + (K + N) * (N + K + 2) + 2 * M * (N + 1);
        max = need > max ? need : max;
    }
    float *buf = malloc(max * sizeof(float));
    if (!buf) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    struct sigaction sa = {.sa_handler = s_on_sigill}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGILL, &sa, &old);
    volatile int rc = 0;
    if (sigsetjmp(s_ill_jmp, 1) != 0) {
        snprintf(why, n, "SIGILL: the kernel uses instructions this CPU does not have");
        rc = -1;
    } else {
        for (size_t s = 0; rc == 0 && s < sizeof shapes / sizeof shapes[0]; s++) {
            for (int t = 0; rc == 0 && t < 4; t++) {
                rc = s_check_one(gemm, shapes[s][0], shapes[s][1], shapes[s][2],
                                 (blas_trans)(t & 1), (blas_trans)(t >> 1), t == 3 ? -0.5f : 1.0f,
                                 t >= 2 ? 0.5f : 0.0f, buf, why, n);
            }
        }
    }
    sigaction(SIGILL, &old, NULL);
    free(buf);
    return rc;
}

// ---- start-up

#define ENV_CHOSEN "APEX_BLAS_CHOSEN"      // set for our own exec: the core apex chose
#define ENV_OWN "APEX_BLAS_OPENBLAS"       // OpenBLAS's own choice before it, for the log
#define ENV_USER "APEX_BLAS_USER_CORETYPE" // the user's OPENBLAS_CORETYPE before it ("" none)
#define ENV_REJECTED "APEX_BLAS_REJECTED"  // a core that failed its check: not chosen again
#define ENV_WHY "APEX_BLAS_WHY"            // the plan's reason, for the log after the exec

// The environment as the user had it (our own variables gone).
static void s_restore_env(void) {
    const char *user = getenv(ENV_USER);
    if (user && *user) {
        setenv("OPENBLAS_CORETYPE", user, 1);
    } else {
        unsetenv("OPENBLAS_CORETYPE");
    }
    unsetenv(ENV_CHOSEN);
    unsetenv(ENV_OWN);
    unsetenv(ENV_USER);
    unsetenv(ENV_WHY);
}

static void s_exec_self(char **argv) {
    execv("/proc/self/exe", argv);
    log_warn("cannot start again with another kernel (execv /proc/self/exe: %s); going on with "
             "%s",
             strerror(errno), blas_core());
}

// After our own exec: the chosen core is the one running, and it computes right.
static void s_after_exec(char **argv, const char *chosen, const char *cpu) {
    char own[64], why[320], bad[256];
    snprintf(own, sizeof own, "%s", getenv(ENV_OWN) ? getenv(ENV_OWN) : "?");
    snprintf(why, sizeof why, "%s", getenv(ENV_WHY) ? getenv(ENV_WHY) : chosen);
    if (strcasecmp(blas_core(), chosen) != 0) {
        s_restore_env();
        log_warn("OpenBLAS did not take core %s (it runs %s); CPU %s", chosen, blas_core(), cpu);
        return;
    }
    if (blas_verify(blas_sgemm_ld, bad, sizeof bad) != 0) {
        log_error("OpenBLAS core %s failed its start-up check (%s); starting again with "
                  "OpenBLAS's own %s",
                  chosen, bad, own);
        setenv(ENV_REJECTED, chosen, 1);
        s_restore_env();
        s_exec_self(argv);
        return;
    }
    s_restore_env();
    log_info("OpenBLAS %s, checked at start-up; CPU %s", why, cpu);
}

void blas_startup(char **argv, const char *configured) {
    cpu_features_t f;
    cpu_detect(&f);
    char cpu[256];
    cpu_describe(&f, cpu, sizeof cpu);
    const char *chosen = getenv(ENV_CHOSEN);
    if (chosen && *chosen) {
        char c[64];
        snprintf(c, sizeof c, "%s", chosen); // s_restore_env unsets it
        s_after_exec(argv, c, cpu);
        return;
    }
    blas_plan_t plan;
    blas_plan(&f, blas_core(), getenv("OPENBLAS_CORETYPE"), configured, &plan);
    const char *rejected = getenv(ENV_REJECTED);
    if (plan.kind == BLAS_PLAN_SWITCH && rejected && strcasecmp(rejected, plan.core) == 0) {
        log_warn("OpenBLAS %s, its own choice: %s failed its check at start-up; CPU %s",
                 blas_core(), plan.core, cpu);
        return;
    }
    if (plan.kind == BLAS_PLAN_SWITCH) {
        const char *user = getenv("OPENBLAS_CORETYPE");
        setenv(ENV_USER, user ? user : "", 1);
        setenv(ENV_OWN, blas_core(), 1);
        setenv(ENV_CHOSEN, plan.core, 1);
        setenv(ENV_WHY, plan.why, 1);
        setenv("OPENBLAS_CORETYPE", plan.core, 1);
        s_exec_self(argv);
        s_restore_env();
        return;
    }
    if (plan.warn) {
        log_warn("OpenBLAS %s; CPU %s", plan.why, cpu);
    } else {
        log_info("OpenBLAS %s; CPU %s", plan.why, cpu);
    }
}
