// check_store_frames.c: the replay store's frame mode (issue #27: each frame stored once,
// stacks rebuilt at sample time) against an independent model of what the actors act on.
// A simulated actor steps E envs through episodes of random lengths; every env's frames are
// kept in full per episode, and the stack of step j is rebuilt the obvious way (frames
// j-K+1 .. j, clamped to the episode's first frame) rather than by following links. Batches
// of random sizes carry each new frame once and the rows' frame numbers, as the actor sends
// them. Checked: every stored row and every sampled row equals its model stacks byte for
// byte, through wrap-around of both rings; rows whose frames were evicted are never sampled
// and their updates are stale; rows naming frames the store never got (a lost batch, a new
// epoch) are refused and counted; hostile numbers and links do not crash; state round trip.
#include "check_apex.h"

#include "apex.h"
#include "config.h"
#include "durable.h"
#include "fcodec.h"
#include "rng.h"
#include "store.h"

#include <stdlib.h>
#include <string.h>

#define K 4
#define FB 67       // bytes per frame: odd, so frames are never word-aligned in the ring
#define OB (K * FB) // one stack
#define NSTEP 3
#define MAX_ROWS 20000
#define MAX_FRAMES 40000
#define E_MAX 8

// The model: every frame the simulated actor made (by actor-local number), each row's
// expected stacks, and the batches as the actor would send them.
typedef struct {
    uint8_t frame[MAX_FRAMES][FB];
    uint32_t prev[MAX_FRAMES];
    uint64_t n_frames;
    // Per row: expected obs and next_obs stacks, action, reward, the frames it names.
    uint8_t obs[MAX_ROWS][OB], next[MAX_ROWS][OB];
    uint64_t obs_fid[MAX_ROWS], next_fid[MAX_ROWS];
    int32_t action[MAX_ROWS];
    float reward[MAX_ROWS], discount[MAX_ROWS];
    uint32_t n_rows;
    // Per env: the frames (numbers) of its current episode.
    uint64_t ep[E_MAX][64];
    int ep_len[E_MAX], ep_target[E_MAX];
    int E;
    rng_t rng;
    // Compressed stores: the codec the batches are sent with (0: raw), and the blobs' buffer.
    int codec;
    fcodec_t *fc;
    uint8_t blobs[MAX_FRAMES * (FB + 32)];
    uint32_t sizes[MAX_FRAMES];
    int zero_frames; // frames made from now on are all zeros (they compress to little)
} s_model;

static s_model *M;

// Stack of step j of env e's current episode: frames j-K+1 .. j, clamped at frame 0.
static void s_model_stack(int e, int j, uint8_t *out) {
    for (int k = 0; k < K; k++) {
        int src = j - (K - 1) + k;
        memcpy(out + k * FB, M->frame[M->ep[e][src < 0 ? 0 : src]], FB);
    }
}

static uint64_t s_new_frame(int e, int first) {
    uint64_t fid = M->n_frames++;
    ck_assert_uint_lt(fid, MAX_FRAMES);
    for (int b = 0; b < FB; b++) {
        M->frame[fid][b] = M->zero_frames ? 0 : (uint8_t)rng_next_u64(&M->rng);
    }
    M->prev[fid] = first ? 0 : (uint32_t)(fid - M->ep[e][M->ep_len[e] - 1]);
    if (first) {
        M->ep_len[e] = 0;
        M->ep_target[e] = 1 + (int)(rng_next_u64(&M->rng) % 40);
    }
    M->ep[e][M->ep_len[e]++] = fid;
    return fid;
}

static void s_model_row(int e, int t, int m, int last) {
    uint32_t r = M->n_rows++;
    ck_assert_uint_lt(r, MAX_ROWS);
    s_model_stack(e, t, M->obs[r]);
    s_model_stack(e, t + m, M->next[r]);
    M->obs_fid[r] = M->ep[e][t];
    M->next_fid[r] = M->ep[e][t + m];
    M->action[r] = (int32_t)(r % 5);
    M->reward[r] = (float)r;
    M->discount[r] = last ? 0.0f : 0.97f;
}

