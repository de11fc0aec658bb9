// wire.h: encode and decode apex messages (STYLE S18).
//
// The only module that includes the protobuf-c generated code. Messages are converted
// between the Envelope of proto/apex.proto and the flat structs below, whose arrays are
// plain little-endian float32/int32/uint32/uint64 buffers.
//
// Decoding validates everything before the caller sees it: protocol version, that the body
// is set, counts within limits and consistent with every array length, dimensions equal to
// the configured ones, actions in range, and every float finite (discounts in [0, 1],
// priorities and importance weights >= 0). Any violation returns an apex_err and nothing
// else happens. Decoding never allocates on the hot path: protobuf-c unpacks into an arena
// owned by the decoder, and the decoded views point into that arena. The views stay valid
// until the next wire_decode on the same decoder.
//
// Not thread-safe per object: one decoder and one buffer per thread.
#ifndef APEX_WIRE_H
#define APEX_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "apex.h"

typedef enum {
    WIRE_MSG_NONE = 0,
    WIRE_MSG_TRANSITION_BATCH,
    WIRE_MSG_SAMPLE_REQUEST,
    WIRE_MSG_SAMPLE_REPLY,
    WIRE_MSG_PRIORITY_UPDATE,
    WIRE_MSG_WEIGHTS,
    WIRE_MSG_ACTOR_STATS,
    WIRE_MSG_INSERT_ACK,
    WIRE_MSG_WEIGHTS_REQUEST,
    WIRE_MSG_COUNT_
} wire_msg_type;

// Name of a message type for logs ("TransitionBatch"); static storage.
const char *wire_msg_name(wire_msg_type t);

// Weights versions are incarnation << 32 | counter (a restarted learner starts the next
// incarnation, so versions only increase); logs print them as "v<incarnation>:<counter>":
//   log_info("weights " WIRE_VERSION_FMT, WIRE_VERSION_ARGS(v));
#define WIRE_VERSION_FMT "v%u:%u"
#define WIRE_VERSION_ARGS(v) (unsigned)((uint64_t)(v) >> 32), (unsigned)((uint64_t)(v)&0xFFFFFFFFu)

// What a weights client (an actor, apex-eval --follow) does with a Weights answer of version
// v, given the version it holds (staged, last heard staged_age_ms ago; has_staged 0: none
// yet). Newest is by version, not by arrival: after a learner restart the client's DEALER
// can still deliver the dead connection's last answers after the new learner's, so an older
// incarnation's weights can arrive after newer ones. Those are stragglers, unless the newer
// learner has been quiet for WIRE_OLDER_WEIGHTS_AFTER_MS (a held request is answered within
// 1-1.5 s, common/weights_server.h): a learner started afresh, in a new run directory,
// counts from zero again and must still be followed.
#define WIRE_OLDER_WEIGHTS_AFTER_MS 3000
typedef enum {
    WIRE_WEIGHTS_TAKE,  // newer (or the learner of the held one went quiet): stage it
    WIRE_WEIGHTS_SAME,  // the held version again (a heartbeat): refresh its time, copy nothing
    WIRE_WEIGHTS_STALE, // older, while the held version is still heard: ignore it
} wire_weights_verdict;
wire_weights_verdict wire_weights_judge(uint64_t v, int has_staged, uint64_t staged,
                                        int64_t staged_age_ms);

// Element type of obs and next_obs (the values of config.h's config_obs_dtype).
typedef enum { WIRE_OBS_FLOAT32 = 0, WIRE_OBS_UINT8 = 1 } wire_obs_dtype;
// Bytes per observation element of dtype t.
static inline size_t wire_obs_elem_bytes(uint32_t t) { return t == WIRE_OBS_UINT8 ? 1 : 4; }

typedef enum {
    WIRE_SAMPLE_OK = 0,
    WIRE_SAMPLE_NOT_READY = 1,
    WIRE_SAMPLE_REFUSED = 2
} wire_sample_status;

