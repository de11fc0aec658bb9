// store.c: FIFO ring of transitions in flat arrays + sum/min tree + generations.
// See store.h for the semantics. Dimension names: N = rows in a call, D = obs_dim.
#define LOG_MODULE "store"
#include "store.h"

#include "apex.h"
#include "log.h"
#include "powbatch.h"
#include "sumtree.h"
#include "wire.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

// add, sample and update walk their rows in chunks of this many so that slot indices and
// tree values fit in stack scratch (no allocation on the hot path, STYLE S8).
#define STORE_CHUNK 512u
// The largest obs_dim accepted; far above any environment apex runs (Atari frames are
// preprocessed elsewhere), and it keeps (capacity * obs_dim) checks simple.
#define STORE_OBS_DIM_MAX (1u << 20)

// Slot layout. Each slot is one record of stride = 16 + 2 D E (+ 4 A) bytes (E = bytes per
// obs element, 4 or 1; A = floats per continuous action, 0 for discrete ones, whose int32 is
// in the header; rounded up to a multiple of 4 so every header stays aligned) in a single
// flat array: this header, then obs[D], then next_obs[D], then a continuous action's floats
// (after the observations, so that a discrete run's records are what they always were:
// snapshots of earlier builds still load). Sampling reads random slots, and
// at capacity 2^20 every slot is a cache miss per line touched: one record of 48 bytes
// (float32, D = 4) costs 1.5 lines on average, where six separate column arrays cost six.
// The generation lives in the record too, so a priority update's validity check is one
// line as well.
typedef struct {
    int32_t action;
    float reward;   // n-step return
    float discount; // gamma^n, 0 at terminal
    uint32_t gen;   // bumped on every write of the slot
} store_meta_t;

struct store {
    uint32_t capacity;
    uint32_t obs_dim;
    uint32_t obs_bytes; // bytes of one observation: obs_dim * (4 or 1)
    float alpha;
    size_t stride;         // bytes per slot record
    uint32_t action_dim;   // 0: discrete (int32 in the header); else floats in the record's tail
    uint32_t action_bytes; // one row's action: 4, or 4 * action_dim
    size_t cont_off;       // where a continuous action starts in a record
    unsigned char *rows;   // (capacity, stride) slot records
    sumtree_t tree;        // leaves: p^alpha per slot, 0 for never-written slots
    uint32_t next;         // slot the next added row goes to
    uint64_t size;         // occupied slots; slots [0, size) are the occupied ones
    uint64_t inserted;
    uint64_t stale;
    float max_prio;  // largest raw priority ever set (clamped), 1.0 initially
    float max_value; // max_prio^alpha, cached for NULL-priority adds
};

// ---------------------------------------------------------------------------------------
// Configuration and lifetime
// ---------------------------------------------------------------------------------------

// Returns NULL when cfg is valid, else a description of the first bad field.
static const char *s_config_error(const store_config_t *cfg) {
    if (cfg->capacity < 1 || cfg->capacity > STORE_CAPACITY_MAX) {
        return "capacity must be in [1, 2^30]";
    }
    if (cfg->obs_dim < 1 || cfg->obs_dim > STORE_OBS_DIM_MAX) {
        return "obs_dim must be in [1, 2^20]";
    }
    if (cfg->obs_elem_bytes != 0 && cfg->obs_elem_bytes != 4 && cfg->obs_elem_bytes != 1) {
        return "obs_elem_bytes must be 4 (float32) or 1 (uint8)";
    }
    if (!(cfg->alpha >= 0.0 && cfg->alpha <= 1.0)) { // also rejects NaN
        return "alpha must be in [0, 1]";
    }
    return NULL;
}

static size_t s_obs_bytes(const store_config_t *cfg) {
    return (size_t)cfg->obs_dim * (cfg->obs_elem_bytes ? cfg->obs_elem_bytes : 4);
}

static size_t s_stride(const store_config_t *cfg) {
    return (sizeof(store_meta_t) + 2 * s_obs_bytes(cfg) + 3) / 4 * 4 +
           (size_t)cfg->action_dim * sizeof(float);
}

static inline store_meta_t *s_meta(const store_t *s, uint32_t slot) {
    return (store_meta_t *)(s->rows + slot * s->stride);
}

// obs of the slot; next_obs follows at + obs_bytes.
static inline unsigned char *s_obs(const store_t *s, uint32_t slot) {
    return s->rows + slot * s->stride + sizeof(store_meta_t);
}

