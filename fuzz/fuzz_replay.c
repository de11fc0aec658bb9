// fuzz_replay.c: libFuzzer harness of what apex-replay does with messages (issue #26: 19.5 M
// fuzzed messages never found the SampleRequest that stopped the server, because the
// decoders were fuzzed alone).
//
// An input is a program (fuzz_prog.h) run against a fresh replay server (replay/server_int.h:
// made with listen = 0, so no sockets; replay_server_handle is what its loop does with one
// message). The first byte chooses the run: capacity (1, 7 or 64), alpha, float32 or uint8
// observations, one server or shard 0/1 of two, the replay ratio, min_size_to_sample; bytes
// from 144 up choose a frame-mode run (issue #27; s_server says how). A second byte from
// DET_MARK (0xF0) up makes the run deterministic ([run] deterministic, replay/detsched.h; the
// byte is consumed, any other is the first operation): one server, or with (b / 72) & 1 shard
// (b / 36) & 1 of two, a replay ratio from the first byte (s_det_sets), and the byte's low
// bits choose [learner]
// prefetch and ranks (the lag of updates behind requests), batches_per_request and [actor]
// max_pending_batches (s_det_sets). Then each operation is an opcode byte and its operands:
//   0  TransitionBatch on the insert socket: actor id (some beyond [actor] num_actors, some of
//      the other shard), epoch, seq (UINT64_MAX among them), 1-20 rows (max_batch is 16),
//      observations, actions, rewards, discounts and priorities from the edge tables; some in
//      the frame layout, which a whole-observation server refuses. In a frame-mode run, a
//      frame-mode batch instead (s_op_frames): 0-18 frames numbered mostly on from the
//      actor's previous batch (sometimes ahead: a gap the server holds back; back; huge),
//      links mostly small or 0, rows naming recent frames (sometimes any), or a batch of
//      whole observations, which it refuses
//   1  SampleRequest on the sample socket: id, batch size, beta, batches, min_priority,
//      stats_only, stats_after
//   2  PriorityUpdate: keys near the ring's slots and generations, priorities
//   3, 4  raw bytes on the insert / sample socket
//   5  time passes (the limiter timer: held requests served or expired)
//   6  a valid message of a kind that does not belong there (both sockets)
//   7  a valid message of another protocol version
//   8  the peer's routing id changes (empty, long, printable or not)
// In a deterministic run, operations 0-2 read one more byte, after all of the above (s_det_*):
//   0  det_period: the actor's current period (mostly), the next, the one before, 0 (an
//      actor not in deterministic mode) or any number (WIRE_SEQ_MAX and past it among them);
//      whether it ends the period (the harness's actor then moves to the next); no rows (an
//      end batch of count 0, frames or not; refused unless it ends a period); seq the actor's
//      next (mostly) or the one read above (repeats, gaps)
//   1  det_index: the next (mostly), one already sent or several back (a restarted learner),
//      ahead (a hole), 0, or any number; asked again (the id's attempt above 0: a learner
//      that timed out); det_horizon on a request for rows (refused). A stats
//      request: no horizon (stats_after as before), the next horizon, the current one, one
//      far ahead (the turn jumps there), any number; with det_index or stats_after too
//      (refused). The request's id is WIRE_DET_ID(det_index, attempt), as a learner's.
//   2  det_index: the oldest served request the harness owes updates for (mostly; its
//      [learner] batches_per_request updates in turn), one not served, 0, one applied
//      already, any number; no keys (count 0, refused without det_index)
// Checked after every operation, beyond "no crash, no leak, no sanitizer report":
//   - the store holds at most its capacity; its total and minimum p^alpha are finite and >= 0,
//     the total > 0 whenever it holds anything;
//   - counters only grow; held requests stay within their tables;
//   - every SampleReply the server built decodes under the learner's limits, with exactly the
//     rows asked for (OK), none otherwise, importance weights in [0, 1], and keys naming held
//     slots: what a peer sends can never make the server send what its learner refuses.
// In a frame-mode run, also (against s_model, a restatement of store.h's "Frames" rules fed
// with every batch the server stored):
//   - live rows <= rows <= capacity; frames inserted, rows refused for missing frames, rows
//     evicted, batches held back and gaps given up on only grow;
//   - a stored batch adds exactly the frames, rows and refusals the model says; a batch held
//     back is one the model sees a gap before, and a batch with a gap that is stored counts a
//     gap given up on; a batch neither stored nor held is counted bad or a duplicate;
//   - some row can be sampled exactly when the server says it holds live rows (else a
//     learner's request would be refused, the store's EAGAIN blamed on it);
//   - every sampled row is one the model holds live, of the key's generation, its action,
//     reward and discount, and both its stacks byte for byte the frames that were sent.
// In a deterministic run, also (the frame model is off: batches are applied in their turn,
// not when they arrive), for every reply the server builds (its reply hook), not only the last:
//   - it decodes under the learner's limits, an OK one with its rows, weights in [0, 1] and
//     keys of held slots;
//   - an OK reply answers the request whose turn it is (its id's index, the det_index the
//     harness gave it, is the schedule's next index), unless raw bytes on the sample socket
//     may have held a request of their own;
//   - its stats' det_horizon is at most the schedule's horizon, and det_served at most the
//     requests served so far (what a learner names a weights target from).
#include "fuzz.h"
#include "fuzz_prog.h"

#include "config.h"
#include "log.h"
#include "server_int.h"
#include "store.h"
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A whole-observation run's (env.id = external); a frame-mode run's come from its env.
#define OBS 4
#define ACTIONS 3
#define ACTORS 4
#define EPOCHS 3
#define MAX_BATCH 16
#define MAX_ROWS 20    // rows a generated batch may carry (past MAX_BATCH on purpose)
#define MAX_FRAMES 18  // frames likewise (max_frames is max_batch)
#define MAX_FRAME 400  // elements of a frame (MinAtar's 10 x 10 x 4)
#define MAX_STACK 1200 // elements of a frame-mode run's observation (3 MinAtar frames)
#define FRAME_RUNS 144 // config bytes from here on choose a frame-mode run
#define DET_MARK 0xF0  // a second byte from here on makes the run deterministic

// What the inputs so far reached (tests/check_fuzz_replay.c checks that the seeds get past
// the decoder into every handler). Test-only state.
typedef struct {
    uint64_t stored, replies_ok, replies_other, updated;
    // Frame mode: rows stored, OK replies checked against the model, batches held back for a
    // gap, gaps given up on, held batches stored once their gap was filled, batches of the
    // other layout refused.
    uint64_t frame_rows_stored, frame_replies_ok, frame_held_back, frame_gaps_given_up,
        frame_held_stored, layout_refused;
    // Deterministic runs: batches held for their turn, OK replies in the schedule's order,
    // horizon watches answered with their horizon, updates held for their turn; batches out
    // of their turn, dropped with a full window, and re-sent while held (detsched_stats_t);
    // requests asked again after they were served (dropped).
    uint64_t det_inserts_held, det_replies_ok, det_watch_replies, det_updates_held, det_out_of_turn,
        det_full, det_duplicates, det_reasks;
} fuzz_replay_stats_t;
static fuzz_replay_stats_t fuzz_replay_stats;

