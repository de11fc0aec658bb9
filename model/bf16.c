// bf16.c: see bf16.h.
//
// GotoBLAS's structure with a bf16 micro-kernel. Per block of KC values of k: op(B)'s rows
// are packed into panels of NR = 32 columns, each k pair (2p, 2p+1) of a column one 32-bit
// word [bf16 of row 2p | bf16 of row 2p+1], 32 words (two zmm) per pair; per block of MC rows
// of op(A), micro panels of MR = 12 rows, each row's k pair one word, 12 words per pair. The
// micro-kernel keeps C's 12 x 32 block in 24 zmm accumulators and, per pair, loads B's two
// zmm and broadcasts each row's word: vdpbf16ps adds both products of a pair into each fp32
// lane, so one pair is 24 instructions for 768 multiply-adds. A micro panel of A (12 x 128
// words, 6 KB) and B's panel (128 x 32 words, 16 KB) stay in L1 while a panel of B is used
// against every micro panel of the block of A (96 KB, L2). An odd k count pads the last pair
// with a zero; columns and rows past C's edges are packed as zeros and not stored.
#include "bf16.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "apex.h"
#include "xalloc.h"

#define MR 12
#define NR 32
#define KC 256
#define MC (16 * MR)

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

int bf16_gemm_supported(const cpu_features_t *f) {
    return f->avx512f && f->avx512bw && f->avx512vl && f->avx512_bf16;
}

static uint32_t s_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (u | 0x00400000u) & 0xffff0000u; // a NaN stays one (quiet)
    }
    return (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
}

float bf16_round(float x) {
    uint32_t u = s_bits(x);
    memcpy(&x, &u, sizeof x);
    return x;
}

// ---------------------------------------------------------------------------------------
// Per-thread packing buffers: grown on a call with a larger product than any before (the
// learner's first update), freed when the thread exits.

typedef struct {
    uint32_t *pa, *pb, *tmp;
    size_t pa_cap, pb_cap, tmp_cap;
} s_ws;

static pthread_key_t s_key;
static pthread_once_t s_key_once = PTHREAD_ONCE_INIT;

static void s_ws_free(void *p) {
    s_ws *w = p;
    xfree(w->pa);
    xfree(w->pb);
    xfree(w->tmp);
    xfree(w);
}

static void s_key_make(void) { APEX_ASSERT(pthread_key_create(&s_key, s_ws_free) == 0); }

static s_ws *s_workspace(void) {
    pthread_once(&s_key_once, s_key_make);
    s_ws *w = pthread_getspecific(s_key);
    if (!w) {
        w = xcalloc(1, sizeof *w);
        APEX_ASSERT(pthread_setspecific(s_key, w) == 0);
    }
    return w;
}

static uint32_t *s_grow(uint32_t **p, size_t *cap, size_t words) {
    if (words > *cap) {
        xfree(*p);
        *p = xaligned_alloc(words * sizeof(uint32_t));
        *cap = words;
    }
    return *p;
}

// ---------------------------------------------------------------------------------------
// Packing

