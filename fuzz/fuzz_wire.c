// fuzz_wire.c: libFuzzer harness for wire_decode (common/wire.c), every message kind.
//
// Each input is a raw Envelope, as a peer would send it. It is decoded by several decoders
// whose limits differ (see s_profiles), so one input covers both the accepting and the
// rejecting paths of every check. On every decode:
//   - the result is one of the codes wire.h documents, and a failure leaves a non-empty
//     reason and no views (out->u all zero);
//   - a success satisfies everything wire.h promises: counts within the limits, dimensions
//     equal to the configured ones, array pointers non-NULL exactly when they carry rows,
//     floats finite and within their ranges, actions in [0, n_actions);
//   - round trip: wire_encode of the decoded message decodes again (with a second decoder of
//     the same limits, since views die at the next decode) to the same values, and encoding
//     that gives the same bytes again (the canonical encoding is a fixed point).
// ASan checks that every view lies inside live memory, because the checks read all of it.
#include <math.h>
#include <string.h>

#include "fuzz.h"
#include "wire.h"

// ---------------------------------------------------------------------------------------
// Limit profiles. 0 is a realistic CartPole run; the others exist to reach rejecting paths
// that profile 0 accepts (small maxima, another obs_dim, Weights refused, a byte limit) and
// the uint8 observations of [env] id = external (profile 4), continuous actions of 2
// floats with per-component bounds (profile 5, issue #28), and frame-mode batches (issue
// #27): stacks of 2 float32 frames (profile 6), and of 3 uint8 frames with small maxima
// (profile 7).

static const wire_limits_t s_profiles[] = {
    {.obs_dim = 4, .n_actions = 2, .num_params = 100, .max_count = 4096, .max_episodes = 1024},
    {.obs_dim = 4,
     .n_actions = 2,
     .num_params = 100,
     .max_count = 8,
     .max_episodes = 4,
     .max_actors = 3,
     .max_message_bytes = 512},
    {.obs_dim = 6, .n_actions = 3, .num_params = 0, .max_count = 4096, .max_episodes = 0},
    {.obs_dim = 1, .n_actions = 1, .num_params = 1, .max_count = 1, .max_episodes = 1},
    {.obs_dim = 4,
     .obs_dtype = WIRE_OBS_UINT8,
     .n_actions = 2,
     .num_params = 100,
     .max_count = 4096,
     .max_episodes = 1024},
    {.obs_dim = 3,
     .action_dim = 2,
     .action_low = (const float[]){-2.0f, 0.0f},
     .action_high = (const float[]){2.0f, 1.0f},
     .num_params = 100,
     .max_count = 4096,
     .max_episodes = 1024},
    {.obs_dim = 4,
     .n_actions = 2,
     .num_params = 100,
     .max_count = 4096,
     .max_episodes = 1024,
     .frame_stack = 2},
    {.obs_dim = 6,
     .obs_dtype = WIRE_OBS_UINT8,
     .n_actions = 3,
     .num_params = 0,
     .max_count = 8,
     .max_episodes = 4,
     .max_actors = 3,
     .frame_stack = 3,
     .max_frames = 4},
};
#define N_PROFILES (sizeof s_profiles / sizeof s_profiles[0])

// Decoders live for the whole process: creating one per input would spend the time in
// allocating arenas. [p][0] decodes the input, [p][1] the re-encoded message.
static wire_decoder_t *s_dec[N_PROFILES][2];
static wire_buf_t s_enc[2];

static void s_setup(void) {
    if (s_dec[0][0]) {
        return;
    }
    for (size_t p = 0; p < N_PROFILES; p++) {
        s_dec[p][0] = wire_decoder_new(&s_profiles[p]);
        s_dec[p][1] = wire_decoder_new(&s_profiles[p]);
    }
    wire_buf_init(&s_enc[0], 0);
    wire_buf_init(&s_enc[1], 0);
}

// ---------------------------------------------------------------------------------------
// Value checks over decoded views.

static int s_finite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            return 0;
        }
    }
    return 1;
}