// What the store should hold in a frame-mode run: store.h's "Frames" rules restated over
// the batches the server stored, so that every sampled row can be checked byte for byte
// against the frames the harness sent. ok drops to 0 when the store took a batch the model
// did not see (raw bytes that happen to decode as one): then only the generic checks run.
typedef struct {
    uint64_t fid, g;
} s_mapent;

typedef struct {
    uint64_t og, ng, oldest; // global numbers of obs's and next_obs's newest frames, and of the
                             // oldest frame of both stacks
    uint32_t gen;
    int32_t action;
    float reward, discount;
} s_mrow;

typedef struct {
    int ok;
    uint32_t K, F, W, cap, fbytes, actors;
    uint64_t total; // frames ever added: the next frame's global number
    uint8_t *fr;    // (F, fbytes): frame g at g mod F
    uint32_t *link; // (F)
    s_mapent *map;  // (actors, W)
    uint64_t *ep;   // (actors, 3): set, epoch, the number after the newest frame added
    s_mrow *rows;   // (cap)
    uint32_t next;
    uint64_t inserted, size, missing;
} s_model;

typedef struct {
    replay_server_t *s;
    wire_decoder_t *learner; // what a learner accepts from this server
    wire_buf_t buf;
    uint8_t id[300];
    size_t id_len;
    int64_t now;
    int uint8_obs;
    uint32_t obs, actions; // elements of an observation, discrete actions
    uint32_t K;            // frame mode's frames per stack; 0 for whole observations
    uint64_t next_fid[ACTORS + 2][EPOCHS]; // the number an actor's next batch starts at
    uint64_t held_seq[ACTORS + 2];         // seq + 1 of the actor's last batch held back
    s_model m;
    uint64_t last_sampled, last_bad, last_dropped;
    uint64_t last_frames, last_missing, last_evicted, last_deferred, last_skipped;
    // Deterministic runs (det: the byte that made it one, 0 otherwise): per actor 1 + the
    // period it is in and its next seq; the next det_index to ask; the request whose updates
    // are owed next and how many of them were sent; whether raw bytes reached the sample
    // socket (then a request the harness did not make may be served); the hook's buffer.
    uint8_t det;
    uint64_t det_period[ACTORS + 2], det_seq[ACTORS + 2];
    uint64_t det_next, det_upd;
    uint32_t det_upd_n, det_batches;
    int foreign;
    wire_buf_t hook_buf;
} s_run;

static replay_server_t *s_frame_server(uint8_t b, s_run *r);

// A deterministic run's keys (r->det's low bits: 1 prefetch 2, 2 ranks 2, 4 one batch per
// request instead of the automatic 4, 8 a window of 2 batches instead of 8); then the ratio,
// which a deterministic run needs: 1 with no tolerance, 0.25 with the default (1e5: the
// learner leads by that much), 8 with 2, 2 with 4 by mode (0-3).
static int s_det_sets(const s_run *r, unsigned mode, const char **sets, int n) {
    static const char *const ratios[][2] = {
        {"replay.samples_per_insert=1", "replay.spi_tolerance=0"},
        {"replay.samples_per_insert=0.25", NULL},
        {"replay.samples_per_insert=8", "replay.spi_tolerance=2"},
        {"replay.samples_per_insert=2", "replay.spi_tolerance=4"}};
    sets[n++] = "run.deterministic=true";
    sets[n++] = r->det & 1 ? "learner.prefetch=2" : "learner.prefetch=1";
    sets[n++] = r->det & 2 ? "learner.ranks=2" : "learner.ranks=1";
    sets[n++] = r->det & 4 ? "learner.batches_per_request=1" : "learner.batches_per_request=0";
    sets[n++] = r->det & 8 ? "actor.max_pending_batches=2" : "actor.max_pending_batches=8";
    sets[n++] = ratios[mode % 4][0];
    if (ratios[mode % 4][1]) {
        sets[n++] = ratios[mode % 4][1];
    }
    return n;
}