// ---------------------------------------------------------------------------------------
// Bounds of the numbers a peer sends: the one source. wire_decode refuses a message with a
// value outside them, and every layer behind the decoder (the replay store, the learner's
// modules, the actor's checks of its own output) tests against these same names, so that a
// value the decoder lets through is one every later layer takes. (Issue #26: the decoder
// took min_priority <= 1e300, the store refused >= 1e300, and the server asserted on the
// refusal: one well-formed SampleRequest stopped apex-replay.) Bounds that come from the
// run's configuration (dims, counts, actions, actor ids) are in wire_limits_t below.
// Raw priorities |TD| + eps (TransitionBatch, PriorityUpdate): [0, this].
#define WIRE_PRIORITY_MAX 3.0e38f
// p^alpha values sent as doubles (SampleRequest.min_priority, ReplayStats total and
// minimum): [0, this]. They are sums or values of the replay's float leaves, so FLT_MAX
// bounds them, and a value in range converts to a finite float.
#define WIRE_MASS_MAX 3.4028234663852886e38
#define WIRE_BETA_MAX 1.0f            // SampleRequest.beta: [0, this]
#define WIRE_DISCOUNT_MAX 1.0f        // discounts: [0, this]
#define WIRE_IS_WEIGHT_MAX 1.0f       // importance weights: [0, this]
#define WIRE_EPSILON_MAX 1.0f         // ActorStats epsilons: [0, this]
#define WIRE_SEQ_MAX (UINT64_MAX - 1) // TransitionBatch.seq: seq + 1 (a high-water mark) fits
// ActorStats.frames (and frames_delta <= frames): counts a double holds exactly (metrics.csv
// and TensorBoard carry them as doubles); 2^53 frames is ~285 years at a million frames/s.
#define WIRE_FRAMES_MAX (1ull << 53)
// Frame numbers of a frame-mode TransitionBatch (below): first_frame + frame_count, and so
// every frame number and every reference, is at most this, so that sums of two never
// overflow a uint64 (2^62 frames is ~146000 years at a million frames/s).
#define WIRE_FRAME_MAX (1ull << 62)

// Key of a sampled transition: ring slot in the low 32 bits, its generation in the high.
#define WIRE_KEY(slot, gen) ((uint64_t)(slot) | ((uint64_t)(gen) << 32))
#define WIRE_KEY_SLOT(key) ((uint32_t)((key)&0xffffffffu))
#define WIRE_KEY_GEN(key) ((uint32_t)((key) >> 32))

// A TransitionBatch carries its observations in one of two layouts:
//  - whole observations (frame_stack 0): obs and next_obs hold every row's observations;
//    the frame fields are 0 and NULL.
//  - frame mode (frame_stack = K >= 1, issue #27: [env] frame_stack = K > 1 with [replay]
//    frame_storage, or any K with [replay] compress): an observation is a stack of K frames, frame-major, oldest first
//    ([f_{t-K+1} | ... | f_t], each frame obs_dim / K elements). obs and next_obs are NULL;
//    the batch carries the actor's new frames, each once, and each row names its two stacks
//    by the number of their newest frame. The actor numbers its frames 0, 1, ... per epoch,
//    consecutively across batches (frames[i] is frame first_frame + i). Frame n's stack is
//    n, n - frame_prev of n, and so on back K - 1 links; an episode's first frame links to
//    itself (frame_prev 0), so the stack repeats it, as framestack does at reset. A row may
//    name frames of earlier batches of the same epoch: the receiver keeps them.
//    Once decoded: frame_count <= max_frames, first_frame + frame_count <= WIRE_FRAME_MAX,
//    frame_prev[i] <= first_frame + i (no link before frame 0), and per row
//    obs_frames[r] < next_frames[r] < first_frame + frame_count (only frames sent so far,
//    next_obs later than obs). count may be 0 when frame_count >= 1 (frames only). Whether
//    a link or a row names a frame the receiver still holds is for the receiver to check.
//    Compressed (frame_codec LZ4 or zstd, [replay] compress): frames holds frame_count blobs
//    back to back, blob i frame_sizes[i] bytes, each one frame compressed alone. Once
//    decoded: every size is in [1, fcodec_bound(frame bytes)] and they sum to the bytes
//    sent. Whether a blob decompresses to a frame (and float32 frames to finite values) the
//    decoder does not know: the receiver checks it (replay/store.h store_check_framed).
// To encode one, obs and next_obs must be NULL and obs_dim a multiple of K (asserted).
// The uint32/uint64 views are aligned to their type (see wire.c "Alignment of the views").
typedef struct {
    uint32_t actor_id;
    uint64_t epoch; // the actor process's run; seq restarts from 0 in each
    uint64_t seq;
    uint64_t weights_version;
    uint32_t count;
    uint32_t obs_dim;
    uint32_t obs_dtype;        // wire_obs_dtype of obs and next_obs (and of frames)
    const void *obs;           // (count, obs_dim) of obs_dtype; NULL in frame mode
    const int32_t *actions;    // (count) discrete actions (NULL when action_dim > 0)
    uint32_t action_dim;       // 0: discrete actions; else floats per continuous action
    const float *cont_actions; // (count, action_dim) continuous actions (NULL when discrete)
    const float *rewards;      // (count) n-step returns
    const float *discounts;    // (count) gamma^n or 0 at terminal
    const void *next_obs;      // (count, obs_dim) of obs_dtype; NULL in frame mode
    const float *priorities;   // (count), or NULL: the replay uses its max priority
    // Frame mode (above); all 0/NULL for whole observations.
    uint32_t frame_stack;        // K >= 1 in frame mode, 0 for whole observations
    uint64_t first_frame;        // number of frames[0] (with no frames: of the next new one)
    uint32_t frame_count;        // new frames in this batch (0 allowed)
    const void *frames;          // (frame_count, obs_dim / K) of obs_dtype, or NULL if none
    const uint32_t *frame_prev;  // (frame_count) frame's number minus its previous frame's
                                 // in its stack (0: an episode's first); NULL if none
    const uint64_t *obs_frames;  // (count) number of obs's newest frame; NULL if no rows
    const uint64_t *next_frames; // (count) number of next_obs's newest frame; NULL if no rows
    uint32_t frame_codec;        // fcodec_kind: 0, frames are raw
    const uint32_t *frame_sizes; // (frame_count) blob sizes when compressed, else NULL
    // Deterministic mode ([run] deterministic): 1 + the actor's weight-sync period (0 = off),
    // and whether this is the period's last batch (count may then be 0, frames or not).
    uint64_t det_period;
    int det_period_end;
    // With det_period_end (0 / NULL otherwise, checked): the actor's env steps and episodes
    // since it started, through the period's end, and the returns of the period's last
    // det_n_returns (<= WIRE_DET_RETURNS_MAX, <= det_episodes) episodes, finite, in order.
    uint64_t det_frames, det_episodes;
    const float *det_returns;
    uint32_t det_n_returns;
} wire_batch_t;