static int s_in(const float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) {
        if (!(x[i] >= lo && x[i] <= hi)) {
            return 0;
        }
    }
    return 1;
}

static int s_actions_ok(const int32_t *a, size_t n, uint32_t n_actions) {
    for (size_t i = 0; i < n; i++) {
        if (a[i] < 0 || (uint32_t)a[i] >= n_actions) {
            return 0;
        }
    }
    return 1;
}

// Reads every key, so that ASan sees a view that runs past its buffer.
static uint64_t s_touch_u64(const uint64_t *x, size_t n) {
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++) {
        h = h * 31u + x[i];
    }
    return h;
}

// Rows shared by TransitionBatch and SampleReply.
// Reads every byte, so that ASan sees a uint8 view that runs past its buffer.
static unsigned s_touch_u8(const uint8_t *x, size_t n) {
    unsigned h = 0;
    for (size_t i = 0; i < n; i++) {
        h = h * 31u + x[i];
    }
    return h;
}

// obs and next_obs hold obs_rows rows: count, or 0 in a frame-mode batch (NULL views); the
// callers check count's lower bound.
static void s_check_rows(const wire_limits_t *lim, uint32_t count, uint32_t obs_rows,
                         uint32_t obs_dim, uint32_t obs_dtype, const void *obs,
                         const int32_t *actions, uint32_t action_dim, const float *cont,
                         const float *rewards, const float *discounts, const void *next_obs) {
    FUZZ_CHECK(count <= lim->max_count);
    FUZZ_CHECK(obs_dim == lim->obs_dim && obs_dtype == lim->obs_dtype);
    FUZZ_CHECK(action_dim == lim->action_dim);
    FUZZ_CHECK(obs_rows ? obs && next_obs : !obs && !next_obs);
    FUZZ_CHECK(count ? (action_dim ? cont && !actions : actions && !cont) && rewards && discounts
                     : !actions && !cont && !rewards && !discounts);
    for (size_t k = 0; k < (size_t)count * action_dim; k++) { // within the run's bounds
        FUZZ_CHECK(cont[k] >= lim->action_low[k % action_dim] &&
                   cont[k] <= lim->action_high[k % action_dim]);
    }
    size_t n_obs = (size_t)obs_rows * obs_dim;
    if (obs_dtype == WIRE_OBS_UINT8) {
        (void)(s_touch_u8(obs, n_obs) + s_touch_u8(next_obs, n_obs));
    } else {
        FUZZ_CHECK(s_finite(obs, n_obs) && s_finite(next_obs, n_obs));
    }
    FUZZ_CHECK(s_finite(rewards, count));
    FUZZ_CHECK(s_in(discounts, count, 0.0f, WIRE_DISCOUNT_MAX));
    FUZZ_CHECK(action_dim || s_actions_ok(actions, count, lim->n_actions));
}

// A frame-mode batch's frames, links and rows' frame numbers (wire.h).
static void s_check_frames(const wire_limits_t *lim, const wire_batch_t *b) {
    uint32_t k = b->frame_stack, n = b->frame_count;
    FUZZ_CHECK(k >= 2 && k == lim->frame_stack && b->obs_dim % k == 0);
    FUZZ_CHECK(n <= (lim->max_frames ? lim->max_frames : lim->max_count));
    FUZZ_CHECK(b->count >= 1 || n >= 1);
    FUZZ_CHECK(n ? b->frames && b->frame_prev : !b->frames && !b->frame_prev);
    FUZZ_CHECK(b->count ? b->obs_frames && b->next_frames : !b->obs_frames && !b->next_frames);
    FUZZ_CHECK(b->first_frame <= WIRE_FRAME_MAX && n <= WIRE_FRAME_MAX - b->first_frame);
    size_t n_elems = (size_t)n * (b->obs_dim / k);
    if (b->obs_dtype == WIRE_OBS_UINT8) {
        (void)s_touch_u8(b->frames, n_elems);
    } else {
        FUZZ_CHECK(s_finite(b->frames, n_elems));
    }
    for (uint32_t i = 0; i < n; i++) { // no link before frame 0
        FUZZ_CHECK(b->frame_prev[i] <= b->first_frame + i);
    }
    for (uint32_t r = 0; r < b->count; r++) { // frames sent so far, next_obs later than obs
        FUZZ_CHECK(b->obs_frames[r] < b->next_frames[r] && b->next_frames[r] < b->first_frame + n);
    }
}