static replay_server_t *s_server(uint8_t b, s_run *r) {
    if (b >= FRAME_RUNS) {
        return s_frame_server(b, r);
    }
    int *uint8_obs = &r->uint8_obs;
    r->obs = OBS, r->actions = ACTIONS;
    static const char *const caps[] = {"replay.capacity=1", "replay.capacity=7",
                                       "replay.capacity=64"};
    static const char *const alphas[] = {"replay.alpha=0.6", "replay.alpha=1", "replay.alpha=0"};
    const char *sets[24];
    int n = 0;
    sets[n++] = "env.id=external";
    sets[n++] = "env.obs_dim=4";
    sets[n++] = "env.n_actions=3";
    sets[n++] = "actor.num_actors=4";
    sets[n++] = "replay.max_batch=16";
    sets[n++] = "learner.batch_size=4";
    sets[n++] = "actor.send_batch=16";
    sets[n++] = "run.out_dir=/nonexistent-fuzz"; // durability none: nothing is written
    // A deterministic run with (b / 72) & 1 is shard (b / 36) & 1 of two (its schedule is its
    // own actors' turns, its ratio K x the run's: replay/server.c).
    int det_sharded = r->det && ((b / 72) & 1);
    int sharded = (b / 18) % 4 == 1 || (b / 18) % 4 == 2 || det_sharded;
    int cap = sharded && b % 3 == 0 ? 1 : b % 3; // a slot per shard at least
    sets[n++] = caps[cap];
    sets[n++] = alphas[(b / 3) % 3];
    *uint8_obs = (b / 9) & 1;
    if (*uint8_obs) {
        sets[n++] = "env.obs_dtype=uint8";
    }
    switch (r->det ? 4 : (b / 18) % 4) {
    case 4: // deterministic: one server or a shard (the mode chooses the ratio)
        n = s_det_sets(r, (b / 18) % 4, sets, n);
        if (det_sharded) {
            sets[n++] = "replay.shards=2";
        }
        break;
    case 0:
        break;
    case 1:
        sets[n++] = "replay.shards=2";
        break;
    case 2:
        sets[n++] = "replay.shards=2"; // shard 1 (below)
        break;
    default:
        sets[n++] = "replay.samples_per_insert=2";
        sets[n++] = "replay.spi_tolerance=4";
        break;
    }
    sets[n++] = (b / 72) & 1 && cap > 0 ? "replay.min_size_to_sample=3"
                                        : "replay.min_size_to_sample=1";
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    if (config_load(&cfg, NULL, sets, n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_replay: config: %s\n", err);
        FUZZ_CHECK(!"the harness's config loads");
    }
    // apex-replay --shard 1
    config_select_shard(&cfg, r->det ? det_sharded && ((b / 36) & 1) : (b / 18) % 4 == 2);
    replay_server_t *s = replay_server_new(&cfg, 0);
    FUZZ_CHECK(s != NULL);
    return s;
}

// A frame-mode run, c = b - FRAME_RUNS: capacity (1, 7, 64)[c % 3]; frames held ([replay]
// frame_capacity over all shards) (6, 16, 40)[(c / 3) % 3], with alpha (0.6, 1, 0)
// likewise: rows die by eviction where frames are fewer than rows, and the rings wrap
// within a program; CartPole-v1 stacked 2 deep (float32 frames of 4) or, if (c / 9) & 1,
// MinAtar/Breakout-v0 stacked 3 deep (uint8 frames of 400); one server or shard 0 / 1 of two
// by (c / 18) % 3; [actor] ack_timeout_ms 100 (a gap is given up on after 400 ms) or, if
// (c / 54) & 1, the default 3000; min_size_to_sample 3 from c = 108 up. One env per actor and
// 1-step returns keep the actors' frame windows small (64 numbers).
static replay_server_t *s_frame_server(uint8_t b, s_run *r) {
    static const char *const caps[] = {"replay.capacity=1", "replay.capacity=7",
                                       "replay.capacity=64"};
    static const char *const fcaps[] = {"replay.frame_capacity=6", "replay.frame_capacity=16",
                                        "replay.frame_capacity=40"};
    static const char *const alphas[] = {"replay.alpha=0.6", "replay.alpha=1", "replay.alpha=0"};
    unsigned c = (unsigned)b - FRAME_RUNS, mode = (c / 18) % 3;
    const char *sets[28];
    int n = 0;
    r->uint8_obs = (c / 9) & 1;
    if (r->uint8_obs) {
        sets[n++] = "env.id=MinAtar/Breakout-v0";
        sets[n++] = "env.frame_stack=3";
    } else {
        sets[n++] = "env.id=CartPole-v1";
        sets[n++] = "env.frame_stack=2";
    }
    sets[n++] = "actor.num_actors=4";
    sets[n++] = "actor.envs_per_actor=1";
    sets[n++] = "actor.n_step=1";
    sets[n++] = "replay.max_batch=16";
    sets[n++] = "learner.batch_size=4";
    sets[n++] = "actor.send_batch=16";
    sets[n++] = "run.out_dir=/nonexistent-fuzz";
    int cap = mode > 0 && c % 3 == 0 ? 1 : (int)(c % 3); // a slot per shard at least
    sets[n++] = caps[cap];
    sets[n++] = fcaps[(c / 3) % 3];
    sets[n++] = alphas[(c / 3) % 3];
    if (r->det) { // one server, whose ratio the mode chooses
        n = s_det_sets(r, mode, sets, n);
    } else if (mode > 0) {
        sets[n++] = "replay.shards=2";
    }
    if (!((c / 54) & 1)) {
        sets[n++] = "actor.ack_timeout_ms=100";
    }
    sets[n++] = c >= 108 && cap > 0 ? "replay.min_size_to_sample=3" : "replay.min_size_to_sample=1";
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    if (config_load(&cfg, NULL, sets, n, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_replay: config: %s\n", err);
        FUZZ_CHECK(!"the harness's frame-mode config loads");
    }
    FUZZ_CHECK(config_frame_mode(&cfg));
    config_select_shard(&cfg, !r->det && mode == 2);
    r->obs = (uint32_t)cfg.env.obs_dim, r->actions = (uint32_t)cfg.env.n_actions;
    r->K = (uint32_t)cfg.env.frame_stack;
    FUZZ_CHECK(r->obs <= MAX_STACK && r->obs / r->K <= MAX_FRAME);
    replay_server_t *s = replay_server_new(&cfg, 0);
    FUZZ_CHECK(s != NULL);
    return s;
}

// ---------------------------------------------------------------------------------------
// The frame model (s_model above): store.c's frame ring, actor maps and row references,
// written from store.h's description.

static void s_model_init(s_model *m, const store_t *st) {
    *m = (s_model){.ok = 1,
                   .K = store_frame_stack(st),
                   .F = store_frame_capacity(st),
                   .W = store_frame_window(st),
                   .cap = store_capacity(st),
                   .actors = store_max_actors(st)};
    m->fbytes = store_obs_dim(st) * store_obs_elem_bytes(st) / m->K;
    m->fr = calloc(m->F, m->fbytes);
    m->link = calloc(m->F, sizeof *m->link);
    m->map = calloc((size_t)m->actors * m->W, sizeof *m->map);
    m->ep = calloc((size_t)m->actors * 3, sizeof *m->ep);
    m->rows = calloc(m->cap, sizeof *m->rows);
    FUZZ_CHECK(m->fr && m->link && m->map && m->ep && m->rows);
}

static void s_model_fini(s_model *m) {
    free(m->fr), free(m->link), free(m->map), free(m->ep), free(m->rows);
}

// Frame g is in the ring: added, and not yet overwritten by the F frames after it.
static int s_mlive(const s_model *m, uint64_t g) { return g < m->total && m->total - g <= m->F; }

static uint64_t s_mget(const s_model *m, uint32_t actor, uint64_t fid) {
    const s_mapent *e = &m->map[(size_t)actor * m->W + (fid & (m->W - 1))];
    return e->fid == fid ? e->g : UINT64_MAX;
}

// The oldest frame of the stack whose newest is g, or UINT64_MAX when a frame of it is gone.
static uint64_t s_mchain(const s_model *m, uint64_t g) {
    for (uint32_t k = 1; k < m->K; k++) {
        if (!s_mlive(m, g) || m->link[g % m->F] == UINT32_MAX || m->link[g % m->F] > g) {
            return UINT64_MAX;
        }
        g -= m->link[g % m->F];
    }
    return s_mlive(m, g) ? g : UINT64_MAX;
}

// The stack whose newest frame is g, oldest frame first (a link to itself repeats a frame).
static void s_mstack(const s_model *m, uint64_t g, uint8_t *out) {
    for (uint32_t k = m->K; k-- > 0;) {
        memcpy(out + (size_t)k * m->fbytes, m->fr + (g % m->F) * m->fbytes, m->fbytes);
        g -= m->link[g % m->F];
    }
}

static int s_mgap(const s_model *m, const wire_batch_t *b) {
    const uint64_t *ep = m->ep + 3 * (size_t)b->actor_id;
    return b->actor_id < m->actors && ep[0] && ep[1] == b->epoch && b->first_frame > ep[2];
}

static void s_madd(s_model *m, const wire_batch_t *b) {
    FUZZ_CHECK(b->actor_id < m->actors);
    uint64_t *ep = m->ep + 3 * (size_t)b->actor_id;
    s_mapent *map = m->map + (size_t)b->actor_id * m->W;
    if (!ep[0] || ep[1] != b->epoch) { // another run of the actor: its numbers start afresh
        memset(map, 0xff, (size_t)m->W * sizeof *map);
        ep[0] = 1, ep[1] = b->epoch, ep[2] = 0;
    }
    for (uint32_t i = 0; i < b->frame_count; i++) {
        uint64_t fid = b->first_frame + i, g = m->total++;
        uint32_t d = b->frame_prev[i], link = 0;
        if (d != 0) {
            uint64_t pg = d <= fid ? s_mget(m, b->actor_id, fid - d) : UINT64_MAX;
            link = pg != UINT64_MAX && s_mlive(m, pg) ? (uint32_t)(g - pg) : UINT32_MAX;
        }
        m->link[g % m->F] = link;
        memcpy(m->fr + (g % m->F) * m->fbytes, (const uint8_t *)b->frames + (size_t)i * m->fbytes,
               m->fbytes);
        map[fid & (m->W - 1)] = (s_mapent){fid, g};
    }
    // The next frame expected only moves on, as store.c's: older frames re-sent late do not
    // make the next batch look like it follows a gap.
    if (b->first_frame + b->frame_count > ep[2]) {
        ep[2] = b->first_frame + b->frame_count;
    }
    for (uint32_t i = 0; i < b->count; i++) {
        uint64_t og = s_mget(m, b->actor_id, b->obs_frames[i]);
        uint64_t ng = s_mget(m, b->actor_id, b->next_frames[i]);
        uint64_t o1 = og == UINT64_MAX ? og : s_mchain(m, og);
        uint64_t o2 = ng == UINT64_MAX ? ng : s_mchain(m, ng);
        if (o1 == UINT64_MAX || o2 == UINT64_MAX) {
            m->missing++;
            continue;
        }
        s_mrow *w = &m->rows[m->next];
        *w = (s_mrow){.og = og,
                      .ng = ng,
                      .oldest = o1 < o2 ? o1 : o2,
                      .gen = w->gen + 1,
                      .action = b->actions[i],
                      .reward = b->rewards[i],
                      .discount = b->discounts[i]};
        m->next = m->next + 1 == m->cap ? 0 : m->next + 1;
        m->inserted++;
        m->size += m->size < m->cap;
    }
}

// Rows of the store that can still be sampled: those whose oldest frame is in the ring.
static uint64_t s_mlive_rows(const s_model *m) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < m->size; i++) {
        n += s_mlive(m, m->rows[i].oldest);
    }
    return n;
}