// One vector step: every env makes a frame; rows complete n steps later or at the episode's
// end (flushing its tail), as nstep.c emits them.
static void s_model_step(void) {
    for (int e = 0; e < M->E; e++) {
        if (M->ep_len[e] == 0 || M->ep_len[e] - 1 >= M->ep_target[e]) {
            s_new_frame(e, 1); // an episode's first frame
            continue;
        }
        s_new_frame(e, 0);
        int j = M->ep_len[e] - 1; // the new frame's step
        if (j >= M->ep_target[e]) {
            for (int t = j - NSTEP < 0 ? 0 : j - NSTEP; t < j; t++) {
                s_model_row(e, t, j - t, 1);
            }
        } else if (j >= NSTEP) {
            s_model_row(e, j - NSTEP, NSTEP, 0);
        }
    }
}

static void s_model_init(int E, uint64_t seed) {
    M = calloc(1, sizeof *M);
    M->E = E;
    rng_init(&M->rng, seed);
}

static void s_model_codec(int codec) {
    M->codec = codec;
    M->fc = fcodec_new(codec, 0);
    ck_assert_ptr_nonnull(M->fc);
}

static void s_model_free(void) {
    fcodec_destroy(&M->fc);
    free(M);
    M = NULL;
}

static store_t *s_new(uint32_t cap, uint32_t fcap, uint32_t window) {
    store_config_t c = {.capacity = cap,
                        .obs_dim = OB,
                        .obs_elem_bytes = 1,
                        .alpha = 0.6,
                        .frame_stack = K,
                        .frame_capacity = fcap,
                        .max_actors = 2,
                        .frame_window = window,
                        .frame_codec = M ? (uint32_t)M->codec : 0};
    store_t *s = store_new(&c);
    ck_assert_ptr_nonnull(s);
    return s;
}

// Sends model frames [f0, f1) and rows [r0, r1) as one batch of actor `actor`.
static uint32_t s_send(store_t *s, uint32_t actor, uint64_t epoch, uint64_t f0, uint64_t f1,
                       uint32_t r0, uint32_t r1, const float *prio) {
    store_framed_t b = {.actor = actor,
                        .epoch = epoch,
                        .first_frame = f0,
                        .frame_count = (uint32_t)(f1 - f0),
                        .frames = M->frame[f0],
                        .frame_prev = &M->prev[f0],
                        .count = r1 - r0,
                        .obs_frames = &M->obs_fid[r0],
                        .next_frames = &M->next_fid[r0],
                        .actions = &M->action[r0],
                        .rewards = &M->reward[r0],
                        .discounts = &M->discount[r0],
                        .prio = prio};
    if (M->codec) { // each frame compressed alone, as an actor sends them
        size_t at = 0;
        for (uint64_t f = f0; f < f1; f++) {
            size_t n = fcodec_compress(M->fc, M->frame[f], FB, M->blobs + at, FB + 32);
            ck_assert_uint_gt(n, 0);
            M->sizes[f - f0] = (uint32_t)n;
            at += n;
        }
        b.frames = M->blobs;
        b.frame_sizes = M->sizes;
        char why[160];
        ck_assert_int_eq(store_check_framed(s, &b, why, sizeof why), APEX_OK);
    }
    return store_add_framed(s, &b);
}

// Runs the model for `steps` vector steps, sending a batch whenever rows reach a random
// size: each frame goes in the first batch sent after it was made. Returns the rows sent.
static uint32_t s_run(store_t *s, int steps, uint64_t epoch) {
    uint64_t f_sent = 0;
    uint32_t r_sent = 0;
    uint32_t next_batch = 1 + (uint32_t)(rng_next_u64(&M->rng) % 30);
    for (int i = 0; i < steps; i++) {
        s_model_step();
        if (M->n_rows - r_sent >= next_batch || i == steps - 1) {
            uint32_t got = s_send(s, 0, epoch, f_sent, M->n_frames, r_sent, M->n_rows, NULL);
            ck_assert_uint_eq(got, M->n_rows - r_sent);
            f_sent = M->n_frames;
            r_sent = M->n_rows;
            next_batch = 1 + (uint32_t)(rng_next_u64(&M->rng) % 30);
        }
    }
    return r_sent;
}

// The row a slot holds, from its reward (row r has reward r).
static void s_check_row(uint32_t r, const uint8_t *obs, const uint8_t *next, int32_t a,
                        float disc) {
    ck_assert_uint_lt(r, M->n_rows);
    ck_assert_mem_eq(obs, M->obs[r], OB);
    ck_assert_mem_eq(next, M->next[r], OB);
    ck_assert_int_eq(a, M->action[r]);
    ck_assert_float_eq(disc, M->discount[r]);
}

