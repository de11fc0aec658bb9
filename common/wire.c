// wire.c: see wire.h. The only file that includes apex.pb-c.h (STYLE S18).
#include "wire.h"

#include "fcodec.h"

#include "apex.pb-c.h"
#include "xalloc.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// Bulk arrays are sent as the host's bytes; apex runs on little-endian hosts only.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "apex's wire format is little-endian");

#define ARENA_ALIGN 16
// Alignment of the views: protobuf-c (1.x, parse_required_member) unpacks each `bytes` field
// into an allocation of its own, from s_arena_alloc (ARENA_ALIGN-aligned) or, past the arena,
// from malloc (aligned for any type); an empty field is NULL. So every float, int32, uint32
// and uint64 view handed out points at memory aligned for its type, and is read in place.
// check_wire tests this, and UBSan (the asan build, the wire fuzzer) would report any
// misaligned read.
_Static_assert(ARENA_ALIGN % _Alignof(uint64_t) == 0, "uint64 views must stay aligned");
// Slack above the largest legal message for the unpacked structs themselves.
#define ARENA_SLACK_BYTES (64u * 1024u)

// ---------------------------------------------------------------------------------------
// Arena allocator for protobuf-c: a bump pointer reset before each decode, so decoding a
// legal message allocates nothing. Hostile inputs (e.g. thousands of unknown fields) can
// need more than the arena; those allocations fall back to malloc and are freed at the
// next reset, so memory stays bounded by a small multiple of max_message_bytes.

typedef struct {
    uint8_t *base;
    size_t cap;
    size_t used;
    void **overflow;
    size_t n_overflow;
    size_t cap_overflow;
} s_arena;

struct wire_decoder {
    wire_limits_t lim; // its action_low/action_high point at low/high below
    float *low, *high; // (action_dim) the bounds, owned; NULL when lim has none
    s_arena arena;
    ProtobufCAllocator allocator;
    char last_error[160];
};

static void *s_arena_alloc(void *data, size_t size) {
    s_arena *a = data;
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need >= size && a->cap - a->used >= need) {
        void *p = a->base + a->used;
        a->used += need;
        return p;
    }
    // Only malformed or hostile input gets here (see the comment above).
    if (a->n_overflow == a->cap_overflow) {
        a->cap_overflow = a->cap_overflow ? 2 * a->cap_overflow : 16;
        a->overflow = xrealloc(a->overflow, a->cap_overflow * sizeof *a->overflow);
    }
    void *p = malloc(size ? size : 1);
    if (p) {
        a->overflow[a->n_overflow++] = p;
    }
    return p; // NULL makes protobuf-c fail the unpack cleanly
}

static void s_arena_free(void *data, void *p) {
    (void)data; // everything is released at once by s_arena_reset
    (void)p;
}

static void s_arena_reset(s_arena *a) {
    for (size_t i = 0; i < a->n_overflow; i++) {
        free(a->overflow[i]);
    }
    a->n_overflow = 0;
    a->used = 0;
}

// ---------------------------------------------------------------------------------------

wire_weights_verdict wire_weights_judge(uint64_t v, int has_staged, uint64_t staged,
                                        int64_t staged_age_ms) {
    if (!has_staged || v > staged) {
        return WIRE_WEIGHTS_TAKE;
    }
    if (v == staged) {
        return WIRE_WEIGHTS_SAME;
    }
    return staged_age_ms < WIRE_OLDER_WEIGHTS_AFTER_MS ? WIRE_WEIGHTS_STALE : WIRE_WEIGHTS_TAKE;
}

const char *wire_msg_name(wire_msg_type t) {
    static const char *const names[WIRE_MSG_COUNT_] = {
        "none",    "TransitionBatch", "SampleRequest", "SampleReply",   "PriorityUpdate",
        "Weights", "ActorStats",      "InsertAck",     "WeightsRequest"};
    return (unsigned)t < WIRE_MSG_COUNT_ ? names[t] : "unknown";
}

size_t wire_max_message_bytes(const wire_limits_t *lim) {
    // A sample reply is the largest row-wise message: 2 observations, key, weight,
    // action, reward, discount per row; Weights carry the parameters; an InsertAck up to
    // WIRE_ACK_MAX_SEQS seqs. Protobuf adds a few bytes of tags and lengths per field;
    // 1 KiB covers them.
    size_t row = 2 * (size_t)lim->obs_dim * wire_obs_elem_bytes(lim->obs_dtype) + 8 + 4 +
                 wire_action_bytes(lim->action_dim) + 4 + 4 + 4;
    size_t rows = (size_t)lim->max_count * row;
    size_t weights = (size_t)lim->num_params * 4;
    size_t stats = (size_t)lim->max_episodes * 12;
    size_t ack = (size_t)WIRE_ACK_MAX_SEQS * 10; // a full InsertAck of 10-byte varints
    size_t m = rows > weights ? rows : weights;
    m = m > ack ? m : ack;
    if (lim->frame_stack >= 1) {
        // A frame-mode batch: max_frames frames of obs_dim / K elements and a 4-byte link
        // each, and max_count rows of two 8-byte frame numbers, action, reward, discount and
        // priority. Taken as a maximum: the replay's sample replies still carry whole stacks.
        size_t frames = lim->max_frames ? lim->max_frames : lim->max_count;
        size_t frame = (size_t)(lim->obs_dim / lim->frame_stack) *
                       wire_obs_elem_bytes(lim->obs_dtype);
        if (lim->frame_codec) { // a blob per frame, up to the codec's bound, and its size
            frame = fcodec_bound((int)lim->frame_codec, frame) + 4;
        }
        size_t batch = frames * (frame + 4) +
                       (size_t)lim->max_count *
                           (16 + wire_action_bytes(lim->action_dim) + 4 + 4 + 4);
        m = m > batch ? m : batch;
    }
    // (a deterministic period's last batch adds up to WIRE_DET_RETURNS_MAX returns and two
    // counters: a TransitionBatch near the largest must still fit)
    return (m > stats ? m : stats) + 1024 + WIRE_DET_RETURNS_MAX * 4 + 32;
}

wire_decoder_t *wire_decoder_new(const wire_limits_t *lim) {
    APEX_ASSERT(lim->frame_codec == FCODEC_NONE ||
                (lim->frame_stack >= 1 && lim->frame_codec <= FCODEC_ZSTD));
    wire_decoder_t *d = xcalloc(1, sizeof *d);
    d->lim = *lim;
    if (d->lim.max_frames == 0) {
        d->lim.max_frames = d->lim.max_count;
    }
    if (d->lim.max_message_bytes == 0) {
        d->lim.max_message_bytes = wire_max_message_bytes(lim);
    }
    if (lim->action_dim && lim->action_low && lim->action_high) {
        d->low = xmalloc(lim->action_dim * sizeof(float));
        d->high = xmalloc(lim->action_dim * sizeof(float));
        memcpy(d->low, lim->action_low, lim->action_dim * sizeof(float));
        memcpy(d->high, lim->action_high, lim->action_dim * sizeof(float));
    }
    d->lim.action_low = d->low;
    d->lim.action_high = d->high;
    d->arena.cap = d->lim.max_message_bytes + ARENA_SLACK_BYTES;
    d->arena.base = xaligned_alloc(d->arena.cap);
    d->allocator.alloc = s_arena_alloc;
    d->allocator.free = s_arena_free;
    d->allocator.allocator_data = &d->arena;
    return d;
}

