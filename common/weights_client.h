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

typedef struct {
    void *sock; // DEALER
    int in_flight;
    int64_t sent_ms;
    wire_buf_t buf;
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

#endif