// A continuous action's floats in the slot's record (action_dim > 0).
static inline float *s_cont(const store_t *s, uint32_t slot) {
    return (float *)(s->rows + slot * s->stride + s->cont_off);
}

// Copies one row's action from src (int32, or action_dim floats) into the slot.
static inline void s_put_action(store_t *s, uint32_t slot, const unsigned char *src) {
    if (s->action_dim) {
        memcpy(s_cont(s, slot), src, s->action_bytes);
    } else {
        memcpy(&s_meta(s, slot)->action, src, sizeof(int32_t));
    }
}

static inline void s_get_action(const store_t *s, uint32_t slot, unsigned char *dst) {
    if (s->action_dim) {
        memcpy(dst, s_cont(s, slot), s->action_bytes);
    } else {
        memcpy(dst, &s_meta(s, slot)->action, sizeof(int32_t));
    }
}

size_t store_bytes(const store_config_t *cfg) {
    if (s_config_error(cfg)) {
        return 0;
    }
    return sizeof(store_t) + (size_t)cfg->capacity * s_stride(cfg) + sumtree_bytes(cfg->capacity);
}

store_t *store_new(const store_config_t *cfg) {
    const char *err = s_config_error(cfg);
    if (err) {
        log_error("invalid replay store config (capacity %u, obs_dim %u, alpha %g): %s",
                  cfg->capacity, cfg->obs_dim, cfg->alpha, err);
        return NULL;
    }
    store_t *s = xcalloc(1, sizeof *s);
    s->capacity = cfg->capacity;
    s->obs_dim = cfg->obs_dim;
    s->obs_bytes = (uint32_t)s_obs_bytes(cfg);
    s->alpha = (float)cfg->alpha;
    s->stride = s_stride(cfg);
    s->action_dim = cfg->action_dim;
    s->action_bytes = cfg->action_dim ? cfg->action_dim * (uint32_t)sizeof(float) : 4;
    s->cont_off = s->stride - (size_t)cfg->action_dim * sizeof(float);
    s->rows = xaligned_alloc((size_t)cfg->capacity * s->stride); // zeroed: generation 0
    sumtree_init(&s->tree, cfg->capacity);
    s->max_prio = 1.0f;
    s->max_value = 1.0f; // 1^alpha
    return s;
}

void store_destroy(store_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    store_t *s = *self_p;
    sumtree_fini(&s->tree);
    xfree(s->rows);
    xfree(s);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Priorities
// ---------------------------------------------------------------------------------------

// p[i] = p[i]^alpha in place, with the common exponents spared the arithmetic. pow_batch's
// result does not depend on a value's place in the batch, so a priority gets the same leaf
// value whether it came alone, in a batch, or as the running maximum below.
static void s_pow_alpha(const store_t *s, float *p, uint32_t n) {
    if (s->alpha == 1.0f) {
        return;
    }
    if (s->alpha == 0.0f) {
        for (uint32_t i = 0; i < n; i++) {
            p[i] = 1.0f;
        }
        return;
    }
    pow_batch(p, n, s->alpha);
}

static void s_set_max_prio(store_t *s, float p) {
    s->max_prio = p;
    s->max_value = p;
    s_pow_alpha(s, &s->max_value, 1);
}

// Clamps a raw priority into [STORE_PRIORITY_MIN, STORE_PRIORITY_MAX] (NaN goes to the
// minimum: upstream validation should make that impossible, but a NaN leaf would poison
// every sum above it) and records it as the running maximum.
static inline float s_clamp_prio(store_t *s, float p) {
    p = p >= STORE_PRIORITY_MIN ? p : STORE_PRIORITY_MIN;
    p = p <= STORE_PRIORITY_MAX ? p : STORE_PRIORITY_MAX;
    if (p > s->max_prio) {
        s_set_max_prio(s, p);
    }
    return p;
}

// Copies one observation (n bytes). Observations are small (16 bytes for CartPole), and
// with n unknown at compile time memcpy is a libc call per row, two per sampled or added
// row. Fixed 8-byte copies are inlined as single moves: sample-512 +6 %, add-50 +17 %
// (bench_replay, 4 alternated runs; bench/RESULTS.md).
static inline void s_copy_obs(unsigned char *dst, const unsigned char *src, size_t n) {
    if (n > 128) {
        memcpy(dst, src, n);
        return;
    }
    size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        memcpy(dst + k, src + k, 8);
    }
    for (; k < n; k++) {
        dst[k] = src[k];
    }
}