void wire_decoder_destroy(wire_decoder_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    wire_decoder_t *d = *self_p;
    free(d->low);
    free(d->high);
    s_arena_reset(&d->arena);
    free(d->arena.overflow);
    free(d->arena.base);
    free(d);
    *self_p = NULL;
}

const char *wire_decoder_last_error(const wire_decoder_t *self) { return self->last_error; }

static int s_err(wire_decoder_t *d, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int s_err(wire_decoder_t *d, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    apex_verrf(d->last_error, sizeof d->last_error, code, fmt, ap);
    va_end(ap);
    return code;
}

// ---------------------------------------------------------------------------------------
// Validation helpers.

// Finite test on the bit pattern: the exponent is all ones for Inf and NaN. Written so that
// the compiler vectorises it; this runs over every float that arrives.
static int s_all_finite(const float *x, size_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)x;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= ((u[i] & 0x7f800000u) == 0x7f800000u);
    }
    return bad == 0;
}

static int s_all_in(const float *x, size_t n, float lo, float hi) {
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        ok &= (x[i] >= lo) & (x[i] <= hi); // false for NaN as well
    }
    return ok;
}

// An array field must hold exactly count * elem bytes (or be empty, if optional).
static int s_len_ok(const ProtobufCBinaryData *b, size_t count, size_t elem, int optional) {
    if (optional && b->len == 0) {
        return 1;
    }
    return b->len == count * elem;
}

// count in [min, max_count]; min is 1 except for a frame-mode batch that carries frames.
static int s_count_ok(wire_decoder_t *d, uint32_t count, uint32_t min, const char *what) {
    if (count < min || count > d->lim.max_count) {
        return s_err(d, APEX_EINVAL, "%s: count %u not in [%u, %u]", what, count, min,
                     d->lim.max_count);
    }
    return APEX_OK;
}

// Views of bytes fields; aligned for their type (see "Alignment of the views" above).
#define F32(b) ((const float *)(const void *)(b).data)
#define U32(b) ((const uint32_t *)(const void *)(b).data)
#define U64(b) ((const uint64_t *)(const void *)(b).data)

static int s_actor_ok(wire_decoder_t *d, const char *what, uint32_t actor_id) {
    if (d->lim.max_actors && actor_id >= d->lim.max_actors) {
        return s_err(d, APEX_EINVAL, "%s: actor_id %u is not below [actor] num_actors %u", what,
                     actor_id, d->lim.max_actors);
    }
    return APEX_OK;
}

// ---------------------------------------------------------------------------------------
// Per-message decoding.

static const char *s_dtype_name(uint32_t t) {
    return t == WIRE_OBS_FLOAT32 ? "float32" : t == WIRE_OBS_UINT8 ? "uint8" : "unknown";
}

// The rows of a TransitionBatch or SampleReply. obs and next_obs hold obs_rows rows: count,
// or 0 in a frame-mode batch (whose observations are its frames); count may be 0 when
// min_count is (a frame-mode batch of frames only).
static int s_rows_ok(wire_decoder_t *d, const char *what, uint32_t count, uint32_t min_count,
                     uint32_t obs_rows, uint32_t obs_dim, uint32_t obs_dtype,
                     const ProtobufCBinaryData *obs, uint32_t action_dim,
                     const ProtobufCBinaryData *actions, const ProtobufCBinaryData *rewards,
                     const ProtobufCBinaryData *discounts, const ProtobufCBinaryData *next_obs) {
    int rc = s_count_ok(d, count, min_count, what);
    if (rc) {
        return rc;
    }
    if (action_dim != d->lim.action_dim) {
        return s_err(d, APEX_EINVAL, "%s: action_dim %u (%s actions), the run's is %u", what,
                     action_dim, action_dim ? "continuous" : "discrete", d->lim.action_dim);
    }
    if (obs_dim != d->lim.obs_dim) {
        return s_err(d, APEX_EINVAL, "%s: obs_dim %u, expected %u", what, obs_dim, d->lim.obs_dim);
    }
    if (obs_dtype != d->lim.obs_dtype) {
        return s_err(d, APEX_EINVAL, "%s: observations of dtype %s (%u), the run's are %s", what,
                     s_dtype_name(obs_dtype), obs_dtype, s_dtype_name(d->lim.obs_dtype));
    }
    size_t n_obs = (size_t)obs_rows * obs_dim, elem = wire_obs_elem_bytes(obs_dtype);
    if (!s_len_ok(obs, n_obs, elem, 0) || !s_len_ok(next_obs, n_obs, elem, 0) ||
        !s_len_ok(actions, (size_t)count * (action_dim ? action_dim : 1), 4, 0) ||
        !s_len_ok(rewards, count, 4, 0) || !s_len_ok(discounts, count, 4, 0)) {
        return s_err(d, APEX_EPROTO, "%s: array lengths do not match count %u x obs_dim %u", what,
                     count, obs_dim);
    }
    // Any byte is a valid uint8 observation; float32 ones must be finite.
    int obs_ok = obs_dtype != WIRE_OBS_FLOAT32 ||
                 (s_all_finite(F32(*obs), n_obs) && s_all_finite(F32(*next_obs), n_obs));
    if (!obs_ok || !s_all_finite(F32(*rewards), count)) {
        return s_err(d, APEX_EINVAL, "%s: non-finite observation or reward", what);
    }
    if (!s_all_in(F32(*discounts), count, 0.0f, WIRE_DISCOUNT_MAX)) {
        return s_err(d, APEX_EINVAL, "%s: discount outside [0, 1] or NaN", what);
    }
    if (action_dim) {
        if (!s_all_finite(F32(*actions), (size_t)count * action_dim)) {
            return s_err(d, APEX_EINVAL, "%s: non-finite continuous action", what);
        }
        if (d->low) {
            const float *a = F32(*actions);
            for (size_t k = 0; k < (size_t)count * action_dim; k++) {
                size_t j = k % action_dim;
                if (!(a[k] >= d->low[j] && a[k] <= d->high[j])) {
                    return s_err(d, APEX_EINVAL, "%s: action[%zu] = %g at row %zu not in [%g, %g]",
                                 what, j, (double)a[k], k / action_dim, (double)d->low[j],
                                 (double)d->high[j]);
                }
            }
        }
        return APEX_OK;
    }
    const int32_t *a = (const int32_t *)(const void *)actions->data;
    for (uint32_t i = 0; i < count; i++) {
        if (a[i] < 0 || (uint32_t)a[i] >= d->lim.n_actions) {
            return s_err(d, APEX_EINVAL, "%s: action %d at row %u not in [0, %u)", what, a[i], i,
                         d->lim.n_actions);
        }
    }
    return APEX_OK;
}

