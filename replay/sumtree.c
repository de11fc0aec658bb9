// sumtree.c: 16-ary sum + min tree with level-synchronous batched search. See sumtree.h for
// the layout and the reasons behind it.
#include "sumtree.h"

#include "apex.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// Searches and updates run in chunks of this many leaves so that their per-leaf scratch
// (current node, remaining mass) lives on the stack: no allocation, 4 KiB of scratch, and
// enough independent searches per level to keep the memory system busy.
#define SUMTREE_CHUNK 512u
// Levels with at most this many nodes are de-duplicated with a bitmap on update (512 B).
#define SUMTREE_DEDUPE_NODES 4096u

#define F SUMTREE_FANOUT

// ---------------------------------------------------------------------------------------
// 16-wide kernels over one node (one cache line)
// ---------------------------------------------------------------------------------------

// The association order of a leaf line's sum: four pairwise quad sums, then added left to
// right. s_prefix16_gt produces exactly this value as its last element (SIMD and scalar
// paths alike), so a level-1 sum is bit-identical to what the leaf search sees below it.
static inline float s_sum16(const float *c) {
    float q0 = (c[0] + c[1]) + (c[2] + c[3]);
    float q1 = (c[4] + c[5]) + (c[6] + c[7]);
    float q2 = (c[8] + c[9]) + (c[10] + c[11]);
    float q3 = (c[12] + c[13]) + (c[14] + c[15]);
    return ((q0 + q1) + q2) + q3;
}

#if defined(__SSE2__)
static inline float s_hmin4(__m128 m) {
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_min_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(m);
}

static inline float s_min16(const float *c) {
    __m128 a = _mm_min_ps(_mm_load_ps(c), _mm_load_ps(c + 4));
    __m128 b = _mm_min_ps(_mm_load_ps(c + 8), _mm_load_ps(c + 12));
    return s_hmin4(_mm_min_ps(a, b));
}

// Min over the non-empty (> 0) leaves of one leaf line; +inf when all are empty. This is
// why the leaves need no min array of their own: an occupied leaf is never 0.
static inline float s_min16_positive(const float *c) {
    const __m128 zero = _mm_setzero_ps(), inf = _mm_set1_ps(INFINITY);
    __m128 m = inf;
    for (uint32_t q = 0; q < 4; q++) {
        __m128 v = _mm_load_ps(c + 4 * q);
        __m128 empty = _mm_cmple_ps(v, zero); // empty lanes become +inf
        m = _mm_min_ps(m, _mm_or_ps(_mm_and_ps(empty, inf), _mm_andnot_ps(empty, v)));
    }
    return s_hmin4(m);
}
#else
static inline float s_min16(const float *c) {
    float m = c[0];
    for (uint32_t k = 1; k < F; k++) {
        m = c[k] < m ? c[k] : m;
    }
    return m;
}

static inline float s_min16_positive(const float *c) {
    float m = INFINITY;
    for (uint32_t k = 0; k < F; k++) {
        float v = c[k] > 0.0f ? c[k] : INFINITY;
        m = v < m ? v : m;
    }
    return m;
}
#endif

// Inclusive prefix sums of c into pre, and returns a 16-bit mask with bit k set iff
// pre[k] > u. The quad prefix is [a0, a0+a1, a0+(a1+a2), (a0+a1)+(a2+a3)], then each quad
// adds the running total of the quads before it (Hillis-Steele within a 4-lane register).
#if defined(__SSE2__)
static inline uint32_t s_prefix16_gt(const float *c, float u, float *pre) {
    __m128 carry = _mm_setzero_ps();
    __m128 uu = _mm_set1_ps(u);
    uint32_t mask = 0;
#pragma GCC unroll 4 // not unrolled at -O2 otherwise: +10 % on sampling
    for (uint32_t q = 0; q < 4; q++) {
        __m128 a = _mm_load_ps(c + 4 * q);
        a = _mm_add_ps(a, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(a), 4)));
        a = _mm_add_ps(a, _mm_castsi128_ps(_mm_slli_si128(_mm_castps_si128(a), 8)));
        a = _mm_add_ps(a, carry); // q == 0: adding +0 is exact
        carry = _mm_shuffle_ps(a, a, _MM_SHUFFLE(3, 3, 3, 3));
        _mm_store_ps(pre + 4 * q, a);
        mask |= (uint32_t)_mm_movemask_ps(_mm_cmpgt_ps(a, uu)) << (4 * q);
    }
    return mask;
}
// Bit k set iff pre[k] > u, over one line of 16 prefix sums.
static inline uint32_t s_gt16(const float *pre, float u) {
    __m128 uu = _mm_set1_ps(u);
    uint32_t m0 = (uint32_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_load_ps(pre), uu));
    uint32_t m1 = (uint32_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_load_ps(pre + 4), uu));
    uint32_t m2 = (uint32_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_load_ps(pre + 8), uu));
    uint32_t m3 = (uint32_t)_mm_movemask_ps(_mm_cmpgt_ps(_mm_load_ps(pre + 12), uu));
    return m0 | m1 << 4 | m2 << 8 | m3 << 12;
}
#else
static inline uint32_t s_gt16(const float *pre, float u) {
    uint32_t mask = 0;
    for (uint32_t k = 0; k < F; k++) {
        mask |= (uint32_t)(pre[k] > u) << k;
    }
    return mask;
}

