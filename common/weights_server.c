// weights_server.c: see weights_server.h.
#define LOG_MODULE "weights"
#include "weights_server.h"

#include "apex.h"
#include "config.h"
#include "log.h"
#include "net.h"
#include "xalloc.h"

#include <string.h>
#include <zmq.h>

#define LOG_INTERVAL_MS 5000

// A request held until the next version (s_hold).
typedef struct {
    uint8_t id[NET_ROUTING_ID_MAX];
    uint8_t id_len;
    int64_t since_ms;
    uint64_t det_target; // a deterministic request's target (0: the next version)
} s_waiter;

// Deterministic runs: a version kept (its message shared) so that a target can be answered
// with it later, and a target's own message (the version's with det_target set).
typedef struct {
    zmq_msg_t msg;
    int has;
    wire_weights_t w; // its fields (params not set)
    size_t params_at; // offset of the parameters in msg
} s_kept;

typedef struct {
    uint64_t target, version; // 0: empty
    zmq_msg_t msg;
    int has; // built (the version was kept)
} s_target;

struct weights_server {
    void *sock;
    char endpoint[CONFIG_STR_LEN]; // as bound
    wire_decoder_t *dec;           // WeightsRequests only (no Weights, no rows)
    wire_buf_t out;                // the encoding of a new version, before its message
    zmq_msg_t msg;                 // the current version, shared by every answer
    int has_msg;
    uint64_t version;
    s_waiter *waiters; // (hold_max)
    int n_waiters, hold_max;
    size_t params_at; // where the current message's parameters start (SIZE_MAX: unknown)
    wire_weights_t cur_w;
    s_kept kept[WEIGHTS_SERVER_DET_KEEP]; // by version counter, when det is on
    s_target targets[WEIGHTS_SERVER_DET_TARGETS];
    s_target stale; // the answer to a target no longer kept (below)
    int det;
    log_limiter_t det_log;
    weights_server_stats_t st;
    log_limiter_t bad_log, full_log;
};

weights_server_t *weights_server_new(void *ctx, security_t *sec, const char *endpoint,
                                     int hold_max) {
    APEX_ASSERT(hold_max >= 1);
    weights_server_t *w = xcalloc(1, sizeof *w);
    net_opts_t o = {.sndhwm = WEIGHTS_SERVER_SNDHWM,
                    .rcvhwm = WEIGHTS_SERVER_RCVHWM,
                    .max_msg_bytes = WEIGHTS_SERVER_MAX_REQUEST_BYTES};
    w->sock = net_socket(ctx, ZMQ_ROUTER, &o);
    if (!w->sock || (sec && security_server(sec, w->sock) != 0) ||
        net_bind(w->sock, endpoint, w->endpoint, sizeof w->endpoint) != 0) {
        weights_server_destroy(&w);
        return NULL;
    }
    wire_limits_t lim = {.max_count = 1}; // a WeightsRequest has no rows and no parameters
    w->dec = wire_decoder_new(&lim);
    wire_buf_init(&w->out, 1024);
    w->hold_max = hold_max;
    w->waiters = xcalloc((size_t)hold_max, sizeof *w->waiters);
    return w;
}

void weights_server_destroy(weights_server_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    weights_server_t *w = *self_p;
    net_close(&w->sock);
    if (w->has_msg) {
        zmq_msg_close(&w->msg);
    }
    for (int i = 0; i < WEIGHTS_SERVER_DET_KEEP; i++) {
        if (w->kept[i].has) {
            zmq_msg_close(&w->kept[i].msg);
        }
    }
    for (int i = 0; i < WEIGHTS_SERVER_DET_TARGETS; i++) {
        if (w->targets[i].has) {
            zmq_msg_close(&w->targets[i].msg);
        }
    }
    if (w->stale.has) {
        zmq_msg_close(&w->stale.msg);
    }
    wire_decoder_destroy(&w->dec);
    wire_buf_fini(&w->out);
    free(w->waiters);
    free(w);
    *self_p = NULL;
}