// The batch's layout (wire.h) must be the run's: whole observations or frames of its K.
static int s_layout_ok(wire_decoder_t *d, const Apex__TransitionBatch *m) {
    uint32_t want = d->lim.frame_stack, got = m->frame_stack;
    if (got == want) {
        // The frame fields mean nothing without frame_stack: a peer that sets them is broken.
        if (got == 0 &&
            (m->first_frame || m->frame_count || m->frames.len || m->frame_prev.len ||
             m->obs_frames.len || m->next_frames.len || m->frame_codec || m->frame_sizes.len)) {
            return s_err(d, APEX_EPROTO, "TransitionBatch: frame fields with frame_stack 0");
        }
        if (got != 0 && m->frame_codec != d->lim.frame_codec) {
            return s_err(d, APEX_EINVAL,
                         "TransitionBatch: frames compressed with %s (codec %u), the run's "
                         "[replay] compress is %s",
                         fcodec_name((int)m->frame_codec), m->frame_codec,
                         fcodec_name((int)d->lim.frame_codec));
        }
        return APEX_OK;
    }
    if (want == 0) {
        return s_err(d, APEX_EINVAL,
                     "TransitionBatch: frame_stack %u, but frame mode not configured (the "
                     "run's frame_stack is 0)",
                     got);
    }
    if (got == 0) {
        return s_err(d, APEX_EINVAL,
                     "TransitionBatch: whole observations where frames are configured "
                     "(frame_stack 0, the run's is %u)",
                     want);
    }
    return s_err(d, APEX_EINVAL, "TransitionBatch: frame_stack %u, the run's is %u", got, want);
}

// A frame-mode batch's frames, links and rows' frame numbers (wire.h), after s_rows_ok.
static int s_frames_ok(wire_decoder_t *d, const Apex__TransitionBatch *m) {
    uint32_t k = m->frame_stack, n = m->frame_count;
    if (m->obs_dim % k) {
        return s_err(d, APEX_EINVAL,
                     "TransitionBatch: obs_dim %u is not a multiple of frame_stack %u", m->obs_dim,
                     k);
    }
    if (n > d->lim.max_frames) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: %u frames, at most %u", n,
                     d->lim.max_frames);
    }
    size_t n_elems = (size_t)n * (m->obs_dim / k);
    size_t frame_bytes = (size_t)(m->obs_dim / k) * wire_obs_elem_bytes(m->obs_dtype);
    int packed = m->frame_codec != FCODEC_NONE;
    if ((packed ? !s_len_ok(&m->frame_sizes, n, 4, 0)
                : (m->frame_sizes.len ||
                   !s_len_ok(&m->frames, n_elems, wire_obs_elem_bytes(m->obs_dtype), 0))) ||
        !s_len_ok(&m->frame_prev, n, 4, 0) || !s_len_ok(&m->obs_frames, m->count, 8, 0) ||
        !s_len_ok(&m->next_frames, m->count, 8, 0)) {
        return s_err(d, APEX_EPROTO,
                     "TransitionBatch: frame array lengths do not match %u frames of %u "
                     "elements, count %u",
                     n, m->obs_dim / k, m->count);
    }
    if (packed) {
        // Blobs: each at most the codec's bound for one frame (a larger one cannot be a
        // frame's), and together exactly the bytes sent. Their contents the receiver checks.
        const uint32_t *sz = U32(m->frame_sizes);
        size_t bound = fcodec_bound((int)m->frame_codec, frame_bytes), sum = 0;
        for (uint32_t i = 0; i < n; i++) {
            if (sz[i] < 1 || sz[i] > bound) {
                return s_err(d, APEX_EINVAL,
                             "TransitionBatch: compressed frame %u of %u bytes, not in [1, %zu]", i,
                             sz[i], bound);
            }
            sum += sz[i];
        }
        if (sum != m->frames.len) {
            return s_err(d, APEX_EPROTO,
                         "TransitionBatch: %zu bytes of compressed frames, their sizes sum to %zu",
                         m->frames.len, sum);
        }
    } else if (m->obs_dtype == APEX__OBS_DTYPE__OBS_FLOAT32 &&
               !s_all_finite(F32(m->frames), n_elems)) {
        // Any byte is a valid uint8 frame; float32 ones must be finite, as observations are.
        return s_err(d, APEX_EINVAL, "TransitionBatch: non-finite frame");
    }
    if (m->first_frame > WIRE_FRAME_MAX - n) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: first_frame %llu + %u frames above %llu",
                     (unsigned long long)m->first_frame, n, (unsigned long long)WIRE_FRAME_MAX);
    }
    // Below, every frame number is at most WIRE_FRAME_MAX: no sum overflows.
    const uint32_t *prev = U32(m->frame_prev);
    for (uint32_t i = 0; i < n; i++) {
        if (prev[i] > m->first_frame + i) {
            return s_err(d, APEX_EINVAL,
                         "TransitionBatch: frame %llu links %u back, before frame 0",
                         (unsigned long long)(m->first_frame + i), prev[i]);
        }
    }
    // A row names frames already sent (in this batch or an earlier one), next_obs's later.
    uint64_t end = m->first_frame + n;
    const uint64_t *of = U64(m->obs_frames), *nf = U64(m->next_frames);
    for (uint32_t r = 0; r < m->count; r++) {
        if (!(of[r] < nf[r] && nf[r] < end)) {
            return s_err(d, APEX_EINVAL,
                         "TransitionBatch: row %u names frames %llu -> %llu, not obs < next "
                         "< %llu (the frames sent)",
                         r, (unsigned long long)of[r], (unsigned long long)nf[r],
                         (unsigned long long)end);
        }
    }
    return APEX_OK;
}