// Samples `rounds` batches of n (<= 256) rows and checks each against the model: the stacks
// byte for byte, action, discount, and an importance weight in (0, 1].
static void s_sample_check(store_t *s, uint64_t seed, int rounds, uint32_t n) {
    enum { NMAX = 256 };
    static uint64_t keys[NMAX];
    static float w[NMAX], r[NMAX], d[NMAX];
    static int32_t acts[NMAX];
    static uint8_t so[NMAX][OB], sn[NMAX][OB];
    ck_assert_uint_le(n, NMAX);
    rng_t rng;
    rng_init(&rng, seed);
    for (int round = 0; round < rounds; round++) {
        ck_assert_int_eq(store_sample(s, &rng, n, 0.4f, keys, w, so, acts, r, d, sn), APEX_OK);
        for (uint32_t i = 0; i < n; i++) {
            s_check_row((uint32_t)r[i], so[i], sn[i], acts[i], d[i]);
            ck_assert(w[i] > 0.0f && w[i] <= 1.0f);
        }
    }
}

START_TEST(test_frames_lossless_round_trip) {
    // Rows outnumber capacity and frames outnumber frame capacity, so both rings wrap.
    s_model_init(5, 11);
    if (_i) {
        s_model_codec(_i); // 1 LZ4, 2 zstd: the same, frames compressed
    }
    store_t *s = s_new(500, 700, 256);
    uint32_t rows = s_run(s, 1500, 1);
    ck_assert_uint_gt(rows, 1000);
    ck_assert_uint_gt(store_frames_inserted(s), 700);
    ck_assert_uint_eq(store_frames_missing(s), 0);
    uint8_t obs[OB], next[OB];
    int32_t a;
    float rew, disc;
    uint32_t readable = 0;
    for (uint32_t slot = 0; slot < 500; slot++) {
        if (store_read_slot(s, slot, obs, &a, &rew, &disc, next) == 0) {
            s_check_row((uint32_t)rew, obs, next, a, disc);
            readable++;
        }
    }
    // The newest rows are all there (their frames are the newest); only rows whose frames
    // went can be missing, and those are empty in the tree.
    ck_assert_uint_eq(readable, store_live_size(s));
    ck_assert_uint_ge(readable, 400);
    // Sampling rebuilds the same stacks.
    s_sample_check(s, 5, 10, 256);
    store_destroy(&s);
    s_model_free();
}
END_TEST

START_TEST(test_frames_evicted_rows_never_sampled) {
    // Fewer frames held than rows: the frame ring wraps first and evicts the frames of rows
    // that are still in the row ring.
    s_model_init(3, 12);
    if (_i) {
        s_model_codec(_i); // 1 LZ4, 2 zstd: the same, frames compressed
    }
    store_t *s = s_new(400, 300, 256);
    s_run(s, 2000, 1);
    ck_assert_uint_gt(store_frame_evicted(s), 0);
    ck_assert_uint_lt(store_live_size(s), store_size(s));
    s_sample_check(s, 6, 20, 128);
    // A key of a row whose frames are gone: its update is stale, and it stays unsampled.
    uint32_t dead = UINT32_MAX;
    for (uint32_t slot = 0; slot < 400 && dead == UINT32_MAX; slot++) {
        uint8_t o[OB], nx[OB];
        int32_t a;
        float rr, dd;
        if (store_read_slot(s, slot, o, &a, &rr, &dd, nx) != 0) {
            dead = slot;
        }
    }
    ck_assert_uint_ne(dead, UINT32_MAX);
    uint64_t key = (uint64_t)dead | (uint64_t)store_slot_generation(s, dead) << 32;
    float p = 100.0f;
    uint64_t stale = store_stale_updates(s);
    ck_assert_uint_eq(store_update(s, 1, &key, &p), 0);
    ck_assert_uint_eq(store_stale_updates(s), stale + 1);
    ck_assert(store_slot_priority(s, dead) == 0.0);
    store_destroy(&s);
    s_model_free();
}
END_TEST

