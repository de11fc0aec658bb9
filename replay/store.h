// store.h: the in-process prioritized replay memory of apex-replay.
//
// What it does: keeps a fixed-capacity FIFO ring of n-step transitions (obs and next_obs
// of obs_dim elements of obs_elem_bytes each (float32 or uint8, copied as bytes), action
// int32, reward float32 (n-step return), discount float32 (gamma^n, 0 at terminal)) in one
// flat array of slot records allocated once (see store.c for why records and not
// columns), a sum/min tree over p^alpha (sumtree.h), and a per-slot generation counter.
// Sampling is proportional and
// stratified, with importance weights (Schaul et al. 2016 eq. 1 and sec. 3.4; Ape-X):
//   P(i) = p_i^alpha / sum_k p_k^alpha,   w_i = (N P(i))^-beta / max_j w_j,
// where max_j w_j = (N P_min)^-beta uses the min-tree over occupied slots, so the weights
// are (p_min^alpha / p_i^alpha)^beta in (0, 1]. A sample hands out keys
// (slot | generation << 32); a later priority update whose slot has been overwritten since
// is dropped and counted, so it can never re-prioritise the newer transition.
// What it does not do: validate input (the wire decoder checks sizes and that priorities
// are finite and >= 0 before anything reaches here), networking, locking, or persistence.
// add, sample and update never allocate.
//
// Thread-safety: none; one thread owns a store_t.
#ifndef APEX_STORE_H
#define APEX_STORE_H

#include "rng.h"

#include <stddef.h>
#include <stdint.h>

// Raw priorities (|TD| + eps, before ^alpha) are clamped into this range, so that every
// occupied slot has p^alpha > 0 and the tree's float sums can never overflow.
#define STORE_PRIORITY_MIN 1e-8f
#define STORE_PRIORITY_MAX 1e20f
#define STORE_CAPACITY_MAX (1u << 30)

typedef struct store store_t;

typedef struct {
    uint32_t capacity;       // transitions held, 1 ..= STORE_CAPACITY_MAX (any value)
    uint32_t obs_dim;        // elements per observation, >= 1
    uint32_t obs_elem_bytes; // bytes per element: 4 (float32) or 1 (uint8); 0 means 4
    uint32_t action_dim;     // 0: discrete actions (int32); else floats per continuous action
    double alpha;            // priority exponent, 0 ..= 1 (0 = uniform sampling)
    // Frame mode (issue #27, see "Frames" below): frame_stack K >= 1 stores each frame of the
    // K-frame stacks once; obs_dim is then the stack's (K x a frame's). 0: whole rows.
    uint32_t frame_stack;
    uint32_t frame_capacity; // frames held, >= capacity (0: store_frame_capacity_default)
    uint32_t max_actors;     // frame mode: actor ids are < this (one frame map each)
    uint32_t frame_window;   // frame mode: frame numbers an actor's map resolves, a power of 2
    uint32_t frame_codec;    // frame mode: fcodec_kind of the frames as they come and are kept
} store_config_t;

// The frames a frame-mode store holds by default: one per transition, as a stream of n-step
// transitions has (one new frame per step), plus 1/256 for the first frames of episodes and
// the frames still waiting for their transitions at the actors.
uint32_t store_frame_capacity_default(uint32_t capacity);

// Bytes store_new would allocate for cfg (0 when cfg is invalid). For a start-up check. With
// compressed frames, the arena is counted at the raw frames' size (its bound in practice).
size_t store_bytes(const store_config_t *cfg);
// Bytes this store uses: store_bytes, with a compressed arena counted as far as it holds
// frames (its ring once it wrapped). For benchmarks and the stats.
size_t store_bytes_used(const store_t *s);

// Returns a new empty store, or NULL after log_error saying which field of cfg is invalid.
// The caller destroys it with store_destroy.
store_t *store_new(const store_config_t *cfg);
// Frees the store and sets *self_p to NULL. Accepts NULL and *self_p == NULL.
void store_destroy(store_t **self_p);

// Appends n rows (not in frame mode, where this is a no-op) (FIFO: each overwrites the oldest slot once the ring is full; when n >
// capacity only the last capacity rows are kept). obs and next_obs are (n, obs_dim) elements
// of obs_elem_bytes; actions (n) int32, or (n, action_dim) floats; rewards, discounts (n). prio holds n raw priorities, or is NULL meaning "the
// largest raw priority ever given to add or update" (1.0 before any). Bumps each written
// slot's generation.
void store_add(store_t *s, uint32_t n, const void *obs, const void *actions, const float *rewards,
               const float *discounts, const void *next_obs, const float *prio);