static int s_decode_batch(wire_decoder_t *d, const Apex__TransitionBatch *m, wire_batch_t *o) {
    int rc = s_layout_ok(d, m);
    if (rc) {
        return rc;
    }
    int frame_mode = m->frame_stack != 0;
    // In frame mode the observations are the frames: obs and next_obs stay empty.
    if (frame_mode && (m->obs.len || m->next_obs.len)) {
        return s_err(d, APEX_EPROTO,
                     "TransitionBatch: %zu obs and %zu next_obs bytes in frame mode (must be "
                     "empty)",
                     m->obs.len, m->next_obs.len);
    }
    // A frame-mode batch may carry frames and no rows (frames whose n-step transitions are
    // not complete yet).
    // So may a deterministic period's last batch: the period ends when it ends, rows or not.
    if (m->det_period_end && m->det_period == 0) {
        return s_err(d, APEX_EPROTO, "TransitionBatch: det_period_end without det_period");
    }
    if (m->det_period > WIRE_SEQ_MAX) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: det_period %llu above %llu",
                     (unsigned long long)m->det_period, (unsigned long long)WIRE_SEQ_MAX);
    }
    if (!m->det_period_end && (m->det_frames || m->det_episodes || m->det_returns.len)) {
        return s_err(d, APEX_EPROTO,
                     "TransitionBatch: det_frames, det_episodes or det_returns without "
                     "det_period_end");
    }
    if (m->det_returns.len % 4 || m->det_returns.len / 4 > WIRE_DET_RETURNS_MAX ||
        m->det_returns.len / 4 > m->det_episodes) {
        return s_err(d, APEX_EPROTO,
                     "TransitionBatch: %zu det_returns bytes (at most %d float32s, and at most "
                     "det_episodes = %llu)",
                     m->det_returns.len, WIRE_DET_RETURNS_MAX, (unsigned long long)m->det_episodes);
    }
    if (!s_all_finite(F32(m->det_returns), m->det_returns.len / 4)) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: non-finite det_returns");
    }
    if (m->det_frames > WIRE_FRAMES_MAX || m->det_episodes > WIRE_FRAMES_MAX) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: det_frames or det_episodes above %llu",
                     (unsigned long long)WIRE_FRAMES_MAX);
    }
    uint32_t min_count = (frame_mode && m->frame_count >= 1) || m->det_period_end ? 0 : 1;
    rc = s_rows_ok(d, "TransitionBatch", m->count, min_count, frame_mode ? 0 : m->count, m->obs_dim,
                   (uint32_t)m->obs_dtype, &m->obs, m->action_dim, &m->actions, &m->rewards,
                   &m->discounts, &m->next_obs);
    if (rc) {
        return rc;
    }
    if (frame_mode && (rc = s_frames_ok(d, m)) != APEX_OK) {
        return rc;
    }
    if (!s_len_ok(&m->priorities, m->count, 4, 1)) {
        return s_err(d, APEX_EPROTO, "TransitionBatch: %zu priority bytes for %u rows",
                     m->priorities.len, m->count);
    }
    if (m->priorities.len && !s_all_in(F32(m->priorities), m->count, 0.0f, WIRE_PRIORITY_MAX)) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: priority negative, above %g or NaN",
                     (double)WIRE_PRIORITY_MAX);
    }
    rc = s_actor_ok(d, "TransitionBatch", m->actor_id);
    if (rc) {
        return rc;
    }
    if (m->seq > WIRE_SEQ_MAX) {
        return s_err(d, APEX_EINVAL, "TransitionBatch: seq %llu above %llu",
                     (unsigned long long)m->seq, (unsigned long long)WIRE_SEQ_MAX);
    }
    *o = (wire_batch_t){
        .actor_id = m->actor_id,
        .epoch = m->epoch,
        .seq = m->seq,
        .weights_version = m->weights_version,
        .count = m->count,
        .obs_dim = m->obs_dim,
        .obs_dtype = (uint32_t)m->obs_dtype,
        .obs = m->obs.data,
        .actions = m->action_dim ? NULL : (const int32_t *)(const void *)m->actions.data,
        .action_dim = m->action_dim,
        .cont_actions = m->action_dim ? F32(m->actions) : NULL,
        .rewards = F32(m->rewards),
        .discounts = F32(m->discounts),
        .next_obs = m->next_obs.data,
        .priorities = m->priorities.len ? F32(m->priorities) : NULL,
        .frame_stack = m->frame_stack,
        .first_frame = m->first_frame,
        .frame_count = m->frame_count,
        .frames = m->frames.data,
        .frame_prev = U32(m->frame_prev),
        .obs_frames = U64(m->obs_frames),
        .next_frames = U64(m->next_frames),
        .frame_codec = m->frame_codec,
        .frame_sizes = m->frame_codec ? U32(m->frame_sizes) : NULL,
        .det_period = m->det_period,
        .det_period_end = m->det_period_end,
        .det_frames = m->det_frames,
        .det_episodes = m->det_episodes,
        .det_returns = m->det_returns.len ? F32(m->det_returns) : NULL,
        .det_n_returns = (uint32_t)(m->det_returns.len / 4),
    };
    return APEX_OK;
}

// p^alpha values on the wire (a learner's minimum, a server's total and minimum): finite, >= 0.
static int s_priority_ok(double v) { return v >= 0.0 && v <= WIRE_MASS_MAX; } // false for NaN

static int s_decode_sample_request(wire_decoder_t *d, const Apex__SampleRequest *m,
                                   wire_sample_request_t *o) {
    if (!s_priority_ok(m->min_priority)) {
        return s_err(d, APEX_EINVAL, "SampleRequest: min_priority %g not in [0, %g]",
                     m->min_priority, WIRE_MASS_MAX);
    }
    if (m->stats_only) {
        // A stats request carries no rows; the zero batch_size is what makes an older
        // server refuse it instead of serving a batch.
        if (m->batch_size != 0 || m->batches != 0) {
            return s_err(d, APEX_EINVAL, "SampleRequest: stats_only with %u batches of %u rows",
                         m->batches, m->batch_size);
        }
        if (m->det_index != 0 || (m->det_horizon != 0 && m->stats_after != 0)) {
            return s_err(d, APEX_EINVAL,
                         "SampleRequest: stats_only with det_index %llu, or with both "
                         "stats_after and det_horizon",
                         (unsigned long long)m->det_index);
        }
        *o = (wire_sample_request_t){.id = m->id,
                                     .batches = 1,
                                     .min_priority = m->min_priority,
                                     .stats_only = 1,
                                     .stats_after = m->stats_after,
                                     .det_horizon = m->det_horizon};
        return APEX_OK;
    }
    if (m->stats_after != 0 || m->det_horizon != 0) {
        return s_err(d, APEX_EINVAL,
                     "SampleRequest: stats_after or det_horizon without stats_only");
    }
    int rc = s_count_ok(d, m->batch_size, 1, "SampleRequest");
    if (rc) {
        return rc;
    }
    if (!(m->beta >= 0.0f && m->beta <= WIRE_BETA_MAX)) {
        return s_err(d, APEX_EINVAL, "SampleRequest: beta %g not in [0, %g]", (double)m->beta,
                     (double)WIRE_BETA_MAX);
    }
    uint32_t k = m->batches ? m->batches : 1;
    if (k > WIRE_MAX_BATCHES_PER_REQUEST ||
        (uint64_t)k * m->batch_size > (uint64_t)d->lim.max_count) {
        return s_err(d, APEX_EINVAL,
                     "SampleRequest: %u batches of %u rows (at most %u batches, "
                     "%u rows)",
                     m->batches, m->batch_size, WIRE_MAX_BATCHES_PER_REQUEST, d->lim.max_count);
    }
    *o = (wire_sample_request_t){.id = m->id,
                                 .batch_size = m->batch_size,
                                 .beta = m->beta,
                                 .batches = k,
                                 .min_priority = m->min_priority,
                                 .det_index = m->det_index};
    return APEX_OK;
}