// The episode returns a deterministic period's last batch carries: the window of
// metrics.csv's mean_return_100 (one actor's period can only add its last 100 to it).
#define WIRE_DET_RETURNS_MAX 100

// A deterministic learner's request id: the request's det_index in the low 48 bits, and how
// many times it asked for that place before (0: the first ask) above, so that the replay
// can tell a learner asking again (a timeout) from one that started over.
#define WIRE_DET_ID(index, attempt) ((uint64_t)(index) | ((uint64_t)(attempt) << 48))
#define WIRE_DET_INDEX(id) ((uint64_t)(id) & ((1ull << 48) - 1))
#define WIRE_DET_ATTEMPT(id) ((uint64_t)(id) >> 48)

// Most batches one SampleRequest may ask for (batch_size * batches is also <= max_count).
#define WIRE_MAX_BATCHES_PER_REQUEST 64
typedef struct {
    uint64_t id;
    uint32_t batch_size; // 0 for a stats request
    float beta;
    uint32_t batches; // >= 1 once decoded (the wire's 0 means 1); the reply has
                      // batch_size * batches rows, batch after batch
    // Sharded replay (proto/apex.proto): finite and >= 0; 0 = the server's own minimum.
    double min_priority;
    // A stats request: no rows, answered NOT_READY with the stats once the server's inserted
    // count reaches stats_after (0 = at once) or at its held-request deadline. Then
    // batch_size is 0 and batches 1 (decoded) or 0 (to encode).
    int stats_only;
    uint64_t stats_after;
    // Deterministic mode (0 = off): 1 + the request's group-wide number, served in that
    // order; and for a stats request, the horizon to wait for (then stats_after is 0).
    uint64_t det_index;
    uint64_t det_horizon;
} wire_sample_request_t;

typedef struct {
    uint64_t size, capacity, inserted, sampled, updated;
    uint64_t stale_updates, bad_messages, limiter_waits, duplicate_batches;
    double total_priority; // sum of p^alpha; finite and >= 0 once decoded
    double min_priority;   // min of p^alpha (0 when empty); finite and >= 0 once decoded
    uint32_t shard;        // < shards once decoded
    uint32_t shards;       // >= 1 once decoded (older servers send 0: one server)
    // Deterministic mode: every actor's periods below det_horizon are stored; det_served
    // requests had been served when the horizon got there (0 and 0 otherwise).
    uint64_t det_horizon, det_served;
    // ... and the actors' columns as of det_horizon (proto/apex.proto): frames and episodes
    // (each <= WIRE_FRAMES_MAX), the last det_return_n returns' sum (finite), and the
    // smallest version acted with in the horizon's last period.
    uint64_t det_env_frames, det_episodes;
    double det_return_sum;
    uint32_t det_return_n; // <= WIRE_DET_RETURNS_MAX x shards of the run
    uint64_t det_version_min;
} wire_replay_stats_t;

