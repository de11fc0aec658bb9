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
#include <sys/syscall.h>
#include <unistd.h>

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
// A panel's pairs are kps apart (kps >= the block's pair count; AMX's tiles take 16 pairs at a
// time, so it pads each panel to a multiple of 16 with zero pairs).
static void s_pack_b(uint32_t *pb, uint32_t *tmp, const float *b, int ldb, blas_trans tb, int k0,
                     int kc, int N, int kps) {
    int kp = (kc + 1) / 2, np = (N + NR - 1) / NR;
    if (N % NR) {
        memset(pb + (size_t)(np - 1) * kps * NR, 0, (size_t)kps * NR * sizeof(uint32_t));
    }
    for (int jp = 0; jp < np && kps > kp; jp++) {
        memset(pb + ((size_t)jp * kps + kp) * NR, 0, (size_t)(kps - kp) * NR * sizeof(uint32_t));
    }
    if (tb == BLAS_NO_TRANS) { // op(B)(k, j) = b[k ldb + j]: a pair of rows at a time
        for (int p = 0; p < kp; p++) {
            const float *r0 = b + (size_t)(k0 + 2 * p) * ldb;
            s_pairs_across(r0, 2 * p + 1 < kc ? r0 + ldb : NULL, N, tmp);
            for (int jp = 0; jp < np; jp++) {
                int nr = APEX_MIN(NR, N - jp * NR);
                memcpy(pb + ((size_t)jp * kps + p) * NR, tmp + jp * NR,
                       (size_t)nr * sizeof(uint32_t));
            }
        }
    } else { // op(B)(k, j) = b[j ldb + k]: a column's pairs are adjacent
        for (int j = 0; j < N; j++) {
            s_pairs_along(b + (size_t)j * ldb + k0, kc, tmp);
            uint32_t *dst = pb + (size_t)(j / NR) * kps * NR + j % NR;
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

static void s_gemm_avx512(float *c, int ldc, const float *a, int lda, const float *b, int ldb,
                          float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                          int K) {
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
        s_pack_b(pb, tmp, b, ldb, tb, k0, kc, N, kp);
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

// ---------------------------------------------------------------------------------------
// AMX (Sapphire Rapids and later): eight tile registers of 16 rows x 64 bytes. tdpbf16ps
// multiplies a 16 x 32 bf16 tile of A by a 32 x 16 one of B (stored as 16 rows of k pairs,
// the layout s_pack_b already writes) into a 16 x 16 fp32 tile of C: 8 192 multiply-adds per
// instruction, 16 times vdpbf16ps's. The block of C is 32 x 32: four C tiles, two of A (rows
// 0-15 and 16-31) and two of B (columns 0-15 and 16-31) use all eight registers. A is packed
// row-major for tileloadd (each row's pairs adjacent, AMR rows per panel) and both operands'
// pair counts are padded with zeros to a multiple of 16, a tile's depth.

#define AMR 32

#define AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} s_tilecfg;

// op(A)'s rows i0 .. i0 + mc - 1 as an (mc rounded up to AMR) x kps row-major array of pairs,
// zero past kc and past mc.
static void s_pack_a_rows(uint32_t *pa, uint32_t *tmp, const float *a, int lda, blas_trans ta,
                          int i0, int mc, int k0, int kc, int kps) {
    int kp = (kc + 1) / 2, rows = (mc + AMR - 1) / AMR * AMR;
    if (ta == BLAS_NO_TRANS) {
        for (int i = 0; i < mc; i++) {
            s_pairs_along(a + (size_t)(i0 + i) * lda + k0, kc, pa + (size_t)i * kps);
        }
    } else {
        for (int p = 0; p < kp; p++) {
            const float *r0 = a + (size_t)(k0 + 2 * p) * lda + i0;
            s_pairs_across(r0, 2 * p + 1 < kc ? r0 + lda : NULL, mc, tmp);
            for (int i = 0; i < mc; i++) {
                pa[(size_t)i * kps + p] = tmp[i];
            }
        }
    }
    for (int i = 0; i < mc && kps > kp; i++) {
        memset(pa + (size_t)i * kps + kp, 0, (size_t)(kps - kp) * sizeof(uint32_t));
    }
    if (rows > mc) {
        memset(pa + (size_t)mc * kps, 0, (size_t)(rows - mc) * kps * sizeof(uint32_t));
    }
}

// buf's mr x nr block (row stride NR) into C: alpha * buf + beta * C.
BF16_TARGET static void s_store_block(const float *buf, float *c, int ldc, int mr, int nr,
                                      float alpha, float beta) {
    __mmask16 m0 = s_mask(nr), m1 = s_mask(nr > 16 ? nr - 16 : 0);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int i = 0; i < mr; i++) {
        float *row = c + (size_t)i * ldc;
        __m512 y0 = _mm512_mul_ps(va, _mm512_load_ps(buf + (size_t)i * NR));
        __m512 y1 = _mm512_mul_ps(va, _mm512_load_ps(buf + (size_t)i * NR + 16));
        if (beta != 0.0f) { // beta == 0 overwrites: a NaN in C does not propagate
            y0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), y0);
            y1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), y1);
        }
        _mm512_mask_storeu_ps(row, m0, y0);
        _mm512_mask_storeu_ps(row + 16, m1, y1);
    }
}