static inline uint32_t s_prefix16_gt(const float *c, float u, float *pre) {
    float carry = 0.0f;
    uint32_t mask = 0;
    for (uint32_t q = 0; q < 4; q++) {
        const float *a = c + 4 * q;
        float p[4] = {a[0], a[0] + a[1], a[0] + (a[1] + a[2]), (a[0] + a[1]) + (a[2] + a[3])};
        for (uint32_t k = 0; k < 4; k++) {
            pre[4 * q + k] = p[k] + carry;
            mask |= (uint32_t)(pre[4 * q + k] > u) << (4 * q + k);
        }
        carry = pre[4 * q + 3];
    }
    return mask;
}
#endif

// Rare path of s_pick: rounding put the target past the last prefix (k == 16), or on a
// child whose sum is 0 (possible because the prefix association is not strictly
// sequential). Move to the nearest non-empty child; landing below keeps the target at that
// child's top end, landing above starts it at 0. The node's total is > 0, so one exists.
static uint32_t s_pick_slow(const float *c, uint32_t k, float *u) {
    for (uint32_t i = APEX_MIN(k, F); i-- > 0;) {
        if (c[i] > 0.0f) {
            *u = c[i];
            return i;
        }
    }
    for (uint32_t i = k + 1; i < F; i++) {
        if (c[i] > 0.0f) {
            *u = 0.0f;
            return i;
        }
    }
    APEX_PANIC("sumtree: search entered an empty node");
}

// Picks the leaf of leaf line c that holds mass *u and leaves in *u the mass left inside it.
static inline uint32_t s_pick(const float *c, float *u) {
    _Alignas(16) float pre[F];
    uint32_t gt = s_prefix16_gt(c, *u, pre);
    uint32_t k = gt ? (uint32_t)__builtin_ctz(gt) : F;
    if (__builtin_expect(k == F || c[k] <= 0.0f, 0)) {
        return s_pick_slow(c, k, u);
    }
    // pre[k-1] <= *u because k is the first prefix above it, so the difference is >= 0.
    *u = k ? *u - pre[k - 1] : *u;
    return k;
}