START_TEST(test_frames_missing_and_epochs) {
    s_model_init(2, 13);
    store_t *s = s_new(1000, 2000, 64);
    // The first batch is lost: rows of the second naming its frames are refused.
    for (int i = 0; i < 20; i++) {
        s_model_step();
    }
    uint64_t f_lost = M->n_frames;
    uint32_t r_lost = M->n_rows;
    for (int i = 0; i < 20; i++) {
        s_model_step();
    }
    uint32_t got = s_send(s, 0, 7, f_lost, M->n_frames, r_lost, M->n_rows, NULL);
    ck_assert_uint_lt(got, M->n_rows - r_lost);
    ck_assert_uint_eq(store_frames_missing(s), (M->n_rows - r_lost) - got);
    // Whatever was stored is right.
    uint8_t obs[OB], next[OB];
    int32_t a;
    float rew, disc;
    for (uint32_t slot = 0; slot < got; slot++) {
        ck_assert_int_eq(store_read_slot(s, slot, obs, &a, &rew, &disc, next), 0);
        s_check_row((uint32_t)rew, obs, next, a, disc);
    }
    // The same numbers under another epoch (a restarted actor) do not resolve to the old
    // frames: its rows are refused until it sends its own frames.
    uint64_t missing = store_frames_missing(s);
    ck_assert_uint_eq(s_send(s, 0, 8, 0, 0, r_lost, M->n_rows, NULL), 0);
    ck_assert_uint_eq(store_frames_missing(s), missing + (M->n_rows - r_lost));
    // Another actor's map is its own: actor 1 cannot name actor 0's frames.
    ck_assert_uint_eq(s_send(s, 1, 7, 0, 0, r_lost, M->n_rows, NULL), 0);
    // An actor id outside the store is refused whole.
    ck_assert_uint_eq(s_send(s, 2, 7, f_lost, M->n_frames, r_lost, M->n_rows, NULL), 0);
    store_destroy(&s);
    s_model_free();
}
END_TEST

START_TEST(test_frames_window_bounds_references) {
    // A window of 16 numbers: a row naming a frame 16 or more numbers back is refused (its
    // map entry was reused), never resolved to another frame.
    s_model_init(8, 14);
    store_t *s = s_new(1000, 4000, 16);
    for (int i = 0; i < 10; i++) {
        s_model_step();
    }
    // 80 frames in one batch, rows naming frames up to ~40 numbers back.
    uint32_t got = s_send(s, 0, 1, 0, M->n_frames, 0, M->n_rows, NULL);
    ck_assert_uint_lt(got, M->n_rows);
    uint8_t obs[OB], next[OB];
    int32_t a;
    float rew, disc;
    for (uint32_t slot = 0; slot < got; slot++) {
        ck_assert_int_eq(store_read_slot(s, slot, obs, &a, &rew, &disc, next), 0);
        s_check_row((uint32_t)rew, obs, next, a, disc);
    }
    store_destroy(&s);
    s_model_free();
}
END_TEST

START_TEST(test_frames_hostile_numbers) {
    store_t *s = s_new(64, 128, 16);
    uint8_t frames[4][FB] = {{1}, {2}, {3}, {4}};
    // Links far past frame 0, to frames never sent, to themselves; rows naming the future,
    // the past, and each other's frames backwards.
    uint32_t prev[4] = {0, 5, UINT32_MAX, 1};
    uint64_t of[5] = {0, 3, UINT64_MAX, 2, 1}, nf[5] = {3, 0, 1, UINT64_MAX, 1};
    int32_t act[5] = {0};
    float rew[5] = {0}, disc[5] = {0};
    store_framed_t b = {.actor = 0,
                        .epoch = 1,
                        .first_frame = UINT64_MAX - 2, // wraps
                        .frame_count = 4,
                        .frames = frames,
                        .frame_prev = prev,
                        .count = 5,
                        .obs_frames = of,
                        .next_frames = nf,
                        .actions = act,
                        .rewards = rew,
                        .discounts = disc};
    store_add_framed(s, &b);
    b.first_frame = 0;
    uint32_t got = store_add_framed(s, &b);
    // Row 0 (frames 0 and 3: 3 links to 2, 2 is missing) and every other row naming a frame
    // with a missing link is refused; what is stored reads back without faults.
    ck_assert_uint_le(got, 5);
    uint8_t o[OB], nx[OB];
    int32_t a;
    float r, d;
    for (uint32_t slot = 0; slot < 64; slot++) {
        store_read_slot(s, slot, o, &a, &r, &d, nx);
    }
    rng_t rng;
    rng_init(&rng, 1);
    uint64_t keys[8];
    float w[8], rr[8], dd[8];
    int32_t aa[8];
    uint8_t so[8][OB], sn[8][OB];
    int rc = store_sample(s, &rng, 8, 0.5f, keys, w, so, aa, rr, dd, sn);
    ck_assert(rc == APEX_OK || rc == APEX_EAGAIN);
    ck_assert_int_eq(rc == APEX_OK, store_live_size(s) > 0);
    store_destroy(&s);
}
END_TEST

