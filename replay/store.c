// store.c: FIFO ring of transitions in flat arrays + sum/min tree + generations.
// See store.h for the semantics. Dimension names: N = rows in a call, D = obs_dim.
#define LOG_MODULE "store"
#include "store.h"

#include "apex.h"
#include "fcodec.h"
#include "log.h"
#include "powbatch.h"
#include "sumtree.h"
#include "wire.h"
#include "xalloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

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

// Frame mode: a row's observations are these 16 bytes after the header instead of obs and
// next_obs: the global number of obs's newest frame, next_obs's relative to it, and how far
// back the oldest frame either stack reaches (the row is sampleable while that frame is in
// the ring: liveness is one comparison, no walk of the links).
typedef struct {
    uint64_t obs;
    int32_t next_off;     // next_obs's newest frame minus obs's
    uint32_t oldest_back; // obs's newest frame minus the oldest frame of both stacks
} store_refs_t;

// One entry of an actor's map: its frame number fid is global frame g (fid UINT64_MAX: empty).
typedef struct {
    uint64_t fid, g;
} s_fmap;

// A compressed frame: its blob's logical position in the arena, its size, its link.
typedef struct {
    uint64_t pos;
    uint32_t size, link;
} s_fidx;

#define LINK_MISSING UINT32_MAX // a frame whose predecessor was never received or is gone
#define G_NONE UINT64_MAX
#define STORE_FRAME_STACK_MAX 64u
#define STORE_FRAME_WINDOW_MAX (1u << 24)

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
    uint64_t nz;     // non-empty leaves: the rows that can be sampled
    // Frame mode (store.h "Frames"); K == 0 otherwise.
    uint32_t K;           // frames per stack
    uint32_t frame_bytes; // one frame: obs_bytes / K
    uint32_t F;           // frames held
    size_t fstride;       // one frame record: a uint32 link, then the frame (4-byte aligned)
    unsigned char *fr;    // raw: (F, fstride): frame g at g mod F; compressed: the arena
    size_t fr_mapped;     // bytes mmap'ed for fr (0: it came from calloc)
    uint64_t frames_total;
    uint64_t low_g; // frames below this number are gone (by count, or overwritten bytes)
    // Compressed frames ([replay] compress): blobs of any size back to back in the arena fr,
    // a ring of A bytes at logical positions (byte p at p mod A; a blob never straddles the
    // end), indexed per frame. A is the whole reservation (F x the codec's bound) until the
    // first F frames are in, then fixed at 5/4 of the bytes they took, so the memory the
    // arena touches follows the frames' compressed size (store.h "Frames").
    int codec;
    fcodec_t *fc;
    s_fidx *fidx;  // (F): frame g's blob at fidx[g % F]
    uint64_t w, A; // the next blob's logical position; the arena's ring size
    int A_fixed;
    unsigned char *scratch; // one frame (store_check_framed)
    uint32_t max_actors, W;
    s_fmap *maps;     // (max_actors, W): actor-local frame number -> global number
    uint64_t *epochs; // (max_actors, 4): the epoch each map belongs to, whether it is set, the
                      // number of the actor's next frame, and a reserved 0
    uint64_t swept;   // rows inserted before this one are evicted or known dead
    uint64_t missing, evicted;
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
    if (cfg->frame_codec && cfg->frame_stack == 0) {
        return "frame_codec needs frame mode (frame_stack >= 1)";
    }
    if (cfg->frame_stack >= 1) {
        if (cfg->frame_stack > STORE_FRAME_STACK_MAX || cfg->obs_dim % cfg->frame_stack) {
            return "frame_stack must be in [1, 64] and divide obs_dim";
        }
        if (cfg->frame_codec > FCODEC_ZSTD) {
            return "frame_codec must be none, lz4 or zstd";
        }
        uint32_t fc = cfg->frame_capacity ? cfg->frame_capacity
                                          : store_frame_capacity_default(cfg->capacity);
        if (fc < cfg->frame_stack || fc > (1u << 31)) {
            return "frame_capacity must be in [frame_stack, 2^31]";
        }
        if (cfg->max_actors < 1 || cfg->max_actors > (1u << 20)) {
            return "max_actors must be in [1, 2^20] in frame mode";
        }
        if (cfg->frame_window < 16 || cfg->frame_window > STORE_FRAME_WINDOW_MAX ||
            (cfg->frame_window & (cfg->frame_window - 1))) {
            return "frame_window must be a power of 2 in [16, 2^24]";
        }
    }
    return NULL;
}