// A sharded learner samples by these numbers (docs/architecture.md "Sharded replay"), so
// they are validated like everything else: priorities finite and >= 0 (a NaN total reads as
// 0, as it always did), the shard below the shard count.
static int s_stats_from(wire_decoder_t *d, const Apex__ReplayStats *s, wire_replay_stats_t *o) {
    memset(o, 0, sizeof *o);
    o->shards = 1;
    if (!s) {
        return APEX_OK;
    }
    double total = s->total_priority == s->total_priority ? s->total_priority : 0.0;
    uint32_t shards = s->shards ? s->shards : 1;
    if (!s_priority_ok(total) || !s_priority_ok(s->min_priority)) {
        return s_err(d, APEX_EINVAL, "ReplayStats: priority total %g / minimum %g not in [0, %g]",
                     s->total_priority, s->min_priority, WIRE_MASS_MAX);
    }
    if (s->shard >= shards) {
        return s_err(d, APEX_EINVAL, "ReplayStats: shard %u of %u", s->shard, shards);
    }
    if (!isfinite(s->det_return_sum) || s->det_return_n > WIRE_DET_RETURNS_MAX * (uint64_t)shards ||
        s->det_env_frames > WIRE_FRAMES_MAX || s->det_episodes > WIRE_FRAMES_MAX) {
        return s_err(d, APEX_EINVAL,
                     "ReplayStats: deterministic actor columns out of range (returns sum %g of "
                     "%u, frames %llu, episodes %llu)",
                     s->det_return_sum, s->det_return_n, (unsigned long long)s->det_env_frames,
                     (unsigned long long)s->det_episodes);
    }
    *o = (wire_replay_stats_t){
        .size = s->size,
        .capacity = s->capacity,
        .inserted = s->inserted,
        .sampled = s->sampled,
        .updated = s->updated,
        .stale_updates = s->stale_updates,
        .bad_messages = s->bad_messages,
        .limiter_waits = s->limiter_waits,
        .duplicate_batches = s->duplicate_batches,
        .total_priority = total,
        .min_priority = s->min_priority,
        .shard = s->shard,
        .shards = shards,
        .det_horizon = s->det_horizon,
        .det_served = s->det_served,
        .det_env_frames = s->det_env_frames,
        .det_episodes = s->det_episodes,
        .det_return_sum = s->det_return_sum,
        .det_return_n = s->det_return_n,
        .det_version_min = s->det_version_min,
    };
    return APEX_OK;
}

static int s_decode_sample_reply(wire_decoder_t *d, const Apex__SampleReply *m,
                                 wire_sample_reply_t *o) {
    memset(o, 0, sizeof *o);
    o->id = m->id;
    int src = s_stats_from(d, m->stats, &o->stats);
    if (src) {
        return src;
    }
    if (m->status == APEX__SAMPLE_STATUS__SAMPLE_NOT_READY ||
        m->status == APEX__SAMPLE_STATUS__SAMPLE_REFUSED) {
        o->status = m->status == APEX__SAMPLE_STATUS__SAMPLE_NOT_READY ? WIRE_SAMPLE_NOT_READY
                                                                       : WIRE_SAMPLE_REFUSED;
        return APEX_OK;
    }
    if (m->status != APEX__SAMPLE_STATUS__SAMPLE_OK) {
        return s_err(d, APEX_EINVAL, "SampleReply: unknown status %d", (int)m->status);
    }
    int rc = s_rows_ok(d, "SampleReply", m->count, 1, m->count, m->obs_dim, (uint32_t)m->obs_dtype,
                       &m->obs, m->action_dim, &m->actions, &m->rewards, &m->discounts,
                       &m->next_obs);
    if (rc) {
        return rc;
    }
    if (!s_len_ok(&m->keys, m->count, 8, 0) || !s_len_ok(&m->is_weights, m->count, 4, 0)) {
        return s_err(d, APEX_EPROTO, "SampleReply: keys/weights lengths do not match count %u",
                     m->count);
    }
    if (!s_all_in(F32(m->is_weights), m->count, 0.0f, WIRE_IS_WEIGHT_MAX)) {
        return s_err(d, APEX_EINVAL, "SampleReply: importance weight outside [0, 1] or NaN");
    }
    o->status = WIRE_SAMPLE_OK;
    o->count = m->count;
    o->obs_dim = m->obs_dim;
    o->obs_dtype = (uint32_t)m->obs_dtype;
    o->keys = (const uint64_t *)(const void *)m->keys.data;
    o->is_weights = F32(m->is_weights);
    o->obs = m->obs.data;
    o->actions = m->action_dim ? NULL : (const int32_t *)(const void *)m->actions.data;
    o->action_dim = m->action_dim;
    o->cont_actions = m->action_dim ? F32(m->actions) : NULL;
    o->rewards = F32(m->rewards);
    o->discounts = F32(m->discounts);
    o->next_obs = m->next_obs.data;
    return APEX_OK;
}

static int s_decode_priority_update(wire_decoder_t *d, const Apex__PriorityUpdate *m,
                                    wire_priority_update_t *o) {
    // A deterministic learner sends an update for every batch, an empty one when every
    // priority was unusable (NaN): the replay counts them to know when a request's are in.
    int rc = s_count_ok(d, m->count, m->det_index ? 0 : 1, "PriorityUpdate");
    if (rc) {
        return rc;
    }
    if (!s_len_ok(&m->keys, m->count, 8, 0) || !s_len_ok(&m->priorities, m->count, 4, 0)) {
        return s_err(d, APEX_EPROTO, "PriorityUpdate: lengths do not match count %u", m->count);
    }
    if (!s_all_in(F32(m->priorities), m->count, 0.0f, WIRE_PRIORITY_MAX)) {
        return s_err(d, APEX_EINVAL, "PriorityUpdate: priority negative, above %g or NaN",
                     (double)WIRE_PRIORITY_MAX);
    }
    *o = (wire_priority_update_t){.count = m->count,
                                  .keys = (const uint64_t *)(const void *)m->keys.data,
                                  .priorities = F32(m->priorities),
                                  .det_index = m->det_index};
    return APEX_OK;
}

static int s_decode_weights(wire_decoder_t *d, const Apex__Weights *m, wire_weights_t *o) {
    if (d->lim.num_params == 0 || m->num_params != d->lim.num_params) {
        return s_err(d, APEX_EINVAL, "Weights: %u parameters, expected %u", m->num_params,
                     d->lim.num_params);
    }
    if (!s_len_ok(&m->params, m->num_params, 4, 0)) {
        return s_err(d, APEX_EPROTO, "Weights: %zu bytes for %u parameters", m->params.len,
                     m->num_params);
    }
    if (!s_all_finite(F32(m->params), m->num_params)) {
        return s_err(d, APEX_EINVAL, "Weights: non-finite parameter");
    }
    *o = (wire_weights_t){.version = m->version,
                          .learner_step = m->learner_step,
                          .env_frames = m->env_frames,
                          .num_params = m->num_params,
                          .params = F32(m->params),
                          .det_target = m->det_target};
    return APEX_OK;
}

