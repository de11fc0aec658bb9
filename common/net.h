// net.h: a thin, checked layer over libzmq (STYLE S7, S15).
//
// Every socket is created with ZMQ_LINGER = 0 (so zmq_ctx_term never hangs on a dead
// peer), bounded high-water marks, and optionally ZMQ_MAXMSGSIZE (so an oversized message
// is dropped by libzmq before it is ever buffered). Send and receive retry on EINTR and map
// libzmq's errno to apex_err codes; every failure is logged with zmq_strerror at a bounded
// rate. The sockets themselves are plain libzmq sockets: a socket is used only by the thread
// that created it (zguide rule).
#ifndef APEX_NET_H
#define APEX_NET_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "wire.h"

// Liveness (STYLE S16) is kept by the daemons at the application level, where it also
// covers a peer that is connected but stuck: the learner re-issues sample requests after
// [learner] request_timeout_ms and names a silent replay server; actors re-send batches
// after [actor] ack_timeout_ms and reconnect a socket whose peer stayed silent
// (actor.c SILENT_RECONNECT_MS). ZeroMQ's own ZMTP heartbeats are deliberately off: libzmq
// 4.3.4 (Debian 12) aborts in its heartbeat timer after an I/O error on a paused peer
// (zeromq/libzmq#4364; reproduced by tests/smoke/flood.sh and hostile.sh). The connecting side
// reconnects with capped exponential back-off from RECONNECT_MIN_MS to RECONNECT_MAX_MS.
#define RECONNECT_MIN_MS 100
#define RECONNECT_MAX_MS 5000

typedef struct {
    int64_t max_msg_bytes; // ZMQ_MAXMSGSIZE; 0 = unlimited
    int sndhwm;            // 0 = libzmq default (1000)
    int rcvhwm;
    int64_t reconnect_ivl_ms;     // first reconnect delay; 0 = RECONNECT_MIN_MS
    int64_t reconnect_ivl_max_ms; // capped exponential back-off; 0 = RECONNECT_MAX_MS
} net_opts_t;

// Creates a socket of type (ZMQ_PUSH, ...) with the options above; NULL + log_error on
// failure. Close with net_close.
void *net_socket(void *ctx, int type, const net_opts_t *opts);
void net_close(void **sock_p);

#define NET_ROUTING_ID_MAX 255 // libzmq's bound on a routing id (ZMQ_ROUTING_ID)

// Bind/connect with a log line naming the endpoint on failure. Return 0 or -1.
// net_bind writes the actual endpoint (ephemeral port resolved) into bound if non-NULL.
int net_bind(void *sock, const char *endpoint, char *bound, size_t bound_len);
int net_connect(void *sock, const char *endpoint);

// Sends one frame. flags: ZMQ_DONTWAIT and/or ZMQ_SNDMORE. Returns APEX_OK, APEX_EAGAIN
// (would block / no peer), APEX_ECLOSED (context terminated) or APEX_EIO.
int net_send(void *sock, const void *buf, size_t len, int flags);

// Receives one frame into msg (initialised by the caller with zmq_msg_init). Returns
// APEX_OK, APEX_EAGAIN, APEX_ECLOSED or APEX_EIO. EINTR is returned as APEX_EAGAIN so that
// the caller's loop can look at the shutdown flag.
int net_recv(void *sock, zmq_msg_t *msg, int flags);

// Discards the remaining frames of a multipart message (hostile peers send extra frames).
// Returns how many were dropped.
int net_drain_more(void *sock);

// Receives [routing id][payload] from a ROUTER without blocking (both initialised by the
// caller with zmq_msg_init). Returns 1 with both filled, 0 when nothing is waiting, -1 on a
// closed socket; *extra is set when the message had another shape (its frames drained).
int net_recv_routed(void *sock, zmq_msg_t *id, zmq_msg_t *payload, int *extra);

// Receives one single-frame message without blocking and decodes it with dec (the views in
// *out live in the decoder's arena, valid until its next decode). Returns APEX_EAGAIN when
// nothing is waiting (or the socket failed), APEX_OK, or the decode error; a multipart
// message is APEX_EPROTO, with its extra frames drained.
int net_recv_decode(void *sock, wire_decoder_t *dec, wire_msg_t *out);

#endif