// ---------------------------------------------------------------------------------------
// Operations

// Deterministic runs: the det byte of a batch (operation 0), read after its other operands
// and applied to x. Bits 0-2 choose det_period: 0-3 the actor's current one, 4 the next, 5
// the one before (0 in the first), 6 none (0), 7 any (fuzz_u64); 8: the batch ends it; 16:
// no rows (the frames too in frame mode), unless keep_rows (a layout the run refuses, built
// after); 32: seq as read, else the actor's next; 64 with an end: the actor's columns
// (TransitionBatch.det_frames, det_episodes, det_returns: a byte for the count of returns, %
// 101), with 128 in range (frames and episodes from a byte each, returns whole numbers in
// [-128, 127]), without it anything the wire carries (u64s, f32s: NaN, infinities, counts
// past WIRE_FRAMES_MAX, more returns than episodes, all refused by the decoder). Returns
// whether it ends the actor's current period (the harness's actor then moves on once the
// server took it).
static int s_det_batch(s_run *r, fuzz_prog_t *in, wire_batch_t *x, int keep_rows) {
    uint8_t e = fuzz_u8(in);
    uint32_t a = x->actor_id;
    uint64_t cur = r->det_period[a], p;
    switch (e & 7) {
    case 4:
        p = cur + 1;
        break;
    case 5:
        p = cur - 1;
        break;
    case 6:
        p = 0;
        break;
    case 7:
        p = fuzz_u64(in);
        break;
    default:
        p = cur;
        break;
    }
    x->det_period = p;
    x->det_period_end = p && (e & 8); // (wire_encode asserts an end has a period)
    if ((e & 16) && !keep_rows) {
        x->count = 0;
        x->frame_count = 0;
        x->obs = x->next_obs = x->frames = NULL;
        x->actions = NULL;
        x->rewards = x->discounts = x->priorities = NULL;
        x->frame_prev = NULL;
        x->obs_frames = x->next_frames = NULL;
    }
    if (!(e & 32)) {
        x->seq = r->det_seq[a];
    }
    if (x->det_period_end && (e & 64)) {
        static float ret[WIRE_DET_RETURNS_MAX];
        uint32_t n = fuzz_u8(in) % (WIRE_DET_RETURNS_MAX + 1);
        if (e & 128) {
            x->det_frames = 1000ull * fuzz_u8(in);
            x->det_episodes = n + (uint64_t)fuzz_u8(in);
            for (uint32_t i = 0; i < n; i++) {
                ret[i] = (float)(int8_t)fuzz_u8(in);
            }
        } else {
            x->det_frames = fuzz_u64(in);
            x->det_episodes = fuzz_u64(in);
            for (uint32_t i = 0; i < n; i++) {
                ret[i] = fuzz_f32(in);
            }
        }
        x->det_returns = n ? ret : NULL;
        x->det_n_returns = n;
    }
    return x->det_period_end && p == cur;
}

// After a batch of the deterministic run went in: held for its turn (counted), the actor's
// next seq and, if it ended its period, its period move on.
static int s_det_batch_sent(s_run *r, const wire_batch_t *x, uint64_t held0, int ends) {
    detsched_stats_t ds;
    detsched_stats(r->s->det, &ds);
    if (ds.held_inserts == held0) {
        return 0;
    }
    fuzz_replay_stats.det_inserts_held++;
    r->det_seq[x->actor_id] = x->seq + 1;
    r->det_period[x->actor_id] += ends != 0;
    return 1;
}

static uint64_t s_det_held_inserts(const s_run *r) {
    detsched_stats_t ds;
    detsched_stats(r->s->det, &ds);
    return ds.held_inserts;
}

// The det byte of a request (operation 1), read after its other operands. For rows, bits
// 0-2: 0-3 the next det_index, 4 (bits 5-7) + 1 back, 5 that far ahead, 6 none (0), 7 any;
// 8: det_horizon 1 too (refused); 16: asked again (attempt 1 + bits 5-7). For stats: 0 none, 1-2 the next horizon, 3 the current
// one, 4 (bits 5-7) + 2 ahead, 5 any; 6 the next with det_index 1 (refused); 7 the next
// with stats_after as read (refused unless 0).
static void s_det_request(s_run *r, fuzz_prog_t *in, wire_sample_request_t *q) {
    uint8_t g = fuzz_u8(in);
    uint64_t k = (uint64_t)(g >> 5), h = detsched_horizon(r->s->det);
    if (q->stats_only) {
        uint64_t after = q->stats_after;
        q->stats_after = 0;
        switch (g & 7) {
        case 0:
            q->stats_after = after;
            break;
        case 3:
            q->det_horizon = h;
            break;
        case 4:
            q->det_horizon = h + 2 + k;
            break;
        case 5:
            q->det_horizon = fuzz_u64(in);
            break;
        case 6:
            q->det_horizon = h + 1;
            q->det_index = 1;
            break;
        case 7:
            q->det_horizon = h + 1;
            q->stats_after = after;
            break;
        default:
            q->det_horizon = h + 1;
            break;
        }
        return;
    }
    switch (g & 7) {
    case 4:
        q->det_index = r->det_next > k + 1 ? r->det_next - k - 1 : 1;
        break;
    case 5:
        q->det_index = r->det_next + k + 1;
        break;
    case 6:
        q->det_index = 0;
        break;
    case 7:
        q->det_index = fuzz_u64(in);
        break;
    default:
        q->det_index = r->det_next++;
        break;
    }
    q->det_horizon = g & 8 ? 1 : 0;
    // (the id's index: the order check's way to tell which request a reply answers)
    q->id = WIRE_DET_ID(q->det_index, g & 16 ? k + 1 : 0);
}