START_TEST(test_frames_state_round_trip) {
    s_model_init(4, 15);
    if (_i) {
        s_model_codec(_i); // 1 LZ4, 2 zstd: the same, frames compressed
    }
    store_t *s = s_new(300, 500, 256);
    s_run(s, 600, 3);
    store_state_t st;
    store_frame_state_t fs;
    store_get_state(s, &st);
    store_get_frame_state(s, &fs);
    size_t rows_bytes;
    const void *rows = store_rows(s, &rows_bytes);
    float *leaves = malloc(300 * sizeof(float));
    store_copy_leaves(s, leaves);
    const void *sec[STORE_FRAME_SECTIONS];
    size_t sec_bytes[STORE_FRAME_SECTIONS];
    store_frame_sections(s, sec, sec_bytes);
    store_t *t = s_new(300, 500, 256);
    void *dst[STORE_FRAME_SECTIONS];
    size_t dst_bytes[STORE_FRAME_SECTIONS];
    store_frame_sections_mut(t, dst, dst_bytes);
    for (int i = 0; i < STORE_FRAME_SECTIONS; i++) {
        // A compressed store's arena is lent as far as it is used, at most its reservation.
        if (_i && i == 0) {
            ck_assert_uint_le(sec_bytes[i], dst_bytes[i]);
        } else {
            ck_assert_uint_eq(dst_bytes[i], sec_bytes[i]);
        }
        if (sec_bytes[i]) { // raw frames have no index section (NULL, 0)
            memcpy(dst[i], sec[i], sec_bytes[i]);
        }
    }
    ck_assert_int_eq(store_restore(t, &st, rows, rows_bytes, leaves), APEX_OK);
    ck_assert_int_eq(store_restore_frames(t, &fs, sec_bytes[0]), APEX_OK);
    ck_assert_uint_eq(store_live_size(t), store_live_size(s));
    // The same draws give the same rows, and the restored store goes on taking the same
    // actor's frames where it left off.
    enum { N = 64 };
    uint64_t k1[N], k2[N];
    float w1[N], w2[N], r1[N], r2[N], d1[N], d2[N];
    int32_t a1[N], a2[N];
    static uint8_t o1[N][OB], o2[N][OB], n1[N][OB], n2[N][OB];
    rng_t ra, rb;
    rng_init(&ra, 9);
    rng_init(&rb, 9);
    ck_assert_int_eq(store_sample(s, &ra, N, 0.4f, k1, w1, o1, a1, r1, d1, n1), APEX_OK);
    ck_assert_int_eq(store_sample(t, &rb, N, 0.4f, k2, w2, o2, a2, r2, d2, n2), APEX_OK);
    ck_assert_mem_eq(k1, k2, sizeof k1);
    ck_assert_mem_eq(o1, o2, sizeof o1);
    ck_assert_mem_eq(n1, n2, sizeof n1);
    uint64_t f0 = M->n_frames;
    uint32_t r0 = M->n_rows;
    for (int i = 0; i < 30; i++) {
        s_model_step();
    }
    uint32_t got = s_send(t, 0, 3, f0, M->n_frames, r0, M->n_rows, NULL);
    ck_assert_uint_eq(got, M->n_rows - r0);
    // A sweep cursor past the rows ever inserted does not fit the store.
    store_frame_state_t bad = fs;
    bad.swept = st.inserted + 1000000;
    ck_assert_int_eq(store_restore_frames(t, &bad, sec_bytes[0]), APEX_EINVAL);
    free(leaves);
    store_destroy(&s);
    store_destroy(&t);
    s_model_free();
}
END_TEST