// ---------------------------------------------------------------------------------------
// Add
// ---------------------------------------------------------------------------------------

// Copies rows [0, len) to slots [slot, slot + len) (no wrap inside) and sets their tree
// leaves. prio is NULL or points at the priorities of these same rows.
static void s_write_run(store_t *s, uint32_t slot, uint32_t len, const unsigned char *obs,
                        const unsigned char *actions, const float *rewards, const float *discounts,
                        const unsigned char *next_obs, const float *prio) {
    size_t d = s->obs_bytes;
    for (uint32_t j = 0; j < len; j++) {
        store_meta_t *meta = s_meta(s, slot + j);
        s_put_action(s, slot + j, actions + (size_t)j * s->action_bytes);
        meta->reward = rewards[j];
        meta->discount = discounts[j];
        // Wraps after 2^32 writes of one slot: a key held that long is not a real risk.
        meta->gen++;
        s_copy_obs(s_obs(s, slot + j), obs + j * d, d);
        s_copy_obs(s_obs(s, slot + j) + d, next_obs + j * d, d);
    }
    uint32_t idx[STORE_CHUNK];
    float value[STORE_CHUNK];
    for (uint32_t base = 0; base < len; base += STORE_CHUNK) {
        uint32_t m = APEX_MIN(STORE_CHUNK, len - base);
        for (uint32_t j = 0; j < m; j++) {
            idx[j] = slot + base + j;
            value[j] = prio ? s_clamp_prio(s, prio[base + j]) : s->max_value;
        }
        if (prio) {
            s_pow_alpha(s, value, m);
        }
        sumtree_set(&s->tree, m, idx, value);
    }
}

void store_add(store_t *s, uint32_t n, const void *obs_v, const void *actions_v,
               const float *rewards, const float *discounts, const void *next_obs_v,
               const float *prio) {
    const unsigned char *obs = obs_v, *next_obs = next_obs_v, *actions = actions_v;
    if (n == 0) {
        return;
    }
    // Rows beyond the last `capacity` would be overwritten within this very call: skip
    // them, but advance the write position as if they had been written.
    uint32_t skip = n > s->capacity ? n - s->capacity : 0;
    uint32_t keep = n - skip;
    uint32_t slot = (uint32_t)(((uint64_t)s->next + skip) % s->capacity);
    size_t row = s->obs_bytes;
    uint32_t done = 0;
    while (done < keep) { // at most two runs: up to the end of the ring, then from slot 0
        uint32_t len = APEX_MIN(keep - done, s->capacity - slot);
        uint32_t r = skip + done;
        s_write_run(s, slot, len, obs + r * row, actions + (size_t)r * s->action_bytes, rewards + r,
                    discounts + r, next_obs + r * row, prio ? prio + r : NULL);
        done += len;
        slot = slot + len == s->capacity ? 0 : slot + len;
    }
    s->next = slot;
    s->inserted += n;
    s->size = APEX_MIN((uint64_t)s->capacity, s->size + n);
}

// ---------------------------------------------------------------------------------------
// Sample
// ---------------------------------------------------------------------------------------