// The frame ring: most of a pixel replay's memory (14 GB for 2 M Atari rows). Mapped, not
// calloc'ed, so that it can ask for transparent huge pages (the kernel's "madvise" mode, the
// common default, gives them only to who asks): 2 MiB pages fault 512 times less while the
// ring fills (measured in bench_replay_atari: the fill of 2 M rows is page-fault bound) and
// miss the TLB less when samples read random frames. Zero pages are mapped lazily, so the
// process's memory grows with what the ring holds.
static unsigned char *s_map_ring(size_t bytes, size_t *mapped) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        *mapped = 0;
        return xcalloc(1, bytes); // which says so and stops if memory is short
    }
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); // advice: without it the ring works the same
#endif
    *mapped = bytes;
    return p;
}

uint32_t store_frame_capacity_default(uint32_t capacity) {
    uint64_t f = (uint64_t)capacity + capacity / 256 + 4096;
    return f > (1u << 31) ? (1u << 31) : (uint32_t)f;
}

static int s_frame_mode(const store_config_t *cfg) { return cfg->frame_stack >= 1; }

static size_t s_obs_bytes(const store_config_t *cfg) {
    return (size_t)cfg->obs_dim * (cfg->obs_elem_bytes ? cfg->obs_elem_bytes : 4);
}

static size_t s_stride(const store_config_t *cfg) {
    size_t body = s_frame_mode(cfg) ? sizeof(store_refs_t) : 2 * s_obs_bytes(cfg);
    return (sizeof(store_meta_t) + body + 3) / 4 * 4 + (size_t)cfg->action_dim * sizeof(float);
}

static size_t s_fstride(const store_config_t *cfg) {
    return (sizeof(uint32_t) + s_obs_bytes(cfg) / cfg->frame_stack + 3) / 4 * 4;
}

// Bytes of frame mode's arrays at most: the ring (raw frames with their links) or the arena
// (compressed: F blobs of the codec's bound), the compressed frames' index, the maps, the
// epochs. A compressed store touches only the arena's first A bytes (see struct store).
static void s_frame_bytes(const store_config_t *cfg, size_t out[STORE_FRAME_SECTIONS]) {
    uint32_t fc = cfg->frame_capacity ? cfg->frame_capacity
                                      : store_frame_capacity_default(cfg->capacity);
    size_t frame = s_obs_bytes(cfg) / cfg->frame_stack;
    out[0] = cfg->frame_codec ? (size_t)fc * fcodec_bound((int)cfg->frame_codec, frame)
                              : (size_t)fc * s_fstride(cfg);
    out[1] = cfg->frame_codec ? (size_t)fc * sizeof(s_fidx) : 0;
    out[2] = (size_t)cfg->max_actors * cfg->frame_window * sizeof(s_fmap);
    out[3] = (size_t)cfg->max_actors * 4 * sizeof(uint64_t);
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
    size_t b = sizeof(store_t) + (size_t)cfg->capacity * s_stride(cfg) +
               sumtree_bytes(cfg->capacity);
    if (s_frame_mode(cfg)) {
        size_t f[STORE_FRAME_SECTIONS];
        s_frame_bytes(cfg, f);
        // The arena is reserved whole but touched only as far as the compressed frames go:
        // count what the raw frames would take, its upper bound in practice.
        if (cfg->frame_codec) {
            store_config_t raw = *cfg;
            raw.frame_codec = 0;
            size_t r[STORE_FRAME_SECTIONS];
            s_frame_bytes(&raw, r);
            f[0] = r[0];
        }
        b += f[0] + f[1] + f[2] + f[3];
    }
    return b;
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
    if (s_frame_mode(cfg)) {
        size_t f[STORE_FRAME_SECTIONS];
        s_frame_bytes(cfg, f);
        s->K = cfg->frame_stack;
        s->frame_bytes = s->obs_bytes / s->K;
        s->F = cfg->frame_capacity ? cfg->frame_capacity
                                   : store_frame_capacity_default(cfg->capacity);
        s->fstride = s_fstride(cfg);
        s->max_actors = cfg->max_actors;
        s->W = cfg->frame_window;
        s->fr = s_map_ring(f[0], &s->fr_mapped);
        s->maps = xmalloc(f[2]);
        memset(s->maps, 0xff, f[2]); // every fid UINT64_MAX: empty
        s->epochs = xcalloc(1, f[3]);
        s->codec = (int)cfg->frame_codec;
        if (s->codec) {
            s->fc = fcodec_new(s->codec, 0);
            if (!s->fc) {
                log_error("cannot create the %s decompressor", fcodec_name(s->codec));
                store_destroy(&s);
                return NULL;
            }
            s->fidx = xcalloc(s->F, sizeof *s->fidx);
            s->A = f[0];
            s->scratch = xmalloc(s->frame_bytes);
        }
    }
    return s;
}