static void s_blob_fn(void *arg, const void *blob, size_t len) {
    (void)blob;
    *(size_t *)arg = len;
}
static void s_record_fn(void *arg, int kind, const void *payload, size_t len) {
    (void)arg, (void)kind, (void)payload, (void)len;
}

// A frame-mode store through a snapshot file (durable.c, format 2): the same rows back, and a
// store of another frame capacity refuses the file before reading it.
START_TEST(test_frames_snapshot_file) {
    s_model_init(3, 16);
    if (_i) {
        s_model_codec(_i); // 1 LZ4, 2 zstd: the same, frames compressed
    }
    store_t *s = s_new(200, 300, 64);
    s_run(s, 400, 5);
    const char *dir = check_tmpdir();
    durable_config_t dc = {.dir = dir, .mode = DURABILITY_SNAPSHOT};
    durable_t *d = durable_new(&dc);
    ck_assert_ptr_nonnull(d);
    size_t blob_len = 0;
    durable_restore_info_t info;
    store_t *empty = s_new(200, 300, 64);
    ck_assert_int_eq(durable_restore(d, empty, s_blob_fn, &blob_len, s_record_fn, NULL, &info),
                     APEX_OK);
    store_destroy(&empty);
    ck_assert_int_eq(durable_snapshot_start(d, s, "blob", 4), APEX_OK);
    ck_assert_int_eq(durable_snapshot_poll(d, 1), 1);
    durable_destroy(&d);
    d = durable_new(&dc);
    store_t *t = s_new(200, 300, 64);
    ck_assert_int_eq(durable_restore(d, t, s_blob_fn, &blob_len, s_record_fn, NULL, &info),
                     APEX_OK);
    ck_assert_uint_eq(blob_len, 4);
    ck_assert_uint_eq(store_live_size(t), store_live_size(s));
    ck_assert_uint_eq(store_frames_inserted(t), store_frames_inserted(s));
    uint8_t o1[OB], o2[OB], n1[OB], n2[OB];
    int32_t a1, a2;
    float r1, r2, d1, d2;
    for (uint32_t slot = 0; slot < 200; slot++) {
        int rc = store_read_slot(s, slot, o1, &a1, &r1, &d1, n1);
        ck_assert_int_eq(store_read_slot(t, slot, o2, &a2, &r2, &d2, n2), rc);
        if (rc == 0) {
            ck_assert_mem_eq(o1, o2, OB);
            ck_assert_mem_eq(n1, n2, OB);
            s_check_row((uint32_t)r2, o2, n2, a2, d2);
        }
    }
    durable_destroy(&d);
    d = durable_new(&dc);
    store_t *other = s_new(200, 301, 64);
    ck_assert_int_eq(durable_restore(d, other, s_blob_fn, &blob_len, s_record_fn, NULL, &info),
                     APEX_EINVAL);
    durable_destroy(&d);
    store_destroy(&other);
    store_destroy(&s);
    store_destroy(&t);
    check_rmtree(dir);
    s_model_free();
}
END_TEST