// Gathers the m rows of slots idx[] into row offset `out` of the caller's buffers.
// Importance weight (Schaul et al. 2016 sec. 3.4): w = (N P(i))^-beta / (N P_min)^-beta
// = (p_min^alpha / p_i^alpha)^beta, so N and the total cancel and w is in (0, 1].
// p_min: the minimum the weights are normalised by (the store's own, or a smaller one over
// every shard of a sharded replay).
static void s_gather(const store_t *s, uint32_t m, const uint32_t *idx, float beta, float p_min,
                     uint32_t out, uint64_t *keys, float *is_w, unsigned char *obs,
                     unsigned char *actions, float *rewards, float *discounts,
                     unsigned char *next_obs) {
    size_t d = s->obs_bytes;
    // Issue all of the chunk's misses (first and last line of each record) before the
    // first copy waits on one of them.
    for (uint32_t j = 0; j < m; j++) {
        const unsigned char *rec = (const unsigned char *)s_meta(s, idx[j]);
        __builtin_prefetch(rec);
        __builtin_prefetch(rec + s->stride - 1);
    }
    for (uint32_t j = 0; j < m; j++) {
        uint32_t i = idx[j];
        size_t o = (size_t)out + j;
        APEX_ASSERT(i < s->size); // the tree never returns an empty leaf
        const store_meta_t *meta = s_meta(s, i);
        keys[o] = (uint64_t)i | (uint64_t)meta->gen << 32;
        is_w[o] = beta == 0.0f ? 1.0f : p_min / sumtree_get(&s->tree, i); // ^beta below
        s_get_action(s, i, actions + o * s->action_bytes);
        rewards[o] = meta->reward;
        discounts[o] = meta->discount;
        s_copy_obs(obs + o * d, s_obs(s, i), d);
        s_copy_obs(next_obs + o * d, s_obs(s, i) + d, d);
    }
    if (beta != 0.0f) {
        pow_batch(is_w + out, m, beta);
        for (uint32_t j = 0; j < m; j++) { // p_min / p_i <= 1: only rounding could pass 1
            is_w[out + j] = is_w[out + j] < 1.0f ? is_w[out + j] : 1.0f;
        }
    }
}

int store_sample(store_t *s, rng_t *rng, uint32_t n, float beta, uint64_t *keys, float *is_w,
                 void *obs, void *actions, float *rewards, float *discounts, void *next_obs) {
    return store_sample_min(s, rng, n, beta, 0.0, keys, is_w, obs, actions, rewards, discounts,
                            next_obs);
}

int store_sample_min(store_t *s, rng_t *rng, uint32_t n, float beta, double global_min,
                     uint64_t *keys, float *is_w, void *obs, void *actions, float *rewards,
                     float *discounts, void *next_obs) {
    // n, beta and the minimum come from a peer's request: refuse, never assert (STYLE S6.4),
    // by the wire's bounds, so that whatever the decoder let through is served.
    if (n == 0 || !(beta >= 0.0f && beta <= WIRE_BETA_MAX) ||
        !(global_min >= 0.0 && global_min <= WIRE_MASS_MAX)) {
        return APEX_EINVAL;
    }
    if (s->size == 0) {
        return APEX_EAGAIN;
    }
    // The leaves are floats: the smaller minimum, as a float, so that with no smaller one the
    // arithmetic is exactly store_sample's.
    float p_min = sumtree_min(&s->tree);
    if (global_min > 0.0 && (float)global_min < p_min) {
        p_min = (float)global_min;
    }
    uint32_t idx[STORE_CHUNK];
    for (uint32_t base = 0; base < n; base += STORE_CHUNK) {
        uint32_t m = APEX_MIN(STORE_CHUNK, n - base);
        // Strata are over the whole batch of n, walked in chunks.
        sumtree_sample_strata(&s->tree, rng, base, m, n, idx);
        s_gather(s, m, idx, beta, p_min, base, keys, is_w, obs, actions, rewards, discounts,
                 next_obs);
    }
    return APEX_OK;
}

// ---------------------------------------------------------------------------------------
// Update
// ---------------------------------------------------------------------------------------

uint32_t store_update(store_t *s, uint32_t n, const uint64_t *keys, const float *prio) {
    uint32_t idx[STORE_CHUNK];
    float value[STORE_CHUNK];
    uint32_t applied = 0;
    for (uint32_t base = 0; base < n; base += STORE_CHUNK) {
        uint32_t m = APEX_MIN(STORE_CHUNK, n - base);
        for (uint32_t j = 0; j < m; j++) { // generations are random misses: start them all
            uint32_t slot = (uint32_t)keys[base + j];
            if (slot < s->size) {
                __builtin_prefetch(&s_meta(s, slot)->gen);
            }
        }
        uint32_t a = 0;
        for (uint32_t j = 0; j < m; j++) {
            uint32_t slot = (uint32_t)keys[base + j];
            uint32_t gen = (uint32_t)(keys[base + j] >> 32);
            // Peer input (the learner's keys): a bad or stale key is dropped, never asserted.
            if (slot >= s->size || s_meta(s, slot)->gen != gen) {
                s->stale++;
                continue;
            }
            idx[a] = slot;
            value[a] = s_clamp_prio(s, prio[base + j]);
            a++;
        }
        s_pow_alpha(s, value, a);
        sumtree_set(&s->tree, a, idx, value);
        applied += a;
    }
    return applied;
}

