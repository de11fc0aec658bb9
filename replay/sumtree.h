// sumtree.h: sum-tree + min-tree over non-negative leaf values, for proportional
// prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay", sec. 3.3).
//
// What it does: holds one float value per leaf (p_i^alpha, 0 = empty slot), and answers in
// O(1) the total sum and the minimum over non-empty leaves; samples a batch of leaves in
// proportion to their values, stratified (sample j lands in the j-th of n equal slices of
// the total mass); updates a batch of leaves in O(n log_16 capacity).
// What it does not do: store transitions, raise priorities to alpha, or know about
// generations (store.h does all three). It never allocates after sumtree_init.
//
// Layout and why (capacity 2^20 is the case that matters; see bench/bench_replay.c):
// - 16-ary, not binary. A node is 16 float child sums = one 64-byte cache line, so a
//   root-to-leaf search reads 5 lines at 2^20 instead of 20 dependent ones. Level 0 is the
//   leaf array itself (16 leaves per line); level l >= 1 holds one float per node of level
//   l-1 (its subtree sum), packed 16 per line, until one line (the root) remains. Any
//   capacity >= 1 works: missing children are 0 in the sum levels and +inf in the min levels.
// - Sampling is level-synchronous: all n searches descend one level together, and as soon
//   as a search knows its next line it prefetches it. The n cache misses of a level are then
//   in flight at once instead of one after another (the tree's lower levels, 4 MiB of leaves
//   at 2^20, do not stay in cache next to the transition arrays).
// - Above the leaves every line is also kept as its 16 inclusive prefix sums (pre[l]), so a
//   search step there is 4 compares and a count instead of computing the prefix (the
//   search was compute-bound: ~16 cycles a step, 5 steps a sample). The raw sums stay the
//   source of truth; an update recomputes a touched line's prefix from them as it computes
//   the parent's sum, and the parent's sum is that prefix's last element. The prefix is
//   summed strictly left to right, so a child adding exactly 0 leaves it equal, and the
//   picked child, where pre[k] > u >= pre[k-1], is never empty. (The SIMD prefix the
//   leaves use pairs values within quads; a zero at a quad's end could then still show a
//   rise in the last bit, and a search would enter an empty subtree.) Cost: 1/15 more tree memory and ~2 % on updates; sampling a
//   batch of 512 at 2^20 is ~1.44x faster (bench/RESULTS.md). The leaves keep raw values only:
//   the store needs each p^alpha exactly for the weights, and a difference of prefixes
//   would lose it.
// - Floats, not doubles: a double node would span two lines. Float drift is avoided by
//   construction: a parent is always recomputed from its 16 children, never adjusted by a
//   delta, so every node is a pure function of the current leaves and its relative error is
//   bounded (about depth * 16 ulp, ~1e-6) no matter how many updates came before. Every
//   16-wide sum uses the association order the search uses for that line's prefix (the
//   SIMD one for leaf lines, left to right above), so a parent's stored value equals the
//   last prefix its children produce.
// - Empty leaves (value 0) can never be sampled: a search picks the first child whose
//   prefix sum exceeds the target, and when rounding leaves the target past the last
//   prefix it falls back to the last non-zero child.
#ifndef APEX_SUMTREE_H
#define APEX_SUMTREE_H

#include "rng.h"

#include <stddef.h>
#include <stdint.h>

#define SUMTREE_FANOUT 16u
#define SUMTREE_MAX_LEVELS 9u // 16^8 = 2^32 leaves, more than a uint32_t capacity needs
#define SUMTREE_CAPACITY_MAX (1u << 30)
// Largest leaf value: 2^30 leaves of it still sum to a finite float (1e28 * 2^30 ~ 1.1e37 <
// FLT_MAX), so the total and every node stay finite and sampling stays proportional. The
// store's leaves are p^alpha <= 1e20.
#define SUMTREE_VALUE_MAX 1e28f

// Plain data (STYLE S2): embed it and use sumtree_init / sumtree_fini. Fields are read-only
// outside sumtree.c. Not thread-safe; concurrent const calls (total, min, find) are fine.
typedef struct {
    uint32_t capacity;                    // number of usable leaves
    uint32_t levels;                      // levels above the leaves; 0 when capacity <= 16
    uint32_t entries[SUMTREE_MAX_LEVELS]; // [0]: leaves; [l]: node sums held at level l
    float *sum[SUMTREE_MAX_LEVELS];       // [0]: leaf values; [l]: subtree sums, 0-padded
    float *pre[SUMTREE_MAX_LEVELS];       // [0] unused; [l]: sum[l] as per-line prefix sums
    float *min[SUMTREE_MAX_LEVELS];       // [0] unused (leaves are their own min); +inf-padded
    float total;                          // sum of all leaves, cached after every set
    float min_value;                      // min over leaves > 0, +inf when all are empty
} sumtree_t;

// Bytes sumtree_init allocates for this capacity (for start-up memory checks).
size_t sumtree_bytes(uint32_t capacity);

// Allocates an all-empty tree with 1 <= capacity <= SUMTREE_CAPACITY_MAX leaves (asserts).
void sumtree_init(sumtree_t *t, uint32_t capacity);
// Frees the arrays; a no-op on a zeroed or already finished tree.
void sumtree_fini(sumtree_t *t);

// Sets leaf idx[i] to values[i] for i < n, then recomputes the affected sums and minima
// bottom-up, level by level. values must be in [0, SUMTREE_VALUE_MAX] (0 empties the leaf),
// asserted; idx[i] <
// capacity (asserted). With duplicate indices the last value wins. No allocation.
void sumtree_set(sumtree_t *t, uint32_t n, const uint32_t *idx, const float *values);
// Empties every leaf.
void sumtree_clear(sumtree_t *t);

static inline float sumtree_get(const sumtree_t *t, uint32_t i) { return t->sum[0][i]; }
static inline float sumtree_total(const sumtree_t *t) { return t->total; }
// Smallest non-empty leaf value; +inf when the tree is empty.
static inline float sumtree_min(const sumtree_t *t) { return t->min_value; }

// Prefix-sum search: for each i < n, out[i] is the leaf k with
// sum(leaf[0..k)) <= mass[i] < sum(leaf[0..k]) (up to float rounding), and always a
// non-empty leaf. Requires total > 0 (asserted); mass[i] is clamped into [0, total).
void sumtree_find(const sumtree_t *t, uint32_t n, const float *mass, uint32_t *out);
// Stratified proportional sample of n >= 1 leaves: out[j] = find((j + U_j) * total / n)
// with U_j = rng_uniform(rng) drawn in order j = 0, 1, ... Requires total > 0 (asserted).
void sumtree_sample(const sumtree_t *t, rng_t *rng, uint32_t n, uint32_t *out);
// The same for strata first .. first+m-1 of n only (out has m entries), so a caller can
// walk a large batch in chunks with bounded scratch. Sampling strata 0..n-1 in chunks,
// in order, draws the same leaves as one sumtree_sample call.
void sumtree_sample_strata(const sumtree_t *t, rng_t *rng, uint32_t first, uint32_t m, uint32_t n,
                           uint32_t *out);

#endif
