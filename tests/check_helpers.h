// check_helpers.h: a stand-in for the learner's weights endpoint, for suites that test its
// clients (the actor; apex-eval --follow). The other shared helpers are in check_apex.h.
//
// The learner binds a ROUTER that reads [routing id][WeightsRequest] and answers
// [routing id][Weights] (docs/architecture.md "Weights", common/weights_client.h). The stand-in
// is a plain ROUTER of the test's; these functions read the requests on it, fail the test on
// anything a client must not send there, and answer. Unlike the learner they never hold a
// request: a test answers when it chooses to (at once, later, or never), which a client must
// cope with anyway.
//
// Every function fails the test (ck_assert) on a socket error; none is thread-safe beyond
// the socket it is given (one thread per socket, as libzmq requires).
#ifndef APEX_CHECK_HELPERS_H
#define APEX_CHECK_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

// A ROUTER on ctx bound to an ephemeral loopback port, with ZMQ_LINGER 0; the endpoint it
// bound goes to ep (ep_len bytes). The caller closes it with zmq_close.
void *check_weights_router(void *ctx, char *ep, size_t ep_len);

// One request read from the ROUTER: who asked (to address the answer) and what it holds.
typedef struct {
    uint8_t id[256]; // routing id (libzmq's are at most 255 bytes)
    size_t id_len;
    uint64_t have_version;
} check_weights_request_t;

// Waits until the monotonic time deadline_ms (clock_now_ms) for one request. Returns 1 with
// *req filled, 0 when the deadline passed first. Anything but [routing id][one WeightsRequest
// frame] fails the test.
int check_weights_wait_request(void *router, int64_t deadline_ms, check_weights_request_t *req);

// Sends [to's routing id][data, len bytes] on router. flags 0 ends the message; ZMQ_SNDMORE
// leaves it open for frames the caller adds with zmq_send (a malformed answer). A ROUTER does
// not block: a message to a peer that is gone or whose queue is full is dropped.
void check_weights_send(void *router, const check_weights_request_t *to, const void *data,
                        size_t len, int flags);

// Answers every request already waiting on router (without waiting for one) with the encoded
// message in answer, e.g. from check_encode_weights. Returns how many were answered; when
// that is > 0 and have is not NULL, *have is the last request's have_version.
int check_weights_answer(void *router, const wire_buf_t *answer, uint64_t *have);

// Encodes Weights{version, learner_step = 100 * version, params[0..num_params)} into out
// (initialised by the caller with wire_buf_init).
void check_encode_weights(wire_buf_t *out, uint64_t version, const float *params,
                          uint32_t num_params);

#endif