// The stored prefix of an upper line. s_pick_prefix relies on "pre[k] rises only where
// c[k] > 0" and on pre never falling. The SIMD association of s_prefix16_gt breaks the
// first: within a quad it adds (a1 + a2) + a0, so a zero at a quad's end can still show a
// rise in the last bit, and the search would enter an empty subtree. Here every element is
// carry_q + local_k, with local_k summed left to right within quad q and carry_q = the
// previous quad's last element, so a zero child repeats its left neighbour's operands and
// its value exactly, and neither term ever falls. The 4 quads are independent chains, so
// this is 3 + 2 + 1 dependent adds deep instead of 16, and the line is written with vector
// stores (scalar stores would stall the search's vector loads of the same line). Returns
// pre[15], the line's sum.
#if defined(__SSE2__)
static inline float s_prefix16_seq(const float *c, float *pre) {
    // Transposed, lane q holds quad q, so the 4 left-to-right chains run side by side.
    __m128 r0 = _mm_load_ps(c), r1 = _mm_load_ps(c + 4), r2 = _mm_load_ps(c + 8),
           r3 = _mm_load_ps(c + 12);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    __m128 l1 = _mm_add_ps(r0, r1);
    __m128 l2 = _mm_add_ps(l1, r2);
    __m128 l3 = _mm_add_ps(l2, r3);
    _Alignas(16) float t[4];
    _mm_store_ps(t, l3); // the quads' own sums
    float c1 = t[0], c2 = c1 + t[1], c3 = c2 + t[2];
    __m128 carry = _mm_setr_ps(0.0f, c1, c2, c3); // quad 0 adds +0: exact
    r0 = _mm_add_ps(carry, r0);
    r1 = _mm_add_ps(carry, l1);
    r2 = _mm_add_ps(carry, l2);
    r3 = _mm_add_ps(carry, l3);
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_store_ps(pre, r0);
    _mm_store_ps(pre + 4, r1);
    _mm_store_ps(pre + 8, r2);
    _mm_store_ps(pre + 12, r3);
    return pre[F - 1];
}
#else
static inline float s_prefix16_seq(const float *c, float *pre) {
    float carry = 0.0f;
    for (uint32_t q = 0; q < 4; q++) {
        const float *a = c + 4 * q;
        float l0 = a[0], l1 = l0 + a[1], l2 = l1 + a[2], l3 = l2 + a[3];
        pre[4 * q] = carry + l0;
        pre[4 * q + 1] = carry + l1;
        pre[4 * q + 2] = carry + l2;
        pre[4 * q + 3] = carry + l3;
        carry = pre[4 * q + 3];
    }
    return carry;
}
#endif

// Rare path of s_pick_prefix: *u is at or past the node's total (rounding, or the INFINITY
// this function leaves for the levels below). The last non-empty child is the one whose
// prefix rises; *u becomes INFINITY, "the top end of this subtree", so every level below
// takes its last non-empty child too, down to s_pick_slow at the leaves.
static uint32_t s_pick_prefix_slow(const float *pre, float *u) {
    for (uint32_t i = F; i-- > 0;) {
        if (pre[i] > (i ? pre[i - 1] : 0.0f)) {
            *u = INFINITY;
            return i;
        }
    }
    APEX_PANIC("sumtree: search entered an empty node");
}

// Picks the child of an upper node from its stored prefix sums (see the header): the first
// prefix above *u. That child is never empty: pre[k] > *u >= pre[k-1] means pre[k] !=
// pre[k-1], and a sequential prefix (s_prefix16_seq) stays equal when the child adds 0.
static inline uint32_t s_pick_prefix(const float *pre, float *u) {
    uint32_t gt = s_gt16(pre, *u);
    if (__builtin_expect(gt == 0, 0)) {
        return s_pick_prefix_slow(pre, u);
    }
    uint32_t k = (uint32_t)__builtin_ctz(gt);
    *u = k ? *u - pre[k - 1] : *u;
    return k;
}

// ---------------------------------------------------------------------------------------
// Lifetime
// ---------------------------------------------------------------------------------------

// Floats allocated for level l: whole lines, so every node can be read as 16 values.
static size_t s_level_len(uint32_t entries) { return ((size_t)entries + F - 1) / F * F; }

// Fills entries[] and returns the number of levels above the leaves for this capacity.
static uint32_t s_shape(uint32_t capacity, uint32_t *entries) {
    uint32_t l = 0;
    entries[0] = capacity;
    while (entries[l] > F) {
        entries[l + 1] = (entries[l] + F - 1) / F;
        l++;
    }
    return l;
}

size_t sumtree_bytes(uint32_t capacity) {
    uint32_t entries[SUMTREE_MAX_LEVELS];
    uint32_t levels = s_shape(capacity ? capacity : 1, entries);
    size_t floats = s_level_len(entries[0]);
    for (uint32_t l = 1; l <= levels; l++) {
        floats += 3 * s_level_len(entries[l]); // sum, prefix and min
    }
    return floats * sizeof(float);
}