static void s_check_ok(const wire_limits_t *lim, const wire_msg_t *m) {
    switch (m->type) {
    case WIRE_MSG_TRANSITION_BATCH: {
        const wire_batch_t *b = &m->u.batch;
        if (b->frame_stack) {
            s_check_frames(lim, b);
        } else {
            // (a deterministic period's last batch may have no rows)
            FUZZ_CHECK(lim->frame_stack == 0 && (b->count >= 1 || b->det_period_end));
            FUZZ_CHECK(!b->first_frame && !b->frame_count && !b->frames && !b->frame_prev &&
                       !b->obs_frames && !b->next_frames);
        }
        s_check_rows(lim, b->count, b->frame_stack ? 0 : b->count, b->obs_dim, b->obs_dtype, b->obs,
                     b->actions, b->action_dim, b->cont_actions, b->rewards, b->discounts,
                     b->next_obs);
        FUZZ_CHECK(!b->priorities || s_in(b->priorities, b->count, 0.0f, WIRE_PRIORITY_MAX));
        FUZZ_CHECK(b->seq <= WIRE_SEQ_MAX);
        FUZZ_CHECK(b->det_period <= WIRE_SEQ_MAX && (!b->det_period_end || b->det_period));
        // The actor's columns: only on a period's end, within their bounds, finite returns.
        FUZZ_CHECK(b->det_period_end || (!b->det_frames && !b->det_episodes && !b->det_n_returns));
        FUZZ_CHECK(b->det_frames <= WIRE_FRAMES_MAX && b->det_episodes <= WIRE_FRAMES_MAX);
        FUZZ_CHECK(b->det_n_returns <= WIRE_DET_RETURNS_MAX && b->det_n_returns <= b->det_episodes);
        FUZZ_CHECK(!b->det_n_returns == !b->det_returns);
        for (uint32_t i = 0; i < b->det_n_returns; i++) {
            FUZZ_CHECK(isfinite(b->det_returns[i]));
        }
        FUZZ_CHECK(!lim->max_actors || b->actor_id < lim->max_actors);
        break;
    }
    case WIRE_MSG_SAMPLE_REQUEST: {
        const wire_sample_request_t *r = &m->u.sample_request;
        FUZZ_CHECK(r->min_priority >= 0.0 && r->min_priority <= WIRE_MASS_MAX);
        if (r->stats_only) { // a stats request: no rows
            FUZZ_CHECK(r->batch_size == 0 && r->batches == 1);
            break;
        }
        FUZZ_CHECK(r->stats_after == 0);
        FUZZ_CHECK(r->batch_size >= 1 && r->batch_size <= lim->max_count);
        FUZZ_CHECK(r->beta >= 0.0f && r->beta <= WIRE_BETA_MAX);
        FUZZ_CHECK(r->batches >= 1 && r->batches <= WIRE_MAX_BATCHES_PER_REQUEST &&
                   (uint64_t)r->batches * r->batch_size <= lim->max_count);
        break;
    }
    case WIRE_MSG_SAMPLE_REPLY: {
        const wire_sample_reply_t *r = &m->u.sample_reply;
        FUZZ_CHECK(r->stats.total_priority >= 0.0 && r->stats.total_priority <= WIRE_MASS_MAX);
        FUZZ_CHECK(r->stats.min_priority >= 0.0 && r->stats.min_priority <= WIRE_MASS_MAX);
        FUZZ_CHECK(r->stats.shards >= 1 && r->stats.shard < r->stats.shards);
        FUZZ_CHECK(isfinite(r->stats.det_return_sum) &&
                   r->stats.det_return_n <= WIRE_DET_RETURNS_MAX * (uint64_t)r->stats.shards &&
                   r->stats.det_env_frames <= WIRE_FRAMES_MAX &&
                   r->stats.det_episodes <= WIRE_FRAMES_MAX);
        if (r->status != WIRE_SAMPLE_OK) {
            FUZZ_CHECK(r->status == WIRE_SAMPLE_NOT_READY || r->status == WIRE_SAMPLE_REFUSED);
            FUZZ_CHECK(r->count == 0 && !r->keys && !r->is_weights && !r->obs && !r->actions &&
                       !r->rewards && !r->discounts && !r->next_obs);
            break;
        }
        FUZZ_CHECK(r->count >= 1);
        s_check_rows(lim, r->count, r->count, r->obs_dim, r->obs_dtype, r->obs, r->actions,
                     r->action_dim, r->cont_actions, r->rewards, r->discounts, r->next_obs);
        FUZZ_CHECK(r->keys && r->is_weights);
        (void)s_touch_u64(r->keys, r->count);
        FUZZ_CHECK(s_in(r->is_weights, r->count, 0.0f, WIRE_IS_WEIGHT_MAX));
        break;
    }
    case WIRE_MSG_PRIORITY_UPDATE: {
        const wire_priority_update_t *u = &m->u.priority_update;
        // (a deterministic learner's update of a batch with no usable priority is empty)
        FUZZ_CHECK((u->count >= 1 || u->det_index) && u->count <= lim->max_count);
        FUZZ_CHECK(u->count == 0 || (u->keys && u->priorities));
        (void)s_touch_u64(u->keys, u->count);
        FUZZ_CHECK(s_in(u->priorities, u->count, 0.0f, WIRE_PRIORITY_MAX));
        break;
    }
    case WIRE_MSG_WEIGHTS: {
        const wire_weights_t *w = &m->u.weights;
        FUZZ_CHECK(lim->num_params != 0 && w->num_params == lim->num_params);
        FUZZ_CHECK(w->params && s_finite(w->params, w->num_params));
        break;
    }
    case WIRE_MSG_ACTOR_STATS: {
        const wire_actor_stats_t *a = &m->u.actor_stats;
        uint32_t n = a->n_episodes;
        FUZZ_CHECK(n <= lim->max_episodes);
        FUZZ_CHECK(n ? (a->returns && a->lengths && a->epsilons)
                     : (!a->returns && !a->lengths && !a->epsilons));
        FUZZ_CHECK(s_finite(a->returns, n) && s_in(a->epsilons, n, 0.0f, WIRE_EPSILON_MAX));
        FUZZ_CHECK(a->frames_delta <= a->frames && a->frames <= WIRE_FRAMES_MAX);
        FUZZ_CHECK(!lim->max_actors || a->actor_id < lim->max_actors);
        uint64_t total = 0;
        for (uint32_t i = 0; i < n; i++) {
            total += a->lengths[i];
        }
        (void)total;
        break;
    }
    case WIRE_MSG_INSERT_ACK:
        FUZZ_CHECK(m->u.insert_ack.n_more <= WIRE_ACK_MAX_SEQS - 1);
        FUZZ_CHECK(m->u.insert_ack.n_more == 0 || m->u.insert_ack.more != NULL);
        break;
    case WIRE_MSG_WEIGHTS_REQUEST:
        break; // any have_version is a legal request
    default:
        FUZZ_CHECK(!"decode succeeded with an unknown message type");
    }
}