// Stratified proportional sample of n >= 1 rows, gathered into caller buffers: keys (n),
// is_w (n), obs and next_obs (n, obs_dim), actions, rewards, discounts (n).
// Returns APEX_OK; APEX_EAGAIN when the store is empty; APEX_EINVAL when n == 0 or beta is
// outside the wire's [0, WIRE_BETA_MAX] (NaN too). Outputs are untouched unless APEX_OK.
int store_sample(store_t *s, rng_t *rng, uint32_t n, float beta, uint64_t *keys, float *is_w,
                 void *obs, void *actions, float *rewards, float *discounts, void *next_obs);

// store_sample with the weights normalised by min(global_min, this store's minimum p^alpha)
// instead of this store's minimum (global_min = 0: exactly store_sample). A shard of a sharded
// replay is given the minimum over every shard, so its weights are those one store holding
// every shard's rows would give: (min / p_i^alpha)^beta, N and the totals cancelling as above.
// Also APEX_EINVAL when global_min is outside the wire's [0, WIRE_MASS_MAX] (NaN too).
int store_sample_min(store_t *s, rng_t *rng, uint32_t n, float beta, double global_min,
                     uint64_t *keys, float *is_w, void *obs, void *actions, float *rewards,
                     float *discounts, void *next_obs);

// Sets the raw priority prio[i] on keys[i] for i < n. A key whose slot is out of range, not
// yet filled, or overwritten since it was sampled (generation mismatch) is dropped and
// counted in store_stale_updates. Returns how many were applied. Later duplicates win.
uint32_t store_update(store_t *s, uint32_t n, const uint64_t *keys, const float *prio);

uint64_t store_size(const store_t *s); // occupied slots, <= capacity
uint32_t store_capacity(const store_t *s);
uint32_t store_obs_dim(const store_t *s);
uint32_t store_obs_elem_bytes(const store_t *s); // 4 or 1
uint32_t store_action_dim(const store_t *s);     // 0: discrete actions
double store_total_priority(const store_t *s);   // sum of p^alpha over occupied slots
double store_min_priority(const store_t *s);     // min of p^alpha over occupied slots; 0 if empty
uint64_t store_stale_updates(const store_t *s);  // updates dropped since store_new
uint64_t store_inserted(const store_t *s);       // rows ever given to store_add

// Introspection, for tests and snapshots: the p^alpha of a slot (0 when empty) and its
// generation (0 when never written; 1 after the first write, +1 per overwrite).
double store_slot_priority(const store_t *s, uint32_t slot);
uint32_t store_slot_generation(const store_t *s, uint32_t slot);
// Slot the next store_add row goes to (the oldest row once the ring is full).
uint32_t store_next_slot(const store_t *s);
// Reads slot's row into the caller's buffers (obs and next_obs hold obs_dim elements each).
// Returns 0, or -1 when the slot is not occupied. For dumps and tests, not the hot path.
int store_read_slot(const store_t *s, uint32_t slot, void *obs, void *action, float *reward,
                    float *discount, void *next_obs);

// ---------------------------------------------------------------------------------------
// Frames (frame mode, [env] frame_stack = K >= 2 with [replay] frame_storage): the store
// keeps each frame an actor sends once, in a FIFO ring of frame_capacity frames numbered
// globally in arrival order, and a row names its obs and next_obs by their newest frame. Each
// frame links to the frame before it in its stack (or to itself: an episode's first frame,
// which the stack repeats), so a stack is rebuilt at sample time by K - 1 steps back, byte
// for byte the actor's (actor/framestack.h's frame-major layout). An actor numbers its frames
// 0, 1, ... per epoch; the store maps the last frame_window numbers of each actor to global
// ones. A row whose frames are unknown (never received: a lost batch, another epoch) or
// already evicted is not stored (store_frames_missing); a stored row whose frames are evicted
// later is never sampled again (its leaf is emptied when found: store_frame_evicted) and its
// priority updates are stale. Frames evict independently of rows, so the replay holds the
// newest frame_capacity frames' worth of rows (a little below capacity when episodes are
// short). Input is validated by the wire decoder; what it cannot know (numbers against the
// store's maps) is checked here, and anything else a peer can send is refused or dropped,
// never asserted.

typedef struct {
    uint32_t actor;             // < max_actors
    uint64_t epoch;             // the actor's run: a new one empties its map
    uint64_t first_frame;       // actor-local number of frames[0]
    uint32_t frame_count;       // new frames
    const void *frames;         // (frame_count, obs bytes / K)
    const uint32_t *frame_prev; // (frame_count): number minus the previous frame's (0: itself)
    uint32_t count;             // rows
    const uint64_t *obs_frames; // (count) actor-local number of obs's newest frame
    const uint64_t *next_frames;
    const void *actions; // (count) int32, or (count, action_dim) floats
    const float *rewards, *discounts;
    const float *prio; // (count) raw priorities, or NULL (the max)
    // Compressed frames (the store's frame_codec): frames holds frame_count blobs back to
    // back, of these sizes; NULL for raw frames.
    const uint32_t *frame_sizes;
} store_framed_t;