static int s_decode_actor_stats(wire_decoder_t *d, const Apex__ActorStats *m,
                                wire_actor_stats_t *o) {
    uint32_t n = m->n_episodes;
    if (n > d->lim.max_episodes) {
        return s_err(d, APEX_EINVAL, "ActorStats: %u episodes, at most %u", n, d->lim.max_episodes);
    }
    if (!s_len_ok(&m->returns, n, 4, 0) || !s_len_ok(&m->lengths, n, 4, 0) ||
        !s_len_ok(&m->epsilons, n, 4, 0)) {
        return s_err(d, APEX_EPROTO, "ActorStats: lengths do not match n_episodes %u", n);
    }
    if (n && (!s_all_finite(F32(m->returns), n) ||
              !s_all_in(F32(m->epsilons), n, 0.0f, WIRE_EPSILON_MAX))) {
        return s_err(d, APEX_EINVAL, "ActorStats: non-finite return or epsilon outside [0, 1]");
    }
    if (m->frames_delta > m->frames || m->frames > WIRE_FRAMES_MAX) {
        return s_err(d, APEX_EINVAL, "ActorStats: frames_delta %llu, frames %llu (at most %llu)",
                     (unsigned long long)m->frames_delta, (unsigned long long)m->frames,
                     (unsigned long long)WIRE_FRAMES_MAX);
    }
    int rc = s_actor_ok(d, "ActorStats", m->actor_id);
    if (rc) {
        return rc;
    }
    *o = (wire_actor_stats_t){.actor_id = m->actor_id,
                              .frames = m->frames,
                              .frames_delta = m->frames_delta,
                              .weights_version = m->weights_version,
                              .dropped_batches = m->dropped_batches,
                              .env_faults = m->env_faults,
                              .episodes_dropped = m->episodes_dropped,
                              .n_episodes = n,
                              .returns = n ? F32(m->returns) : NULL,
                              .lengths = n ? (const uint32_t *)(const void *)m->lengths.data : NULL,
                              .epsilons = n ? F32(m->epsilons) : NULL};
    return APEX_OK;
}

static int s_decode_body(wire_decoder_t *d, const Apex__Envelope *env, wire_msg_t *out) {
    switch (env->body_case) {
    case APEX__ENVELOPE__BODY_TRANSITION_BATCH:
        out->type = WIRE_MSG_TRANSITION_BATCH;
        return s_decode_batch(d, env->transition_batch, &out->u.batch);
    case APEX__ENVELOPE__BODY_SAMPLE_REQUEST:
        out->type = WIRE_MSG_SAMPLE_REQUEST;
        return s_decode_sample_request(d, env->sample_request, &out->u.sample_request);
    case APEX__ENVELOPE__BODY_SAMPLE_REPLY:
        out->type = WIRE_MSG_SAMPLE_REPLY;
        return s_decode_sample_reply(d, env->sample_reply, &out->u.sample_reply);
    case APEX__ENVELOPE__BODY_PRIORITY_UPDATE:
        out->type = WIRE_MSG_PRIORITY_UPDATE;
        return s_decode_priority_update(d, env->priority_update, &out->u.priority_update);
    case APEX__ENVELOPE__BODY_WEIGHTS:
        out->type = WIRE_MSG_WEIGHTS;
        return s_decode_weights(d, env->weights, &out->u.weights);
    case APEX__ENVELOPE__BODY_ACTOR_STATS:
        out->type = WIRE_MSG_ACTOR_STATS;
        return s_decode_actor_stats(d, env->actor_stats, &out->u.actor_stats);
    case APEX__ENVELOPE__BODY_INSERT_ACK:
        out->type = WIRE_MSG_INSERT_ACK;
        if (env->insert_ack->n_seqs > WIRE_ACK_MAX_SEQS - 1) {
            return s_err(d, APEX_EINVAL, "InsertAck with %zu seqs, more than %d",
                         env->insert_ack->n_seqs + 1, WIRE_ACK_MAX_SEQS);
        }
        out->u.insert_ack =
            (wire_insert_ack_t){.actor_id = env->insert_ack->actor_id,
                                .seq = env->insert_ack->seq,
                                .n_more = (uint32_t)env->insert_ack->n_seqs,
                                .more = env->insert_ack->n_seqs ? env->insert_ack->seqs : NULL};
        return APEX_OK;
    case APEX__ENVELOPE__BODY_WEIGHTS_REQUEST:
        out->type = WIRE_MSG_WEIGHTS_REQUEST;
        out->u.weights_request.have_version = env->weights_request->have_version;
        out->u.weights_request.det_target = env->weights_request->det_target;
        return APEX_OK;
    default:
        return s_err(d, APEX_EPROTO, "envelope without a known body (case %d)",
                     (int)env->body_case);
    }
}

int wire_decode(wire_decoder_t *self, const void *buf, size_t len, wire_msg_t *out) {
    memset(out, 0, sizeof *out);
    self->last_error[0] = '\0';
    if (len > self->lim.max_message_bytes) {
        return s_err(self, APEX_ENOSPC, "message of %zu bytes exceeds the limit of %zu", len,
                     self->lim.max_message_bytes);
    }
    s_arena_reset(&self->arena);
    Apex__Envelope *env = apex__envelope__unpack(&self->allocator, len, buf);
    if (!env) {
        return s_err(self, APEX_EPROTO, "not a valid apex message (%zu bytes)", len);
    }
    if (env->version != APEX_PROTOCOL_VERSION) {
        return s_err(self, APEX_EVERSION, "protocol version %u, this build speaks %u", env->version,
                     APEX_PROTOCOL_VERSION);
    }
    int rc = s_decode_body(self, env, out);
    if (rc != APEX_OK) {
        // Keep the kind, so that callers can count bad messages per kind; drop the views.
        wire_msg_type kind = out->type;
        memset(out, 0, sizeof *out);
        out->type = kind;
    }
    // The arena owns env; it is released by the next reset. No free_unpacked is needed, and
    // no protobuf-c pointer escapes: the views in out point at arena bytes, not at env.
    return rc;
}

// ---------------------------------------------------------------------------------------
// Row buffers

void wire_rows_init(wire_rows_t *r, size_t rows, size_t obs_bytes, uint32_t action_dim) {
    r->action_dim = action_dim;
    r->keys = xmalloc(rows * sizeof *r->keys);
    r->is_weights = xmalloc(rows * sizeof(float));
    r->rewards = xmalloc(rows * sizeof(float));
    r->discounts = xmalloc(rows * sizeof(float));
    r->obs = xmalloc(rows * obs_bytes);
    r->next_obs = xmalloc(rows * obs_bytes);
    r->actions = action_dim ? NULL : xmalloc(rows * sizeof(int32_t));
    r->cont_actions = action_dim ? xmalloc(rows * action_dim * sizeof(float)) : NULL;
}

void wire_rows_fini(wire_rows_t *r) {
    free(r->keys);
    free(r->is_weights);
    free(r->rewards);
    free(r->discounts);
    free(r->obs);
    free(r->next_obs);
    free(r->actions);
    free(r->cont_actions);
    memset(r, 0, sizeof *r);
}

void wire_rows_copy(wire_rows_t *r, size_t at, const wire_sample_reply_t *reply, size_t n,
                    size_t obs_bytes) {
    memcpy(r->keys + at, reply->keys, n * sizeof *r->keys);
    memcpy(r->is_weights + at, reply->is_weights, n * sizeof(float));
    memcpy(r->rewards + at, reply->rewards, n * sizeof(float));
    memcpy(r->discounts + at, reply->discounts, n * sizeof(float));
    memcpy(r->obs + at * obs_bytes, reply->obs, n * obs_bytes);
    memcpy(r->next_obs + at * obs_bytes, reply->next_obs, n * obs_bytes);
    if (r->action_dim) {
        memcpy(r->cont_actions + at * r->action_dim, reply->cont_actions,
               n * r->action_dim * sizeof(float));
    } else {
        memcpy(r->actions + at, reply->actions, n * sizeof(int32_t));
    }
}