// ---------------------------------------------------------------------------------------
// Equality of two decoded messages: every array byte for byte (bulk floats travel as raw
// bytes, so they must survive bit for bit), scalars by value. Scalar floats are compared
// with ==, because protobuf-c, following proto3, does not encode a float or double field
// equal to zero, so a -0.0 beta or total_priority comes back as +0.0 (the same value).

static int s_same(const void *a, const void *b, size_t bytes) {
    if (bytes == 0) {
        return 1;
    }
    if (!a || !b) {
        return a == b;
    }
    return memcmp(a, b, bytes) == 0;
}

static int s_same_batch(const wire_batch_t *a, const wire_batch_t *b) {
    size_t n = a->count, no = (size_t)a->count * a->obs_dim * wire_obs_elem_bytes(a->obs_dtype);
    size_t nf = a->frame_count, fb = a->frame_stack ? nf * (a->obs_dim / a->frame_stack) *
                                                          wire_obs_elem_bytes(a->obs_dtype)
                                                    : 0;
    int same_frames = a->frame_stack == b->frame_stack && a->first_frame == b->first_frame &&
                      a->frame_count == b->frame_count && s_same(a->frames, b->frames, fb) &&
                      s_same(a->frame_prev, b->frame_prev, nf * 4) &&
                      s_same(a->obs_frames, b->obs_frames, n * 8) &&
                      s_same(a->next_frames, b->next_frames, n * 8);
    return same_frames && a->actor_id == b->actor_id && a->seq == b->seq &&
           a->weights_version == b->weights_version && a->count == b->count &&
           a->obs_dim == b->obs_dim && a->obs_dtype == b->obs_dtype && s_same(a->obs, b->obs, no) &&
           s_same(a->actions, b->actions, n * 4) && s_same(a->rewards, b->rewards, n * 4) &&
           s_same(a->discounts, b->discounts, n * 4) && s_same(a->next_obs, b->next_obs, no) &&
           !a->priorities == !b->priorities && s_same(a->priorities, b->priorities, n * 4) &&
           a->det_period == b->det_period && !a->det_period_end == !b->det_period_end &&
           a->det_frames == b->det_frames && a->det_episodes == b->det_episodes &&
           a->det_n_returns == b->det_n_returns &&
           s_same(a->det_returns, b->det_returns, (size_t)a->det_n_returns * 4);
}