// Checks what the wire decoder cannot: that every compressed frame of b decompresses to
// exactly one frame (and float32 frames to finite values). APEX_OK, or APEX_EINVAL with why
// written (the server refuses the batch as a bad message). Raw frames pass (the decoder has
// checked them). Nothing is stored. No allocation.
int store_check_framed(store_t *s, const store_framed_t *b, char *why, size_t why_len);

// Appends b's frames, then its rows (FIFO as store_add). Returns the rows stored; the others
// are counted in store_frames_missing. 0 (nothing stored) when the store is not in frame mode
// or the actor id is out of range.
uint32_t store_add_framed(store_t *s, const store_framed_t *b);
// 1 when frames of this actor's epoch before first_frame were never added: the store has
// this epoch's frames up to some number below first_frame (a batch in between is missing,
// or was overtaken: a re-sent batch arrives after a newer one after a replay restart). The
// server then holds the batch back (replay/server.c). 0 otherwise (in order, or an epoch the
// store knows nothing of).
int store_frame_gap(const store_t *s, uint32_t actor, uint64_t epoch, uint64_t first_frame);

uint32_t store_frame_stack(const store_t *s);     // K, or 0 when not in frame mode
uint32_t store_frame_capacity(const store_t *s);  // 0 when not in frame mode
uint32_t store_max_actors(const store_t *s);      // frame mode's; 0 otherwise
uint32_t store_frame_window(const store_t *s);    // frame mode's; 0 otherwise
uint32_t store_frame_codec(const store_t *s);     // fcodec_kind of the stored frames
uint64_t store_frames_inserted(const store_t *s); // frames ever added
uint64_t store_frames_missing(const store_t *s);  // rows refused: frames unknown or evicted
uint64_t store_frame_evicted(const store_t *s);   // stored rows dropped since their frames went
uint64_t store_live_size(const store_t *s);       // rows that can be sampled (<= size)

// ---------------------------------------------------------------------------------------
// Persistence (replay/durable.c writes and reads these in snapshots).
// The whole state is: the scalar counters below, the slot records (store_rows: capacity *
// stride bytes, generations included) and the p^alpha leaves (capacity floats). The sums and
// minima are not saved: store_restore rebuilds them from the leaves.

typedef struct {
    uint32_t next;       // slot of the next add
    uint32_t action_dim; // the rows' action layout (0: discrete; was a zero reserved field)
    uint64_t size;
    uint64_t inserted;
    uint64_t stale;
    float max_prio; // largest raw priority seen (the default for priority-less adds)
    float reserved2;
} store_state_t;

void store_get_state(const store_t *s, store_state_t *out);
// The slot records as one byte array of *bytes bytes. Borrowed; valid until the next add.
const void *store_rows(const store_t *s, size_t *bytes);
// Copies the capacity leaves (p^alpha; 0 for empty slots) into out. No allocation.
void store_copy_leaves(const store_t *s, float *out);
// Replaces the whole state (a store of the same capacity and obs_dim). Validates before
// touching anything: APEX_EINVAL when the sizes differ, a counter is out of range, or a leaf
// is negative, non-finite, or non-zero beyond the occupied slots; the store is unchanged.
int store_restore(store_t *s, const store_state_t *st, const void *rows, size_t rows_bytes,
                  const float *leaves);

// Frame mode's state beyond store_state_t: counters, then the frame ring (or the compressed
// frames' arena and their index), the actors' maps and their epochs as STORE_FRAME_SECTIONS
// byte arrays (the index empty for raw frames). The arena's section is as long as the arena
// holds (store_frame_sections), at most its reservation (store_frame_sections_mut). store_frame_sections lends them for a
// snapshot (valid until the next add); a restore reads them in place (the ring is the bulk of
// a pixel replay's memory: no second copy) through store_frame_sections_mut, then calls
// store_restore_frames, which checks the counters against the store (APEX_EINVAL when they
// do not fit; every later walk of the links is bounds-safe whatever the bytes). Call it
// after store_restore (it checks the sweep cursor against the restored insert count).
#define STORE_FRAME_SECTIONS 4
typedef struct {
    uint64_t frames_total; // frames ever added (the next frame's global number)
    uint64_t swept;        // rows before this insertion number are known dead or evicted
    uint64_t missing, evicted;
    uint64_t low;                              // frames below this number are gone
    uint64_t arena_w, arena_ring, arena_fixed; // compressed frames: the arena's state
} store_frame_state_t;
void store_get_frame_state(const store_t *s, store_frame_state_t *out);
void store_frame_sections(const store_t *s, const void **data, size_t *bytes);
void store_frame_sections_mut(store_t *s, void **data, size_t *bytes);
int store_restore_frames(store_t *s, const store_frame_state_t *fs, size_t arena_bytes);

#endif
