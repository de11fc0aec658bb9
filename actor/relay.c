// relay.c: see relay.h.
#define LOG_MODULE "relay"
#include "relay.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "log.h"
#include "loop.h"
#include "net.h"
#include "nn.h"
#include "security.h"
#include "weights_client.h"
#include "weights_server.h"
#include "wire.h"
#include "xalloc.h"

#define DRAIN_MAX 64         // answers taken from the learner per wake-up (a flood cannot hold it)
#define SERVE_MAX 256        // actors' requests per wake-up
#define TICK_MS 100          // the stop flag, the silence check
#define STATUS_LOG_MS 10000  // the status line
#define LOG_INTERVAL_MS 5000 // rate limit of the warnings

struct relay {
    apex_config_t cfg;
    void *ctx;
    security_t *security; // the learner-facing side only
    weights_client_t up;  // DEALER to the learner
    weights_server_t *down;
    wire_decoder_t *dec;
    loop_t *loop;
    uint64_t version; // served (and held: the version we ask the learner to beat)
    int64_t version_seen_ms;
    relay_stats_t st;
    pthread_mutex_t st_lock; // st_shared for other threads
    relay_stats_t st_shared;
    atomic_int stop_requested;
    log_limiter_t bad_log, old_log, silent_log;
};

// The answers the learner sent: the newest valid version is served. Another kind of
// message, or Weights of another size, is dropped and counted (and the request left to its
// resend timeout, as an actor does, so that a peer answering garbage cannot make us ask
// again and again).
static int s_reader_up(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    relay_t *r = arg;
    int answered = 0;
    for (int i = 0; i < DRAIN_MAX; i++) {
        wire_msg_t m;
        int rc = net_recv_decode(sock, r->dec, &m);
        if (rc == APEX_EAGAIN) {
            break;
        }
        int64_t now = clock_now_ms();
        if (rc == APEX_OK && m.type == WIRE_MSG_WEIGHTS) {
            uint64_t v = m.u.weights.version;
            weights_client_heard(&r->up, now);
            wire_weights_verdict w = wire_weights_judge(v, r->version != 0, r->version,
                                                        now - r->version_seen_ms);
            if (w == WIRE_WEIGHTS_SAME) {
                r->version_seen_ms = now;
                answered = 1;
                continue;
            }
            if (w == WIRE_WEIGHTS_STALE) {
                r->st.stale++;
                log_every(&r->old_log, LOG_INTERVAL_MS, LOG_INFO,
                          "ignored weights " WIRE_VERSION_FMT " older than " WIRE_VERSION_FMT
                          " (a restarted learner's old connection)",
                          WIRE_VERSION_ARGS(v), WIRE_VERSION_ARGS(r->version));
                continue;
            }
            if (v >> 32 != r->version >> 32) {
                log_info("serving weights " WIRE_VERSION_FMT " (learner incarnation %u)",
                         WIRE_VERSION_ARGS(v), (unsigned)(v >> 32));
            }
            // A lower version only after the held one went quiet (a learner started afresh):
            // weights_server_replace lets the served version go down for that case.
            weights_server_replace(r->down, &m.u.weights);
            r->version = v;
            r->version_seen_ms = now;
            r->st.taken++;
            answered = 1;
            continue;
        }
        r->st.bad++;
        log_every(&r->bad_log, LOG_INTERVAL_MS, LOG_WARN,
                  "dropped a bad message from the learner at %s: %s",
                  r->cfg.endpoints.learner_weights,
                  rc == APEX_OK ? "not Weights" : wire_decoder_last_error(r->dec));
    }
    if (answered) {
        weights_client_answered(&r->up);
        weights_client_ask(&r->up, r->version, clock_now_ms());
    }
    return 0;
}

static int s_reader_down(loop_t *loop, void *sock, void *arg) {
    (void)loop;
    (void)sock;
    relay_t *r = arg;
    weights_server_read(r->down, SERVE_MAX, clock_now_ms());
    return 0;
}

// The weights endpoint's counters into st, and st where other threads read it; w (if not
// NULL) gets the endpoint's counters as read.
static void s_publish_stats(relay_t *r, weights_server_stats_t *w_out) {
    weights_server_stats_t w;
    weights_server_stats(r->down, &w);
    r->st.version = r->version;
    r->st.requests = w.requests;
    r->st.answers = w.answers;
    r->st.bytes = w.bytes;
    r->st.refused = w.refused;
    if (w_out) {
        *w_out = w;
    }
    pthread_mutex_lock(&r->st_lock);
    r->st_shared = r->st;
    pthread_mutex_unlock(&r->st_lock);
}