// ---------------------------------------------------------------------------------------
// Encoding. The protobuf-c structs are built on the stack and point at the caller's arrays
// (protobuf-c only reads them while packing), so the only copy is the pack itself.

void wire_buf_init(wire_buf_t *b, size_t initial_cap) {
    b->cap = initial_cap ? initial_cap : 256;
    b->data = xmalloc(b->cap);
    b->len = 0;
}

void wire_buf_fini(wire_buf_t *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static ProtobufCBinaryData s_bin(const void *p, size_t bytes) {
    ProtobufCBinaryData b = {.len = p ? bytes : 0, .data = (uint8_t *)(uintptr_t)p};
    return b;
}

static void s_pack(const Apex__Envelope *env, wire_buf_t *out) {
    size_t n = apex__envelope__get_packed_size(env);
    if (n > out->cap) {
        // Grows only for a message larger than any before: not on the steady-state path.
        out->cap = n + n / 4;
        out->data = xrealloc(out->data, out->cap);
    }
    out->len = apex__envelope__pack(env, out->data);
    APEX_ASSERT(out->len == n);
}

void wire_encode_version(const wire_msg_t *msg, uint32_t version, wire_buf_t *out) {
    Apex__Envelope env = APEX__ENVELOPE__INIT;
    Apex__TransitionBatch tb = APEX__TRANSITION_BATCH__INIT;
    Apex__SampleRequest sq = APEX__SAMPLE_REQUEST__INIT;
    Apex__SampleReply sr = APEX__SAMPLE_REPLY__INIT;
    Apex__ReplayStats rs = APEX__REPLAY_STATS__INIT;
    Apex__PriorityUpdate pu = APEX__PRIORITY_UPDATE__INIT;
    Apex__Weights w = APEX__WEIGHTS__INIT;
    Apex__ActorStats as = APEX__ACTOR_STATS__INIT;
    Apex__InsertAck ack = APEX__INSERT_ACK__INIT;
    Apex__WeightsRequest wr = APEX__WEIGHTS_REQUEST__INIT;
    env.version = version;
    switch (msg->type) {
    case WIRE_MSG_TRANSITION_BATCH: {
        const wire_batch_t *b = &msg->u.batch;
        size_t n = b->count,
               no = (size_t)b->count * b->obs_dim * wire_obs_elem_bytes(b->obs_dtype); // bytes
        tb.actor_id = b->actor_id;
        tb.epoch = b->epoch;
        tb.seq = b->seq;
        tb.weights_version = b->weights_version;
        tb.count = b->count;
        tb.obs_dim = b->obs_dim;
        tb.obs_dtype = (Apex__ObsDtype)b->obs_dtype;
        tb.obs = s_bin(b->obs, no);
        tb.action_dim = b->action_dim;
        tb.actions = b->action_dim ? s_bin(b->cont_actions, n * 4 * b->action_dim)
                                   : s_bin(b->actions, n * 4);
        tb.rewards = s_bin(b->rewards, n * 4);
        tb.discounts = s_bin(b->discounts, n * 4);
        tb.next_obs = s_bin(b->next_obs, no);
        tb.priorities = s_bin(b->priorities, n * 4);
        if (b->frame_stack) {
            APEX_ASSERT(b->frame_stack >= 1 && b->obs_dim % b->frame_stack == 0);
            APEX_ASSERT(!b->obs && !b->next_obs); // the frames are the observations
            APEX_ASSERT(b->frame_count == 0 || (b->frames && b->frame_prev));
            APEX_ASSERT(n == 0 || (b->obs_frames && b->next_frames));
            APEX_ASSERT(!b->frame_codec || b->frame_count == 0 || b->frame_sizes);
            size_t nf = b->frame_count, fbytes = 0;
            if (b->frame_codec) {
                for (size_t i = 0; i < nf; i++) {
                    fbytes += b->frame_sizes[i];
                }
                tb.frame_codec = b->frame_codec;
                tb.frame_sizes = s_bin(b->frame_sizes, nf * 4);
            } else {
                fbytes = nf * (b->obs_dim / b->frame_stack) * wire_obs_elem_bytes(b->obs_dtype);
            }
            tb.frame_stack = b->frame_stack;
            tb.first_frame = b->first_frame;
            tb.frame_count = b->frame_count;
            tb.frames = s_bin(b->frames, fbytes);
            tb.frame_prev = s_bin(b->frame_prev, nf * 4);
            tb.obs_frames = s_bin(b->obs_frames, n * 8);
            tb.next_frames = s_bin(b->next_frames, n * 8);
        } else {
            APEX_ASSERT(!b->first_frame && !b->frame_count && !b->frames && !b->frame_prev &&
                        !b->obs_frames && !b->next_frames && !b->frame_codec && !b->frame_sizes);
        }
        APEX_ASSERT(!b->det_period_end || b->det_period);
        APEX_ASSERT(b->det_period_end || (!b->det_frames && !b->det_episodes && !b->det_n_returns));
        APEX_ASSERT(b->det_n_returns <= WIRE_DET_RETURNS_MAX);
        tb.det_period = b->det_period;
        tb.det_period_end = b->det_period_end != 0;
        tb.det_frames = b->det_frames;
        tb.det_episodes = b->det_episodes;
        tb.det_returns = s_bin(b->det_returns, (size_t)b->det_n_returns * 4);
        env.body_case = APEX__ENVELOPE__BODY_TRANSITION_BATCH;
        env.transition_batch = &tb;
        break;
    }
    case WIRE_MSG_SAMPLE_REQUEST:
        sq.id = msg->u.sample_request.id;
        sq.batch_size = msg->u.sample_request.batch_size;
        sq.beta = msg->u.sample_request.beta;
        sq.batches = msg->u.sample_request.batches > 1 ? msg->u.sample_request.batches : 0;
        sq.min_priority = msg->u.sample_request.min_priority;
        sq.stats_only = msg->u.sample_request.stats_only != 0;
        sq.stats_after = msg->u.sample_request.stats_after;
        sq.det_index = msg->u.sample_request.det_index;
        sq.det_horizon = msg->u.sample_request.det_horizon;
        APEX_ASSERT(!sq.stats_only || (sq.batch_size == 0 && sq.batches == 0));
        env.body_case = APEX__ENVELOPE__BODY_SAMPLE_REQUEST;
        env.sample_request = &sq;
        break;
    case WIRE_MSG_SAMPLE_REPLY: {
        const wire_sample_reply_t *r = &msg->u.sample_reply;
        size_t n = r->count,
               no = (size_t)r->count * r->obs_dim * wire_obs_elem_bytes(r->obs_dtype); // bytes
        sr.id = r->id;
        sr.status = (Apex__SampleStatus)r->status;
        sr.count = r->count;
        sr.obs_dim = r->obs_dim;
        sr.obs_dtype = (Apex__ObsDtype)r->obs_dtype;
        sr.keys = s_bin(r->keys, n * 8);
        sr.is_weights = s_bin(r->is_weights, n * 4);
        sr.obs = s_bin(r->obs, no);
        sr.action_dim = r->action_dim;
        sr.actions = r->action_dim ? s_bin(r->cont_actions, n * 4 * r->action_dim)
                                   : s_bin(r->actions, n * 4);
        sr.rewards = s_bin(r->rewards, n * 4);
        sr.discounts = s_bin(r->discounts, n * 4);
        sr.next_obs = s_bin(r->next_obs, no);
        const wire_replay_stats_t *st = &r->stats;
        rs.size = st->size;
        rs.capacity = st->capacity;
        rs.inserted = st->inserted;
        rs.sampled = st->sampled;
        rs.updated = st->updated;
        rs.stale_updates = st->stale_updates;
        rs.bad_messages = st->bad_messages;
        rs.limiter_waits = st->limiter_waits;
        rs.duplicate_batches = st->duplicate_batches;
        rs.total_priority = st->total_priority;
        rs.min_priority = st->min_priority;
        rs.shard = st->shard;
        rs.shards = st->shards > 1 ? st->shards : 0; // one server: as older builds send it
        rs.det_horizon = st->det_horizon;
        rs.det_served = st->det_served;
        rs.det_env_frames = st->det_env_frames;
        rs.det_episodes = st->det_episodes;
        rs.det_return_sum = st->det_return_sum;
        rs.det_return_n = st->det_return_n;
        rs.det_version_min = st->det_version_min;
        sr.stats = &rs;
        env.body_case = APEX__ENVELOPE__BODY_SAMPLE_REPLY;
        env.sample_reply = &sr;
        break;
    }
    case WIRE_MSG_PRIORITY_UPDATE:
        pu.count = msg->u.priority_update.count;
        pu.keys = s_bin(msg->u.priority_update.keys, (size_t)pu.count * 8);
        pu.priorities = s_bin(msg->u.priority_update.priorities, (size_t)pu.count * 4);
        pu.det_index = msg->u.priority_update.det_index;
        env.body_case = APEX__ENVELOPE__BODY_PRIORITY_UPDATE;
        env.priority_update = &pu;
        break;
    case WIRE_MSG_WEIGHTS:
        w.version = msg->u.weights.version;
        w.learner_step = msg->u.weights.learner_step;
        w.env_frames = msg->u.weights.env_frames;
        w.num_params = msg->u.weights.num_params;
        w.params = s_bin(msg->u.weights.params, (size_t)w.num_params * 4);
        w.det_target = msg->u.weights.det_target;
        env.body_case = APEX__ENVELOPE__BODY_WEIGHTS;
        env.weights = &w;
        break;
    case WIRE_MSG_ACTOR_STATS: {
        const wire_actor_stats_t *a = &msg->u.actor_stats;
        as.actor_id = a->actor_id;
        as.frames = a->frames;
        as.frames_delta = a->frames_delta;
        as.weights_version = a->weights_version;
        as.dropped_batches = a->dropped_batches;
        as.env_faults = a->env_faults;
        as.episodes_dropped = a->episodes_dropped;
        as.n_episodes = a->n_episodes;
        as.returns = s_bin(a->returns, (size_t)a->n_episodes * 4);
        as.lengths = s_bin(a->lengths, (size_t)a->n_episodes * 4);
        as.epsilons = s_bin(a->epsilons, (size_t)a->n_episodes * 4);
        env.body_case = APEX__ENVELOPE__BODY_ACTOR_STATS;
        env.actor_stats = &as;
        break;
    }
    case WIRE_MSG_INSERT_ACK:
        ack.actor_id = msg->u.insert_ack.actor_id;
        ack.seq = msg->u.insert_ack.seq;
        APEX_ASSERT(msg->u.insert_ack.n_more <= WIRE_ACK_MAX_SEQS - 1);
        ack.n_seqs = msg->u.insert_ack.n_more;
        ack.seqs = (uint64_t *)msg->u.insert_ack.more; // protobuf-c only reads it here
        env.body_case = APEX__ENVELOPE__BODY_INSERT_ACK;
        env.insert_ack = &ack;
        break;
    case WIRE_MSG_WEIGHTS_REQUEST:
        wr.have_version = msg->u.weights_request.have_version;
        wr.det_target = msg->u.weights_request.det_target;
        env.body_case = APEX__ENVELOPE__BODY_WEIGHTS_REQUEST;
        env.weights_request = &wr;
        break;
    default:
        APEX_PANIC("wire_encode: message type %d", (int)msg->type);
    }
    s_pack(&env, out);
}

// wire_weights_encode_hole: protobuf-c hands a bytes field's data to the buffer's append in
// one call with the caller's pointer, so a sentinel pointer marks where the params go; the
// other appends (tags, lengths, the scalar fields) are copied. The sentinel is never read.
static const uint8_t s_params_hole;

typedef struct {
    ProtobufCBuffer base;
    uint8_t *out;
    size_t len, cap, hole_at, hole_len;
    int holes;
} s_hole_buffer_t;

static void s_hole_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data) {
    s_hole_buffer_t *b = (s_hole_buffer_t *)buffer;
    APEX_ASSERT(b->len + len <= b->cap);
    if (data == &s_params_hole && len == b->hole_len) {
        b->hole_at = b->len;
        b->holes++;
    } else {
        memcpy(b->out + b->len, data, len);
    }
    b->len += len;
}