// The det byte of a priority update (operation 2), read after its keys. Bits 0-2: 0-3 the
// request the harness owes updates for, 4 (bits 5-7) past the schedule's next (not served),
// 5 none (0: applied at once), 6 (bits 5-7) + 1 before the owed one, 7 any; 8: no keys.
static void s_det_update(s_run *r, fuzz_prog_t *in, wire_priority_update_t *u) {
    uint8_t g = fuzz_u8(in);
    uint64_t k = (uint64_t)(g >> 5);
    switch (g & 7) {
    case 4:
        u->det_index = detsched_next_index(r->s->det) + k;
        break;
    case 5:
        u->det_index = 0;
        break;
    case 6:
        u->det_index = r->det_upd > k + 1 ? r->det_upd - k - 1 : 0;
        break;
    case 7:
        u->det_index = fuzz_u64(in);
        break;
    default:
        u->det_index = r->det_upd;
        if (++r->det_upd_n == r->det_batches) { // its updates are all sent: the next one's
            r->det_upd++;
            r->det_upd_n = 0;
        }
        break;
    }
    if (g & 8) {
        u->count = 0;
        u->keys = NULL;
        u->priorities = NULL;
    }
}

static void s_send(s_run *r, replay_sock which, const wire_msg_t *m) {
    wire_encode(m, &r->buf);
    replay_server_handle(r->s, which, r->id, r->id_len, r->buf.data, r->buf.len, r->now);
}

static void s_op_batch(s_run *r, fuzz_prog_t *in) {
    static float obs[MAX_ROWS * OBS], next[MAX_ROWS * OBS], rew[MAX_ROWS], disc[MAX_ROWS],
        prio[MAX_ROWS];
    static uint8_t obs8[MAX_ROWS * OBS], next8[MAX_ROWS * OBS];
    static int32_t act[MAX_ROWS];
    uint8_t b = fuzz_u8(in);
    uint32_t count = 1 + (uint32_t)fuzz_u8(in) % MAX_ROWS;
    for (uint32_t i = 0; i < count * OBS; i++) {
        obs[i] = fuzz_f32(in), next[i] = fuzz_f32(in);
        obs8[i] = fuzz_u8(in), next8[i] = fuzz_u8(in);
    }
    for (uint32_t i = 0; i < count; i++) {
        // Mostly valid numbers, so the batch gets past the decoder often enough.
        act[i] = b & 1 ? fuzz_i32(in) : (int32_t)(fuzz_u8(in) % ACTIONS);
        rew[i] = b & 2 ? fuzz_f32(in) : (float)fuzz_u8(in);
        disc[i] = b & 4 ? fuzz_f32(in) : (float)(fuzz_u8(in) % 5) * 0.25f;
        prio[i] = fuzz_f32(in);
        if (!(b & 8)) {
            obs[i * OBS] = next[i * OBS] = 0.0f; // finite rows
            for (int j = 1; j < OBS; j++) {
                obs[i * OBS + j] = next[i * OBS + j] = (float)j;
            }
        }
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = (uint32_t)fuzz_u8(in) % (ACTORS + 2),
                               .epoch = fuzz_u8(in) % 3,
                               .seq = fuzz_u64(in),
                               .weights_version = fuzz_u64(in),
                               .count = count,
                               .obs_dim = b & 16 ? OBS - 1 : OBS, // the arrays hold either
                               .obs_dtype = r->uint8_obs ^ ((b >> 5) & 1),
                               .actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .priorities = b & 64 ? prio : NULL};
    int u8 = m.u.batch.obs_dtype == WIRE_OBS_UINT8;
    m.u.batch.obs = u8 ? (const void *)obs8 : (const void *)obs;
    m.u.batch.next_obs = u8 ? (const void *)next8 : (const void *)next;
    int ends = 0;
    uint64_t held0 = 0;
    if (r->det) {
        ends = s_det_batch(r, in, &m.u.batch, b & 128);
        held0 = s_det_held_inserts(r);
    }
    if (b & 128) {
        // The frame layout, well formed but for the run (its stacks are one row's obs of
        // obs_dim frames of 1 element, each row's obs and next_obs two frames): a
        // whole-observation server must refuse it.
        static uint32_t prev[MAX_FRAMES];
        static uint64_t of[MAX_ROWS], nf[MAX_ROWS];
        for (uint32_t i = 0; i < count; i++) {
            of[i] = i, nf[i] = i + 1;
        }
        m.u.batch.frame_stack = m.u.batch.obs_dim;
        m.u.batch.frame_count = count + 1 < MAX_FRAMES ? count + 1 : MAX_FRAMES;
        m.u.batch.count = m.u.batch.frame_count - 1;
        m.u.batch.frames = m.u.batch.obs;
        m.u.batch.frame_prev = prev;
        m.u.batch.obs_frames = of, m.u.batch.next_frames = nf;
        m.u.batch.obs = m.u.batch.next_obs = NULL;
    }
    uint64_t bad = r->s->bad_total;
    s_send(r, REPLAY_SOCK_INSERT, &m);
    if (b & 128) {
        FUZZ_CHECK(r->s->bad_total == bad + 1);
        fuzz_replay_stats.layout_refused++;
    } else if (r->det) {
        s_det_batch_sent(r, &m.u.batch, held0, ends);
    }
}

// Operation 0 in a frame-mode run. Reads: flags b (1 i32 actions, 2 f32 rewards, 4 f32
// discounts, 8 raw frames, 16 wild links, 32 wild row numbers, 64 priorities sent, 128
// whole observations instead); actor, epoch, seq; where the frames start (s_first); frames
// (< 224: % 9, else % 19), rows (% 21); per frame its link byte (or u64), then its elements
// (one byte, or raw: f32s or bytes); per row two bytes (or two u64) naming its frames, then
// action, reward, discount, priority as s_op_batch.
static uint64_t s_first(fuzz_prog_t *in, uint64_t next) {
    uint8_t c = fuzz_u8(in);
    switch (c >> 6) {
    case 2: // ahead: frames in between are missing (a gap), the batch is held back
        return next + 1 + (c & 63);
    case 3: // back (a re-send, or numbers reused), or anywhere
        if (c & 32) {
            return fuzz_u64(in);
        }
        return next - (next < (c & 31u) ? next : (c & 31u));
    default: // on from the actor's previous batch
        return next;
    }
}