typedef struct {
    uint64_t id;
    wire_sample_status status;
    uint32_t count; // 0 unless status is OK
    uint32_t obs_dim;
    uint32_t obs_dtype; // wire_obs_dtype of obs and next_obs
    const uint64_t *keys;
    const float *is_weights;
    const void *obs;
    const int32_t *actions;    // discrete (NULL when action_dim > 0)
    uint32_t action_dim;       // as in wire_batch_t
    const float *cont_actions; // (count, action_dim), continuous (NULL when discrete)
    const float *rewards;
    const float *discounts;
    const void *next_obs;
    wire_replay_stats_t stats;
} wire_sample_reply_t;

// Owned buffers for the rows of sample replies: what the replay server gathers a reply into
// and what the learner copies one out into. rows rows of obs_bytes observations each, and
// discrete actions (action_dim 0) or continuous ones of action_dim floats.
typedef struct {
    uint64_t *keys;
    float *is_weights, *rewards, *discounts;
    uint8_t *obs, *next_obs; // (rows, obs_bytes): the run's dtype, never interpreted
    int32_t *actions;        // (rows) discrete, or NULL
    float *cont_actions;     // (rows, action_dim) continuous, or NULL
    uint32_t action_dim;
} wire_rows_t;

// Allocates r for rows rows (aborts on OOM); wire_rows_fini frees (a zeroed r: a no-op).
void wire_rows_init(wire_rows_t *r, size_t rows, size_t obs_bytes, uint32_t action_dim);
// The actions of r's row i as bytes (int32 or action_dim floats), and one row's size.
static inline void *wire_rows_actions(const wire_rows_t *r, size_t i) {
    return r->action_dim ? (void *)(r->cont_actions + i * r->action_dim) : (void *)(r->actions + i);
}
static inline size_t wire_action_bytes(uint32_t action_dim) {
    return action_dim ? (size_t)action_dim * sizeof(float) : sizeof(int32_t);
}
void wire_rows_fini(wire_rows_t *r);
// Copies rows [0, n) of a decoded OK reply into r at row `at` (r has room for at + n).
void wire_rows_copy(wire_rows_t *r, size_t at, const wire_sample_reply_t *reply, size_t n,
                    size_t obs_bytes);

typedef struct {
    uint32_t count;
    const uint64_t *keys;
    const float *priorities; // raw |TD| + eps, before the alpha exponent
    uint64_t det_index;      // deterministic mode: the request's det_index (0 = off)
} wire_priority_update_t;

typedef struct {
    uint64_t version;
    uint64_t learner_step;
    uint64_t env_frames; // the run's frames when published (0 from older learners)
    uint32_t num_params;
    const float *params;
    uint64_t det_target; // deterministic mode: the horizon these answer (0 = off)
} wire_weights_t;

typedef struct {
    uint32_t actor_id;
    uint64_t frames;       // env steps since the actor process started
    uint64_t frames_delta; // since its previous ActorStats that was sent (<= frames)
    uint64_t weights_version;
    uint64_t dropped_batches;
    uint64_t env_faults;       // since the actor process started ([env] id = python)
    uint64_t episodes_dropped; // likewise
    uint32_t n_episodes;
    const float *returns;
    const uint32_t *lengths;
    const float *epsilons;
} wire_actor_stats_t;

// An InsertAck acknowledges seq and the n_more seqs in more (a view into the decoder's
// arena, valid until its next decode; NULL when n_more is 0).
#define WIRE_ACK_MAX_SEQS 512 // most seqs in one InsertAck (seq + more); more is refused
typedef struct {
    uint32_t actor_id;
    uint64_t seq;
    uint32_t n_more;
    const uint64_t *more;
} wire_insert_ack_t;

typedef struct {
    uint64_t have_version; // the newest weights version the asking peer holds (0: none)
    uint64_t det_target;   // deterministic mode: the weights for this horizon (0 = newest)
} wire_weights_request_t;