// Compressed frames are held in an arena sized after the first frame_capacity frames (5/4 of
// their bytes): frames that compress worse later fill it sooner, and the oldest go by bytes
// before their count says so; their rows are never sampled, the rest read back exactly.
// Blobs that are not frames are refused before anything is stored.
START_TEST(test_frames_arena_evicts_by_bytes) {
    s_model_init(3, 17);
    s_model_codec(FCODEC_ZSTD);
    store_t *s = s_new(2000, 300, 256);
    M->zero_frames = 1; // the first frames compress to a few bytes: a small arena
    uint64_t f_sent = 0;
    uint32_t r_sent = 0;
    while (M->n_frames < 400) {
        s_model_step();
        if (M->n_rows - r_sent >= 10) {
            ck_assert_uint_eq(s_send(s, 0, 1, f_sent, M->n_frames, r_sent, M->n_rows, NULL),
                              M->n_rows - r_sent);
            f_sent = M->n_frames, r_sent = M->n_rows;
        }
    }
    M->zero_frames = 0; // random bytes: blobs of ~FB + header, several times larger
    while (M->n_frames < 3000) {
        s_model_step();
        if (M->n_rows - r_sent >= 10) {
            s_send(s, 0, 1, f_sent, M->n_frames, r_sent, M->n_rows, NULL);
            f_sent = M->n_frames, r_sent = M->n_rows;
        }
    }
    store_frame_state_t fs;
    store_get_frame_state(s, &fs);
    ck_assert_uint_eq(fs.arena_fixed, 1);
    // Gone by bytes: fewer frames held than frame_capacity.
    ck_assert_uint_gt(fs.low, fs.frames_total - 300);
    ck_assert_uint_gt(store_frame_evicted(s), 0);
    s_sample_check(s, 8, 20, 64);
    // A blob that does not decompress to one frame, or one of a frame of another size.
    uint8_t junk[16] = {0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3};
    uint32_t size = sizeof junk, prev = 0;
    store_framed_t b = {.actor = 0,
                        .epoch = 1,
                        .first_frame = M->n_frames,
                        .frame_count = 1,
                        .frames = junk,
                        .frame_prev = &prev,
                        .frame_sizes = &size};
    char why[160];
    ck_assert_int_eq(store_check_framed(s, &b, why, sizeof why), APEX_EINVAL);
    ck_assert_msg(strstr(why, "does not decompress") != NULL, "%s", why);
    uint8_t big[FB + 5] = {0}, blob[FB + 64];
    size = (uint32_t)fcodec_compress(M->fc, big, sizeof big, blob, sizeof blob);
    b.frames = blob;
    ck_assert_int_eq(store_check_framed(s, &b, why, sizeof why), APEX_EINVAL);
    b.frame_sizes = NULL; // raw frames into a compressed store
    ck_assert_int_eq(store_check_framed(s, &b, why, sizeof why), APEX_EINVAL);
    ck_assert_uint_eq(store_add_framed(s, &b), 0);
    store_destroy(&s);
    s_model_free();
}
END_TEST

START_TEST(test_frames_config_and_bytes) {
    store_config_t c = {.capacity = 1000,
                        .obs_dim = 4 * 84 * 84,
                        .obs_elem_bytes = 1,
                        .alpha = 0.6,
                        .frame_stack = 4,
                        .max_actors = 4,
                        .frame_window = 1024};
    // The paper's 2 M Atari rows (only sized here): one 7 056-byte frame per row plus the
    // row, its tree leaves, a frame's link and the default 1/256 of spare frames, instead of
    // two stacks of four frames.
    store_config_t big = c;
    big.capacity = 2000000;
    size_t framed = store_bytes(&big);
    store_config_t whole = big;
    whole.frame_stack = 0;
    ck_assert_uint_lt(framed / big.capacity, 7150);
    ck_assert_uint_gt(store_bytes(&whole) / big.capacity, 56448);
    store_config_t bad = c;
    bad.obs_dim = 4 * 84 * 84 + 1; // not a multiple of K
    ck_assert_ptr_null(store_new(&bad));
    bad = c;
    bad.frame_window = 1000; // not a power of 2
    ck_assert_ptr_null(store_new(&bad));
    bad = c;
    bad.max_actors = 0;
    ck_assert_ptr_null(store_new(&bad));
    bad = c;
    bad.frame_capacity = 3; // below K
    ck_assert_ptr_null(store_new(&bad));
    // Whole-observation adds do nothing to a frame-mode store.
    store_t *s = store_new(&c);
    ck_assert_ptr_nonnull(s);
    static uint8_t obs[4 * 84 * 84];
    int32_t a = 0;
    float r = 0, d = 0;
    store_add(s, 1, obs, &a, &r, &d, obs, NULL);
    ck_assert_uint_eq(store_size(s), 0);
    store_destroy(&s);
}
END_TEST

Suite *store_frames_suite(void) {
    Suite *s = suite_create("store_frames");
    TCase *tc = tcase_create("core");
    tcase_add_loop_test(tc, test_frames_lossless_round_trip, 0, 3);
    tcase_add_loop_test(tc, test_frames_evicted_rows_never_sampled, 0, 3);
    tcase_add_test(tc, test_frames_missing_and_epochs);
    tcase_add_test(tc, test_frames_window_bounds_references);
    tcase_add_test(tc, test_frames_hostile_numbers);
    tcase_add_loop_test(tc, test_frames_state_round_trip, 0, 3);
    tcase_add_loop_test(tc, test_frames_snapshot_file, 0, 3);
    tcase_add_test(tc, test_frames_config_and_bytes);
    tcase_add_test(tc, test_frames_arena_evicts_by_bytes);
    suite_add_tcase(s, tc);
    return s;
}