static void s_weights_envelope(const wire_weights_t *w, Apex__Envelope *env, Apex__Weights *m) {
    m->version = w->version;
    m->learner_step = w->learner_step;
    m->env_frames = w->env_frames;
    m->num_params = w->num_params;
    m->det_target = w->det_target;
    m->params = (ProtobufCBinaryData){.len = (size_t)w->num_params * 4,
                                      .data = (uint8_t *)(uintptr_t)&s_params_hole};
    env->version = APEX_PROTOCOL_VERSION;
    env->body_case = APEX__ENVELOPE__BODY_WEIGHTS;
    env->weights = m;
}

size_t wire_weights_size(const wire_weights_t *w) {
    Apex__Envelope env = APEX__ENVELOPE__INIT;
    Apex__Weights m = APEX__WEIGHTS__INIT;
    s_weights_envelope(w, &env, &m);
    return apex__envelope__get_packed_size(&env);
}

size_t wire_weights_encode_hole(const wire_weights_t *w, uint8_t *out, size_t out_len) {
    APEX_ASSERT(w->num_params > 0);
    Apex__Envelope env = APEX__ENVELOPE__INIT;
    Apex__Weights m = APEX__WEIGHTS__INIT;
    s_weights_envelope(w, &env, &m);
    s_hole_buffer_t b = {.base = {.append = s_hole_append},
                         .out = out,
                         .cap = out_len,
                         .hole_len = (size_t)w->num_params * 4};
    size_t n = apex__envelope__pack_to_buffer(&env, &b.base);
    APEX_ASSERT(n == out_len && b.len == n && b.holes == 1);
    return b.hole_at;
}

void wire_encode(const wire_msg_t *msg, wire_buf_t *out) {
    wire_encode_version(msg, APEX_PROTOCOL_VERSION, out);
}