void sumtree_init(sumtree_t *t, uint32_t capacity) {
    APEX_ASSERT(capacity >= 1 && capacity <= SUMTREE_CAPACITY_MAX);
    *t = (sumtree_t){0};
    t->capacity = capacity;
    t->levels = s_shape(capacity, t->entries);
    for (uint32_t l = 0; l <= t->levels; l++) {
        t->sum[l] = xaligned_alloc(s_level_len(t->entries[l]) * sizeof(float));
        if (l > 0) {
            t->pre[l] = xaligned_alloc(s_level_len(t->entries[l]) * sizeof(float));
            t->min[l] = xaligned_alloc(s_level_len(t->entries[l]) * sizeof(float));
        }
    }
    sumtree_clear(t);
}

void sumtree_fini(sumtree_t *t) {
    for (uint32_t l = 0; l < SUMTREE_MAX_LEVELS; l++) {
        xfree(t->sum[l]);
        xfree(t->pre[l]);
        xfree(t->min[l]);
    }
    *t = (sumtree_t){0};
}

void sumtree_clear(sumtree_t *t) {
    for (uint32_t l = 0; l <= t->levels; l++) {
        size_t len = s_level_len(t->entries[l]);
        for (size_t i = 0; i < len; i++) {
            t->sum[l][i] = 0.0f;
            if (l > 0) {
                t->pre[l][i] = 0.0f;
                t->min[l][i] = INFINITY;
            }
        }
    }
    t->total = 0.0f;
    t->min_value = INFINITY;
}

// ---------------------------------------------------------------------------------------
// Batched set: leaves first, then one pass per level recomputing each touched parent from
// its 16 children (never adding a delta: see the header on drift).
// ---------------------------------------------------------------------------------------

// Recomputes, at level l, the sum and min entries of the nodes in node[0..m) and replaces
// each node[j] with its parent's index. Consecutive duplicates (a batch of adjacent slots)
// are recomputed once. Above level 1 the child line's prefix sums are stored too, and the
// node's sum is their last element, so the two can never disagree. Prefetches the lines
// the next level will write.
static void s_recompute_level(sumtree_t *t, uint32_t l, uint32_t m, uint32_t *node) {
    const float *child_sum = t->sum[l - 1];
    const float *child_min = t->min[l - 1];
    float *child_pre = t->pre[l - 1];
    float *sum = t->sum[l], *min = t->min[l];
    int has_next = l < t->levels;
    // Near the root a batch of random slots shares most nodes (512 updates at 2^20 touch
    // ~220 of level 3's 256 and all 16 of level 4): there a bitmap skips every repeat,
    // not just consecutive ones. Lower down, repeats are rare and the bitmap would be big;
    // a small batch (an actor's 50 consecutive rows) repeats only consecutively.
    uint64_t seen[SUMTREE_DEDUPE_NODES / 64];
    int dedupe = t->entries[l] <= SUMTREE_DEDUPE_NODES && m >= 128;
    if (dedupe) {
        memset(seen, 0, (t->entries[l] + 63) / 64 * sizeof(uint64_t));
    }
    uint32_t prev = UINT32_MAX;
    for (uint32_t j = 0; j < m; j++) {
        uint32_t g = node[j];
        node[j] = g / F;
        if (g == prev) {
            continue;
        }
        prev = g;
        if (dedupe) {
            uint64_t bit = (uint64_t)1 << (g % 64);
            if (seen[g / 64] & bit) {
                continue;
            }
            seen[g / 64] |= bit;
        }
        size_t c = (size_t)g * F;
        if (l == 1) {
            sum[g] = s_sum16(child_sum + c);
            min[g] = s_min16_positive(child_sum + c);
        } else {
            sum[g] = s_prefix16_seq(child_sum + c, child_pre + c);
            min[g] = s_min16(child_min + c);
        }
        if (has_next) {
            __builtin_prefetch(t->sum[l + 1] + g / F, 1);
            __builtin_prefetch(t->pre[l] + g / F * F, 1);
            __builtin_prefetch(t->min[l + 1] + g / F, 1);
        }
    }
}