const char *weights_server_endpoint(const weights_server_t *self) { return self->endpoint; }
void *weights_server_socket(const weights_server_t *self) { return self->sock; }
uint64_t weights_server_version(const weights_server_t *self) { return self->version; }

void weights_server_stats(const weights_server_t *self, weights_server_stats_t *out) {
    *out = self->st;
    out->held = self->n_waiters;
}

// Sends msg to the peer id (dropped by the ROUTER when that peer's queue is full or it is
// gone: it asks again after its own timeout).
static void s_send(weights_server_t *w, zmq_msg_t *msg, const void *id, size_t id_len) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_copy(&m, msg) != 0 ||
        zmq_send(w->sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&m, w->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    w->st.answers++;
    w->st.bytes += zmq_msg_size(msg);
}

// Sends the current weights to the peer id.
static void s_answer(weights_server_t *w, const void *id, size_t id_len) {
    if (w->has_msg) { // (nothing published yet: nothing to send)
        s_send(w, &w->msg, id, id_len);
    }
}

static void s_build(s_target *t, const s_kept *k);

// The built message of a deterministic target, or NULL. A target whose slot a later one took
// (a client far behind the others: only after a restart) is answered with the current
// weights under its own number, said once: the run diverges, but the client goes on.
static s_target *s_target_of(weights_server_t *w, uint64_t target) {
    s_target *t = &w->targets[target % WEIGHTS_SERVER_DET_TARGETS];
    if (t->target == target && t->has) {
        return t;
    }
    const s_kept *cur = &w->kept[(uint32_t)w->version % WEIGHTS_SERVER_DET_KEEP];
    if (t->target <= target || !cur->has || cur->w.version != w->version) {
        return NULL;
    }
    log_every(&w->det_log, LOG_INTERVAL_MS, LOG_WARN,
              "deterministic run: weights target %llu asked after target %llu took its place "
              "(a client far behind, after a restart): answered with the current "
              "weights " WIRE_VERSION_FMT " (the run diverges)",
              (unsigned long long)target, (unsigned long long)t->target,
              WIRE_VERSION_ARGS(w->version));
    if (w->stale.has) {
        zmq_msg_close(&w->stale.msg);
    }
    w->stale = (s_target){.target = target, .version = w->version};
    s_build(&w->stale, cur);
    return &w->stale;
}

// Holds the request of peer id until the next version (one entry per peer: a repeated
// request leaves it as it is, so its heartbeat stays due).
static void s_hold(weights_server_t *w, const uint8_t *id, size_t id_len, int64_t now,
                   uint64_t det_target) {
    for (int i = 0; i < w->n_waiters; i++) {
        if (w->waiters[i].id_len == id_len && memcmp(w->waiters[i].id, id, id_len) == 0) {
            w->waiters[i].det_target = det_target; // (a client asks for one thing at a time)
            return;
        }
    }
    if (w->n_waiters == w->hold_max) {
        w->st.unheld++;
        log_every(&w->full_log, LOG_INTERVAL_MS, LOG_WARN,
                  "weights endpoint: %d requests held already; dropped one (%llu in all): a "
                  "flood of connections, or more clients than it was sized for",
                  w->hold_max, (unsigned long long)w->st.unheld);
        return;
    }
    s_waiter *h = &w->waiters[w->n_waiters++];
    memcpy(h->id, id, id_len);
    h->id_len = (uint8_t)id_len;
    h->since_ms = now;
    h->det_target = det_target;
}

