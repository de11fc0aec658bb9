// powbatch.c: 4-lane SSE2 x^beta = 2^(beta log2 x) for x > 0 (see powbatch.h):
// - log2 x = e + log2 m with m in [sqrt(1/2), sqrt(2)), and ln m = 2 atanh(t), t =
//   (m-1)/(m+1), |t| <= 0.172, summed to t^9 (truncation < 2e-9 relative);
// - 2^y with y = n + f, n an integer, |f| <= 1/2: e^(f ln 2) to the 7th power (truncation
//   < 6e-9), then n is added to the exponent field.
// The large part of y, beta e, is kept exact (see s_pow4); every other term is small, so
// y's rounding error stays ~1e-7 absolute and the result's relative error < 1e-6 for beta
// <= 10 (tests/check_powbatch.c measures it against double pow on a dense grid). A lane
// whose x is subnormal, infinite or NaN, or whose 2^y could be subnormal or overflow,
// takes powf. Every value's result depends on (x, beta) only, never on its neighbours or
// its position in the batch (the tail goes through the same 4-lane code): a priority
// inserted alone or in a batch gets the very same leaf value.
#include "powbatch.h"

#include <float.h>
#include <math.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define POW_LN2 0.693147180559945f
#define POW_INV_LN2 1.442695040888963f

#if defined(__SSE2__)
// x^beta on 4 lanes; returns a 4-bit mask of lanes outside the fast path's domain.
static inline uint32_t s_pow4(__m128 x, __m128 beta, __m128 *out) {
    const __m128 one = _mm_set1_ps(1.0f), half = _mm_set1_ps(0.5f);
    __m128i bits = _mm_castps_si128(x);
    __m128i e = _mm_sub_epi32(_mm_srli_epi32(bits, 23), _mm_set1_epi32(127));
    __m128 m = _mm_castsi128_ps(
        _mm_or_si128(_mm_and_si128(bits, _mm_set1_epi32(0x7fffff)), _mm_castps_si128(one)));
    __m128 big = _mm_cmpgt_ps(m, _mm_set1_ps(1.41421356f)); // m -> m/2, e -> e+1
    m = _mm_sub_ps(m, _mm_and_ps(big, _mm_mul_ps(m, half)));
    e = _mm_sub_epi32(e, _mm_castps_si128(big)); // the mask is -1 where big
    __m128 t = _mm_div_ps(_mm_sub_ps(m, one), _mm_add_ps(m, one));
    __m128 t2 = _mm_mul_ps(t, t);
    __m128 p = _mm_add_ps(_mm_set1_ps(1.0f / 7.0f), _mm_mul_ps(t2, _mm_set1_ps(1.0f / 9.0f)));
    p = _mm_add_ps(_mm_set1_ps(1.0f / 5.0f), _mm_mul_ps(t2, p));
    p = _mm_add_ps(_mm_set1_ps(1.0f / 3.0f), _mm_mul_ps(t2, p));
    p = _mm_add_ps(one, _mm_mul_ps(t2, p));
    __m128 log2m = _mm_mul_ps(_mm_mul_ps(t, p), _mm_set1_ps(2.0f * POW_INV_LN2));
    // y = beta e + beta log2 m, without rounding the large part: beta_hi keeps 16 bits of
    // beta, so beta_hi e (|e| <= 2^7) is exact, and so is its distance to the nearest
    // integer n. Everything left is small, so y's rounding error stays ~1e-7 absolute.
    __m128 ef = _mm_cvtepi32_ps(e);
    __m128 beta_hi = _mm_and_ps(beta, _mm_castsi128_ps(_mm_set1_epi32((int)0xffffff00)));
    __m128 a = _mm_mul_ps(beta_hi, ef);
    __m128i n = _mm_cvtps_epi32(a); // nearest (the default rounding mode)
    __m128 f =
        _mm_add_ps(_mm_sub_ps(a, _mm_cvtepi32_ps(n)),
                   _mm_add_ps(_mm_mul_ps(_mm_sub_ps(beta, beta_hi), ef), _mm_mul_ps(beta, log2m)));
    __m128i n2 = _mm_cvtps_epi32(f);
    n = _mm_add_epi32(n, n2);
    f = _mm_sub_ps(f, _mm_cvtepi32_ps(n2));
    // 2^n q with q in [0.70, 1.42] is a normal float for n in [-125, 127].
    __m128i out_of_range = _mm_or_si128(_mm_cmplt_epi32(n, _mm_set1_epi32(-125)),
                                        _mm_cmpgt_epi32(n, _mm_set1_epi32(127)));
    __m128 bad_x = _mm_or_ps(_mm_cmplt_ps(x, _mm_set1_ps(FLT_MIN)), // also NaN: not >=
                             _mm_cmpgt_ps(x, _mm_set1_ps(FLT_MAX)));
    bad_x = _mm_or_ps(bad_x, _mm_cmpunord_ps(x, x));
    uint32_t slow = (uint32_t)_mm_movemask_ps(_mm_or_ps(bad_x, _mm_castsi128_ps(out_of_range)));
    __m128 g = _mm_mul_ps(f, _mm_set1_ps(POW_LN2));
    __m128 q = _mm_add_ps(_mm_set1_ps(1.0f / 720.0f), _mm_mul_ps(g, _mm_set1_ps(1.0f / 5040.0f)));
    q = _mm_add_ps(_mm_set1_ps(1.0f / 120.0f), _mm_mul_ps(g, q));
    q = _mm_add_ps(_mm_set1_ps(1.0f / 24.0f), _mm_mul_ps(g, q));
    q = _mm_add_ps(_mm_set1_ps(1.0f / 6.0f), _mm_mul_ps(g, q));
    q = _mm_add_ps(half, _mm_mul_ps(g, q));
    q = _mm_add_ps(one, _mm_mul_ps(g, q));
    q = _mm_add_ps(one, _mm_mul_ps(g, q));
    *out = _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(q), _mm_slli_epi32(n, 23)));
    return slow;
}
#endif

#if defined(__SSE2__)
// x[0..4) = x^beta, with powf on the lanes the fast path refuses.
static inline void s_pow4_store(float *x, __m128 b4, float beta) {
    __m128 w;
    uint32_t slow = s_pow4(_mm_loadu_ps(x), b4, &w);
    float in[4];
    _mm_storeu_ps(in, _mm_loadu_ps(x));
    _mm_storeu_ps(x, w);
    while (__builtin_expect(slow != 0, 0)) {
        uint32_t k = (uint32_t)__builtin_ctz(slow);
        x[k] = powf(in[k], beta);
        slow &= slow - 1;
    }
}
#endif

// Above beta 10 (Ape-X anneals it within [0.4, 1]) beta log2 m itself grows large enough
// to cost precision, so such a beta takes powf.
void pow_batch(float *x, uint32_t n, float beta) {
#if defined(__SSE2__)
    if (beta <= 10.0f) {
        __m128 b4 = _mm_set1_ps(beta);
        uint32_t i = 0;
        for (; i + 4 <= n; i += 4) {
            s_pow4_store(x + i, b4, beta);
        }
        if (i < n) { // the tail through the same code, padded with 1s
            float t[4] = {1.0f, 1.0f, 1.0f, 1.0f};
            for (uint32_t k = 0; i + k < n; k++) {
                t[k] = x[i + k];
            }
            s_pow4_store(t, b4, beta);
            for (uint32_t k = 0; i + k < n; k++) {
                x[i + k] = t[k];
            }
        }
        return;
    }
#endif
    for (uint32_t i = 0; i < n; i++) {
        x[i] = powf(x[i], beta);
    }
}
