// net.c: see net.h.
#define LOG_MODULE "net"
#include "net.h"

#include "apex.h"
#include "log.h"

#include <errno.h>
#include <string.h>

static void s_setopt_int(void *s, int opt, int v, const char *name) {
    if (zmq_setsockopt(s, opt, &v, sizeof v) != 0) {
        log_warn("zmq_setsockopt(%s=%d): %s", name, v, zmq_strerror(errno));
    }
}

void *net_socket(void *ctx, int type, const net_opts_t *opts) {
    void *s = zmq_socket(ctx, type);
    if (!s) {
        log_error("zmq_socket(type %d): %s", type, zmq_strerror(errno));
        return NULL;
    }
    net_opts_t o = opts ? *opts : (net_opts_t){0};
    s_setopt_int(s, ZMQ_LINGER, 0, "ZMQ_LINGER");
    if (o.max_msg_bytes > 0) {
        int64_t m = o.max_msg_bytes;
        if (zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &m, sizeof m) != 0) {
            log_warn("zmq_setsockopt(ZMQ_MAXMSGSIZE): %s", zmq_strerror(errno));
        }
    }
    if (o.sndhwm > 0) {
        s_setopt_int(s, ZMQ_SNDHWM, o.sndhwm, "ZMQ_SNDHWM");
    }
    if (o.rcvhwm > 0) {
        s_setopt_int(s, ZMQ_RCVHWM, o.rcvhwm, "ZMQ_RCVHWM");
    }
    s_setopt_int(s, ZMQ_RECONNECT_IVL,
                 (int)(o.reconnect_ivl_ms ? o.reconnect_ivl_ms : RECONNECT_MIN_MS),
                 "ZMQ_RECONNECT_IVL");
    s_setopt_int(s, ZMQ_RECONNECT_IVL_MAX,
                 (int)(o.reconnect_ivl_max_ms ? o.reconnect_ivl_max_ms : RECONNECT_MAX_MS),
                 "ZMQ_RECONNECT_IVL_MAX");
    if (type == ZMQ_ROUTER) {
        // A peer that reconnects under the same routing id (a restarted actor whose old
        // connection is not yet known to be dead) takes the id over instead of being ignored.
        s_setopt_int(s, ZMQ_ROUTER_HANDOVER, 1, "ZMQ_ROUTER_HANDOVER");
    }
    return s;
}

void net_close(void **sock_p) {
    if (sock_p && *sock_p) {
        zmq_close(*sock_p);
        *sock_p = NULL;
    }
}

int net_bind(void *sock, const char *endpoint, char *bound, size_t bound_len) {
    if (zmq_bind(sock, endpoint) != 0) {
        log_error("cannot bind %s: %s%s", endpoint, zmq_strerror(errno),
                  errno == EADDRINUSE ? " (another apex daemon running? change [endpoints])" : "");
        return -1;
    }
    if (bound && bound_len) {
        size_t n = bound_len;
        if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, bound, &n) != 0) {
            snprintf(bound, bound_len, "%s", endpoint);
        }
    }
    return 0;
}

int net_connect(void *sock, const char *endpoint) {
    // connect is asynchronous in ZeroMQ: it fails only for a malformed endpoint; an absent
    // peer is retried in the background with the reconnect back-off set above.
    if (zmq_connect(sock, endpoint) != 0) {
        log_error("cannot connect to %s: %s", endpoint, zmq_strerror(errno));
        return -1;
    }
    return 0;
}

static int s_map_errno(int e) {
    switch (e) {
    case EAGAIN:
    case EINTR:
        return APEX_EAGAIN;
    case ETERM:
    case ENOTSOCK:
        return APEX_ECLOSED;
    case EHOSTUNREACH:
        return APEX_EAGAIN; // ROUTER: the peer is gone; the caller drops the reply
    default:
        return APEX_EIO;
    }
}

int net_send(void *sock, const void *buf, size_t len, int flags) {
    for (;;) {
        if (zmq_send(sock, buf, len, flags) >= 0) {
            return APEX_OK;
        }
        if (errno == EINTR && !(flags & ZMQ_DONTWAIT)) {
            continue; // a blocking send interrupted by a signal: retry once more
        }
        return s_map_errno(errno);
    }
}

int net_recv(void *sock, zmq_msg_t *msg, int flags) {
    if (zmq_msg_recv(msg, sock, flags) >= 0) {
        return APEX_OK;
    }
    return s_map_errno(errno);
}

int net_drain_more(void *sock) {
    int dropped = 0;
    int more = 0;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        zmq_msg_close(&m);
        dropped++;
        sz = sizeof more;
    }
    return dropped;
}

int net_recv_routed(void *sock, zmq_msg_t *id, zmq_msg_t *payload, int *extra) {
    *extra = 0;
    int rc = net_recv(sock, id, ZMQ_DONTWAIT);
    if (rc == APEX_EAGAIN) {
        return 0;
    }
    if (rc != APEX_OK) {
        return -1;
    }
    if (!zmq_msg_more(id) || net_recv(sock, payload, ZMQ_DONTWAIT) != APEX_OK) {
        *extra = 1; // a ROUTER always delivers id + payload; anything else is malformed
        return 1;
    }
    if (zmq_msg_more(payload)) {
        *extra = net_drain_more(sock);
    }
    return 1;
}

int net_recv_decode(void *sock, wire_decoder_t *dec, wire_msg_t *out) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (net_recv(sock, &msg, ZMQ_DONTWAIT) != APEX_OK) {
        zmq_msg_close(&msg);
        return APEX_EAGAIN;
    }
    int rc = wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), out);
    if (zmq_msg_more(&msg)) {
        net_drain_more(sock);
        rc = APEX_EPROTO;
    }
    zmq_msg_close(&msg); // the views in *out point into the decoder's arena, not into msg
    return rc;
}