// Answers the held requests that arrived at or before held_since_ms (INT64_MAX: all) with
// the current weights (a deterministic request's answer then says it is not its target: the
// client asks again), and those whose deterministic target has been built with it.
static void s_answer_held(weights_server_t *w, int64_t held_since_ms, int heartbeat) {
    int kept = 0;
    for (int i = 0; i < w->n_waiters; i++) {
        s_waiter *h = &w->waiters[i];
        s_target *t = h->det_target ? s_target_of(w, h->det_target) : NULL;
        if (t) {
            s_send(w, &t->msg, h->id, h->id_len);
        } else if (h->since_ms <= held_since_ms && (heartbeat || !h->det_target)) {
            // (a new version answers the clients waiting for it, not those waiting for a
            // target: their link is checked by the heartbeat alone)
            s_answer(w, h->id, h->id_len);
        } else {
            w->waiters[kept++] = *h;
        }
    }
    w->n_waiters = kept;
}

// Answered at once when the peer's version is older than the current one, held when it is
// the current one or newer (a learner started afresh counts from 0 again, and a client keeps
// a newer version for a while, see wire_weights_judge: answering it at once would be a loop
// of weights it refuses).
void weights_server_handle(weights_server_t *self, const void *id, size_t id_len, const void *body,
                           size_t len, int extra, int64_t now_ms) {
    const char *why = NULL;
    wire_msg_t m;
    if (extra) {
        why = "not [routing id][one frame]";
    } else if (id_len == 0 || id_len > NET_ROUTING_ID_MAX) {
        why = "bad routing id";
    } else if (wire_decode(self->dec, body, len, &m) != APEX_OK) {
        why = wire_decoder_last_error(self->dec);
    } else if (m.type != WIRE_MSG_WEIGHTS_REQUEST) {
        why = wire_msg_name(m.type);
    }
    if (why) {
        self->st.refused++;
        log_every(&self->bad_log, LOG_INTERVAL_MS, LOG_WARN,
                  "weights endpoint: dropped a message that is not a weights request (%s); "
                  "%llu in all",
                  why, (unsigned long long)self->st.refused);
        return;
    }
    self->st.requests++;
    uint64_t target = m.u.weights_request.det_target;
    if (target) {
        s_target *t = s_target_of(self, target);
        if (t) {
            s_send(self, &t->msg, id, id_len);
        } else {
            s_hold(self, id, id_len, now_ms, target); // until weights_server_det_set builds it
        }
    } else if (self->has_msg && m.u.weights_request.have_version < self->version) {
        s_answer(self, id, id_len);
    } else {
        s_hold(self, id, id_len, now_ms, 0);
    }
}

int weights_server_read(weights_server_t *self, int max, int64_t now_ms) {
    int n = 0;
    for (; n < max; n++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        int extra = 0;
        if (net_recv_routed(self->sock, &id, &body, &extra) <= 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            break;
        }
        weights_server_handle(self, zmq_msg_data(&id), zmq_msg_size(&id), zmq_msg_data(&body),
                              zmq_msg_size(&body), extra, now_ms);
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    return n;
}

// A new version: encoded once into a message of its own (the previous one lives on in the
// answers still queued), then sent to every held request.
void weights_server_publish(weights_server_t *self, const wire_weights_t *w) {
    APEX_ASSERT(w->version > self->version); // versions only increase (the caller's counter)
    weights_server_replace(self, w);
}

// A new message of n bytes in place of the current one; its bytes, to be filled.
static uint8_t *s_new_msg(weights_server_t *self, size_t n) {
    if (self->has_msg) {
        zmq_msg_close(&self->msg);
        self->has_msg = 0;
    }
    if (zmq_msg_init_size(&self->msg, n) != 0) {
        // Memory, sized at start-up (the learner's trainer_fits counts two messages).
        APEX_PANIC("cannot allocate the %zu-byte weights message", n);
    }
    return zmq_msg_data(&self->msg);
}

static void s_build_targets(weights_server_t *self);

// The filled message is w's: answer every request held for it (and, in a deterministic
// run, keep it for the targets that will name it).
static void s_installed(weights_server_t *self, const wire_weights_t *w, size_t params_at) {
    self->has_msg = 1;
    self->version = w->version;
    self->cur_w = *w;
    self->cur_w.params = NULL;
    self->params_at = params_at;
    if (self->det && params_at != SIZE_MAX) {
        s_kept *k = &self->kept[(uint32_t)w->version % WEIGHTS_SERVER_DET_KEEP];
        if (k->has) {
            zmq_msg_close(&k->msg);
        }
        zmq_msg_init(&k->msg);
        k->has = zmq_msg_copy(&k->msg, &self->msg) == 0; // shares the buffer
        k->w = self->cur_w;
        k->params_at = params_at;
        s_build_targets(self);
    }
    s_answer_held(self, INT64_MAX, 0);
}

void weights_server_replace(weights_server_t *self, const wire_weights_t *w) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
    m.u.weights = *w;
    wire_encode(&m, &self->out);
    memcpy(s_new_msg(self, self->out.len), self->out.data, self->out.len);
    s_installed(self, w, SIZE_MAX); // (not kept for deterministic targets)
}

