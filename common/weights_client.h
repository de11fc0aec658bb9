// weights_client.h: asking the learner for weights (actors and the following evaluator).
//
// The learner answers a WeightsRequest on its weights endpoint (a ROUTER) at once when the
// asker's version is older than its current one, and otherwise holds it until the next
// version or for a second or so (learner.c s_reader_weights). A client keeps one request in flight:
// it asks again when an answer arrives, so new versions come as soon as they exist; when
// the connection the request went on is gone (the learner restarted); and when a request
// has gone unanswered for WEIGHTS_RESEND_MS (its answer was dropped).
#ifndef APEX_WEIGHTS_CLIENT_H
#define APEX_WEIGHTS_CLIENT_H

#include <stdint.h>

#include "security.h"
#include "wire.h"

#define WEIGHTS_RESEND_MS 2500 // > the learner's 1-1.5 s hold: an unanswered request is lost
#define WEIGHTS_SILENT_MS 5000 // > two holds: a link this silent is taken for dead
#define WEIGHTS_ENDPOINT_LEN 256

typedef struct {
    void *sock; // DEALER
    int in_flight;
    int64_t sent_ms;
    int64_t heard_ms; // the last Weights message of any version: the link was alive then
    char endpoint[WEIGHTS_ENDPOINT_LEN];
    wire_buf_t buf;
    // [run] deterministic: the target asked for (WeightsRequest.det_target; 0 = the next
    // version), and the one the request in flight asked for: a new target goes out at once.
    uint64_t det_target, sent_target;
} weights_client_t;

// Connects a DEALER to endpoint (with the security of sec, as a client of "learner") that
// accepts messages up to max_bytes. Returns 0, or -1 with the reason logged.
int weights_client_open(weights_client_t *w, void *ctx, security_t *sec, const char *endpoint,
                        int64_t max_bytes);
void weights_client_close(weights_client_t *w);

// Asks for weights newer than have, unless a request younger than WEIGHTS_RESEND_MS is in
// flight. A request that cannot be sent (no connection yet) is tried again on the next call.
void weights_client_ask(weights_client_t *w, uint64_t have, int64_t now_ms);

// An answer was taken (a version newer than or equal to the one held): the next ask sends
// at once.
static inline void weights_client_answered(weights_client_t *w) { w->in_flight = 0; }

// A Weights message arrived (whatever its version or verdict): the link is alive.
static inline void weights_client_heard(weights_client_t *w, int64_t now_ms) {
    w->heard_ms = now_ms;
}

// A link silent for WEIGHTS_SILENT_MS is reconnected by hand: libzmq stops reconnecting a
// socket whose peer sent a message above ZMQ_MAXMSGSIZE (a protocol error to it, which a
// hostile or broken peer can use to cut a client off for good), and a peer that vanished
// without closing its end (a host down, a firewall dropping the flow) leaves a connection
// that looks up. Call it after reading what is queued, so that a client busy elsewhere
// (an evaluation) is not taken for cut off. Returns 1 when it reconnected (the caller logs
// and counts it; the request in flight went with the old connection and the next ask sends
// a new one: not in the same breath, which could still put it on the closing connection),
// else 0.
int weights_client_revive(weights_client_t *w, int64_t now_ms);

#endif