// The held requests' heartbeat, the learner's silence, the stop flag.
static int s_timer_tick(loop_t *loop, void *arg) {
    (void)loop;
    relay_t *r = arg;
    int64_t now = clock_now_ms();
    weights_server_heartbeat(r->down, now);
    if (weights_client_revive(&r->up, now)) {
        r->st.reconnects++;
        log_every(&r->silent_log, LOG_INTERVAL_MS, LOG_WARN,
                  "learner at %s silent for %d s: reconnected", r->up.endpoint,
                  WEIGHTS_SILENT_MS / 1000);
    } else {
        weights_client_ask(&r->up, r->version, now);
    }
    s_publish_stats(r, NULL);
    return atomic_load(&r->stop_requested) ? -1 : 0;
}

static int s_timer_status(loop_t *loop, void *arg) {
    (void)loop;
    relay_t *r = arg;
    weights_server_stats_t w;
    s_publish_stats(r, &w);
    log_info("weights " WIRE_VERSION_FMT "  taken %llu  bad %llu  stale %llu  reconnects %llu  "
             "actors' requests %llu, answers %llu (%llu bytes), held %d, refused %llu",
             WIRE_VERSION_ARGS(r->version), (unsigned long long)r->st.taken,
             (unsigned long long)r->st.bad, (unsigned long long)r->st.stale,
             (unsigned long long)r->st.reconnects, (unsigned long long)w.requests,
             (unsigned long long)w.answers, (unsigned long long)w.bytes, w.held,
             (unsigned long long)w.refused);
    return 0;
}

relay_t *relay_new(const apex_config_t *cfg) {
    const config_endpoints_t *e = &cfg->endpoints;
    if (!e->relay[0]) {
        log_error("[endpoints] relay is empty: nothing to serve the actors on"
                  "\n---> HINT: set it, e.g. --set endpoints.relay=ipc://runs/<name>/relay.sock");
        return NULL;
    }
    relay_t *r = xcalloc(1, sizeof *r);
    r->cfg = *cfg;
    pthread_mutex_init(&r->st_lock, NULL);
    wire_limits_t lim = {.obs_dim = (uint32_t)cfg->env.obs_dim,
                         .n_actions = (uint32_t)cfg->env.n_actions,
                         .num_params = (uint32_t)nn_run_weights_params(cfg),
                         .max_count = 1};
    r->dec = wire_decoder_new(&lim);
    r->ctx = zmq_ctx_new();
    r->security = security_new(r->ctx, cfg, "actor", -1, 0);
    if (!r->security || weights_client_open(&r->up, r->ctx, r->security, e->learner_weights,
                                            (int64_t)wire_max_message_bytes(&lim)) != 0) {
        relay_destroy(&r);
        return NULL;
    }
    // The actors' side is not CURVE: ipc:// is guarded by the file system, and config_check
    // refuses a tcp:// relay when [security] mode = curve.
    // One held request per actor of the host, which has at most the run's actors.
    r->down = weights_server_new(r->ctx, NULL, e->relay, (int)cfg->actor.num_actors + 16);
    if (!r->down) {
        relay_destroy(&r);
        return NULL;
    }
    r->loop = loop_new();
    loop_add_reader(r->loop, r->up.sock, s_reader_up, r);
    loop_add_reader(r->loop, weights_server_socket(r->down), s_reader_down, r);
    loop_add_timer(r->loop, TICK_MS, s_timer_tick, r);
    loop_add_timer(r->loop, STATUS_LOG_MS, s_timer_status, r);
    log_info("relaying the weights of %s to %s (%zu parameters a version)", e->learner_weights,
             weights_server_endpoint(r->down), (size_t)lim.num_params);
    return r;
}

void relay_destroy(relay_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    relay_t *r = *self_p;
    loop_destroy(&r->loop);
    weights_server_destroy(&r->down);
    weights_client_close(&r->up); // a no-op on a client never opened (zeroed)
    security_destroy(&r->security);
    if (r->ctx) {
        zmq_ctx_term(r->ctx);
    }
    wire_decoder_destroy(&r->dec);
    pthread_mutex_destroy(&r->st_lock);
    free(r);
    *self_p = NULL;
}

int relay_run(relay_t *self) {
    weights_client_ask(&self->up, self->version, clock_now_ms());
    loop_run(self->loop);
    s_publish_stats(self, NULL);
    log_info("stopping: weights " WIRE_VERSION_FMT ", %llu versions taken, %llu answers to the "
             "actors (%llu bytes), %llu bad messages from the learner",
             WIRE_VERSION_ARGS(self->version), (unsigned long long)self->st.taken,
             (unsigned long long)self->st.answers, (unsigned long long)self->st.bytes,
             (unsigned long long)self->st.bad);
    return 0;
}

void relay_stop(relay_t *self) { atomic_store(&self->stop_requested, 1); }

void relay_get_stats(relay_t *self, relay_stats_t *out) {
    pthread_mutex_lock(&self->st_lock);
    *out = self->st_shared;
    pthread_mutex_unlock(&self->st_lock);
}

const char *relay_endpoint(const relay_t *self) { return weights_server_endpoint(self->down); }