void weights_server_publish_fill(weights_server_t *self, const wire_weights_t *w,
                                 weights_fill_fn fill, void *arg) {
    APEX_ASSERT(w->version > self->version);
    size_t n = wire_weights_size(w);
    uint8_t *data = s_new_msg(self, n);
    size_t at = wire_weights_encode_hole(w, data, n);
    fill(arg, data + at);
    s_installed(self, w, at);
}

// ---------------------------------------------------------------------------------------
// Deterministic runs

void weights_server_det_enable(weights_server_t *self) { self->det = 1; }

// A target's message: its version's fields and parameters, with det_target set.
static void s_build(s_target *t, const s_kept *k) {
    wire_weights_t w = k->w;
    w.det_target = t->target;
    size_t n = wire_weights_size(&w);
    if (zmq_msg_init_size(&t->msg, n) != 0) {
        APEX_PANIC("cannot allocate the %zu-byte weights message", n);
    }
    uint8_t *data = zmq_msg_data(&t->msg);
    size_t at = wire_weights_encode_hole(&w, data, n);
    memcpy(data + at, (const uint8_t *)zmq_msg_data((zmq_msg_t *)&k->msg) + k->params_at,
           (size_t)w.num_params * 4);
    t->has = 1;
}

// Builds the targets whose version has been kept since they were set.
static void s_build_targets(weights_server_t *self) {
    for (int i = 0; i < WEIGHTS_SERVER_DET_TARGETS; i++) {
        s_target *t = &self->targets[i];
        if (!t->target || t->has) {
            continue;
        }
        const s_kept *k = &self->kept[(uint32_t)t->version % WEIGHTS_SERVER_DET_KEEP];
        if (k->has && k->w.version == t->version) {
            s_build(t, k);
        } else if (t->version <= self->version) {
            // Published and gone from the kept ones already: a learner far ahead of its
            // actors, which the schedule does not let happen; the newest kept instead.
            log_every(&self->det_log, LOG_INTERVAL_MS, LOG_WARN,
                      "deterministic run: weights " WIRE_VERSION_FMT " for target %llu no longer "
                      "kept; answered with the current ones (the run diverges)",
                      WIRE_VERSION_ARGS(t->version), (unsigned long long)t->target);
            const s_kept *cur = &self->kept[(uint32_t)self->version % WEIGHTS_SERVER_DET_KEEP];
            if (cur->has) {
                s_build(t, cur);
            }
        }
    }
}

void weights_server_det_set(weights_server_t *self, uint64_t target, uint64_t version) {
    APEX_ASSERT(self->det && target > 0);
    s_target *t = &self->targets[target % WEIGHTS_SERVER_DET_TARGETS];
    if (t->has) {
        zmq_msg_close(&t->msg);
    }
    *t = (s_target){.target = target, .version = version};
    s_build_targets(self);
    if (t->has) {
        s_answer_held(self, INT64_MIN, 0); // only the requests held for a target now built
    }
}

void weights_server_heartbeat(weights_server_t *self, int64_t now_ms) {
    s_answer_held(self, now_ms - WEIGHTS_SERVER_HOLD_MS, 1);
}
