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
} s_waiter;

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

// Sends the current weights to the peer id (dropped by the ROUTER when that peer's queue is
// full or it is gone: it asks again after its own timeout).
static void s_answer(weights_server_t *w, const void *id, size_t id_len) {
    if (!w->has_msg) {
        return; // nothing published yet
    }
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_copy(&m, &w->msg) != 0 ||
        zmq_send(w->sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_msg_send(&m, w->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return;
    }
    w->st.answers++;
    w->st.bytes += zmq_msg_size(&w->msg);
}

// Holds the request of peer id until the next version (one entry per peer: a repeated
// request leaves it as it is, so its heartbeat stays due).
static void s_hold(weights_server_t *w, const uint8_t *id, size_t id_len, int64_t now) {
    for (int i = 0; i < w->n_waiters; i++) {
        if (w->waiters[i].id_len == id_len && memcmp(w->waiters[i].id, id, id_len) == 0) {
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
}

// Answers the held requests that arrived at or before held_since_ms (INT64_MAX: all).
static void s_answer_held(weights_server_t *w, int64_t held_since_ms) {
    int kept = 0;
    for (int i = 0; i < w->n_waiters; i++) {
        s_waiter *h = &w->waiters[i];
        if (h->since_ms <= held_since_ms) {
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
    if (self->has_msg && m.u.weights_request.have_version < self->version) {
        s_answer(self, id, id_len);
    } else {
        s_hold(self, id, id_len, now_ms);
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

// The filled message is version's: answer every request held for it.
static void s_installed(weights_server_t *self, uint64_t version) {
    self->has_msg = 1;
    self->version = version;
    s_answer_held(self, INT64_MAX);
}

void weights_server_replace(weights_server_t *self, const wire_weights_t *w) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS};
    m.u.weights = *w;
    wire_encode(&m, &self->out);
    memcpy(s_new_msg(self, self->out.len), self->out.data, self->out.len);
    s_installed(self, w->version);
}

void weights_server_publish_fill(weights_server_t *self, const wire_weights_t *w,
                                 weights_fill_fn fill, void *arg) {
    APEX_ASSERT(w->version > self->version);
    size_t n = wire_weights_size(w);
    uint8_t *data = s_new_msg(self, n);
    fill(arg, data + wire_weights_encode_hole(w, data, n));
    s_installed(self, w->version);
}

void weights_server_heartbeat(weights_server_t *self, int64_t now_ms) {
    s_answer_held(self, now_ms - WEIGHTS_SERVER_HOLD_MS);
}