static void s_op_frames(s_run *r, fuzz_prog_t *in) {
    static uint8_t frames[MAX_FRAMES * MAX_FRAME * 4];
    static const uint8_t whole[MAX_ROWS * MAX_STACK * 4];
    static uint32_t prev[MAX_FRAMES];
    static uint64_t of[MAX_ROWS], nf[MAX_ROWS];
    static float rew[MAX_ROWS], disc[MAX_ROWS], prio[MAX_ROWS];
    static int32_t act[MAX_ROWS];
    s_model *m = &r->m;
    store_t *st = r->s->store;
    uint8_t b = fuzz_u8(in);
    uint32_t actor = (uint32_t)fuzz_u8(in) % (ACTORS + 2), epoch = fuzz_u8(in) % EPOCHS;
    uint64_t seq = fuzz_u64(in);
    uint64_t first = s_first(in, r->next_fid[actor][epoch]);
    uint8_t nb = fuzz_u8(in);
    uint32_t n = nb < 224 ? nb % 9u : nb % (MAX_FRAMES + 1u);
    uint32_t count = (uint32_t)fuzz_u8(in) % (MAX_ROWS + 1);
    uint32_t felems = r->obs / r->K, esize = r->uint8_obs ? 1 : 4;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t fid = first + i;
        if (b & 16) {
            prev[i] = (uint32_t)fuzz_u64(in);
        } else { // 0: an episode's first frame; mostly 1, never before frame 0
            uint32_t d = fuzz_u8(in) & 3;
            prev[i] = d <= fid ? d : (uint32_t)fid;
        }
        uint8_t *f = frames + (size_t)i * felems * esize;
        if (!(b & 8)) { // one byte makes a finite frame
            uint8_t v = fuzz_u8(in);
            for (uint32_t j = 0; j < felems; j++) {
                if (r->uint8_obs) {
                    f[j] = (uint8_t)(v + j);
                } else {
                    float x = (float)v + 0.25f * (float)j;
                    memcpy(f + 4 * j, &x, 4);
                }
            }
        } else if (r->uint8_obs) {
            fuzz_bytes(in, f, felems);
        } else {
            for (uint32_t j = 0; j < felems; j++) {
                float x = fuzz_f32(in);
                memcpy(f + 4 * j, &x, 4);
            }
        }
    }
    uint64_t end = first + n;
    for (uint32_t i = 0; i < count; i++) {
        if (b & 32) {
            of[i] = fuzz_u64(in), nf[i] = fuzz_u64(in);
        } else if (end >= 2 && end <= WIRE_FRAME_MAX) {
            // next_obs's newest frame among the last 48 sent, obs's up to 8 before it.
            uint64_t back = fuzz_u8(in) % 48u, gap = fuzz_u8(in) % 8u;
            nf[i] = end - 1 - (back < end - 2 ? back : end - 2);
            of[i] = nf[i] - 1 - (gap < nf[i] - 1 ? gap : nf[i] - 1);
        } else {
            fuzz_u8(in), fuzz_u8(in);
            of[i] = 0, nf[i] = 1; // nothing to name: refused
        }
        act[i] = b & 1 ? fuzz_i32(in) : (int32_t)(fuzz_u8(in) % r->actions);
        rew[i] = b & 2 ? fuzz_f32(in) : (float)fuzz_u8(in);
        disc[i] = b & 4 ? fuzz_f32(in) : (float)(fuzz_u8(in) % 5) * 0.25f;
        prio[i] = fuzz_f32(in);
    }
    wire_msg_t msg = {.type = WIRE_MSG_TRANSITION_BATCH};
    wire_batch_t *x = &msg.u.batch;
    int ends = 0;
    *x = (wire_batch_t){.actor_id = actor,
                        .epoch = epoch,
                        .seq = seq,
                        .weights_version = 1,
                        .count = count,
                        .obs_dim = r->obs,
                        .obs_dtype = (uint32_t)r->uint8_obs,
                        .actions = act,
                        .rewards = rew,
                        .discounts = disc,
                        .priorities = b & 64 ? prio : NULL};
    if (b & 128) { // whole observations to a frame-mode server: refused
        x->count = count ? count : 1;
        x->obs = x->next_obs = whole;
    } else {
        x->frame_stack = r->K;
        x->first_frame = first;
        x->frame_count = n;
        x->frames = n ? frames : NULL;
        x->frame_prev = n ? prev : NULL;
        x->obs_frames = count ? of : NULL;
        x->next_frames = count ? nf : NULL;
    }
    if (r->det) {
        ends = s_det_batch(r, in, x, 0);
        end = first + x->frame_count;
    }
    replay_server_t *s = r->s;
    uint64_t f0 = store_frames_inserted(st), i0 = store_inserted(st),
             mi0 = store_frames_missing(st), d0 = s->frames_deferred, k0 = s->frame_gaps_skipped,
             bad0 = s->bad_total, dup0 = s->counters.duplicate_batches;
    if (r->det) {
        // Applied in its turn, maybe by a later operation: the model is off (m->ok is 0).
        uint64_t held0 = s_det_held_inserts(r);
        s_send(r, REPLAY_SOCK_INSERT, &msg);
        if (b & 128) {
            FUZZ_CHECK(s->bad_total == bad0 + 1);
            fuzz_replay_stats.layout_refused++;
        } else if (s_det_batch_sent(r, x, held0, ends)) {
            r->next_fid[actor][epoch] = end;
        }
        return;
    }
    int gap = m->ok && !(b & 128) && s_mgap(m, x);
    s_send(r, REPLAY_SOCK_INSERT, &msg);
    int applied = store_frames_inserted(st) != f0 || store_inserted(st) != i0 ||
                  store_frames_missing(st) != mi0;
    int held = s->frames_deferred != d0;
    if (b & 128) {
        FUZZ_CHECK(!applied && s->bad_total == bad0 + 1);
        fuzz_replay_stats.layout_refused++;
        return;
    }
    FUZZ_CHECK(!(applied && held));
    FUZZ_CHECK(applied || held || s->bad_total > bad0 || s->counters.duplicate_batches > dup0);
    if (held) {
        fuzz_replay_stats.frame_held_back++;
        r->held_seq[actor] = seq + 1;
        FUZZ_CHECK(!m->ok || gap); // held back only behind a gap the store has
        return;
    }
    if (!applied) {
        return;
    }
    r->next_fid[actor][epoch] = end;
    if (s->frame_gaps_skipped != k0) {
        fuzz_replay_stats.frame_gaps_given_up++;
    } else if (r->held_seq[actor] == seq + 1) {
        fuzz_replay_stats.frame_held_stored++;
    }
    if (!m->ok) {
        return;
    }
    // A stored batch with a gap is one whose gap was given up on.
    FUZZ_CHECK(!gap || s->frame_gaps_skipped == k0 + 1);
    s_madd(m, x);
    FUZZ_CHECK(m->total == store_frames_inserted(st) && m->inserted == store_inserted(st) &&
               m->missing == store_frames_missing(st) && m->size == store_size(st) &&
               m->next == store_next_slot(st));
}

static void s_op_sample(s_run *r, fuzz_prog_t *in) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    uint8_t b = fuzz_u8(in);
    wire_sample_request_t *q = &m.u.sample_request;
    q->id = fuzz_u64(in);
    q->stats_only = b & 1;
    q->min_priority = b & 2 ? fuzz_f64(in) : 0.0;
    q->beta = b & 4 ? fuzz_f32(in) : 0.4f;
    if (q->stats_only) {
        q->stats_after = fuzz_u64(in); // (rows in a stats request: only raw bytes can say so)
    } else {
        q->batch_size = fuzz_u8(in) % (MAX_BATCH + 4);
        q->batches = fuzz_u8(in) % 70;
        q->stats_after = b & 16 ? fuzz_u64(in) : 0;
    }
    if (r->det) {
        s_det_request(r, in, q);
    }
    s_send(r, REPLAY_SOCK_SAMPLE, &m);
}