// C's mr x nr block (mr <= AMR, nr <= NR) from an A panel (rows kps words apart) and a B panel.
// A block of at most 16 rows uses half the tiles: the output layers' few rows cost half.
AMX_TARGET static void s_amx_kernel(int kps, const uint32_t *pa, const uint32_t *pb, float *c,
                                    int ldc, int mr, int nr, float alpha, float beta, float *buf) {
    const long sa = (long)kps * 4, sb = NR * 4;
    _tile_zero(0);
    _tile_zero(1);
    if (mr > 16) {
        _tile_zero(2);
        _tile_zero(3);
        for (int p = 0; p < kps; p += 16) {
            _tile_loadd(4, pa + p, sa);
            _tile_loadd(5, pa + (size_t)16 * kps + p, sa);
            _tile_loadd(6, pb + (size_t)p * NR, sb);
            _tile_loadd(7, pb + (size_t)p * NR + 16, sb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
        _tile_stored(2, buf + 16 * NR, sb);
        _tile_stored(3, buf + 16 * NR + 16, sb);
    } else {
        for (int p = 0; p < kps; p += 16) {
            _tile_loadd(4, pa + p, sa);
            _tile_loadd(6, pb + (size_t)p * NR, sb);
            _tile_loadd(7, pb + (size_t)p * NR + 16, sb);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
    }
    _tile_stored(0, buf, sb);
    _tile_stored(1, buf + 16, sb);
    s_store_block(buf, c, ldc, mr, nr, alpha, beta);
}

AMX_TARGET static void s_gemm_amx(float *c, int ldc, const float *a, int lda, const float *b,
                                  int ldb, float alpha, float beta, blas_trans ta, blas_trans tb,
                                  int M, int N, int K) {
    s_ws *w = s_workspace();
    int np = (N + NR - 1) / NR, kpsmax = ((APEX_MIN(K, KC) + 1) / 2 + 15) / 16 * 16;
    int mcmax = (APEX_MIN(M, MC) + AMR - 1) / AMR * AMR;
    uint32_t *pb = s_grow(&w->pb, &w->pb_cap, (size_t)np * kpsmax * NR);
    uint32_t *pa = s_grow(&w->pa, &w->pa_cap, (size_t)mcmax * kpsmax);
    // tmp: a row of pairs across N or mc columns, or along kc; then the 32 x 32 block of C
    size_t tmp_words = (size_t)APEX_MAX(APEX_MAX(N, APEX_MIN(M, MC)), kpsmax) + 16;
    uint32_t *tmp = s_grow(&w->tmp, &w->tmp_cap, tmp_words + 16 + AMR * NR);
    float *buf = (float *)(tmp + (tmp_words + 15) / 16 * 16); // 64-byte aligned
    s_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
    for (int k0 = 0; k0 < K; k0 += KC) {
        int kc = APEX_MIN(KC, K - k0), kps = ((kc + 1) / 2 + 15) / 16 * 16;
        float bk = k0 == 0 ? beta : 1.0f;
        s_pack_b(pb, tmp, b, ldb, tb, k0, kc, N, kps);
        for (int i0 = 0; i0 < M; i0 += MC) {
            int mc = APEX_MIN(MC, M - i0), nmp = (mc + AMR - 1) / AMR;
            s_pack_a_rows(pa, tmp, a, lda, ta, i0, mc, k0, kc, kps);
            for (int jp = 0; jp < np; jp++) {
                int nr = APEX_MIN(NR, N - jp * NR);
                for (int ip = 0; ip < nmp; ip++) {
                    s_amx_kernel(kps, pa + (size_t)ip * AMR * kps, pb + (size_t)jp * kps * NR,
                                 c + (size_t)(i0 + ip * AMR) * ldc + jp * NR, ldc,
                                 APEX_MIN(AMR, mc - ip * AMR), nr, alpha, bk, buf);
                }
            }
        }
    }
    _tile_release();
}

// ---------------------------------------------------------------------------------------
// Which kernel: decided once per process. AMX's tile data is a large register state Linux
// saves only for processes that ask for it (arch_prctl ARCH_REQ_XCOMP_PERM, 5.16 and later):
// without the grant, the first tile instruction kills the process with SIGILL, so AMX is used
// only after the request succeeds.

#define S_ARCH_REQ_XCOMP_PERM 0x1023
#define S_XFEATURE_XTILEDATA 18

bf16_kernel bf16_kernel_for(const cpu_features_t *f, int amx_granted) {
    if (!bf16_gemm_supported(f)) {
        return BF16_KERNEL_NONE;
    }
    return f->amx_tile && f->amx_bf16 && amx_granted ? BF16_KERNEL_AMX : BF16_KERNEL_AVX512;
}

int bf16_kernel_slow(const cpu_features_t *f, bf16_kernel k) {
    return k == BF16_KERNEL_AVX512 && f->amx_tile && f->amx_bf16;
}

const char *bf16_kernel_name(bf16_kernel k) {
    switch (k) {
    case BF16_KERNEL_AMX:
        return "AMX";
    case BF16_KERNEL_AVX512:
        return "AVX512_BF16";
    default:
        return "none";
    }
}

static atomic_int s_kernel_cached = -1;

static int s_amx_grant(void) {
#if defined(__linux__) && defined(__x86_64__)
    return syscall(SYS_arch_prctl, S_ARCH_REQ_XCOMP_PERM, S_XFEATURE_XTILEDATA) == 0;
#else
    return 0;
#endif
}

bf16_kernel bf16_gemm_kernel(void) {
    int k = atomic_load_explicit(&s_kernel_cached, memory_order_acquire);
    if (k < 0) {
        cpu_features_t f;
        cpu_detect(&f);
        // The grant is asked for only where AMX exists; asking twice is harmless.
        int granted = f.amx_tile && f.amx_bf16 && bf16_gemm_supported(&f) && s_amx_grant();
        k = (int)bf16_kernel_for(&f, granted);
        atomic_store_explicit(&s_kernel_cached, k, memory_order_release);
    }
    return (bf16_kernel)k;
}

void bf16_gemm_ld_on(bf16_kernel k, float *c, int ldc, const float *a, int lda, const float *b,
                     int ldb, float alpha, float beta, blas_trans ta, blas_trans tb, int M, int N,
                     int K) {
    bf16_kernel have = bf16_gemm_kernel();
    // Callers check bf16_gemm_supported: no kernel runs on a CPU without AVX512_BF16, and
    // AMX only where this process has it.
    APEX_ASSERT(have != BF16_KERNEL_NONE &&
                (k == BF16_KERNEL_AVX512 || (k == BF16_KERNEL_AMX && have == BF16_KERNEL_AMX)));
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
    if (k == BF16_KERNEL_AMX) {
        s_gemm_amx(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
    } else {
        s_gemm_avx512(c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
    }
}

void bf16_gemm_ld(float *c, int ldc, const float *a, int lda, const float *b, int ldb, float alpha,
                  float beta, blas_trans ta, blas_trans tb, int M, int N, int K) {
    bf16_gemm_ld_on(bf16_gemm_kernel(), c, ldc, a, lda, b, ldb, alpha, beta, ta, tb, M, N, K);
}