// ---------------------------------------------------------------------------------------
// Accessors
// ---------------------------------------------------------------------------------------

uint64_t store_size(const store_t *s) { return s->size; }
uint32_t store_capacity(const store_t *s) { return s->capacity; }
uint32_t store_obs_dim(const store_t *s) { return s->obs_dim; }
uint32_t store_obs_elem_bytes(const store_t *s) { return s->obs_bytes / s->obs_dim; }
uint32_t store_action_dim(const store_t *s) { return s->action_dim; }
double store_total_priority(const store_t *s) { return sumtree_total(&s->tree); }
uint64_t store_stale_updates(const store_t *s) { return s->stale; }
uint64_t store_inserted(const store_t *s) { return s->inserted; }
uint32_t store_next_slot(const store_t *s) { return s->next; }

double store_min_priority(const store_t *s) {
    return s->size ? (double)sumtree_min(&s->tree) : 0.0;
}

double store_slot_priority(const store_t *s, uint32_t slot) {
    return slot < s->capacity ? (double)sumtree_get(&s->tree, slot) : 0.0;
}

uint32_t store_slot_generation(const store_t *s, uint32_t slot) {
    return slot < s->capacity ? s_meta(s, slot)->gen : 0;
}

// ---------------------------------------------------------------------------------------
// Persistence
// ---------------------------------------------------------------------------------------

int store_read_slot(const store_t *s, uint32_t slot, void *obs, void *action, float *reward,
                    float *discount, void *next_obs) {
    if ((uint64_t)slot >= s->size) {
        return -1;
    }
    const store_meta_t *m = s_meta(s, slot);
    const unsigned char *o = s_obs(s, slot);
    memcpy(obs, o, s->obs_bytes);
    memcpy(next_obs, o + s->obs_bytes, s->obs_bytes);
    s_get_action(s, slot, action);
    *reward = m->reward;
    *discount = m->discount;
    return 0;
}

void store_get_state(const store_t *s, store_state_t *out) {
    *out = (store_state_t){.next = s->next,
                           .action_dim = s->action_dim,
                           .size = s->size,
                           .inserted = s->inserted,
                           .stale = s->stale,
                           .max_prio = s->max_prio};
}

const void *store_rows(const store_t *s, size_t *bytes) {
    *bytes = (size_t)s->capacity * s->stride;
    return s->rows;
}

void store_copy_leaves(const store_t *s, float *out) {
    for (uint32_t i = 0; i < s->capacity; i++) {
        out[i] = sumtree_get(&s->tree, i);
    }
}

int store_restore(store_t *s, const store_state_t *st, const void *rows, size_t rows_bytes,
                  const float *leaves) {
    // action_dim 1 has the stride of a discrete action: only the recorded layout tells them apart.
    if (rows_bytes != (size_t)s->capacity * s->stride || st->action_dim != s->action_dim ||
        st->next >= s->capacity || st->size > s->capacity || st->inserted < st->size ||
        !(st->max_prio >= STORE_PRIORITY_MIN && st->max_prio <= STORE_PRIORITY_MAX)) {
        return APEX_EINVAL;
    }
    for (uint32_t i = 0; i < s->capacity; i++) {
        int occupied = (uint64_t)i < st->size;
        // The tree's own bound (a larger leaf would assert there); also false for NaN.
        if (!(leaves[i] >= 0.0f && leaves[i] <= SUMTREE_VALUE_MAX) ||
            (occupied != (leaves[i] > 0.0f))) {
            return APEX_EINVAL;
        }
    }
    memcpy(s->rows, rows, rows_bytes);
    // Rebuild the sums level by level from the leaves, in chunks of consecutive slots.
    enum { CHUNK = 4096 };
    uint32_t idx[CHUNK];
    sumtree_clear(&s->tree);
    for (uint32_t first = 0; first < s->capacity; first += CHUNK) {
        uint32_t n = APEX_MIN((uint32_t)CHUNK, s->capacity - first);
        for (uint32_t j = 0; j < n; j++) {
            idx[j] = first + j;
        }
        sumtree_set(&s->tree, n, idx, leaves + first);
    }
    s->next = st->next;
    s->size = st->size;
    s->inserted = st->inserted;
    s->stale = st->stale;
    s_set_max_prio(s, st->max_prio);
    return APEX_OK;
}