static int s_same_reply(const wire_sample_reply_t *a, const wire_sample_reply_t *b) {
    size_t n = a->count, no = (size_t)a->count * a->obs_dim * wire_obs_elem_bytes(a->obs_dtype);
    return a->id == b->id && a->status == b->status && a->count == b->count &&
           a->obs_dim == b->obs_dim && a->obs_dtype == b->obs_dtype &&
           s_same(a->keys, b->keys, n * 8) && s_same(a->is_weights, b->is_weights, n * 4) &&
           s_same(a->obs, b->obs, no) && s_same(a->actions, b->actions, n * 4) &&
           s_same(a->rewards, b->rewards, n * 4) && s_same(a->discounts, b->discounts, n * 4) &&
           s_same(a->next_obs, b->next_obs, no) &&
           memcmp(&a->stats, &b->stats, offsetof(wire_replay_stats_t, total_priority)) == 0 &&
           a->stats.total_priority == b->stats.total_priority &&
           a->stats.min_priority == b->stats.min_priority && a->stats.shard == b->stats.shard &&
           a->stats.shards == b->stats.shards && a->stats.det_horizon == b->stats.det_horizon &&
           a->stats.det_served == b->stats.det_served &&
           a->stats.det_env_frames == b->stats.det_env_frames &&
           a->stats.det_episodes == b->stats.det_episodes &&
           a->stats.det_return_sum == b->stats.det_return_sum &&
           a->stats.det_return_n == b->stats.det_return_n &&
           a->stats.det_version_min == b->stats.det_version_min;
}