static void s_op_update(s_run *r, fuzz_prog_t *in) {
    static uint64_t keys[MAX_ROWS];
    static float prio[MAX_ROWS];
    uint32_t count = 1 + (uint32_t)fuzz_u8(in) % MAX_ROWS;
    for (uint32_t i = 0; i < count; i++) {
        uint8_t k = fuzz_u8(in);
        keys[i] = k < 200 ? WIRE_KEY(k % 70, fuzz_u8(in) % 4) : fuzz_u64(in);
        prio[i] = fuzz_f32(in);
    }
    wire_msg_t m = {.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update =
        (wire_priority_update_t){.count = count, .keys = keys, .priorities = prio};
    if (r->det) {
        s_det_update(r, in, &m.u.priority_update);
    }
    s_send(r, REPLAY_SOCK_SAMPLE, &m);
}

static void s_op_raw(s_run *r, fuzz_prog_t *in, replay_sock which) {
    static uint8_t raw[4096];
    size_t len = (size_t)fuzz_u8(in) * 16u;
    len = len < in->n ? len : in->n;
    fuzz_bytes(in, raw, len);
    r->foreign |= which == REPLAY_SOCK_SAMPLE && len > 0; // (a request the harness did not make)
    replay_server_handle(r->s, which, r->id, r->id_len, raw, len, r->now);
}

static void s_op_other_kind(s_run *r, fuzz_prog_t *in) {
    static const float params[3] = {1, 2, 3};
    static const float ret = 1.0f, eps = 0.1f;
    static const uint32_t len = 3;
    wire_msg_t m = {0};
    switch (fuzz_u8(in) % 5) {
    case 0:
        m.type = WIRE_MSG_WEIGHTS;
        m.u.weights = (wire_weights_t){.version = 1, .num_params = 3, .params = params};
        break;
    case 1:
        m.type = WIRE_MSG_ACTOR_STATS;
        m.u.actor_stats = (wire_actor_stats_t){
            .frames = 5, .n_episodes = 1, .returns = &ret, .lengths = &len, .epsilons = &eps};
        break;
    case 2:
        m.type = WIRE_MSG_INSERT_ACK;
        m.u.insert_ack = (wire_insert_ack_t){.seq = fuzz_u64(in)};
        break;
    case 3:
        m.type = WIRE_MSG_WEIGHTS_REQUEST;
        break;
    default:
        m.type = WIRE_MSG_SAMPLE_REPLY;
        m.u.sample_reply = (wire_sample_reply_t){.status = WIRE_SAMPLE_NOT_READY};
        break;
    }
    s_send(r, fuzz_u8(in) & 1 ? REPLAY_SOCK_SAMPLE : REPLAY_SOCK_INSERT, &m);
}

static void s_op_version(s_run *r, fuzz_prog_t *in) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = 1, .batch_size = 1, .beta = 0.5f};
    uint32_t v = fuzz_u8(in);
    wire_encode_version(&m, v == APEX_PROTOCOL_VERSION ? v + 1 : v, &r->buf);
    replay_server_handle(r->s, REPLAY_SOCK_SAMPLE, r->id, r->id_len, r->buf.data, r->buf.len,
                         r->now);
}

static void s_op_peer(s_run *r, fuzz_prog_t *in) {
    uint8_t b = fuzz_u8(in);
    r->id_len = b < 128 ? b % 12 : b < 192 ? sizeof r->id : (size_t)b;
    fuzz_bytes(in, r->id, r->id_len);
}

// ---------------------------------------------------------------------------------------
// Invariants

// The reply the server built last (a ring buffer lent to libzmq, or the copy buffer): a
// learner of this run must take it.
static void s_check_reply(s_run *r) {
    replay_server_t *s = r->s;
    const wire_buf_t *b = &s->replies[(s->reply_next + REPLY_RING - 1) % REPLY_RING].buf;
    wire_msg_t m;
    int rc = wire_decode(r->learner, b->data, b->len, &m);
    if (rc != APEX_OK) {
        fprintf(stderr, "fuzz_replay: a reply the learner refuses: %s\n",
                wire_decoder_last_error(r->learner));
    }
    FUZZ_CHECK(rc == APEX_OK && m.type == WIRE_MSG_SAMPLE_REPLY);
    const wire_sample_reply_t *y = &m.u.sample_reply;
    FUZZ_CHECK(y->stats.size <= y->stats.capacity && y->stats.size <= store_size(s->store));
    if (y->status != WIRE_SAMPLE_OK) {
        FUZZ_CHECK(y->count == 0);
        fuzz_replay_stats.replies_other++;
        return;
    }
    fuzz_replay_stats.replies_ok++;
    FUZZ_CHECK(y->count >= 1 && y->count <= MAX_BATCH);
    FUZZ_CHECK(y->obs_dim == r->obs);
    for (uint32_t i = 0; i < y->count; i++) {
        FUZZ_CHECK(WIRE_KEY_SLOT(y->keys[i]) < store_size(s->store));
        FUZZ_CHECK(y->is_weights[i] >= 0.0f && y->is_weights[i] <= WIRE_IS_WEIGHT_MAX);
    }
    const s_model *md = &r->m;
    if (!r->K || !md->ok) {
        return;
    }
    // Each row is the one the model holds in its slot, live, and its stacks are made of the
    // frames that were sent, in the order their links say.
    static uint8_t want[MAX_STACK * 4];
    size_t ob = (size_t)md->K * md->fbytes;
    for (uint32_t i = 0; i < y->count; i++) {
        const s_mrow *w = &md->rows[WIRE_KEY_SLOT(y->keys[i])];
        FUZZ_CHECK(WIRE_KEY_GEN(y->keys[i]) == w->gen && s_mlive(md, w->oldest));
        FUZZ_CHECK(y->actions[i] == w->action && !memcmp(&y->rewards[i], &w->reward, 4) &&
                   !memcmp(&y->discounts[i], &w->discount, 4));
        s_mstack(md, w->og, want);
        FUZZ_CHECK(!memcmp((const uint8_t *)y->obs + i * ob, want, ob));
        s_mstack(md, w->ng, want);
        FUZZ_CHECK(!memcmp((const uint8_t *)y->next_obs + i * ob, want, ob));
    }
    fuzz_replay_stats.frame_replies_ok++;
}

// Deterministic runs: every reply the server builds (replay_server_t.reply_hook, called
// before it is encoded and sent), as its learner reads it.
static void s_det_reply(void *arg, const wire_msg_t *msg) {
    s_run *r = arg;
    replay_server_t *s = r->s;
    FUZZ_CHECK(msg->type == WIRE_MSG_SAMPLE_REPLY);
    wire_encode(msg, &r->hook_buf);
    wire_msg_t m;
    int rc = wire_decode(r->learner, r->hook_buf.data, r->hook_buf.len, &m);
    if (rc != APEX_OK) {
        fprintf(stderr, "fuzz_replay: a deterministic reply the learner refuses: %s\n",
                wire_decoder_last_error(r->learner));
    }
    FUZZ_CHECK(rc == APEX_OK && m.type == WIRE_MSG_SAMPLE_REPLY);
    const wire_sample_reply_t *y = &m.u.sample_reply;
    // (the hook runs before the request it answers counts as served)
    uint64_t next = detsched_next_index(s->det);
    FUZZ_CHECK(next >= 1);
    FUZZ_CHECK(y->stats.det_horizon <= detsched_horizon(s->det));
    FUZZ_CHECK(y->stats.det_served <= next - 1);
    if (y->stats.det_horizon && y->status != WIRE_SAMPLE_OK) {
        fuzz_replay_stats.det_watch_replies++;
    }
    if (y->status != WIRE_SAMPLE_OK) {
        FUZZ_CHECK(y->count == 0);
        return;
    }
    FUZZ_CHECK(y->count >= 1 && y->count <= MAX_BATCH && y->obs_dim == r->obs);
    for (uint32_t i = 0; i < y->count; i++) {
        FUZZ_CHECK(WIRE_KEY_SLOT(y->keys[i]) < store_size(s->store));
        FUZZ_CHECK(y->is_weights[i] >= 0.0f && y->is_weights[i] <= WIRE_IS_WEIGHT_MAX);
    }
    uint64_t index = WIRE_DET_INDEX(y->id);
    if (!r->foreign) {
        FUZZ_CHECK(index == WIRE_DET_INDEX(next)); // served in the order of det_index
    }
    if (index < r->det_upd) { // a restarted schedule: its updates are owed from there
        r->det_upd = index;
        r->det_upd_n = 0;
    }
    fuzz_replay_stats.det_replies_ok++;
}