static void s_set_chunk(sumtree_t *t, uint32_t m, const uint32_t *idx, const float *values) {
    uint32_t node[SUMTREE_CHUNK];
    float *leaf = t->sum[0];
    // Start every leaf-line and level-1 miss of the chunk before touching any of them.
    for (uint32_t j = 0; j < m; j++) {
        APEX_ASSERT(idx[j] < t->capacity);
        __builtin_prefetch(leaf + idx[j], 1);
        if (t->levels > 0) {
            __builtin_prefetch(t->sum[1] + idx[j] / F, 1);
            __builtin_prefetch(t->min[1] + idx[j] / F, 1);
        }
    }
    for (uint32_t j = 0; j < m; j++) {
        float v = values[j];
        APEX_ASSERT(v >= 0.0f && v <= SUMTREE_VALUE_MAX); // also false for NaN
        leaf[idx[j]] = v;
        node[j] = idx[j] / F;
    }
    for (uint32_t l = 1; l <= t->levels; l++) {
        s_recompute_level(t, l, m, node);
    }
}

void sumtree_set(sumtree_t *t, uint32_t n, const uint32_t *idx, const float *values) {
    for (uint32_t base = 0; base < n; base += SUMTREE_CHUNK) {
        s_set_chunk(t, APEX_MIN(SUMTREE_CHUNK, n - base), idx + base, values + base);
    }
    // The root is the single line at the top level; total and min are read from it.
    const float *root = t->sum[t->levels];
    if (t->levels > 0) {
        t->total = s_prefix16_seq(root, t->pre[t->levels]);
        t->min_value = s_min16(t->min[t->levels]);
    } else {
        t->total = s_sum16(root);
        t->min_value = s_min16_positive(root);
    }
}

// ---------------------------------------------------------------------------------------
// Batched search
// ---------------------------------------------------------------------------------------

// Descends all m searches one level at a time. u[j] is the mass still to find; on return
// out[j] is the leaf. Each search prefetches its next line as soon as it knows it, and
// that line is read only after the other m - 1 searches have taken their step.
static void s_find_chunk(const sumtree_t *t, uint32_t m, float *u, uint32_t *out) {
    for (uint32_t j = 0; j < m; j++) {
        out[j] = 0; // node index at the current level; the root is node 0
    }
    for (uint32_t l = t->levels; l > 0; l--) {
        const float *pre = t->pre[l];
        const float *below = l > 1 ? t->pre[l - 1] : t->sum[0];
        for (uint32_t j = 0; j < m; j++) {
            uint32_t node = out[j] * F + s_pick_prefix(pre + (size_t)out[j] * F, &u[j]);
            out[j] = node;
            __builtin_prefetch(below + (size_t)node * F);
        }
    }
    const float *leaf = t->sum[0];
    for (uint32_t j = 0; j < m; j++) {
        out[j] = out[j] * F + s_pick(leaf + (size_t)out[j] * F, &u[j]);
    }
}

void sumtree_find(const sumtree_t *t, uint32_t n, const float *mass, uint32_t *out) {
    APEX_ASSERT(t->total > 0.0f);
    float u[SUMTREE_CHUNK];
    for (uint32_t base = 0; base < n; base += SUMTREE_CHUNK) {
        uint32_t m = APEX_MIN(SUMTREE_CHUNK, n - base);
        for (uint32_t j = 0; j < m; j++) {
            float x = mass[base + j];
            u[j] = x > 0.0f ? x : 0.0f; // also maps NaN to 0; >= total is handled in s_pick
        }
        s_find_chunk(t, m, u, out + base);
    }
}

void sumtree_sample_strata(const sumtree_t *t, rng_t *rng, uint32_t first, uint32_t m, uint32_t n,
                           uint32_t *out) {
    APEX_ASSERT(t->total > 0.0f && n >= 1 && m <= n && first <= n - m);
    float u[SUMTREE_CHUNK];
    // Stratum j is [j, j+1) * total/n (Schaul et al. 2016, App. B.2.1); in double so the
    // stratum edges are exact to well below a float ulp of the total.
    double step = (double)t->total / n;
    for (uint32_t base = 0; base < m; base += SUMTREE_CHUNK) {
        uint32_t c = APEX_MIN(SUMTREE_CHUNK, m - base);
        for (uint32_t j = 0; j < c; j++) {
            u[j] = (float)(((double)(first + base + j) + rng_uniform(rng)) * step);
        }
        s_find_chunk(t, c, u, out + base);
    }
}

void sumtree_sample(const sumtree_t *t, rng_t *rng, uint32_t n, uint32_t *out) {
    sumtree_sample_strata(t, rng, 0, n, n, out);
}