static int s_same_msg(const wire_msg_t *a, const wire_msg_t *b) {
    if (a->type != b->type) {
        return 0;
    }
    switch (a->type) {
    case WIRE_MSG_TRANSITION_BATCH:
        return s_same_batch(&a->u.batch, &b->u.batch);
    case WIRE_MSG_SAMPLE_REQUEST:
        return a->u.sample_request.id == b->u.sample_request.id &&
               a->u.sample_request.batch_size == b->u.sample_request.batch_size &&
               a->u.sample_request.beta == b->u.sample_request.beta &&
               a->u.sample_request.batches == b->u.sample_request.batches &&
               a->u.sample_request.min_priority == b->u.sample_request.min_priority &&
               a->u.sample_request.stats_only == b->u.sample_request.stats_only &&
               a->u.sample_request.stats_after == b->u.sample_request.stats_after;
    case WIRE_MSG_SAMPLE_REPLY:
        return s_same_reply(&a->u.sample_reply, &b->u.sample_reply);
    case WIRE_MSG_PRIORITY_UPDATE: {
        const wire_priority_update_t *x = &a->u.priority_update, *y = &b->u.priority_update;
        return x->count == y->count && s_same(x->keys, y->keys, (size_t)x->count * 8) &&
               s_same(x->priorities, y->priorities, (size_t)x->count * 4);
    }
    case WIRE_MSG_WEIGHTS: {
        const wire_weights_t *x = &a->u.weights, *y = &b->u.weights;
        return x->version == y->version && x->learner_step == y->learner_step &&
               x->num_params == y->num_params &&
               s_same(x->params, y->params, (size_t)x->num_params * 4);
    }
    case WIRE_MSG_ACTOR_STATS: {
        const wire_actor_stats_t *x = &a->u.actor_stats, *y = &b->u.actor_stats;
        size_t n = x->n_episodes;
        return x->actor_id == y->actor_id && x->frames == y->frames &&
               x->weights_version == y->weights_version &&
               x->dropped_batches == y->dropped_batches && x->n_episodes == y->n_episodes &&
               s_same(x->returns, y->returns, n * 4) && s_same(x->lengths, y->lengths, n * 4) &&
               s_same(x->epsilons, y->epsilons, n * 4);
    }
    case WIRE_MSG_INSERT_ACK:
        return a->u.insert_ack.actor_id == b->u.insert_ack.actor_id &&
               a->u.insert_ack.seq == b->u.insert_ack.seq &&
               a->u.insert_ack.n_more == b->u.insert_ack.n_more &&
               s_same(a->u.insert_ack.more, b->u.insert_ack.more,
                      (size_t)a->u.insert_ack.n_more * 8);
    case WIRE_MSG_WEIGHTS_REQUEST:
        return a->u.weights_request.have_version == b->u.weights_request.have_version;
    default:
        return 0;
    }
}

// ---------------------------------------------------------------------------------------

static int s_is_zero(const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        if (b[i]) {
            return 0;
        }
    }
    return 1;
}

static void s_check_failure(const wire_decoder_t *d, int rc, const wire_msg_t *m) {
    FUZZ_CHECK(rc == APEX_EINVAL || rc == APEX_EPROTO || rc == APEX_EVERSION || rc == APEX_ENOSPC);
    const char *why = wire_decoder_last_error(d);
    FUZZ_CHECK(why && why[0] != '\0');
    FUZZ_CHECK((unsigned)m->type < WIRE_MSG_COUNT_);
    FUZZ_CHECK(s_is_zero(&m->u, sizeof m->u)); // no view of a rejected message survives
}

static void s_round_trip(size_t p, const wire_msg_t *m) {
    wire_msg_t again;
    wire_encode(m, &s_enc[0]);
    int rc = wire_decode(s_dec[p][1], s_enc[0].data, s_enc[0].len, &again);
    if (rc != APEX_OK) {
        fprintf(stderr, "re-decode failed: %s\n", wire_decoder_last_error(s_dec[p][1]));
    }
    FUZZ_CHECK(rc == APEX_OK);
    FUZZ_CHECK(s_same_msg(m, &again));
    wire_encode(&again, &s_enc[1]);
    FUZZ_CHECK(s_enc[0].len == s_enc[1].len &&
               memcmp(s_enc[0].data, s_enc[1].data, s_enc[0].len) == 0);
}

int fuzz_wire_one(const uint8_t *data, size_t size) {
    s_setup();
    for (size_t p = 0; p < N_PROFILES; p++) {
        wire_msg_t m;
        int rc = wire_decode(s_dec[p][0], data, size, &m);
        FUZZ_CHECK(wire_msg_name(m.type) != NULL);
        if (rc != APEX_OK) {
            s_check_failure(s_dec[p][0], rc, &m);
            continue;
        }
        s_check_ok(&s_profiles[p], &m);
        s_round_trip(p, &m);
    }
    return 0;
}

#ifndef FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return fuzz_wire_one(data, size); }
#endif
