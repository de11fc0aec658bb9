// weights_client.c: see weights_client.h.
#include "weights_client.h"

#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "log.h"
#include "net.h"

int weights_client_open(weights_client_t *w, void *ctx, security_t *sec, const char *endpoint,
                        int64_t max_bytes) {
    *w = (weights_client_t){0};
    wire_buf_init(&w->buf, 64);
    w->heard_ms = clock_now_ms();
    if (strlen(endpoint) >= sizeof w->endpoint) {
        log_error("weights endpoint %.64s... longer than %zu bytes", endpoint,
                  sizeof w->endpoint - 1);
        return -1;
    }
    memcpy(w->endpoint, endpoint, strlen(endpoint) + 1);
    // Answers queue at most 4 deep (one per request, plus ones a restarted learner's old
    // connection still delivers); a request is never queued behind another.
    net_opts_t o = {.max_msg_bytes = max_bytes, .rcvhwm = 4, .sndhwm = 1};
    w->sock = net_socket(ctx, ZMQ_DEALER, &o);
    if (!w->sock || security_client(sec, w->sock, "learner") != 0) {
        return -1;
    }
    // A request goes only to a connection that is up: one queued to a learner that is not
    // there would be answered by nobody (weights_client_ask tries again instead).
    int one = 1;
    zmq_setsockopt(w->sock, ZMQ_IMMEDIATE, &one, sizeof one);
    return net_connect(w->sock, endpoint);
}

int weights_client_revive(weights_client_t *w, int64_t now_ms) {
    if (now_ms - w->heard_ms <= WEIGHTS_SILENT_MS) {
        return 0;
    }
    zmq_disconnect(w->sock, w->endpoint);
    net_connect(w->sock, w->endpoint);
    w->heard_ms = now_ms;
    w->in_flight = 0;
    return 1;
}

void weights_client_close(weights_client_t *w) {
    net_close(&w->sock);
    wire_buf_fini(&w->buf);
}

void weights_client_ask(weights_client_t *w, uint64_t have, int64_t now_ms) {
    if (w->in_flight && w->det_target == w->sent_target) {
        // With ZMQ_IMMEDIATE a DEALER without a connection cannot send: the one the request
        // went out on is gone (a learner killed and restarting), and so is the request. Ask
        // the new learner as soon as it is there rather than after WEIGHTS_RESEND_MS.
        int ev = 0;
        size_t len = sizeof ev;
        if (zmq_getsockopt(w->sock, ZMQ_EVENTS, &ev, &len) == 0 && !(ev & ZMQ_POLLOUT)) {
            w->in_flight = 0;
            return;
        }
        if (now_ms - w->sent_ms < WEIGHTS_RESEND_MS) {
            return;
        }
    }
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = have;
    m.u.weights_request.det_target = w->det_target;
    wire_encode(&m, &w->buf);
    if (net_send(w->sock, w->buf.data, w->buf.len, ZMQ_DONTWAIT) == APEX_OK) {
        w->in_flight = 1;
        w->sent_ms = now_ms;
        w->sent_target = w->det_target;
    }
}