static __mmask16 s_mask(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

// out[m] = [bf16(r0[m]) | bf16(r1[m])] for m < n; r1 NULL: zeros in the high halves.
BF16_TARGET static void s_pairs_across(const float *r0, const float *r1, int n, uint32_t *out) {
    // Interleaves the 16-bit halves: word m takes element m of the low 16 (r0) and of the high.
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24,
                                         8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    for (int m = 0; m < n; m += 16) {
        __mmask16 k = s_mask(n - m);
        __m512 x0 = _mm512_maskz_loadu_ps(k, r0 + m);
        __m512 x1 = r1 ? _mm512_maskz_loadu_ps(k, r1 + m) : _mm512_setzero_ps();
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(x1, x0); // low 16 bf16: x0; high 16: x1
        _mm512_mask_storeu_epi32(out + m, k, _mm512_permutexvar_epi16(idx, h));
    }
}

// out[p] = [bf16(row[2p]) | bf16(row[2p + 1])] for p < (kc + 1) / 2, a missing row[kc] as 0.
BF16_TARGET static void s_pairs_along(const float *row, int kc, uint32_t *out) {
    for (int k = 0; k < kc; k += 32) {
        int n = kc - k;
        __m512 lo = _mm512_maskz_loadu_ps(s_mask(n), row + k);
        __m512 hi = _mm512_maskz_loadu_ps(s_mask(n - 16 > 0 ? n - 16 : 0), row + k + 16);
        // In memory order: bf16 k, k+1, ..., k+31, so word m is the pair (k+2m, k+2m+1).
        __m512i h = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
        int words = n >= 32 ? 16 : (n + 1) / 2;
        _mm512_mask_storeu_epi32(out + k / 2, s_mask(words), h);
    }
}

// op(B)'s rows k0 .. k0 + kc - 1, columns 0 .. N - 1, into panels of NR columns.
static void s_pack_b(uint32_t *pb, uint32_t *tmp, const float *b, int ldb, blas_trans tb, int k0,
                     int kc, int N) {
    int kp = (kc + 1) / 2, np = (N + NR - 1) / NR;
    if (N % NR) {
        memset(pb + (size_t)(np - 1) * kp * NR, 0, (size_t)kp * NR * sizeof(uint32_t));
    }
    if (tb == BLAS_NO_TRANS) { // op(B)(k, j) = b[k ldb + j]: a pair of rows at a time
        for (int p = 0; p < kp; p++) {
            const float *r0 = b + (size_t)(k0 + 2 * p) * ldb;
            s_pairs_across(r0, 2 * p + 1 < kc ? r0 + ldb : NULL, N, tmp);
            for (int jp = 0; jp < np; jp++) {
                int nr = APEX_MIN(NR, N - jp * NR);
                memcpy(pb + ((size_t)jp * kp + p) * NR, tmp + jp * NR,
                       (size_t)nr * sizeof(uint32_t));
            }
        }
    } else { // op(B)(k, j) = b[j ldb + k]: a column's pairs are adjacent
        for (int j = 0; j < N; j++) {
            s_pairs_along(b + (size_t)j * ldb + k0, kc, tmp);
            uint32_t *dst = pb + (size_t)(j / NR) * kp * NR + j % NR;
            for (int p = 0; p < kp; p++) {
                dst[(size_t)p * NR] = tmp[p];
            }
        }
    }
}

// op(A)'s rows i0 .. i0 + mc - 1, k0 .. k0 + kc - 1, into micro panels of MR rows.
static void s_pack_a(uint32_t *pa, uint32_t *tmp, const float *a, int lda, blas_trans ta, int i0,
                     int mc, int k0, int kc) {
    int kp = (kc + 1) / 2, nmp = (mc + MR - 1) / MR;
    if (mc % MR) {
        memset(pa + (size_t)(nmp - 1) * kp * MR, 0, (size_t)kp * MR * sizeof(uint32_t));
    }
    if (ta == BLAS_NO_TRANS) { // op(A)(i, k) = a[i lda + k]: a row's pairs are adjacent
        for (int i = 0; i < mc; i++) {
            s_pairs_along(a + (size_t)(i0 + i) * lda + k0, kc, tmp);
            uint32_t *dst = pa + (size_t)(i / MR) * kp * MR + i % MR;
            for (int p = 0; p < kp; p++) {
                dst[(size_t)p * MR] = tmp[p];
            }
        }
    } else { // op(A)(i, k) = a[k lda + i]: a pair of stored rows at a time
        for (int p = 0; p < kp; p++) {
            const float *r0 = a + (size_t)(k0 + 2 * p) * lda + i0;
            s_pairs_across(r0, 2 * p + 1 < kc ? r0 + lda : NULL, mc, tmp);
            for (int ip = 0; ip < nmp; ip++) {
                int mr = APEX_MIN(MR, mc - ip * MR);
                memcpy(pa + ((size_t)ip * kp + p) * MR, tmp + ip * MR,
                       (size_t)mr * sizeof(uint32_t));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The micro-kernel: C's mr x nr block (mr <= MR, nr <= NR) = alpha * sum + beta * C.

BF16_TARGET static void s_kernel(int kp, const uint32_t *pa, const uint32_t *pb, float *c, int ldc,
                                 int mr, int nr, float alpha, float beta) {
    __m512 acc[MR][2];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
    }
    for (int p = 0; p < kp; p++) {
        __m512bh b0 = (__m512bh)_mm512_load_si512(pb + (size_t)p * NR);
        __m512bh b1 = (__m512bh)_mm512_load_si512(pb + (size_t)p * NR + 16);
        const uint32_t *ap = pa + (size_t)p * MR;
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)ap[i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
        }
    }
    __mmask16 m0 = s_mask(nr), m1 = s_mask(nr > 16 ? nr - 16 : 0);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        if (i < mr) {
            float *row = c + (size_t)i * ldc;
            __m512 y0 = _mm512_mul_ps(va, acc[i][0]), y1 = _mm512_mul_ps(va, acc[i][1]);
            if (beta != 0.0f) { // beta == 0 overwrites: a NaN in C does not propagate
                y0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), y0);
                y1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), y1);
            }
            _mm512_mask_storeu_ps(row, m0, y0);
            _mm512_mask_storeu_ps(row + 16, m1, y1);
        }
    }
}