typedef struct {
    wire_msg_type type;
    union {
        wire_batch_t batch;
        wire_sample_request_t sample_request;
        wire_sample_reply_t sample_reply;
        wire_priority_update_t priority_update;
        wire_weights_t weights;
        wire_actor_stats_t actor_stats;
        wire_insert_ack_t insert_ack;
        wire_weights_request_t weights_request;
    } u;
} wire_msg_t;

// What a decoder accepts. Dimensions must match exactly; counts must not exceed the maxima.
typedef struct {
    uint32_t obs_dim;    // elements per observation
    uint32_t obs_dtype;  // wire_obs_dtype observations must have
    uint32_t n_actions;  // discrete actions must be in [0, n_actions)
    uint32_t action_dim; // 0: discrete actions; else continuous ones of this many floats
    // (action_dim) each: continuous actions must lie in [action_low[j], action_high[j]] (the
    // actors clip to the run's bounds, so anything outside was not produced by an actor of
    // this run); NULL: any finite value. Copied by wire_decoder_new.
    const float *action_low, *action_high;
    uint32_t num_params;      // Weights must carry exactly this many (0: refuse Weights)
    uint32_t max_count;       // most rows in a batch, sample or priority update
    uint32_t max_episodes;    // most episodes in one ActorStats
    uint32_t max_actors;      // TransitionBatch and ActorStats actor_id must be below this
                              // ([actor] num_actors); 0: not checked (no such messages expected)
    size_t max_message_bytes; // larger inputs are refused before parsing
    // TransitionBatch layout (wire_batch_t): 0, batches must carry whole observations; K >= 1,
    // they must be in frame mode with exactly this K (obs_dim a multiple of it).
    uint32_t frame_stack;
    uint32_t max_frames; // most frames in one frame-mode batch; 0 means max_count
    // Frame mode's compression (fcodec_kind): a batch must use exactly this one.
    uint32_t frame_codec;
} wire_limits_t;

// Bytes of the largest legal message under lim (for ZMQ_MAXMSGSIZE and buffer sizing): with
// frame_stack >= 1 also of a batch of max_frames frames (compressed: of their bound) and
// max_count rows.
size_t wire_max_message_bytes(const wire_limits_t *lim);

typedef struct wire_decoder wire_decoder_t;

// Creates a decoder whose arena is sized for lim. Caller destroys with wire_decoder_destroy.
wire_decoder_t *wire_decoder_new(const wire_limits_t *lim);
void wire_decoder_destroy(wire_decoder_t **self_p);

// Decodes and validates buf[0..len). On success returns APEX_OK and fills out, whose array
// pointers stay valid until the next call on this decoder. Errors: APEX_EPROTO (not a
// message, no body, wrong sizes of arrays), APEX_EVERSION, APEX_EINVAL (limits, dims,
// non-finite values), APEX_ENOSPC (longer than max_message_bytes). Never aborts on input.
int wire_decode(wire_decoder_t *self, const void *buf, size_t len, wire_msg_t *out);

// Why the last wire_decode failed, for the (rate-limited) log line. Static per decoder.
const char *wire_decoder_last_error(const wire_decoder_t *self);

// A growable output buffer; it grows only when a larger message than ever before is encoded,
// so after the first few messages encoding does not allocate.
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} wire_buf_t;

void wire_buf_init(wire_buf_t *b, size_t initial_cap);
void wire_buf_fini(wire_buf_t *b);

// Encodes msg (with the current protocol version) into out->data[0..out->len).
// msg is trusted (it comes from this process): inconsistent counts are an APEX_ASSERT.
void wire_encode(const wire_msg_t *msg, wire_buf_t *out);
// Same, with an explicit protocol version (tests use it to forge other versions).
void wire_encode_version(const wire_msg_t *msg, uint32_t version, wire_buf_t *out);

// A Weights message encoded around its parameters, for a sender that writes them straight
// into the outgoing message (a ZeRO stage 3 learner gathers them there: no whole copy of its
// own). wire_weights_size: the encoded bytes of w (w->params is not read);
// wire_weights_encode_hole writes them into out (out_len = that size, asserted) except the
// num_params x 4 bytes of the params, and returns their offset in out: once the caller has
// written the floats there (little-endian, possibly unaligned), out is byte for byte what
// wire_encode gives for w with those params. num_params >= 1.
size_t wire_weights_size(const wire_weights_t *w);
size_t wire_weights_encode_hole(const wire_weights_t *w, uint8_t *out, size_t out_len);

#endif