// Frame mode: the counters only grow, and the model follows the store (it stops, ok = 0,
// when the store took a batch it did not see: raw bytes that decode as one).
static void s_check_frames(s_run *r) {
    replay_server_t *s = r->s;
    store_t *st = s->store;
    s_model *m = &r->m;
    uint64_t live = store_live_size(st);
    FUZZ_CHECK(live <= store_size(st));
    FUZZ_CHECK(store_frames_inserted(st) >= r->last_frames &&
               store_frames_missing(st) >= r->last_missing &&
               store_frame_evicted(st) >= r->last_evicted &&
               s->frames_deferred >= r->last_deferred && s->frame_gaps_skipped >= r->last_skipped);
    r->last_frames = store_frames_inserted(st), r->last_missing = store_frames_missing(st);
    r->last_evicted = store_frame_evicted(st), r->last_deferred = s->frames_deferred;
    r->last_skipped = s->frame_gaps_skipped;
    if (m->ok && (m->total != store_frames_inserted(st) || m->inserted != store_inserted(st) ||
                  m->missing != store_frames_missing(st))) {
        m->ok = 0;
    }
    if (m->ok) {
        // Every live row has its leaf, and a store with leaves has a row to sample (else a
        // request the limiter lets through finds none: EAGAIN, refused, blamed on the peer).
        uint64_t n = s_mlive_rows(m);
        FUZZ_CHECK(live >= n && (live > 0) == (n > 0));
    }
}

static void s_check(s_run *r) {
    replay_server_t *s = r->s;
    store_t *st = s->store;
    FUZZ_CHECK(store_size(st) <= store_capacity(st));
    if (r->K) {
        s_check_frames(r);
    }
    double total = store_total_priority(st), min = store_min_priority(st);
    FUZZ_CHECK(isfinite(total) && total >= 0.0 && isfinite(min) && min >= 0.0);
    FUZZ_CHECK(store_live_size(st) == 0 || total > 0.0); // (size in whole-observation runs)
    FUZZ_CHECK(s->pending_len >= 0 && s->pending_len <= PENDING_MAX);
    FUZZ_CHECK(s->n_watches >= 0 && s->n_watches <= WATCH_MAX);
    FUZZ_CHECK(s->counters.sampled_rows >= r->last_sampled && s->bad_total >= r->last_bad);
    r->last_sampled = s->counters.sampled_rows, r->last_bad = s->bad_total;
    uint64_t replies = s->counters.sampled_rows + s->not_ready + s->refused + s->stats_replies;
    if (replies != r->last_dropped && s->reply_copies == 0) {
        s_check_reply(r);
    }
    r->last_dropped = replies;
}

int fuzz_replay_one(const uint8_t *data, size_t size) {
    // A fresh server per input logs its first refusal of each kind: thousands of lines a
    // second. Below LOG_ERROR nothing is written.
    log_level_current = -1;
    fuzz_prog_t in = {data, size};
    s_run r = {.now = 1000000};
    uint8_t run = fuzz_u8(&in);
    if (in.n > 0 && in.p[0] >= DET_MARK) {
        r.det = fuzz_u8(&in);
    }
    r.s = s_server(run, &r);
    if (r.K) {
        s_model_init(&r.m, r.s->store);
    }
    wire_buf_init(&r.hook_buf, 0);
    if (r.det) {
        FUZZ_CHECK(r.s->det != NULL);
        r.s->reply_hook = s_det_reply;
        r.s->reply_hook_arg = &r;
        r.m.ok = 0;
        r.det_next = r.det_upd = 1;
        r.det_batches = (uint32_t)r.s->cfg.learner.batches_per_request;
        for (int a = 0; a < ACTORS + 2; a++) {
            r.det_period[a] = 1;
        }
    }
    wire_limits_t lim = {.obs_dim = r.obs,
                         .obs_dtype = r.uint8_obs ? WIRE_OBS_UINT8 : WIRE_OBS_FLOAT32,
                         .n_actions = r.actions,
                         .max_count = MAX_BATCH};
    r.learner = wire_decoder_new(&lim);
    wire_buf_init(&r.buf, 0);
    memcpy(r.id, "actor-0", 7);
    r.id_len = 7;
    for (int ops = 0; !fuzz_prog_done(&in) && ops < 256; ops++) {
        switch (fuzz_u8(&in) % 9) {
        case 0:
            if (r.K) {
                s_op_frames(&r, &in);
            } else {
                s_op_batch(&r, &in);
            }
            break;
        case 1:
            s_op_sample(&r, &in);
            break;
        case 2:
            s_op_update(&r, &in);
            break;
        case 3:
            s_op_raw(&r, &in, REPLAY_SOCK_INSERT);
            break;
        case 4:
            s_op_raw(&r, &in, REPLAY_SOCK_SAMPLE);
            break;
        case 5:
            r.now += (int64_t)fuzz_u8(&in) * 10;
            replay_server_tick(r.s, r.now);
            break;
        case 6:
            s_op_other_kind(&r, &in);
            break;
        case 7:
            s_op_version(&r, &in);
            break;
        default:
            s_op_peer(&r, &in);
            break;
        }
        s_check(&r);
    }
    fuzz_replay_stats.stored += store_inserted(r.s->store);
    fuzz_replay_stats.updated += r.s->counters.updated;
    if (r.K) {
        fuzz_replay_stats.frame_rows_stored += store_inserted(r.s->store);
        s_model_fini(&r.m);
    }
    if (r.det) {
        detsched_stats_t ds;
        detsched_stats(r.s->det, &ds);
        fuzz_replay_stats.det_updates_held += ds.held_updates;
        fuzz_replay_stats.det_out_of_turn += ds.out_of_turn;
        fuzz_replay_stats.det_full += ds.full;
        fuzz_replay_stats.det_duplicates += ds.duplicates;
        fuzz_replay_stats.det_reasks += r.s->det_reasks;
    }
    wire_buf_fini(&r.hook_buf);
    wire_buf_fini(&r.buf);
    wire_decoder_destroy(&r.learner);
    replay_server_destroy(&r.s);
    return 0;
}

#ifndef FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_replay_one(data, size); }
#endif