// ---------------------------------------------------------------------------------------

static atomic_int s_checked; // 0 unknown, 1 supported, -1 not

void bf16_gemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                  float beta, blas_trans ta, blas_trans tb, int M, int N, int K) {
    int ok = atomic_load_explicit(&s_checked, memory_order_relaxed);
    if (ok == 0) {
        cpu_features_t f;
        cpu_detect(&f);
        ok = bf16_gemm_supported(&f) ? 1 : -1;
        atomic_store_explicit(&s_checked, ok, memory_order_relaxed);
    }
    APEX_ASSERT(ok == 1); // callers check bf16_gemm_supported first
    if (M <= 0 || N <= 0) {
        return;
    }
    if (K <= 0) { // C = beta * C, the empty sum being 0
        for (int i = 0; i < M; i++) {
            for (int j = 0; j < N; j++) {
                c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
            }
        }
        return;
    }
    s_ws *w = s_workspace();
    int np = (N + NR - 1) / NR, kpmax = (APEX_MIN(K, KC) + 1) / 2;
    uint32_t *pb = s_grow(&w->pb, &w->pb_cap, (size_t)np * kpmax * NR);
    uint32_t *pa = s_grow(&w->pa, &w->pa_cap,
                          (size_t)((APEX_MIN(M, MC) + MR - 1) / MR) * kpmax * MR);
    size_t tmp_words = (size_t)APEX_MAX(APEX_MAX(N, APEX_MIN(M, MC)), kpmax) + 16;
    uint32_t *tmp = s_grow(&w->tmp, &w->tmp_cap, tmp_words);
    for (int k0 = 0; k0 < K; k0 += KC) {
        int kc = APEX_MIN(KC, K - k0), kp = (kc + 1) / 2;
        float bk = k0 == 0 ? beta : 1.0f; // later blocks add to what the first wrote
        s_pack_b(pb, tmp, b, ldb, tb, k0, kc, N);
        for (int i0 = 0; i0 < M; i0 += MC) {
            int mc = APEX_MIN(MC, M - i0), nmp = (mc + MR - 1) / MR;
            s_pack_a(pa, tmp, a, lda, ta, i0, mc, k0, kc);
            for (int jp = 0; jp < np; jp++) {
                int nr = APEX_MIN(NR, N - jp * NR);
                for (int ip = 0; ip < nmp; ip++) {
                    s_kernel(kp, pa + (size_t)ip * kp * MR, pb + (size_t)jp * kp * NR,
                             c + (size_t)(i0 + ip * MR) * ldc + jp * NR, ldc,
                             APEX_MIN(MR, mc - ip * MR), nr, alpha, bk);
                }
            }
        }
    }
}
