// weights_server.h: the weights endpoint, the twin of weights_client.h.
//
// A ROUTER, bound. A client (an actor, apex-eval --follow) sends a WeightsRequest with the
// newest version it holds; the server answers at once when that is older than the current
// version, and otherwise holds the request (one entry per peer) until the next version is
// published, or for WEIGHTS_SERVER_HOLD_MS at most, when it answers with the current
// weights anyway, so that a client that hears nothing for several seconds knows its link is
// dead, not the learner slow (weights_client.h's WEIGHTS_RESEND_MS is longer). A version is
// encoded once into a message of its own, and every answer shares its buffer
// (zmq_msg_copy counts references).
//
// Why a ROUTER and not a PUB (docs/architecture.md "Weights are asked for, not published"): a
// PUB or XPUB handles every subscription a peer sends inside libzmq, eagerly, and a peer that
// floods subscriptions kept the learner's thread there (2.5 GB, nothing published for a
// minute, in a CI run). A ROUTER only queues what a peer sends, WEIGHTS_SERVER_RCVHWM deep
// per peer, and weights_server_read takes at most a bounded number per call, fairly over the
// peers: a flooding peer is slowed by TCP and costs its own queue. Answers go out with
// ZMQ_DONTWAIT on a ROUTER without ZMQ_ROUTER_MANDATORY: an answer to a peer whose queue
// (WEIGHTS_SERVER_SNDHWM) is full or that is gone is dropped, and that peer asks again.
//
// Every message is peer input: one that is not [routing id][one frame] holding a valid
// WeightsRequest is counted (refused), logged at most once per interval and dropped. A full
// hold table (hold_max peers waiting: a flood of connections, or more clients than the
// server was sized for) drops the request, counted: answering it at once would make the
// client ask again at once, a loop of full weights.
// Not thread-safe: one thread owns the server and its socket.
#ifndef APEX_WEIGHTS_SERVER_H
#define APEX_WEIGHTS_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "security.h"
#include "wire.h"

#define WEIGHTS_SERVER_HOLD_MS 1000 // a held request is answered after this long regardless
#define WEIGHTS_SERVER_SNDHWM 4     // answers queued per peer (one per request, and a spare)
#define WEIGHTS_SERVER_RCVHWM 16    // requests queued per peer
// A request is a few bytes, but the bound also applies to ZMTP handshake commands, and a
// CURVE HELLO/INITIATE is a few hundred bytes (tests/smoke/curve.sh).
#define WEIGHTS_SERVER_MAX_REQUEST_BYTES 4096

typedef struct weights_server weights_server_t;

typedef struct {
    uint64_t requests; // valid requests
    uint64_t answers;  // answers handed to the socket
    uint64_t bytes;    // their Weights messages' bytes (the egress, framing aside)
    uint64_t refused;  // messages that were not valid requests
    uint64_t unheld;   // valid requests dropped with the hold table full
    int held;          // requests held right now
} weights_server_stats_t;

// Binds a ROUTER to endpoint on ctx (a CURVE server through sec, which may be NULL for
// none) whose hold table takes hold_max peers. Returns NULL after logging why (address in
// use, bad endpoint). Caller destroys with weights_server_destroy (before zmq_ctx_term).
weights_server_t *weights_server_new(void *ctx, security_t *sec, const char *endpoint,
                                     int hold_max);
void weights_server_destroy(weights_server_t **self_p);

// The endpoint as bound (an ephemeral port resolved). Borrowed, valid until destroy.
const char *weights_server_endpoint(const weights_server_t *self);
// The ROUTER, for a loop reader that calls weights_server_read.
void *weights_server_socket(const weights_server_t *self);

// Handles what waits on the socket, at most max messages. Returns how many were taken.
int weights_server_read(weights_server_t *self, int max, int64_t now_ms);
// Handles one message from the peer id: body[0..len) is the frame after the routing id, and
// extra is nonzero when the message had another shape than [routing id][one frame] (its
// other frames already drained). The path weights_server_read takes for each message.
void weights_server_handle(weights_server_t *self, const void *id, size_t id_len, const void *body,
                           size_t len, int extra, int64_t now_ms);

// Makes w the current version (its version must be above the current one's: versions only
// increase) and answers every held request with it.
void weights_server_publish(weights_server_t *self, const wire_weights_t *w);
// The same, with the parameters written by fill(arg, dst) straight into the outgoing message
// (dst: w->num_params x 4 bytes, little-endian floats, possibly unaligned; w->params is not
// read): the learner's one copy of what it publishes is the message itself (wire.h,
// wire_weights_encode_hole). The message is the one weights_server_publish sends.
typedef void (*weights_fill_fn)(void *arg, void *dst);
void weights_server_publish_fill(weights_server_t *self, const wire_weights_t *w,
                                 weights_fill_fn fill, void *arg);
// The same without the order: w's version may be below the current one. For a relay
// (actor/relay.h) that follows a learner started afresh, whose versions count from the start
// again; its peers take the lower version once the higher one has gone quiet
// (wire_weights_judge).
void weights_server_replace(weights_server_t *self, const wire_weights_t *w);
// Answers the requests held since WEIGHTS_SERVER_HOLD_MS or longer with the current weights.
void weights_server_heartbeat(weights_server_t *self, int64_t now_ms);

// Deterministic runs ([run] deterministic, docs/architecture.md "Deterministic runs"): a
// WeightsRequest with det_target t is answered with the weights the learner named for t
// (weights_server_det_set), whose message carries det_target = t; it is held until they are
// known (the heartbeat answers it meanwhile with the current weights, which the client
// ignores but which tell it the link is alive). The versions published through
// weights_server_publish_fill are kept, the last WEIGHTS_SERVER_DET_KEEP of them, for the
// targets that name them later; a target names the current version or a later one in a
// run that keeps to the schedule. Targets are kept WEIGHTS_SERVER_DET_TARGETS at a time
// (by number: an actor asks for its own within a few of the newest).
#define WEIGHTS_SERVER_DET_KEEP 16
#define WEIGHTS_SERVER_DET_TARGETS 16
void weights_server_det_enable(weights_server_t *self);
// Target (>= 1) is answered with version: at once if kept, or once it is published.
void weights_server_det_set(weights_server_t *self, uint64_t target, uint64_t version);

// The current version (0 before the first publish).
uint64_t weights_server_version(const weights_server_t *self);
void weights_server_stats(const weights_server_t *self, weights_server_stats_t *out);

#endif