void store_destroy(store_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    store_t *s = *self_p;
    sumtree_fini(&s->tree);
    xfree(s->rows);
    if (s->fr_mapped) {
        munmap(s->fr, s->fr_mapped);
    } else {
        free(s->fr);
    }
    free(s->maps);
    free(s->epochs);
    fcodec_destroy(&s->fc);
    free(s->fidx);
    free(s->scratch);
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
    if (n == 0 || s->K) { // a frame-mode store takes rows through store_add_framed only
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
// Frames (frame mode; store.h "Frames")
// ---------------------------------------------------------------------------------------

static inline store_refs_t *s_refs(const store_t *s, uint32_t slot) {
    return (store_refs_t *)(s->rows + slot * s->stride + sizeof(store_meta_t));
}

// Frame g's record: its link (uint32), then its bytes. Any g maps into the ring, so a walk
// over links read from a restored snapshot stays in bounds whatever they say.
static inline unsigned char *s_frame(const store_t *s, uint64_t g) {
    return s->fr + (size_t)(g % s->F) * s->fstride;
}

static inline uint32_t s_link(const store_t *s, uint64_t g) {
    if (s->codec) {
        return s->fidx[g % s->F].link;
    }
    uint32_t l;
    memcpy(&l, s_frame(s, g), sizeof l);
    return l;
}

// Frame g is held: added, and neither pushed out by the F frames after it nor (compressed)
// overwritten in the arena (low_g, kept by s_advance_low).
static inline int s_live(const store_t *s, uint64_t g) {
    return g < s->frames_total && g >= s->low_g;
}

// Frame g's bytes into out (frame_bytes): a copy, or a blob decompressed. The blob was
// checked when it came (store_check_framed); a restored one that fails reads as zeros.
static inline void s_frame_out(const store_t *s, uint64_t g, unsigned char *out) {
    if (!s->codec) {
        memcpy(out, s_frame(s, g) + sizeof(uint32_t), s->frame_bytes);
        return;
    }
    const s_fidx *e = &s->fidx[g % s->F];
    uint64_t at = e->pos % s->A;
    if (at + e->size > s->A ||
        fcodec_decompress(s->fc, s->fr + at, e->size, out, s->frame_bytes) != 0) {
        memset(out, 0, s->frame_bytes);
    }
}

// After frames were added: the frames pushed out by count, and (compressed) those whose
// bytes the arena has overwritten (a blob at logical p is intact while w <= p + A).
static void s_advance_low(store_t *s) {
    if (s->frames_total > s->F && s->low_g < s->frames_total - s->F) {
        s->low_g = s->frames_total - s->F;
    }
    while (s->codec && s->low_g < s->frames_total && s->fidx[s->low_g % s->F].pos + s->A < s->w) {
        s->low_g++;
    }
}

// Appends a compressed frame's blob to the arena (compressed stores).
static void s_put_blob(store_t *s, uint64_t g, const unsigned char *blob, uint32_t size,
                       uint32_t link) {
    uint64_t pos = s->w, at = pos % s->A;
    if (at + size > s->A) { // a blob never straddles the end: on to the start
        pos += s->A - at;
        at = 0;
    }
    memcpy(s->fr + at, blob, size);
    s->w = pos + size;
    s->fidx[g % s->F] = (s_fidx){.pos = pos, .size = size, .link = link};
    if (!s->A_fixed && g + 1 == s->F) {
        // The first F frames are in: the arena's ring is what they took and a quarter more,
        // so it touches memory as the compressed frames need, no more. Every blob so far lies
        // below it.
        uint64_t a = (s->w + s->w / 4 + 63) / 64 * 64;
        s->A = a < s->A ? a : s->A;
        s->A_fixed = 1;
    }
}

// Walks the K - 1 links back from frame g: 1 with *oldest the stack's oldest frame when every
// frame of the stack is in the ring, 0 when one is gone or was never received.
static int s_chain(const store_t *s, uint64_t g, uint64_t *oldest) {
    for (uint32_t k = 1; k < s->K; k++) {
        if (!s_live(s, g)) {
            return 0;
        }
        uint32_t l = s_link(s, g);
        if (l == LINK_MISSING || l > g) {
            return 0;
        }
        g -= l;
    }
    if (!s_live(s, g)) {
        return 0;
    }
    *oldest = g;
    return 1;
}

// Writes the stack whose newest frame is g into out, oldest frame first (framestack.h's
// layout): frame g last, then back along the links; a link to itself repeats the frame.
static void s_rebuild(const store_t *s, uint64_t g, unsigned char *out) {
    const size_t FB = s->frame_bytes;
    for (uint32_t k = s->K; k-- > 0;) {
        s_frame_out(s, g, out + (size_t)k * FB);
        uint32_t l = s_link(s, g);
        g -= l != LINK_MISSING && l <= g ? l : 0;
    }
}

// A stored row can still be sampled: the oldest frame of its stacks is in the ring.
static inline int s_row_live(const store_t *s, uint32_t slot) {
    const store_refs_t *r = s_refs(s, slot);
    return r->oldest_back <= r->obs && s_live(s, r->obs - r->oldest_back);
}

static inline uint64_t s_map_get(const s_fmap *map, uint32_t W, uint64_t fid) {
    const s_fmap *e = &map[fid & (W - 1)];
    return e->fid == fid ? e->g : G_NONE;
}

// Empties the leaves of the n rows in idx (rows whose frames are gone), counting them.
static void s_kill(store_t *s, uint32_t n, const uint32_t *idx) {
    static const float zero[STORE_CHUNK];
    for (uint32_t base = 0; base < n; base += STORE_CHUNK) {
        uint32_t m = APEX_MIN(STORE_CHUNK, n - base);
        sumtree_set(&s->tree, m, idx + base, zero);
    }
    s->nz -= n;
    s->evicted += n;
}

// Rows age in insertion order, and so, roughly, do their frames: after frames were added,
// the oldest rows whose frames are gone are emptied here, so that the sampleable count and
// the tree's mass stay true. A dead row behind a live one is found when sampled.
static void s_sweep(store_t *s) {
    uint64_t oldest_row = s->inserted - s->size;
    if (s->swept < oldest_row) {
        s->swept = oldest_row;
    }
    uint32_t idx[STORE_CHUNK], m = 0;
    for (; s->swept < s->inserted; s->swept++) {
        uint32_t slot = (uint32_t)(s->swept % s->capacity);
        if (s_row_live(s, slot)) {
            break;
        }
        if (sumtree_get(&s->tree, slot) > 0.0f) {
            idx[m++] = slot;
            if (m == STORE_CHUNK) {
                s_kill(s, m, idx);
                m = 0;
            }
        }
    }
    s_kill(s, m, idx);
}

int store_frame_gap(const store_t *s, uint32_t actor, uint64_t epoch, uint64_t first_frame) {
    if (!s->K || actor >= s->max_actors) {
        return 0;
    }
    const uint64_t *ep = s->epochs + 4 * (size_t)actor;
    return ep[1] && ep[0] == epoch && first_frame > ep[2];
}

// A batch this store can take: frame mode, an actor it keeps a map for, and blob sizes
// exactly when its frames are compressed.
static int s_batch_fits(const store_t *s, const store_framed_t *b) {
    return s->K && b->actor < s->max_actors &&
           (s->codec ? b->frame_count == 0 || b->frame_sizes != NULL : b->frame_sizes == NULL);
}

int store_check_framed(store_t *s, const store_framed_t *b, char *why, size_t why_len) {
    if (!s_batch_fits(s, b)) {
        snprintf(why, why_len, "not a batch of this store's frames (%s)",
                 s->codec ? "compressed frames expected" : "raw frames expected");
        return APEX_EINVAL;
    }
    if (!s->codec) {
        return APEX_OK; // raw frames: the decoder checked their sizes and values
    }
    const unsigned char *p = b->frames;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        if (fcodec_decompress(s->fc, p, b->frame_sizes[i], s->scratch, s->frame_bytes) != 0) {
            snprintf(why, why_len, "frame %u (%u bytes) does not decompress to %u bytes of %s", i,
                     b->frame_sizes[i], s->frame_bytes, fcodec_name(s->codec));
            return APEX_EINVAL;
        }
        if (s->obs_bytes / s->obs_dim == 4) { // float32 frames: finite, as observations are
            for (uint32_t j = 0; j < s->frame_bytes / 4; j++) {
                float v;
                memcpy(&v, s->scratch + 4 * (size_t)j, sizeof v);
                if (!isfinite(v)) {
                    snprintf(why, why_len, "frame %u: non-finite value at element %u", i, j);
                    return APEX_EINVAL;
                }
            }
        }
        p += b->frame_sizes[i];
    }
    return APEX_OK;
}

uint32_t store_add_framed(store_t *s, const store_framed_t *b) {
    if (!s_batch_fits(s, b)) {
        return 0;
    }
    const uint32_t W = s->W;
    s_fmap *map = s->maps + (size_t)b->actor * W;
    uint64_t *ep = s->epochs + 4 * (size_t)b->actor;
    if (!ep[1] || ep[0] != b->epoch) { // a new run of the actor numbers its frames from 0
        memset(map, 0xff, (size_t)W * sizeof *map);
        ep[0] = b->epoch;
        ep[1] = 1;
        ep[2] = 0;
    }
    const unsigned char *frames = b->frames;
    for (uint32_t i = 0; i < b->frame_count; i++) {
        uint64_t fid = b->first_frame + i, g = s->frames_total++;
        uint32_t d = b->frame_prev[i], link = 0;
        if (d != 0) {
            uint64_t pg = d <= fid ? s_map_get(map, W, fid - d) : G_NONE;
            link = pg != G_NONE && s_live(s, pg) ? (uint32_t)(g - pg) : LINK_MISSING;
        }
        if (s->codec) {
            s_put_blob(s, g, frames, b->frame_sizes[i], link);
            frames += b->frame_sizes[i];
        } else {
            unsigned char *f = s_frame(s, g);
            memcpy(f, &link, sizeof link);
            memcpy(f + sizeof link, frames + (size_t)i * s->frame_bytes, s->frame_bytes);
        }
        map[fid & (W - 1)] = (s_fmap){fid, g};
        s_advance_low(s);
    }
    // The next frame expected only moves on: a late re-send of older frames (after a restart
    // without durability, where a newer batch came first) must not make the next batch look
    // like it follows a gap (found by fuzz_replay).
    if (b->first_frame + b->frame_count > ep[2]) {
        ep[2] = b->first_frame + b->frame_count;
    }
    const unsigned char *actions = b->actions;
    uint32_t idx[STORE_CHUNK];
    float value[STORE_CHUNK];
    uint32_t m = 0, stored = 0;
    // A chunk's slots are consecutive in the ring: at most capacity of them stay distinct, so
    // that the "was empty" test below reads each slot's leaf before this call changes it.
    const uint32_t chunk = APEX_MIN(STORE_CHUNK, s->capacity);
    for (uint32_t r = 0; r < b->count; r++) {
        uint64_t og = s_map_get(map, W, b->obs_frames[r]);
        uint64_t ng = s_map_get(map, W, b->next_frames[r]);
        uint64_t o1, o2;
        if (og == G_NONE || ng == G_NONE || !s_chain(s, og, &o1) || !s_chain(s, ng, &o2)) {
            s->missing++;
            continue;
        }
        uint64_t oldest = o1 < o2 ? o1 : o2;
        int64_t off = (int64_t)(ng - og); // both within F <= 2^31 of frames_total
        uint32_t slot = s->next;
        store_meta_t *meta = s_meta(s, slot);
        s_put_action(s, slot, actions + (size_t)r * s->action_bytes);
        meta->reward = b->rewards[r];
        meta->discount = b->discounts[r];
        meta->gen++;
        *s_refs(s, slot) = (store_refs_t){
            .obs = og, .next_off = (int32_t)off, .oldest_back = (uint32_t)(og - oldest)};
        if (!(sumtree_get(&s->tree, slot) > 0.0f)) {
            s->nz++;
        }
        idx[m] = slot;
        value[m] = b->prio ? s_clamp_prio(s, b->prio[r]) : s->max_value;
        if (++m == chunk) {
            if (b->prio) {
                s_pow_alpha(s, value, m);
            }
            sumtree_set(&s->tree, m, idx, value);
            m = 0;
        }
        s->next = slot + 1 == s->capacity ? 0 : slot + 1;
        s->inserted++;
        s->size = APEX_MIN((uint64_t)s->capacity, s->size + 1);
        stored++;
    }
    if (b->prio) {
        s_pow_alpha(s, value, m);
    }
    sumtree_set(&s->tree, m, idx, value);
    s_sweep(s);
    return stored;
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
        if (s->K) {
            const store_refs_t *r = s_refs(s, i);
            s_rebuild(s, r->obs, obs + o * d);
            s_rebuild(s, r->obs + (uint64_t)(int64_t)r->next_off, next_obs + o * d);
            continue;
        }
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
    uint32_t idx[STORE_CHUNK], dead[STORE_CHUNK];
    for (;;) {
        if ((s->K ? s->nz : s->size) == 0) {
            return APEX_EAGAIN;
        }
        // The leaves are floats: the smaller minimum, as a float, so that with no smaller one
        // the arithmetic is exactly store_sample's.
        float p_min = sumtree_min(&s->tree);
        if (global_min > 0.0 && (float)global_min < p_min) {
            p_min = (float)global_min;
        }
        uint32_t n_dead = 0;
        for (uint32_t base = 0; base < n && n_dead == 0; base += STORE_CHUNK) {
            uint32_t m = APEX_MIN(STORE_CHUNK, n - base);
            // Strata are over the whole batch of n, walked in chunks.
            sumtree_sample_strata(&s->tree, rng, base, m, n, idx);
            for (uint32_t j = 0; s->K && j < m; j++) {
                if (!s_row_live(s, idx[j])) {
                    dead[n_dead++] = idx[j];
                }
            }
            if (n_dead == 0) {
                s_gather(s, m, idx, beta, p_min, base, keys, is_w, obs, actions, rewards, discounts,
                         next_obs);
            }
        }
        if (n_dead == 0) {
            return APEX_OK;
        }
        // Frame mode: rows whose frames went after a live row's (the sweep stops at the
        // first live one) leave the tree, and the whole batch is drawn again from the rest,
        // so the strata stay those of the mass that can be served. Each round removes at
        // least one row: it ends.
        for (uint32_t j = 1; j < n_dead; j++) { // a row drawn twice is removed once
            for (uint32_t k = 0; k < j; k++) {
                if (dead[k] == dead[j]) {
                    dead[j--] = dead[--n_dead];
                    break;
                }
            }
        }
        s_kill(s, n_dead, dead);
    }
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
            // Frame mode: a row whose frames are gone is never brought back.
            if (s->K && (!(sumtree_get(&s->tree, slot) > 0.0f) || !s_row_live(s, slot))) {
                if (sumtree_get(&s->tree, slot) > 0.0f) {
                    s_kill(s, 1, &slot);
                }
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
uint32_t store_frame_stack(const store_t *s) { return s->K; }
uint32_t store_frame_capacity(const store_t *s) { return s->F; }
uint32_t store_max_actors(const store_t *s) { return s->max_actors; }
uint32_t store_frame_window(const store_t *s) { return s->W; }
uint32_t store_frame_codec(const store_t *s) { return (uint32_t)s->codec; }
uint64_t store_frames_inserted(const store_t *s) { return s->frames_total; }
uint64_t store_frames_missing(const store_t *s) { return s->missing; }
uint64_t store_frame_evicted(const store_t *s) { return s->evicted; }
uint64_t store_live_size(const store_t *s) { return s->K ? s->nz : s->size; }

double store_min_priority(const store_t *s) {
    // Frame mode: rows whose frames went have empty leaves, so the rows held may all be
    // empty (the tree's minimum is then +inf, which no peer takes).
    return store_live_size(s) ? (double)sumtree_min(&s->tree) : 0.0;
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
    if (s->K) {
        if (!(sumtree_get(&s->tree, slot) > 0.0f) || !s_row_live(s, slot)) {
            return -1;
        }
        const store_refs_t *r = s_refs(s, slot);
        s_rebuild(s, r->obs, obs);
        s_rebuild(s, r->obs + (uint64_t)(int64_t)r->next_off, next_obs);
        s_get_action(s, slot, action);
        *reward = m->reward;
        *discount = m->discount;
        return 0;
    }
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
        // The tree's own bound (a larger leaf would assert there); also false for NaN. In
        // frame mode an occupied row may be empty: its frames went.
        if (!(leaves[i] >= 0.0f && leaves[i] <= SUMTREE_VALUE_MAX) ||
            (s->K ? (leaves[i] > 0.0f && !occupied) : (occupied != (leaves[i] > 0.0f)))) {
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
    s->nz = 0;
    for (uint32_t i = 0; i < s->capacity; i++) {
        s->nz += leaves[i] > 0.0f;
    }
    return APEX_OK;
}

// The config a store was made with (its frame capacity resolved), for the sizes derived from it.
static store_config_t s_config_of(const store_t *s) {
    return (store_config_t){.capacity = s->capacity,
                            .obs_dim = s->obs_dim,
                            .obs_elem_bytes = s->obs_bytes / s->obs_dim,
                            .action_dim = s->action_dim,
                            .frame_stack = s->K,
                            .frame_capacity = s->F,
                            .max_actors = s->max_actors,
                            .frame_window = s->W,
                            .frame_codec = (uint32_t)s->codec};
}

size_t store_bytes_used(const store_t *s) {
    store_config_t c = s_config_of(s);
    c.frame_codec = 0;          // store_bytes counts the arena as raw frames: replaced below
    size_t b = store_bytes(&c); // raw frames: everything is in use once full
    if (s->codec) {
        size_t f[STORE_FRAME_SECTIONS];
        s_frame_bytes(&c, f);
        b = b - f[0] + (size_t)s->F * sizeof(s_fidx) + (size_t)(s->w < s->A ? s->w : s->A);
    }
    return b;
}

void store_get_frame_state(const store_t *s, store_frame_state_t *out) {
    *out = (store_frame_state_t){.frames_total = s->frames_total,
                                 .swept = s->swept,
                                 .missing = s->missing,
                                 .evicted = s->evicted,
                                 .low = s->low_g,
                                 .arena_w = s->w,
                                 .arena_ring = s->A,
                                 .arena_fixed = (uint64_t)s->A_fixed};
}

// What the arena holds: its first w bytes until it wrapped, then its whole ring.
static size_t s_arena_used(const store_t *s) { return (size_t)(s->w < s->A ? s->w : s->A); }

void store_frame_sections(const store_t *s, const void **data, size_t *bytes) {
    store_frame_sections_mut((store_t *)s, (void **)data, bytes);
    if (s->codec) {
        bytes[0] = s_arena_used(s);
    }
}

void store_frame_sections_mut(store_t *s, void **data, size_t *bytes) {
    store_config_t c = s_config_of(s);
    if (!s->K) {
        for (int i = 0; i < STORE_FRAME_SECTIONS; i++) {
            data[i] = NULL;
            bytes[i] = 0;
        }
        return;
    }
    s_frame_bytes(&c, bytes);
    data[0] = s->fr;
    data[1] = s->fidx;
    data[2] = s->maps;
    data[3] = s->epochs;
}

int store_restore_frames(store_t *s, const store_frame_state_t *fs, size_t arena_bytes) {
    // Counters that must fit the store: the sweep cursor is an insertion number, the low mark
    // a frame number, and a compressed store's arena must fit its reservation and hold what
    // it says. Every other value is safe as it is (links, positions and numbers are checked,
    // or taken modulo the rings, wherever they are used).
    size_t res[STORE_FRAME_SECTIONS];
    void *unused[STORE_FRAME_SECTIONS];
    store_frame_sections_mut(s, unused, res);
    if (!s->K || fs->swept > s->inserted || fs->low > fs->frames_total) {
        return APEX_EINVAL;
    }
    if (s->codec &&
        (fs->arena_ring < 1 || fs->arena_ring > res[0] || fs->arena_fixed > 1 ||
         arena_bytes != (fs->arena_w < fs->arena_ring ? fs->arena_w : fs->arena_ring))) {
        return APEX_EINVAL;
    }
    if (!s->codec && (arena_bytes != res[0] || fs->arena_w || fs->arena_fixed)) {
        return APEX_EINVAL;
    }
    s->frames_total = fs->frames_total;
    s->swept = fs->swept;
    s->missing = fs->missing;
    s->evicted = fs->evicted;
    s->low_g = fs->low;
    if (s->codec) {
        s->w = fs->arena_w;
        s->A = fs->arena_ring;
        s->A_fixed = (int)fs->arena_fixed;
    }
    return APEX_OK;
}
