// check_replay_server.c: apex-replay's server over real ZeroMQ sockets on ephemeral loopback
// ports, run in a thread: inserts from two actors, sampling, priority updates, the limiter's
// "not ready" after its timeout, and hostile input on both endpoints (the server keeps
// serving and counts each bad message). The deterministic schedule's cases at the end drive
// servers made with listen = 0 through replay_server_handle instead (no sockets, no timing).
#include "check_apex.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "rng.h"
#include "server.h"
#include "server_int.h" // INSERT_SLICE, SAMPLE_BURST and the sockets, for the scheduling tests
#include "wire.h"

#define OBS 4

typedef struct {
    replay_server_t *server;
    pthread_t thread;
    void *ctx;
    // s_connect's clients (NULL before it): actor-0 and actor-1 on the insert endpoint, a
    // learner on the sample endpoint, a decoder for s_lim; and the reply s_reply returned
    // last, with the frame it lives in. s_stop closes them.
    void *a0, *a1, *lr;
    wire_decoder_t *dec;
    wire_msg_t m;
    zmq_msg_t msg;
    int msg_open;
} s_fixture;

static void *s_run(void *arg) {
    replay_server_run(arg);
    return NULL;
}

static void s_create(s_fixture *f, int64_t min_size, double spi) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN], a[64], b[64];
    snprintf(a, sizeof a, "replay.min_size_to_sample=%lld", (long long)min_size);
    snprintf(b, sizeof b, "replay.samples_per_insert=%g", spi);
    const char *sets[] = {"replay.capacity=1000",
                          "replay.max_batch=64",
                          "replay.sample_timeout_ms=200",
                          "learner.batch_size=32",
                          "actor.send_batch=8",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                          "replay.spi_tolerance=0",
                          a,
                          b};
    ck_assert_msg(config_load(&cfg, NULL, sets, 10, err, sizeof err) == 0, "%s", err);
    *f = (s_fixture){.server = replay_server_new(&cfg, 1)};
    ck_assert_ptr_nonnull(f->server);
    f->ctx = zmq_ctx_new();
}

// Starts the server's loop thread (pthread_create orders the test thread's earlier use of
// the server's sockets before the loop's).
static void s_run_loop(s_fixture *f) {
    ck_assert_int_eq(pthread_create(&f->thread, NULL, s_run, f->server), 0);
}

static void s_start(s_fixture *f, int64_t min_size, double spi) {
    s_create(f, min_size, spi);
    s_run_loop(f);
}

static void *s_dealer(s_fixture *f, const char *ep, const char *id) {
    return check_dealer(f->ctx, ep, id, 3000);
}

static const wire_limits_t s_lim = {.obs_dim = OBS, .n_actions = 2, .max_count = 64};

// The usual clients: actor-0 (and actor-1 when actors is 2) on the insert endpoint, a
// learner on the sample endpoint, a decoder for s_lim.
static void s_connect(s_fixture *f, int actors) {
    f->a0 = s_dealer(f, replay_server_insert_endpoint(f->server), "actor-0");
    f->a1 = actors > 1 ? s_dealer(f, replay_server_insert_endpoint(f->server), "actor-1") : NULL;
    f->lr = s_dealer(f, replay_server_sample_endpoint(f->server), NULL);
    f->dec = wire_decoder_new(&s_lim);
}

// Closes s_connect's clients (if any), stops the server and joins its thread.
static void s_stop(s_fixture *f) {
    if (f->msg_open) {
        zmq_msg_close(&f->msg);
        f->msg_open = 0;
    }
    wire_decoder_destroy(&f->dec);
    void **socks[] = {&f->a0, &f->a1, &f->lr};
    for (size_t i = 0; i < APEX_ARRAY_LEN(socks); i++) {
        if (*socks[i]) {
            zmq_close(*socks[i]);
            *socks[i] = NULL;
        }
    }
    replay_server_stop(f->server);
    pthread_join(f->thread, NULL);
    zmq_ctx_term(f->ctx);
}

// Sends a batch of n rows whose observations all equal `tag` (so samples are traceable).
static void s_send_batch(void *sock, uint32_t actor, uint64_t seq, int n, float tag,
                         const float *prio) {
    check_rows_t r;
    for (int i = 0; i < n * OBS; i++) {
        r.obs[i] = tag;
        r.next_obs[i] = tag + 0.5f;
    }
    for (int i = 0; i < n; i++) {
        r.rewards[i] = tag;
        r.discounts[i] = 0.99f;
        r.actions[i] = i % 2;
    }
    check_send_rows(sock, &r, (uint32_t)n, OBS, actor, seq, prio);
}

// Receives one message and decodes it into *out using dec. Returns the apex_err.
static int s_recv(void *sock, wire_decoder_t *dec, zmq_msg_t *msg, wire_msg_t *out) {
    zmq_msg_init(msg);
    if (zmq_msg_recv(msg, sock, 0) < 0) {
        return APEX_ETIMEDOUT;
    }
    return wire_decode(dec, zmq_msg_data(msg), zmq_msg_size(msg), out);
}

// Receives the learner's next message and asserts that it is SampleReply `id` with `status`.
// The reply is valid until the next s_reply or s_stop.
static const wire_sample_reply_t *s_reply(s_fixture *f, uint64_t id, wire_sample_status status) {
    if (f->msg_open) {
        zmq_msg_close(&f->msg);
    }
    f->msg_open = 1;
    ck_assert_int_eq(s_recv(f->lr, f->dec, &f->msg, &f->m), APEX_OK);
    ck_assert_int_eq(f->m.type, WIRE_MSG_SAMPLE_REPLY);
    ck_assert_uint_eq(f->m.u.sample_reply.id, id);
    ck_assert_int_eq(f->m.u.sample_reply.status, status);
    return &f->m.u.sample_reply;
}

static void s_send_request(void *sock, uint64_t id, uint32_t n) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = id, .batch_size = n, .beta = 0.5f};
    check_send_msg(sock, &m);
}

START_TEST(test_insert_sample_update) {
    s_fixture f;
    s_start(&f, 10, 0);
    s_connect(&f, 2);
    wire_msg_t m;
    zmq_msg_t msg;
    // Two actors insert; each batch is acknowledged with its (actor, seq).
    float hi[8] = {100, 100, 100, 100, 100, 100, 100, 100};
    s_send_batch(f.a0, 0, 0, 8, 1.0f, NULL);
    s_send_batch(f.a1, 1, 0, 8, 2.0f, hi);
    ck_assert_int_eq(s_recv(f.a0, f.dec, &msg, &m), APEX_OK);
    ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
    ck_assert_uint_eq(m.u.insert_ack.actor_id, 0);
    zmq_msg_close(&msg);
    ck_assert_int_eq(s_recv(f.a1, f.dec, &msg, &m), APEX_OK);
    ck_assert_uint_eq(m.u.insert_ack.actor_id, 1);
    zmq_msg_close(&msg);
    // Several requests in flight, each answered with its own id.
    s_send_request(f.lr, 11, 32);
    s_send_request(f.lr, 12, 32);
    uint64_t keys[32];
    int seen[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        ck_assert_int_eq(s_recv(f.lr, f.dec, &msg, &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_SAMPLE_REPLY);
        const wire_sample_reply_t *rep = &m.u.sample_reply;
        ck_assert_int_eq(rep->status, WIRE_SAMPLE_OK);
        ck_assert(rep->id == 11 || rep->id == 12);
        seen[rep->id - 11]++;
        ck_assert_uint_eq(rep->count, 32);
        ck_assert_uint_eq(rep->stats.size, 16);
        int from_hi = 0;
        const float *obs = rep->obs, *next_obs = rep->next_obs;
        for (int i = 0; i < 32; i++) {
            from_hi += obs[i * OBS] == 2.0f;
            ck_assert_float_eq(next_obs[i * OBS], obs[i * OBS] + 0.5f);
        }
        // priority 100 vs the default max (100, the largest seen): both batches equal...
        ck_assert_int_gt(from_hi, 0);
        memcpy(keys, rep->keys, sizeof keys);
        zmq_msg_close(&msg);
    }
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(seen[1], 1);
    // Priority update: make every sampled key tiny except none; then sampling must favour
    // the rest. Send it and check through the stats of the next reply.
    float low[32];
    for (int i = 0; i < 32; i++) {
        low[i] = 1e-6f;
    }
    wire_msg_t up = {.type = WIRE_MSG_PRIORITY_UPDATE};
    up.u.priority_update = (wire_priority_update_t){.count = 32, .keys = keys, .priorities = low};
    check_send_msg(f.lr, &up);
    s_send_request(f.lr, 13, 32);
    const wire_sample_reply_t *r13 = s_reply(&f, 13, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r13->stats.updated, 32);
    ck_assert_double_lt(r13->stats.total_priority, 16 * pow(100, 0.6));
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.inserted, 16);
    ck_assert_uint_eq(st.sampled, 96);
    ck_assert_uint_eq(st.bad_messages, 0);
    replay_server_destroy(&f.server);
}
END_TEST

START_TEST(test_limiter_not_ready_then_ok) {
    s_fixture f;
    s_start(&f, 20, 0);
    s_connect(&f, 1);
    // Empty replay: the request is held, then answered NOT_READY after ~200 ms.
    s_send_request(f.lr, 1, 8);
    ck_assert_uint_ge(s_reply(&f, 1, WIRE_SAMPLE_NOT_READY)->stats.limiter_waits, 1);
    // A held request is served as soon as enough data arrives (before its timeout).
    s_send_request(f.lr, 2, 8);
    s_send_batch(f.a0, 0, 0, 8, 1.0f, NULL);
    s_send_batch(f.a0, 0, 1, 8, 1.0f, NULL);
    s_send_batch(f.a0, 0, 2, 8, 1.0f, NULL);
    s_reply(&f, 2, WIRE_SAMPLE_OK);
    s_stop(&f);
    replay_server_destroy(&f.server);
}
END_TEST

START_TEST(test_samples_per_insert_ratio) {
    s_fixture f;
    s_start(&f, 1, 1.0); // at most one sampled row per inserted row, no tolerance
    s_connect(&f, 1);
    s_send_batch(f.a0, 0, 0, 8, 1.0f, NULL);
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    zmq_msg_recv(&msg, f.a0, 0); // ack: the batch is in
    zmq_msg_close(&msg);
    s_send_request(f.lr, 1, 8); // 8 <= 1.0 * 8: allowed
    s_reply(&f, 1, WIRE_SAMPLE_OK);
    s_send_request(f.lr, 2, 8); // 16 > 8: held, then not ready
    s_reply(&f, 2, WIRE_SAMPLE_NOT_READY);
    s_stop(&f);
    replay_server_destroy(&f.server);
}
END_TEST

START_TEST(test_hostile_input_counted_and_survived) {
    s_fixture f;
    s_start(&f, 1, 0);
    void *ins = s_dealer(&f, replay_server_insert_endpoint(f.server), "evil");
    void *smp = s_dealer(&f, replay_server_sample_endpoint(f.server), "evil2");
    // Garbage, empty frame, a multipart message, a truncated batch, another version, NaN,
    // and a request on the wrong socket.
    const char junk[] = "\x0a\xff\xff\xff\xff\x0fhello";
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    float obs[OBS] = {0, 1, 2, 3}, next[OBS] = {0, 1, 2, NAN}, r = 1, d = 1;
    int32_t a = 0;
    m.u.batch = (wire_batch_t){.count = 1,
                               .obs_dim = OBS,
                               .obs = obs,
                               .actions = &a,
                               .rewards = &r,
                               .discounts = &d,
                               .next_obs = obs};
    wire_buf_t good, other, nan;
    wire_buf_init(&good, 0);
    wire_buf_init(&other, 0);
    wire_buf_init(&nan, 0);
    wire_encode(&m, &good);
    wire_encode_version(&m, 99, &other);
    m.u.batch.next_obs = next;
    wire_encode(&m, &nan);
    void *socks[2] = {ins, smp};
    for (int k = 0; k < 2; k++) {
        void *s = socks[k];
        zmq_send(s, junk, sizeof junk, 0);
        zmq_send(s, "", 0, 0);
        zmq_send(s, good.data, good.len, ZMQ_SNDMORE);
        zmq_send(s, good.data, good.len, 0);
        zmq_send(s, good.data, good.len / 2, 0);
        zmq_send(s, other.data, other.len, 0);
        zmq_send(s, nan.data, nan.len, 0);
        if (s == smp) {
            zmq_send(s, good.data, good.len, 0); // a valid batch on the wrong socket
        }
    }
    // Still serving: a legitimate actor and learner get through.
    s_connect(&f, 1);
    s_send_batch(f.a0, 0, 0, 8, 3.0f, NULL);
    zmq_msg_t msg;
    wire_msg_t out;
    ck_assert_int_eq(s_recv(f.a0, f.dec, &msg, &out), APEX_OK);
    zmq_msg_close(&msg);
    s_send_request(f.lr, 5, 4);
    s_reply(&f, 5, WIRE_SAMPLE_OK);
    zmq_close(ins);
    zmq_close(smp);
    s_stop(&f);
    // Per socket: junk, empty, multipart, truncated, other version, NaN = 6, plus the batch
    // on the sample socket = 13. Of these, the two NaN batches and the wrong-socket batch
    // were recognised as TransitionBatch; the rest never got that far.
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.bad_messages, 13);
    ck_assert_uint_eq(st.inserted, 8); // nothing from the hostile peer was stored
    ck_assert_uint_eq(replay_server_bad_count(f.server, WIRE_MSG_TRANSITION_BATCH), 3);
    wire_buf_fini(&good);
    wire_buf_fini(&other);
    wire_buf_fini(&nan);
    replay_server_destroy(&f.server);
}
END_TEST

// Before the loop runs: waits until the server's socket has a message queued (sent by a
// client, carried by libzmq's I/O thread), peeking with zmq_poll, which consumes nothing;
// then gives the rest of a flood a moment to arrive behind it. The assertions below hold
// however much of the flood has arrived when the loop starts; the pause only makes them
// sharper (a loop that drained whole sockets first fails them once the flood is queued).
static void s_wait_queued(void *server_sock) {
    zmq_pollitem_t it = {.socket = server_sock, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&it, 1, 5000), 1);
    struct timespec pause = {0, 100 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

static void s_send_stale_update(void *sock) {
    uint64_t key = 999; // slot 999 of an empty store: dropped as stale, and counted
    float prio = 1.0f;
    wire_msg_t m = {.type = WIRE_MSG_PRIORITY_UPDATE};
    m.u.priority_update = (wire_priority_update_t){.count = 1, .keys = &key, .priorities = &prio};
    check_send_msg(sock, &m);
}

// Receives InsertAcks on sock until n seqs are acknowledged (an ack may carry several);
// fails on anything else. The seqs go to out in the order they were acknowledged.
static void s_recv_acked(void *sock, wire_decoder_t *dec, uint64_t *out, int n) {
    int got = 0;
    while (got < n) {
        wire_msg_t m;
        zmq_msg_t msg;
        ck_assert_int_eq(s_recv(sock, dec, &msg, &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
        ck_assert_int_le(got + 1 + (int)m.u.insert_ack.n_more, n);
        out[got++] = m.u.insert_ack.seq;
        for (uint32_t k = 0; k < m.u.insert_ack.n_more; k++) {
            out[got++] = m.u.insert_ack.more[k];
        }
        zmq_msg_close(&msg);
    }
}

// Sampling is not starved by inserts: with hundreds of insert batches queued, a waiting
// SampleRequest is answered after at most one slice of them (the old loop drained up to
// MAX_DRAIN = 256 inserts first).
START_TEST(test_sample_served_between_insert_slices) {
    enum { FLOOD = 300, ROWS = 8 };
    s_fixture f;
    s_create(&f, ROWS, 0); // the first batch makes sampling possible
    s_connect(&f, 1);
    for (int i = 0; i < FLOOD; i++) {
        s_send_batch(f.a0, 0, (uint64_t)i, ROWS, 1.0f, NULL);
    }
    s_send_request(f.lr, 7, ROWS);
    s_wait_queued(f.server->insert_sock);
    s_wait_queued(f.server->sample_sock); // the request waits before the loop starts
    s_run_loop(&f);
    const wire_sample_reply_t *r = s_reply(&f, 7, WIRE_SAMPLE_OK);
    // Held (the store was empty) and answered right after the first insert slice.
    ck_assert_uint_ge(r->stats.inserted, ROWS);
    ck_assert_uint_le(r->stats.inserted, INSERT_SLICE * ROWS);
    // Every insert is still acknowledged, in order (acks are coalesced per slice).
    uint64_t acked[FLOOD];
    s_recv_acked(f.a0, f.dec, acked, FLOOD);
    for (int i = 0; i < FLOOD; i++) {
        ck_assert_uint_eq(acked[i], (uint64_t)i);
    }
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.inserted, FLOOD * ROWS);
    replay_server_destroy(&f.server);
}
END_TEST

// Inserts are not starved by the sample socket: with a request followed by hundreds of
// priority updates queued there, the waiting insert is handled after at most SAMPLE_BURST
// of them; the held request, answered right after that insert, shows how many.
START_TEST(test_insert_served_during_sample_flood) {
    enum { FLOOD = 500, ROWS = 8 };
    s_fixture f;
    s_create(&f, ROWS, 0);
    s_connect(&f, 1);
    s_send_request(f.lr, 1, ROWS); // held: the store is empty
    for (int i = 0; i < FLOOD; i++) {
        s_send_stale_update(f.lr);
    }
    s_send_request(f.lr, 2, ROWS);
    s_send_batch(f.a0, 0, 0, ROWS, 1.0f, NULL);
    s_wait_queued(f.server->sample_sock);
    s_wait_queued(f.server->insert_sock);
    s_run_loop(&f);
    wire_msg_t m;
    zmq_msg_t msg;
    ck_assert_int_eq(s_recv(f.a0, f.dec, &msg, &m), APEX_OK);
    ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
    zmq_msg_close(&msg);
    ck_assert_uint_le(s_reply(&f, 1, WIRE_SAMPLE_OK)->stats.stale_updates, SAMPLE_BURST);
    // The rest of the flood is handled too, in order, before the second request.
    ck_assert_uint_eq(s_reply(&f, 2, WIRE_SAMPLE_OK)->stats.stale_updates, FLOOD);
    s_stop(&f);
    replay_server_destroy(&f.server);
}
END_TEST

// Zero-copy replies (server.c s_send_reply) lend ring buffers to libzmq until its I/O thread
// has written them. A learner that stops reading leaves replies queued in libzmq, which
// holds their buffers; the server must then copy instead of reusing a buffer whose bytes
// are still queued. Every reply that arrives must be intact and in order.
START_TEST(test_queued_replies_intact_when_learner_stalls) {
    enum { ROWS = 4096, BATCHES = ROWS / 64, REQUESTS = 120 };
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"replay.capacity=8192",
                          "replay.max_batch=4096",
                          "learner.batch_size=4096",
                          "actor.send_batch=64",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                          "replay.min_size_to_sample=1"};
    ck_assert_msg(config_load(&cfg, NULL, sets, 7, err, sizeof err) == 0, "%s", err);
    s_fixture f = {.server = replay_server_new(&cfg, 1), .ctx = zmq_ctx_new()};
    ck_assert_ptr_nonnull(f.server);
    s_run_loop(&f);
    wire_limits_t lim = s_lim;
    lim.max_count = ROWS;
    lim.max_message_bytes = wire_max_message_bytes(&lim);
    wire_decoder_t *dec = wire_decoder_new(&lim);
    wire_msg_t m;
    zmq_msg_t msg;
    void *a0 = s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0");
    for (int i = 0; i < BATCHES; i++) {
        s_send_batch(a0, 0, (uint64_t)i, 64, (float)i, NULL);
    }
    uint64_t acked[BATCHES];
    s_recv_acked(a0, dec, acked, BATCHES);
    // A learner that reads nothing while ~27 MB of replies are produced: more than the
    // loopback socket buffers hold, so libzmq keeps the rest (and their buffers) queued.
    void *lr = zmq_socket(f.ctx, ZMQ_DEALER);
    // A small kernel buffer, but not the minimum: at ~2 KB the TCP window and delayed ACKs
    // brought a 230 KB reply down to ~60 KB/s, and under ASan on a loaded CI machine the
    // first reply took longer than the read timeout. The first read waits long; later ones
    // only until the queue is seen to be empty.
    int one = 1, zero = 0, rcvbuf = 64 * 1024, timeout = 10000, timeout_after_first = 3000;
    zmq_setsockopt(lr, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(lr, ZMQ_RCVBUF, &rcvbuf, sizeof rcvbuf);
    zmq_setsockopt(lr, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(lr, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_connect(lr, replay_server_sample_endpoint(f.server)), 0);
    for (int i = 1; i <= REQUESTS; i++) {
        s_send_request(lr, (uint64_t)i, ROWS);
    }
    // Every request is answered before anything is read: a second learner asks for one row
    // until the stats in its reply count all of them.
    void *probe = s_dealer(&f, replay_server_sample_endpoint(f.server), NULL);
    uint64_t sampled = 0;
    for (int k = 0; k < 500 && sampled < (uint64_t)REQUESTS * ROWS; k++) {
        s_send_request(probe, 1000000 + (uint64_t)k, 1);
        ck_assert_int_eq(s_recv(probe, dec, &msg, &m), APEX_OK);
        // Minus the probes' own rows (this one is counted in its own reply).
        sampled = m.u.sample_reply.stats.sampled - (uint64_t)(k + 1);
        zmq_msg_close(&msg);
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    ck_assert_uint_ge(sampled, (uint64_t)REQUESTS * ROWS);
    zmq_close(probe);
    uint64_t last = 0;
    int got = 0;
    for (int rc; (rc = s_recv(lr, dec, &msg, &m)) != APEX_ETIMEDOUT;) {
        ck_assert_msg(rc == APEX_OK, "reply %d after id %llu does not decode: %s", got + 1,
                      (unsigned long long)last, wire_decoder_last_error(dec));
        const wire_sample_reply_t *r = &m.u.sample_reply;
        ck_assert_int_eq(m.type, WIRE_MSG_SAMPLE_REPLY);
        ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
        ck_assert_uint_gt(r->id, last); // replies beyond the high-water mark may be dropped
        last = r->id;
        ck_assert_uint_eq(r->count, ROWS);
        const float *obs = r->obs, *next_obs = r->next_obs;
        for (uint32_t j = 0; j < ROWS; j++) { // each row is a row that was inserted
            ck_assert_float_eq(next_obs[j * OBS], obs[j * OBS] + 0.5f);
            ck_assert_float_eq(r->rewards[j], obs[j * OBS]);
        }
        zmq_msg_close(&msg);
        if (got++ == 0) {
            zmq_setsockopt(lr, ZMQ_RCVTIMEO, &timeout_after_first, sizeof timeout_after_first);
        }
    }
    zmq_msg_close(&msg);
    ck_assert_int_gt(got, REPLY_RING);
    wire_decoder_destroy(&dec);
    zmq_close(a0);
    zmq_close(lr);
    s_stop(&f);
    ck_assert_uint_gt(f.server->reply_copies, 0); // the ring did run out: the copy path ran
    replay_server_destroy(&f.server);
}
END_TEST

// [env] id = external with obs_dtype = uint8, end to end over the sockets: the server
// stores and serves the exact bytes, its replies say uint8, a float32 batch is refused and
// counted, and the store's rows are a quarter of the float32 ones.
START_TEST(test_uint8_observations) {
    enum { D = 5, N = 16, ROWS_OUT = 32 }; // odd D: uint8 rows are padded to 4 bytes
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"env.id=external",
                          "env.obs_dim=5",
                          "env.n_actions=3",
                          "env.obs_dtype=uint8",
                          "replay.capacity=100",
                          "replay.max_batch=64",
                          "replay.min_size_to_sample=1",
                          "learner.batch_size=32",
                          "actor.send_batch=16",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    ck_assert_msg(config_load(&cfg, NULL, sets, 11, err, sizeof err) == 0, "%s", err);
    s_fixture f = {.server = replay_server_new(&cfg, 1), .ctx = zmq_ctx_new()};
    ck_assert_ptr_nonnull(f.server);
    ck_assert_uint_eq(store_obs_elem_bytes(f.server->store), 1);
    s_run_loop(&f);
    const wire_limits_t lim = {
        .obs_dim = D, .obs_dtype = WIRE_OBS_UINT8, .n_actions = 3, .max_count = 64};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    void *a0 = s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0");
    void *lr = s_dealer(&f, replay_server_sample_endpoint(f.server), NULL);
    // Row r: obs bytes 251 - (r * D + k) (some of them 0xff, which no float check may
    // reject), next_obs their complement, reward r, action r % 3.
    uint8_t obs[N * D], next[N * D];
    float rew[N], disc[N];
    int32_t act[N];
    for (int r = 0; r < N; r++) {
        for (int k = 0; k < D; k++) {
            obs[r * D + k] = (uint8_t)(251 - (r * D + k) + (r == 0 ? 4 : 0));
            next[r * D + k] = (uint8_t)~obs[r * D + k];
        }
        rew[r] = (float)r;
        disc[r] = 0.99f;
        act[r] = r % 3;
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .seq = 0,
                               .count = N,
                               .obs_dim = D,
                               .obs_dtype = WIRE_OBS_UINT8,
                               .obs = obs,
                               .actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = next};
    check_send_msg(a0, &m);
    uint64_t acked;
    s_recv_acked(a0, dec, &acked, 1);
    ck_assert_uint_eq(acked, 0);
    // The same rows as float32 (as a CartPole actor would send them): refused, not acked.
    float fobs[N * D], fnext[N * D];
    for (int i = 0; i < N * D; i++) {
        fobs[i] = fnext[i] = (float)obs[i];
    }
    m.u.batch.seq = 1;
    m.u.batch.obs_dtype = WIRE_OBS_FLOAT32;
    m.u.batch.obs = fobs;
    m.u.batch.next_obs = fnext;
    check_send_msg(a0, &m);
    // Sampling: every row served is one of the inserted rows, byte for byte.
    zmq_msg_t msg;
    wire_msg_t rep;
    s_send_request(lr, 1, ROWS_OUT);
    ck_assert_int_eq(s_recv(lr, dec, &msg, &rep), APEX_OK);
    const wire_sample_reply_t *r = &rep.u.sample_reply;
    ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->obs_dtype, WIRE_OBS_UINT8);
    ck_assert_uint_eq(r->count, ROWS_OUT);
    const uint8_t *ro = r->obs, *rn = r->next_obs;
    for (int j = 0; j < ROWS_OUT; j++) {
        int row = (int)r->rewards[j];
        ck_assert(row >= 0 && row < N && r->actions[j] == row % 3);
        ck_assert_mem_eq(ro + j * D, obs + row * D, D);
        ck_assert_mem_eq(rn + j * D, next + row * D, D);
    }
    zmq_msg_close(&msg);
    // The float32 batch is refused and counted. The server reads a0's batches in order, so
    // once the uint8 batch sent after it (seq 2) is acknowledged, it has been handled; the
    // counters are then read as server.h allows, after the loop has stopped.
    m.u.batch.seq = 2;
    m.u.batch.obs_dtype = WIRE_OBS_UINT8;
    m.u.batch.obs = obs;
    m.u.batch.next_obs = next;
    check_send_msg(a0, &m);
    s_recv_acked(a0, dec, &acked, 1);
    ck_assert_uint_eq(acked, 2);
    wire_decoder_destroy(&dec);
    zmq_close(a0);
    zmq_close(lr);
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.bad_messages, 1);
    ck_assert_uint_eq(st.inserted, 2 * N);
    // Rows of 16 + 2 * 5 bytes, padded to 28, against 56 for float32.
    store_config_t u8 = {.capacity = 100, .obs_dim = D, .obs_elem_bytes = 1, .alpha = 0.6};
    store_config_t f32 = {.capacity = 100, .obs_dim = D, .obs_elem_bytes = 4, .alpha = 0.6};
    ck_assert_uint_eq(store_bytes(&f32) - store_bytes(&u8), 100 * (56 - 28));
    replay_server_destroy(&f.server);
}
END_TEST

// Continuous actions through the server (issue #28): rows of 2 floats per action inserted,
// sampled back exactly; a batch with an action outside the run's bounds and a discrete batch
// are refused (counted, not acked) and the server goes on.
START_TEST(test_continuous_actions) {
    enum { D = 3, AD = 2, N = 16, ROWS_OUT = 32 };
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"env.id=external",
                          "env.obs_dim=3",
                          "env.action_dim=2",
                          "env.action_low=-2,0",
                          "env.action_high=2,1",
                          "replay.capacity=100",
                          "replay.max_batch=64",
                          "replay.min_size_to_sample=1",
                          "learner.batch_size=32",
                          "actor.send_batch=16",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    ck_assert_msg(config_load(&cfg, NULL, sets, 12, err, sizeof err) == 0, "%s", err);
    s_fixture f = {.server = replay_server_new(&cfg, 1), .ctx = zmq_ctx_new()};
    ck_assert_ptr_nonnull(f.server);
    ck_assert_uint_eq(store_action_dim(f.server->store), AD);
    s_run_loop(&f);
    const wire_limits_t lim = {.obs_dim = D, .action_dim = AD, .max_count = 64};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    void *a0 = s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0");
    void *lr = s_dealer(&f, replay_server_sample_endpoint(f.server), NULL);
    // Row r: obs r + k/4, action (r / 8 - 1, r / 16), both bounds reached; reward r.
    float obs[N * D], next[N * D], act[N * AD], rew[N], disc[N];
    for (int r = 0; r < N; r++) {
        for (int k = 0; k < D; k++) {
            obs[r * D + k] = (float)r + 0.25f * (float)k, next[r * D + k] = -obs[r * D + k];
        }
        act[r * AD] = r == N - 1 ? 2.0f : (float)r / 8.0f - 1.0f - (r == 0);
        act[r * AD + 1] = r == N - 1 ? 1.0f : (float)r / 16.0f;
        rew[r] = (float)r, disc[r] = 0.99f;
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = 0,
                               .count = N,
                               .obs_dim = D,
                               .obs = obs,
                               .action_dim = AD,
                               .cont_actions = act,
                               .rewards = rew,
                               .discounts = disc,
                               .next_obs = next};
    check_send_msg(a0, &m);
    uint64_t acked;
    s_recv_acked(a0, dec, &acked, 1);
    ck_assert_uint_eq(acked, 0);
    // seq 1: component 1 above its bound 1; seq 2: discrete actions. Both refused.
    act[5 * AD + 1] = 1.5f;
    m.u.batch.seq = 1;
    check_send_msg(a0, &m);
    act[5 * AD + 1] = 5.0f / 16.0f;
    int32_t disc_act[N] = {0};
    wire_msg_t md = m;
    md.u.batch.seq = 2, md.u.batch.action_dim = 0, md.u.batch.cont_actions = NULL;
    md.u.batch.actions = disc_act;
    check_send_msg(a0, &md);
    zmq_msg_t msg;
    wire_msg_t rep;
    s_send_request(lr, 1, ROWS_OUT);
    ck_assert_int_eq(s_recv(lr, dec, &msg, &rep), APEX_OK);
    const wire_sample_reply_t *r = &rep.u.sample_reply;
    ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->count, ROWS_OUT);
    ck_assert_uint_eq(r->action_dim, AD);
    ck_assert_ptr_null(r->actions);
    for (int j = 0; j < ROWS_OUT; j++) {
        int row = (int)r->rewards[j];
        ck_assert(row >= 0 && row < N);
        ck_assert_mem_eq(r->cont_actions + j * AD, act + row * AD, AD * sizeof(float));
        ck_assert_mem_eq((const float *)r->obs + j * D, obs + row * D, D * sizeof(float));
    }
    zmq_msg_close(&msg);
    // seq 3 goes through: once it is acked, seqs 1 and 2 have been handled (in order).
    m.u.batch.seq = 3;
    check_send_msg(a0, &m);
    s_recv_acked(a0, dec, &acked, 1);
    ck_assert_uint_eq(acked, 3);
    wire_decoder_destroy(&dec);
    zmq_close(a0);
    zmq_close(lr);
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.bad_messages, 2);
    ck_assert_uint_eq(st.inserted, 2 * N);
    replay_server_destroy(&f.server);
}
END_TEST

// A SampleRequest for several batches: one reply of batches * batch_size rows, each batch a
// stratified sample of its own (with equal priorities, row j of every batch comes from
// stratum j), and a request beyond max_batch rows refused as a bad message.
START_TEST(test_several_batches_per_request) {
    enum { ROWS = 32, B = 8, K = 3 };
    s_fixture f;
    s_start(&f, ROWS, 0);
    s_connect(&f, 1);
    for (int i = 0; i < ROWS / 8; i++) {
        s_send_batch(f.a0, 0, (uint64_t)i, 8, (float)i, NULL); // no priorities: all equal
    }
    uint64_t acked[ROWS / 8];
    s_recv_acked(f.a0, f.dec, acked, ROWS / 8);
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request =
        (wire_sample_request_t){.id = 7, .batch_size = B, .beta = 0.5f, .batches = K};
    check_send_msg(f.lr, &m);
    const wire_sample_reply_t *r = s_reply(&f, 7, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->count, B * K);
    for (int k = 0; k < K; k++) {
        for (int j = 0; j < B; j++) {
            uint32_t slot = WIRE_KEY_SLOT(r->keys[k * B + j]);
            ck_assert_msg(slot / (ROWS / B) == (uint32_t)j, "batch %d row %d: slot %u", k, j, slot);
            ck_assert_float_eq(r->is_weights[k * B + j], 1.0f); // equal priorities
        }
    }
    ck_assert_uint_eq(r->stats.sampled, B * K);
    // 9 batches of 8 = 72 rows > max_batch 64: refused by the decoder, counted, no reply.
    m.u.sample_request.batches = 9;
    m.u.sample_request.id = 8;
    check_send_msg(f.lr, &m);
    s_send_request(f.lr, 9, B); // answered: the bad one was dropped
    ck_assert_uint_eq(s_reply(&f, 9, WIRE_SAMPLE_OK)->count, B);
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.bad_messages, 1);
    replay_server_destroy(&f.server);
}
END_TEST

START_TEST(test_capacity_too_large_refused) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"replay.capacity=1073741824", "network.hidden=4"};
    ck_assert_int_eq(config_load(&cfg, NULL, sets, 2, err, sizeof err), 0);
    cfg.env.obs_dim = 64; // the (hypothetical) 256 GiB this needs is not available
    ck_assert_ptr_null(replay_server_new(&cfg, 1));
}
END_TEST

// wal: every acknowledged batch survives a SIGKILL. The server runs in a child process (so
// it can be killed mid-stream, its log writer thread and all); the parent streams batches
// with a window of unacknowledged ones, as an actor does, kills the server right after the
// last ack, and restores the directory.
static void s_wal_config(apex_config_t *cfg, const char *dir, int sync_ms) {
    char err[CONFIG_ERR_LEN], out[700], sync[64];
    snprintf(out, sizeof out, "run.out_dir=%s", dir);
    snprintf(sync, sizeof sync, "replay.wal_sync_ms=%d", sync_ms);
    const char *sets[] = {"replay.capacity=4096",
                          "replay.max_batch=64",
                          "actor.send_batch=8",
                          "learner.batch_size=32",
                          "replay.durability=wal",
                          sync,
                          "replay.snapshot_interval_s=1000",
                          "run.name=walkill",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                          out};
    ck_assert_msg(config_load(cfg, NULL, sets, 11, err, sizeof err) == 0, "%s", err);
}

START_TEST(test_wal_acked_batches_survive_kill) {
    const char *tmp = check_tmpdir();
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tmp);
    apex_config_t cfg;
    s_wal_config(&cfg, dir, 5);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        replay_server_t *srv = replay_server_new(&cfg, 1);
        if (!srv) {
            _exit(1);
        }
        char ep[CONFIG_STR_LEN];
        snprintf(ep, sizeof ep, "%s", replay_server_insert_endpoint(srv));
        if (write(fds[1], ep, sizeof ep) != (ssize_t)sizeof ep) {
            _exit(1);
        }
        replay_server_run(srv);
        _exit(0);
    }
    close(fds[1]);
    char ep[CONFIG_STR_LEN];
    ck_assert_int_eq(read(fds[0], ep, sizeof ep), (ssize_t)sizeof ep);
    close(fds[0]);
    s_fixture f = {.ctx = zmq_ctx_new()};
    void *a0 = s_dealer(&f, ep, "actor-0");
    wire_decoder_t *dec = wire_decoder_new(&s_lim);
    enum { BATCHES = 300, WINDOW = 64 };
    static uint8_t acked[BATCHES];
    int n_acked = 0;
    uint64_t sent = 0;
    while (n_acked < BATCHES) {
        if (sent < BATCHES && sent - (uint64_t)n_acked < WINDOW) {
            s_send_batch(a0, 0, sent, 8, (float)sent, NULL);
            sent++;
            continue;
        }
        wire_msg_t m;
        zmq_msg_t msg;
        ck_assert_int_eq(s_recv(a0, dec, &msg, &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
        for (uint32_t k = 0; k <= m.u.insert_ack.n_more; k++) {
            uint64_t seq = k == 0 ? m.u.insert_ack.seq : m.u.insert_ack.more[k - 1];
            ck_assert_uint_lt(seq, sent);
            ck_assert(!acked[seq]);
            acked[seq] = 1;
            n_acked++;
        }
        zmq_msg_close(&msg);
    }
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFSIGNALED(status));
    zmq_close(a0);
    zmq_ctx_term(f.ctx);
    wire_decoder_destroy(&dec);
    // Restore: every acknowledged batch is there, from the log alone (no snapshot was due).
    replay_server_t *srv = replay_server_new(&cfg, 0);
    ck_assert_ptr_nonnull(srv);
    wire_replay_stats_t st;
    replay_server_stats(srv, &st);
    ck_assert_uint_eq(st.inserted, BATCHES * 8);
    ck_assert_uint_eq(st.size, BATCHES * 8);
    replay_server_destroy(&srv);
    check_rmtree(dir);
}
END_TEST

// Acks are coalesced: with a long commit interval, everything two actors sent before the
// first commit comes back as one InsertAck per actor, carrying its seqs in order (and only
// after the commit: acks mean durable).
START_TEST(test_wal_acks_coalesced_per_actor) {
    const char *dir = check_tmpdir();
    apex_config_t cfg;
    s_wal_config(&cfg, dir, 1500);
    s_fixture f = {.server = replay_server_new(&cfg, 1)};
    ck_assert_ptr_nonnull(f.server);
    ck_assert_int_eq(pthread_create(&f.thread, NULL, s_run, f.server), 0);
    f.ctx = zmq_ctx_new();
    void *a[2] = {s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0"),
                  s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-1")};
    wire_decoder_t *dec = wire_decoder_new(&s_lim);
    enum { N = 40 };
    for (int i = 0; i < N; i++) {
        s_send_batch(a[i % 2], (uint32_t)(i % 2), (uint64_t)(i / 2), 8, (float)i, NULL);
    }
    for (uint32_t actor = 0; actor < 2; actor++) {
        wire_msg_t m;
        zmq_msg_t msg;
        ck_assert_int_eq(s_recv(a[actor], dec, &msg, &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
        ck_assert_uint_eq(m.u.insert_ack.actor_id, actor);
        ck_assert_uint_eq(m.u.insert_ack.n_more, N / 2 - 1);
        ck_assert_uint_eq(m.u.insert_ack.seq, 0);
        for (uint32_t k = 0; k < N / 2 - 1; k++) {
            ck_assert_uint_eq(m.u.insert_ack.more[k], k + 1);
        }
        zmq_msg_close(&msg);
    }
    wire_replay_stats_t st;
    zmq_close(a[0]);
    zmq_close(a[1]);
    wire_decoder_destroy(&dec);
    s_stop(&f);
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.inserted, N * 8);
    replay_server_destroy(&f.server);
    check_rmtree(dir);
}
END_TEST

// The limiter's state is part of what a restore brings back: a learner that sampled all it
// was allowed before a restart is not allowed a burst after it (the old "forget the sample
// count on restore" let it sample every stored transition again at once), and a restored
// server that holds sampling back lets it go on as soon as the actors make up the deficit
// (Reverb issue #118's opposite failure: restored counters that blocked sampling).
static void s_ratio_config(apex_config_t *cfg, const char *dir) {
    char err[CONFIG_ERR_LEN], out[700];
    snprintf(out, sizeof out, "run.out_dir=%s", dir);
    const char *sets[] = {"replay.capacity=4096",
                          "replay.max_batch=64",
                          "actor.send_batch=8",
                          "learner.batch_size=32",
                          "replay.durability=wal",
                          "replay.wal_sync_ms=5",
                          "replay.snapshot_interval_s=1000",
                          "replay.samples_per_insert=1",
                          "replay.spi_tolerance=16",
                          "replay.min_size_to_sample=1",
                          "replay.sample_timeout_ms=200",
                          "run.name=ratio",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*",
                          out};
    ck_assert_msg(config_load(cfg, NULL, sets, 15, err, sizeof err) == 0, "%s", err);
}

// Sends batches seq0 .. seq0+n-1 of 8 rows as actor 0 and waits for every ack.
static void s_insert_acked(void *a0, wire_decoder_t *dec, uint64_t seq0, int n) {
    for (int i = 0; i < n; i++) {
        s_send_batch(a0, 0, seq0 + (uint64_t)i, 8, (float)i, NULL);
    }
    for (int acked = 0; acked < n;) {
        wire_msg_t m;
        zmq_msg_t msg;
        ck_assert_int_eq(s_recv(a0, dec, &msg, &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_INSERT_ACK);
        acked += 1 + (int)m.u.insert_ack.n_more;
        zmq_msg_close(&msg);
    }
}

// Requests batches of 32 one after the other until one is NOT_READY; returns how many were OK.
static int s_sample_until_held(void *lr, wire_decoder_t *dec, uint64_t *id) {
    for (int ok = 0;; ok++) {
        wire_msg_t m;
        zmq_msg_t msg;
        s_send_request(lr, ++*id, 32);
        ck_assert_int_eq(s_recv(lr, dec, &msg, &m), APEX_OK);
        int status = m.u.sample_reply.status;
        zmq_msg_close(&msg);
        if (status != WIRE_SAMPLE_OK) {
            ck_assert_int_eq(status, WIRE_SAMPLE_NOT_READY);
            return ok;
        }
        ck_assert_int_lt(ok, 100);
    }
}

START_TEST(test_restore_keeps_replay_ratio) {
    const char *dir = check_tmpdir();
    apex_config_t cfg;
    s_ratio_config(&cfg, dir);
    wire_decoder_t *dec = wire_decoder_new(&s_lim);
    uint64_t id = 0;
    // Run 1: 320 rows in; the credit stops at tolerance + max_batch = 80, so 3 batches of 32
    // are served (80 -> 48 -> 16 -> -16) and the 4th is held.
    s_fixture f = {.server = replay_server_new(&cfg, 1)};
    ck_assert_ptr_nonnull(f.server);
    s_run_loop(&f);
    f.ctx = zmq_ctx_new();
    void *a0 = s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0");
    void *lr = s_dealer(&f, replay_server_sample_endpoint(f.server), NULL);
    s_insert_acked(a0, dec, 0, 40);
    ck_assert_int_eq(s_sample_until_held(lr, dec, &id), 3);
    zmq_close(a0);
    zmq_close(lr);
    s_stop(&f); // SIGTERM's path: final snapshot with the limiter's credit
    replay_server_destroy(&f.server);
    // Run 2 restores 320 stored rows and a credit of -16: nothing may be sampled until the
    // actors insert more (the old reset allowed 10 batches here, 320 rows at once).
    f.server = replay_server_new(&cfg, 1);
    ck_assert_ptr_nonnull(f.server);
    ck_assert_double_eq_tol(f.server->limiter.credit, -16.0, 1e-9);
    s_run_loop(&f);
    f.ctx = zmq_ctx_new();
    a0 = s_dealer(&f, replay_server_insert_endpoint(f.server), "actor-0");
    lr = s_dealer(&f, replay_server_sample_endpoint(f.server), NULL);
    ck_assert_int_eq(s_sample_until_held(lr, dec, &id), 0);
    // ... and is not blocked beyond that: 48 new rows (credit 32) serve exactly one batch.
    s_insert_acked(a0, dec, 40, 6);
    ck_assert_int_eq(s_sample_until_held(lr, dec, &id), 1);
    zmq_close(a0);
    zmq_close(lr);
    s_stop(&f);
    wire_replay_stats_t st;
    replay_server_stats(f.server, &st);
    ck_assert_uint_eq(st.sampled, 4 * 32); // the sample count itself is continuous
    replay_server_destroy(&f.server);
    wire_decoder_destroy(&dec);
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Sharded replay: a shard's own rules (server.h)

// Starts shard k of a 2-shard run ([replay] min_size_to_sample 10 and samples_per_insert 1
// with tolerance 0, which a shard must NOT apply: the learner holds them over every shard).
static void s_start_shard(s_fixture *f, int k) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"replay.shards=2",
                          "replay.capacity=2000",
                          "replay.max_batch=64",
                          "replay.sample_timeout_ms=200",
                          "replay.min_size_to_sample=10",
                          "replay.samples_per_insert=1",
                          "replay.spi_tolerance=0",
                          "learner.batch_size=32",
                          "actor.send_batch=8",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    ck_assert_msg(config_load(&cfg, NULL, sets, APEX_ARRAY_LEN(sets), err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(config_select_shard(&cfg, k), 0);
    *f = (s_fixture){.server = replay_server_new(&cfg, 1)};
    ck_assert_ptr_nonnull(f->server);
    f->ctx = zmq_ctx_new();
    s_run_loop(f);
}

static void s_send_stats_request(void *sock, uint64_t id, uint64_t after) {
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){.id = id, .stats_only = 1, .stats_after = after};
    check_send_msg(sock, &m);
}

START_TEST(test_shard_serves_its_actors_without_holds) {
    s_fixture f;
    s_start_shard(&f, 1);
    s_connect(&f, 2);
    // Actor 0 belongs to shard 0: refused and counted. Actor 1's batch is stored and acked.
    s_send_batch(f.a0, 0, 0, 8, 1.0f, NULL);
    float prio[8] = {1, 2, 3, 4, 5, 6, 7, 0.25f};
    s_send_batch(f.a1, 1, 0, 8, 2.0f, prio);
    uint64_t acked;
    s_recv_acked(f.a1, f.dec, &acked, 1);
    // 8 rows < min_size_to_sample and 32 rows > samples_per_insert * 8: served all the same,
    // at once. The stats name the shard and its minimum p^alpha.
    s_send_request(f.lr, 1, 32);
    const wire_sample_reply_t *r = s_reply(&f, 1, WIRE_SAMPLE_OK);
    ck_assert_uint_eq(r->stats.shard, 1);
    ck_assert_uint_eq(r->stats.shards, 2);
    ck_assert_uint_eq(r->stats.size, 8);
    ck_assert_double_eq_tol(r->stats.min_priority, pow(0.25, 0.6), 1e-6);
    ck_assert_uint_eq(r->stats.bad_messages, 1);
    // The weights are normalised by this shard's minimum: the lowest-priority row has 1.
    float wmax = 0;
    for (uint32_t i = 0; i < r->count; i++) {
        wmax = r->is_weights[i] > wmax ? r->is_weights[i] : wmax;
    }
    ck_assert_float_eq(wmax, 1.0f);
    // With a smaller minimum over every shard (another shard's), every weight is below 1 and
    // is (min / p_i^alpha)^beta.
    double gmin = pow(0.01, 0.6);
    wire_msg_t q = {.type = WIRE_MSG_SAMPLE_REQUEST};
    q.u.sample_request =
        (wire_sample_request_t){.id = 2, .batch_size = 32, .beta = 0.5f, .min_priority = gmin};
    check_send_msg(f.lr, &q);
    r = s_reply(&f, 2, WIRE_SAMPLE_OK);
    for (uint32_t i = 0; i < r->count; i++) {
        ck_assert_float_lt(r->is_weights[i], 1.0f);
    }
    // Seq 3 without seq 1 and 2: the dump's marks name the two as not stored.
    s_send_batch(f.a1, 1, 3, 8, 2.0f, NULL);
    s_recv_acked(f.a1, f.dec, &acked, 1);
    s_stop(&f);
    ck_assert_uint_eq(replay_server_bad_count(f.server, WIRE_MSG_TRANSITION_BATCH), 1);
    char path[] = "/tmp/apex_dump_XXXXXX", marks[64], line[256];
    close(mkstemp(path));
    ck_assert_int_eq(replay_server_dump(f.server, path), 0);
    snprintf(marks, sizeof marks, "%s.marks", path);
    FILE *mf = fopen(marks, "r");
    ck_assert_ptr_nonnull(mf);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, mf)); // header
    ck_assert_ptr_nonnull(fgets(line, sizeof line, mf));
    ck_assert_str_eq(line, "1,0,4,0,2,1 2\n"); // actor 1, epoch 0, hwm 4, window from 0
    fclose(mf);
    unlink(marks);
    unlink(path);
    replay_server_destroy(&f.server);
}
END_TEST

// Stats requests: at once for stats_after 0 or an insert count already reached; otherwise
// held until an insert reaches it (the sharded learner's rate limiter waits on that), or
// until sample_timeout_ms. None of them samples.
START_TEST(test_shard_stats_requests) {
    s_fixture f;
    s_start_shard(&f, 0);
    s_connect(&f, 1);
    // A stats reply is NOT_READY: it carries no rows.
    s_send_stats_request(f.lr, 7, 0);
    ck_assert_uint_eq(s_reply(&f, 7, WIRE_SAMPLE_NOT_READY)->stats.inserted, 0);
    // Held until the first insert; its reply carries the new count.
    s_send_stats_request(f.lr, 8, 1);
    s_send_batch(f.a0, 0, 0, 8, 1.0f, NULL);
    ck_assert_uint_eq(s_reply(&f, 8, WIRE_SAMPLE_NOT_READY)->stats.inserted, 8);
    // Waiting for an insert that does not come: answered at the deadline, still with stats.
    s_send_stats_request(f.lr, 9, 9);
    const wire_sample_reply_t *r = s_reply(&f, 9, WIRE_SAMPLE_NOT_READY);
    ck_assert_uint_eq(r->stats.inserted, 8);
    ck_assert_uint_eq(r->stats.sampled, 0);
    s_stop(&f);
    ck_assert_uint_eq(f.server->stats_replies, 3);
    ck_assert_uint_eq(f.server->not_ready, 0);
    replay_server_destroy(&f.server);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Deterministic runs ([run] deterministic, replay/detsched.h) through replay_server_handle:
// one fixed set of messages (two actors' batches with their periods, a learner's requests
// with det_index 1..N, the priority updates it sends for each reply and its horizon watches)
// fed to fresh servers made with listen = 0 in different arrival orders. Every reply is
// captured through reply_hook. A deterministic server must send the same replies in the
// same order whatever the order, and the ones an independent model of the schedule says
// (inserts period-major, a request served at the first insert that lets the limiter allow
// it, request i's updates applied just before request i + lag); a server that is not
// deterministic, fed the same messages in those orders, sends different ones.

#define DET_ACTORS 2
#define DET_PERIODS 8
#define DET_B 8   // [learner] batch_size
#define DET_K 2   // [learner] batches_per_request
#define DET_LAG 2 // [learner] prefetch x ranks
#define DET_ROWS (DET_B * DET_K)
#define DET_SPI 2.0      // [replay] samples_per_insert
#define DET_MIN_SIZE 20  // [replay] min_size_to_sample
#define DET_MAX_BATCH 64 // [replay] max_batch: the limiter's credit stops at it (tolerance 0)
#define DET_BATCHES 40   // most batches of one actor (DET_PERIODS x 4)
#define DET_BATCH_ROWS 8 // most rows of one batch
#define DET_MAX_REQ 64
#define DET_MAX_REPLIES 128
#define DET_WATCH_ID (1ull << 40) // a horizon watch's SampleRequest id: this | h

// The fixed messages, and what a deterministic replay must make of them.
typedef struct {
    wire_buf_t batch[DET_ACTORS][DET_BATCHES]; // actor a's batches in seq order, encoded
    int n_batches[DET_ACTORS];
    // The batches in period-major order (actor, seq), and rows of each.
    int order_actor[DET_ACTORS * DET_BATCHES], order_seq[DET_ACTORS * DET_BATCHES];
    int rows[DET_ACTORS][DET_BATCHES], period[DET_ACTORS][DET_BATCHES];
    int end[DET_ACTORS][DET_BATCHES];
    int n_order;
    float slot_reward[DET_ACTORS * DET_BATCHES * DET_BATCH_ROWS]; // row k of the order's
    uint64_t total_rows;
    // The model's schedule: requests 1..n_requests, request i served with inserted_at[i]
    // rows in and the horizon at horizon_at[i]; served_at[h]: requests served when every
    // actor's periods below h were in.
    int n_requests;
    uint64_t inserted_at[DET_MAX_REQ + 1], horizon_at[DET_MAX_REQ + 1];
    uint64_t served_at[DET_PERIODS + 1];
} s_det_msgs;

// One reply as the hook saw it.
typedef struct {
    uint64_t id;
    int status;
    uint32_t count;
    uint64_t keys[DET_ROWS];
    uint32_t weight_bits[DET_ROWS]; // is_weights, bit for bit
    float rewards[DET_ROWS];
    wire_replay_stats_t stats;
    uint64_t horizon; // the server's horizon when it sent the reply (deterministic runs)
} s_det_reply;

typedef struct {
    replay_server_t *srv;
    s_det_reply replies[DET_MAX_REPLIES];
    int n_replies;
} s_det_run;

// reply_hook: copies what the test compares (the message's pointers live only for the call).
static void s_det_hook(void *arg, const wire_msg_t *m) {
    s_det_run *run = arg;
    ck_assert_int_eq(m->type, WIRE_MSG_SAMPLE_REPLY);
    ck_assert_int_lt(run->n_replies, DET_MAX_REPLIES);
    const wire_sample_reply_t *r = &m->u.sample_reply;
    s_det_reply *o = &run->replies[run->n_replies++];
    *o = (s_det_reply){.id = r->id, .status = (int)r->status, .count = r->count, .stats = r->stats};
    ck_assert_uint_le(r->count, DET_ROWS);
    if (r->count) {
        memcpy(o->keys, r->keys, r->count * sizeof *r->keys);
        memcpy(o->weight_bits, r->is_weights, r->count * sizeof *r->is_weights);
        memcpy(o->rewards, r->rewards, r->count * sizeof *r->rewards);
    }
    o->horizon = run->srv->det ? detsched_horizon(run->srv->det) : 0;
}

// The server of these tests: CartPole's dimensions, 2 actors, a learner of one rank with 2
// requests in flight, each of DET_K batches of DET_B; deterministic or not, all else equal.
static replay_server_t *s_det_server(int deterministic) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {deterministic ? "run.deterministic=true" : "run.deterministic=false",
                          "run.seed=11",
                          "run.out_dir=/nonexistent-check-det", // durability none: no files
                          "actor.num_actors=2",
                          "actor.max_pending_batches=64",
                          "learner.ranks=1",
                          "learner.prefetch=2",
                          "learner.batch_size=8",
                          "learner.batches_per_request=2",
                          "replay.capacity=1024",
                          "replay.max_batch=64",
                          "replay.samples_per_insert=2",
                          "replay.spi_tolerance=0",
                          "replay.min_size_to_sample=20"};
    ck_assert_msg(config_load(&cfg, NULL, sets, APEX_ARRAY_LEN(sets), err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(cfg.env.obs_dim, OBS);
    replay_server_t *s = replay_server_new(&cfg, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert(deterministic ? s->det != NULL : s->det == NULL);
    return s;
}

// The model of a deterministic replay's schedule over the batches in period-major order,
// with every request there when its turn comes and every update in time: inserts are
// applied while the next request could not be served (the limiter: credit + spi per row,
// capped at the tolerance 0 + max_batch; min_size_to_sample), then it is served.
static void s_det_model(s_det_msgs *g) {
    double credit = 0.0;
    uint64_t size = 0, horizon = 0;
    int next = 0, served = 0;
    g->served_at[0] = 0;
    for (;;) {
        while (!(size >= DET_MIN_SIZE && credit - DET_ROWS >= 0.0) && next < g->n_order) {
            int a = g->order_actor[next], q = g->order_seq[next++];
            size += (uint64_t)g->rows[a][q];
            credit = fmin(credit + DET_SPI * g->rows[a][q], (double)DET_MAX_BATCH);
            if (g->end[a][q] && a == DET_ACTORS - 1) {
                horizon = (uint64_t)g->period[a][q] + 1;
                g->served_at[horizon] = (uint64_t)served;
            }
        }
        if (!(size >= DET_MIN_SIZE && credit - DET_ROWS >= 0.0)) {
            break;
        }
        ck_assert_int_lt(served, DET_MAX_REQ);
        served++;
        credit -= DET_ROWS;
        g->inserted_at[served] = size;
        g->horizon_at[served] = horizon;
    }
    ck_assert_int_eq(next, g->n_order); // the last request lets every insert in
    ck_assert_uint_eq(horizon, DET_PERIODS);
    g->n_requests = served;
}

// Generates the actors' batches (random but seeded rows and priorities; 1-4 batches per
// actor and period, 1-8 rows each, the period's last 0-8 rows) and the model's schedule.
static void s_det_make(s_det_msgs *g, uint64_t seed) {
    memset(g, 0, sizeof *g);
    rng_t r;
    rng_init(&r, seed);
    for (int p = 0; p < DET_PERIODS; p++) {
        for (int a = 0; a < DET_ACTORS; a++) {
            int nb = 1 + (int)rng_below(&r, 4);
            for (int k = 0; k < nb; k++) {
                int q = g->n_batches[a]++, end = k == nb - 1;
                uint32_t n = end ? rng_below(&r, DET_BATCH_ROWS + 1)
                                 : 1 + rng_below(&r, DET_BATCH_ROWS);
                float obs[DET_BATCH_ROWS * OBS], next_obs[DET_BATCH_ROWS * OBS];
                float rewards[DET_BATCH_ROWS], discounts[DET_BATCH_ROWS], prio[DET_BATCH_ROWS];
                int32_t actions[DET_BATCH_ROWS];
                for (uint32_t i = 0; i < n * OBS; i++) {
                    obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
                    next_obs[i] = 2.0f * rng_uniform_f(&r) - 1.0f;
                }
                for (uint32_t i = 0; i < n; i++) {
                    rewards[i] = rng_uniform_f(&r);
                    discounts[i] = rng_below(&r, 8) ? 0.99f : 0.0f;
                    prio[i] = 0.05f + 2.0f * rng_uniform_f(&r);
                    actions[i] = (int32_t)rng_below(&r, 2);
                    g->slot_reward[g->total_rows++] = rewards[i];
                }
                wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
                m.u.batch = (wire_batch_t){.actor_id = (uint32_t)a,
                                           .epoch = 100 + (uint64_t)a,
                                           .seq = (uint64_t)q,
                                           .count = n,
                                           .obs_dim = OBS,
                                           .obs = n ? obs : NULL,
                                           .actions = n ? actions : NULL,
                                           .rewards = n ? rewards : NULL,
                                           .discounts = n ? discounts : NULL,
                                           .next_obs = n ? next_obs : NULL,
                                           .priorities = n ? prio : NULL,
                                           .det_period = (uint64_t)p + 1,
                                           .det_period_end = end};
                wire_buf_init(&g->batch[a][q], 0);
                wire_encode(&m, &g->batch[a][q]);
                g->rows[a][q] = (int)n;
                g->period[a][q] = p;
                g->end[a][q] = end;
                g->order_actor[g->n_order] = a;
                g->order_seq[g->n_order++] = q;
            }
        }
    }
    s_det_model(g);
}

static void s_det_free(s_det_msgs *g) {
    for (int a = 0; a < DET_ACTORS; a++) {
        for (int q = 0; q < g->n_batches[a]; q++) {
            wire_buf_fini(&g->batch[a][q]);
        }
    }
}

// The arrival orders.
typedef enum {
    DET_EAGER,        // actor 1's batches before actor 0's; the learner's messages at once
    DET_LATE,         // the actors' batches alternating; the learner only once they are all sent,
                      // each update as late as its next request allows
    DET_RANDOM,       // a seeded random mix, with re-sends of batches and timer ticks
    DET_UPDATES_LAST, // request i + lag as soon as request i's reply is in, before its
                      // updates (no learner does that; the server waits for them all the same),
                      // the updates only when nothing else can go
} s_det_order;

// A learner of DET_LAG slots (learner/prefetch.c in a deterministic run): request i + lag
// goes out after the updates of request i, which go out after its reply (one per batch, in
// training order), and it asks about horizons 1, 2, ... one at a time.
typedef struct {
    int sent[DET_ACTORS]; // batches sent per actor
    int requests;         // requests 1..requests sent
    int updates;          // updates sent: update u is request u / DET_K + 1's batch u % DET_K
    int reply_of[DET_MAX_REQ + 1]; // request i's reply in run->replies, -1 until it came
    int seen;                      // replies looked at
    uint64_t watch;                // the horizon of the watch in flight, 0: none
    uint64_t watch_next;           // the next horizon to ask about
    int step, watch_sent_step;     // messages sent so far; when the watch went out
    int watches_held;              // watches answered after more messages, not at once
    int timer_ticks;               // ticks when nothing else could happen
} s_det_learner;

enum { SRC_ACTOR0, SRC_ACTOR1, SRC_REQUEST, SRC_UPDATE, SRC_WATCH, SRC_RESEND, SRC_TICK, SRC_N };

static void s_det_send(replay_server_t *s, replay_sock which, const char *id, const wire_msg_t *m) {
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(m, &b);
    replay_server_handle(s, which, id, strlen(id), b.data, b.len, 0);
    wire_buf_fini(&b);
}

// A priority the learner computes for a key: a fixed function of it, in [0.05, 2.5).
static float s_det_prio(uint64_t key) {
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return 0.05f + (float)(h >> 40) / (float)(1u << 24) * 2.45f;
}

// Looks at the replies that came since the last call: request i's reply, a watch's answer.
static void s_det_see(s_det_learner *l, s_det_run *run, const s_det_msgs *g) {
    for (; l->seen < run->n_replies; l->seen++) {
        const s_det_reply *r = &run->replies[l->seen];
        if (r->id & DET_WATCH_ID) {
            uint64_t h = r->id & ~DET_WATCH_ID;
            ck_assert_uint_eq(h, l->watch);
            ck_assert_int_eq(r->status, WIRE_SAMPLE_NOT_READY);
            ck_assert_uint_eq(r->count, 0);
            // Answered only once the horizon got there, with the pair for h.
            ck_assert_uint_ge(r->horizon, h);
            ck_assert_uint_eq(r->stats.det_horizon, h);
            ck_assert_uint_eq(r->stats.det_served, g->served_at[h]);
            l->watches_held += l->step > l->watch_sent_step;
            l->watch = 0;
            continue;
        }
        ck_assert_uint_ge(r->id, 1);
        ck_assert_uint_le(r->id, (uint64_t)l->requests);
        ck_assert_int_eq(r->status, WIRE_SAMPLE_OK);
        ck_assert_uint_eq(r->count, DET_ROWS);
        ck_assert_int_eq(l->reply_of[r->id], -1);
        l->reply_of[r->id] = l->seen;
    }
}

// Which messages the actors and the learner could send now.
static void s_det_enabled(const s_det_learner *l, const s_det_msgs *g, s_det_order order, int det,
                          int on[SRC_N]) {
    int next = l->requests + 1;
    on[SRC_ACTOR0] = l->sent[0] < g->n_batches[0];
    on[SRC_ACTOR1] = l->sent[1] < g->n_batches[1];
    int after = order == DET_UPDATES_LAST
                    ? next <= DET_LAG || l->reply_of[next - DET_LAG] >= 0
                    : next <= DET_LAG || l->updates >= (next - DET_LAG) * DET_K;
    on[SRC_REQUEST] = next <= g->n_requests && after;
    on[SRC_UPDATE] = l->updates < l->requests * DET_K && l->reply_of[l->updates / DET_K + 1] >= 0;
    on[SRC_WATCH] = det && !l->watch && l->watch_next <= DET_PERIODS;
    on[SRC_RESEND] = order == DET_RANDOM && (l->sent[0] > 0 || l->sent[1] > 0);
    on[SRC_TICK] = order == DET_RANDOM;
}

// Chooses the next message in the given order; -1 when nothing can be sent.
static int s_det_pick(const int on[SRC_N], s_det_order order, const s_det_learner *l, rng_t *r) {
    if (order == DET_EAGER) {
        static const int pref[] = {SRC_WATCH, SRC_UPDATE, SRC_REQUEST, SRC_ACTOR1, SRC_ACTOR0};
        for (size_t k = 0; k < APEX_ARRAY_LEN(pref); k++) {
            if (on[pref[k]]) {
                return pref[k];
            }
        }
        return -1;
    }
    if (order == DET_UPDATES_LAST) {
        static const int pref[] = {SRC_REQUEST, SRC_WATCH, SRC_ACTOR0, SRC_ACTOR1, SRC_UPDATE};
        for (size_t k = 0; k < APEX_ARRAY_LEN(pref); k++) {
            if (on[pref[k]]) {
                return pref[k];
            }
        }
        return -1;
    }
    if (order == DET_LATE) {
        int a = l->step % 2 ? SRC_ACTOR1 : SRC_ACTOR0;
        if (on[a] || on[SRC_ACTOR0 + SRC_ACTOR1 - a]) {
            return on[a] ? a : SRC_ACTOR0 + SRC_ACTOR1 - a;
        }
        static const int pref[] = {SRC_WATCH, SRC_REQUEST, SRC_UPDATE};
        for (size_t k = 0; k < APEX_ARRAY_LEN(pref); k++) {
            if (on[pref[k]]) {
                return pref[k];
            }
        }
        return -1;
    }
    // Random: weights per source (actors more often than the rest); only the actors and the
    // learner's messages count as progress, so that ticks and re-sends cannot go on forever.
    static const uint32_t weight[SRC_N] = {4, 4, 2, 2, 1, 1, 1};
    int progress = 0;
    uint32_t total = 0;
    for (int k = 0; k < SRC_N; k++) {
        progress |= on[k] && k < SRC_RESEND;
        total += on[k] ? weight[k] : 0;
    }
    if (!progress) {
        return -1;
    }
    uint32_t x = rng_below(r, total);
    for (int k = 0; k < SRC_N; k++) {
        if (on[k] && x < weight[k]) {
            return k;
        }
        x -= on[k] ? weight[k] : 0;
    }
    APEX_PANIC("unreachable");
}

// Feeds the fixed messages to a fresh server (deterministic or not) in the given order,
// as the learner above and the actors would send them; the replies go to *run.
static void s_det_feed(s_det_run *run, const s_det_msgs *g, int det, s_det_order order,
                       uint64_t seed) {
    memset(run, 0, sizeof *run);
    run->srv = s_det_server(det);
    run->srv->reply_hook = s_det_hook;
    run->srv->reply_hook_arg = run;
    s_det_learner l = {.watch_next = 1};
    for (int i = 0; i <= DET_MAX_REQ; i++) {
        l.reply_of[i] = -1;
    }
    rng_t r;
    rng_init(&r, seed);
    int ticked = 0;
    for (;;) {
        int on[SRC_N];
        s_det_enabled(&l, g, order, det, on);
        int src = s_det_pick(on, order, &l, &r);
        if (src < 0 && l.watch && !ticked) {
            // Everyone waits: the loop's limiter timer runs (LIMITER_TICK_MS). A watch whose
            // horizon a request or an update brought is answered only there: the sample
            // socket's handler does not look at the watches.
            ticked = 1;
            l.timer_ticks++;
            replay_server_tick(run->srv, 0);
            s_det_see(&l, run, g);
            continue;
        }
        if (src < 0) {
            break;
        }
        ticked = 0;
        l.step++;
        wire_msg_t m = {0};
        char id[16];
        if (src == SRC_ACTOR0 || src == SRC_ACTOR1 || src == SRC_RESEND) {
            int a = src == SRC_RESEND
                        ? (l.sent[0] > 0 && (l.sent[1] == 0 || rng_below(&r, 2)) ? 0 : 1)
                        : src - SRC_ACTOR0;
            int q = src == SRC_RESEND ? (int)rng_below(&r, (uint32_t)l.sent[a]) : l.sent[a]++;
            snprintf(id, sizeof id, "actor-%d", a);
            const wire_buf_t *b = &g->batch[a][q];
            replay_server_handle(run->srv, REPLAY_SOCK_INSERT, id, strlen(id), b->data, b->len, 0);
        } else if (src == SRC_REQUEST) {
            uint64_t i = (uint64_t)++l.requests;
            m.type = WIRE_MSG_SAMPLE_REQUEST;
            m.u.sample_request = (wire_sample_request_t){.id = i,
                                                         .batch_size = DET_B,
                                                         .beta = 0.4f + 0.01f * (float)i,
                                                         .batches = DET_K,
                                                         .det_index = i};
            s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
        } else if (src == SRC_UPDATE) {
            int i = l.updates / DET_K + 1, k = l.updates % DET_K;
            const s_det_reply *rep = &run->replies[l.reply_of[i]];
            float prio[DET_B];
            for (int j = 0; j < DET_B; j++) {
                prio[j] = s_det_prio(rep->keys[k * DET_B + j]);
            }
            m.type = WIRE_MSG_PRIORITY_UPDATE;
            m.u.priority_update = (wire_priority_update_t){.count = DET_B,
                                                           .keys = rep->keys + k * DET_B,
                                                           .priorities = prio,
                                                           .det_index = (uint64_t)i};
            l.updates++;
            s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
        } else if (src == SRC_WATCH) {
            l.watch = l.watch_next++;
            l.watch_sent_step = l.step;
            m.type = WIRE_MSG_SAMPLE_REQUEST;
            m.u.sample_request = (wire_sample_request_t){
                .id = DET_WATCH_ID | l.watch, .stats_only = 1, .det_horizon = l.watch};
            s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
        } else {
            replay_server_tick(run->srv, 0); // (now 0: nothing held ever times out)
        }
        s_det_see(&l, run, g);
    }
    if (det) {
        ck_assert_int_eq(l.requests, g->n_requests);
        ck_assert_int_eq(l.updates, g->n_requests * DET_K);
        ck_assert_uint_eq(l.watch_next, DET_PERIODS + 1);
        ck_assert_uint_eq(l.watch, 0);
        ck_assert_uint_eq(detsched_horizon(run->srv->det), DET_PERIODS);
        if (order == DET_EAGER) {
            ck_assert_int_gt(l.watches_held, 0); // the hold was exercised
        }
    }
}

// The OK replies of a run, in order (the watches' answers are left out: they are asked at
// different times in different orders).
static int s_det_ok(const s_det_run *run, const s_det_reply **out) {
    int n = 0;
    for (int k = 0; k < run->n_replies; k++) {
        if (!(run->replies[k].id & DET_WATCH_ID)) {
            out[n++] = &run->replies[k];
        }
    }
    return n;
}

// Whether two runs sent the same OK replies in the same order: ids, keys, importance
// weights bit for bit, rewards, the stats that follow the schedule. On the first difference
// says what it is (when say is set) and returns 0.
static int s_det_same(const s_det_run *x, const s_det_run *y, int say) {
    const s_det_reply *a[DET_MAX_REPLIES], *b[DET_MAX_REPLIES];
    int na = s_det_ok(x, a), nb = s_det_ok(y, b);
    if (na != nb) {
        if (say) {
            fprintf(stderr, "det: %d replies against %d\n", na, nb);
        }
        return 0;
    }
    for (int k = 0; k < na; k++) {
        const s_det_reply *p = a[k], *q = b[k];
        int same = p->id == q->id && p->status == q->status && p->count == q->count &&
                   memcmp(p->keys, q->keys, sizeof p->keys) == 0 &&
                   memcmp(p->weight_bits, q->weight_bits, sizeof p->weight_bits) == 0 &&
                   memcmp(p->rewards, q->rewards, sizeof p->rewards) == 0 &&
                   p->stats.inserted == q->stats.inserted && p->stats.size == q->stats.size &&
                   p->stats.sampled == q->stats.sampled && p->stats.updated == q->stats.updated &&
                   p->stats.det_horizon == q->stats.det_horizon &&
                   p->stats.det_served == q->stats.det_served &&
                   p->stats.total_priority == q->stats.total_priority;
        if (!same) {
            if (say) {
                fprintf(stderr,
                        "det: reply %d differs: id %llu/%llu inserted %llu/%llu updated "
                        "%llu/%llu horizon %llu/%llu key[0] %llx/%llx\n",
                        k, (unsigned long long)p->id, (unsigned long long)q->id,
                        (unsigned long long)p->stats.inserted,
                        (unsigned long long)q->stats.inserted, (unsigned long long)p->stats.updated,
                        (unsigned long long)q->stats.updated,
                        (unsigned long long)p->stats.det_horizon,
                        (unsigned long long)q->stats.det_horizon, (unsigned long long)p->keys[0],
                        (unsigned long long)q->keys[0]);
            }
            return 0;
        }
    }
    return 1;
}

// A deterministic run's replies against the model: request i served at the insert the
// model says (period-major order, exact samples per insert), the updates of every request
// up to i - lag applied before it and none later, the horizon and its served count of that
// moment, and every sampled row the one period-major order put in its slot.
static void s_det_check_model(const s_det_run *run, const s_det_msgs *g) {
    const s_det_reply *ok[DET_MAX_REPLIES];
    int n = s_det_ok(run, ok);
    ck_assert_int_eq(n, g->n_requests);
    for (int k = 0; k < n; k++) {
        const s_det_reply *r = ok[k];
        uint64_t i = (uint64_t)k + 1;
        ck_assert_uint_eq(r->id, i);
        ck_assert_uint_eq(r->stats.inserted, g->inserted_at[i]);
        ck_assert_uint_eq(r->stats.size, g->inserted_at[i]);
        ck_assert_uint_eq(r->stats.sampled, i * DET_ROWS);
        ck_assert_uint_eq(r->stats.updated, i > DET_LAG ? (i - DET_LAG) * DET_ROWS : 0);
        ck_assert_uint_eq(r->horizon, g->horizon_at[i]);
        ck_assert_uint_eq(r->stats.det_horizon, g->horizon_at[i]);
        ck_assert_uint_eq(r->stats.det_served, g->served_at[g->horizon_at[i]]);
        for (int j = 0; j < DET_ROWS; j++) {
            uint32_t slot = WIRE_KEY_SLOT(r->keys[j]);
            ck_assert_msg(slot < g->inserted_at[i], "request %llu row %d: slot %u of %llu",
                          (unsigned long long)i, j, slot, (unsigned long long)g->inserted_at[i]);
            ck_assert_msg(r->rewards[j] == g->slot_reward[slot],
                          "request %llu row %d: slot %u holds another row than period-major "
                          "order puts there",
                          (unsigned long long)i, j, slot);
        }
    }
}

START_TEST(test_det_same_replies_any_arrival_order) {
    static s_det_msgs g;
    s_det_make(&g, 2026);
    ck_assert_int_ge(g.n_requests, 12);
    static const s_det_order orders[] = {DET_EAGER, DET_LATE, DET_RANDOM, DET_UPDATES_LAST};
    static s_det_run runs[APEX_ARRAY_LEN(orders)];
    for (int k = 0; k < (int)APEX_ARRAY_LEN(orders); k++) {
        s_det_feed(&runs[k], &g, 1, orders[k], 7 + (uint64_t)k);
        s_det_check_model(&runs[k], &g);
        wire_replay_stats_t st;
        replay_server_stats(runs[k].srv, &st);
        ck_assert_uint_eq(st.inserted, g.total_rows);
        ck_assert_uint_eq(st.det_horizon, DET_PERIODS);
        ck_assert_uint_eq(st.det_served, g.served_at[DET_PERIODS]);
        ck_assert_uint_eq(st.bad_messages, 0);
        if (k > 0) {
            ck_assert_msg(s_det_same(&runs[0], &runs[k], 1), "arrival order %d: other replies", k);
        }
        replay_server_destroy(&runs[k].srv);
    }
    s_det_free(&g);
}
END_TEST

// The negative control: the same messages in the same orders to a server that is not
// deterministic give other replies (so the test above can fail).
// A learner that timed out on a request asks for its place again (learner/prefetch.c: the
// same det_index, the next attempt in the id's high bits). If the first ask was served
// meanwhile, the second is dropped (the learner takes the first's reply): no second reply,
// the schedule goes on. A first ask of an earlier place is a learner that started over: the
// schedule starts again there, and the place is served again. Below where the schedule
// restarted, a re-ask restarts it there (those places were never served).
START_TEST(test_det_reask_of_served_request_dropped) {
    s_det_msgs *g = malloc(sizeof *g);
    ck_assert_ptr_nonnull(g);
    s_det_make(g, 5);
    s_det_run *run = calloc(1, sizeof *run);
    ck_assert_ptr_nonnull(run);
    run->srv = s_det_server(1);
    run->srv->reply_hook = s_det_hook;
    run->srv->reply_hook_arg = run;
    for (int k = 0; k < g->n_order; k++) { // every batch, in turn order
        int a = g->order_actor[k], q = g->order_seq[k];
        char id[16];
        snprintf(id, sizeof id, "actor-%d", a);
        replay_server_handle(run->srv, REPLAY_SOCK_INSERT, id, strlen(id), g->batch[a][q].data,
                             g->batch[a][q].len, 0);
    }
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    m.u.sample_request = (wire_sample_request_t){
        .batch_size = DET_B, .beta = 0.5f, .batches = DET_K, .det_index = 1};
    m.u.sample_request.id = WIRE_DET_ID(1, 0);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_int_eq(run->n_replies, 1);
    ck_assert_uint_eq(run->replies[0].id, WIRE_DET_ID(1, 0));
    // The ask again, after a timeout: dropped.
    m.u.sample_request.id = WIRE_DET_ID(1, 1);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_int_eq(run->n_replies, 1);
    ck_assert_uint_eq(run->srv->det_reasks, 1);
    ck_assert_uint_eq(detsched_next_index(run->srv->det), 2);
    // The schedule goes on: place 2 is served.
    m.u.sample_request.det_index = 2;
    m.u.sample_request.id = WIRE_DET_ID(2, 0);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_int_eq(run->n_replies, 2);
    ck_assert_uint_eq(detsched_next_index(run->srv->det), 3);
    // A first ask of place 1 again: a learner that started over. Served again, from the
    // store as it is now.
    m.u.sample_request.det_index = 1;
    m.u.sample_request.id = WIRE_DET_ID(1, 0);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_int_eq(run->n_replies, 3);
    ck_assert_uint_eq(run->replies[2].id, WIRE_DET_ID(1, 0));
    ck_assert_uint_eq(detsched_next_index(run->srv->det), 2);
    ck_assert_uint_eq(run->srv->det_reasks, 1);
    // A schedule that restarted at a place far ahead (this replay restarted: the learner's
    // asks of 30 came first) never served the places below it: a re-ask of one of them (a
    // learner whose first ask was lost with the old process) is not dropped as served, the
    // schedule restarts there.
    m.u.sample_request.det_index = 30;
    m.u.sample_request.id = WIRE_DET_ID(30, 0);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_uint_eq(detsched_base_index(run->srv->det), 30);
    m.u.sample_request.det_index = 28;
    m.u.sample_request.id = WIRE_DET_ID(28, 2);
    s_det_send(run->srv, REPLAY_SOCK_SAMPLE, "learner", &m);
    ck_assert_uint_eq(run->srv->det_reasks, 1);
    ck_assert_uint_eq(detsched_base_index(run->srv->det), 28);
    ck_assert_uint_le(detsched_next_index(run->srv->det), 29); // 28 held or served
    replay_server_destroy(&run->srv);
    free(run);
    s_det_free(g);
    free(g);
}
END_TEST

START_TEST(test_det_off_replies_follow_arrival_order) {
    static s_det_msgs g;
    s_det_make(&g, 2026);
    static s_det_run runs[3];
    static const s_det_order orders[] = {DET_EAGER, DET_LATE, DET_RANDOM};
    for (int k = 0; k < 3; k++) {
        s_det_feed(&runs[k], &g, 0, orders[k], 7 + (uint64_t)k);
    }
    ck_assert(!s_det_same(&runs[0], &runs[1], 0));
    ck_assert(!s_det_same(&runs[0], &runs[2], 0));
    ck_assert(!s_det_same(&runs[1], &runs[2], 0));
    // Not only in how many: the first reply already holds other rows.
    const s_det_reply *a[DET_MAX_REPLIES], *b[DET_MAX_REPLIES];
    ck_assert_int_gt(s_det_ok(&runs[0], a), 0);
    ck_assert_int_gt(s_det_ok(&runs[1], b), 0);
    ck_assert(memcmp(a[0]->rewards, b[0]->rewards, sizeof a[0]->rewards) != 0);
    for (int k = 0; k < 3; k++) {
        replay_server_destroy(&runs[k].srv);
    }
    s_det_free(&g);
}
END_TEST

// A deterministic run's replay shard (shard 1 of 2, actors 1 and 3 of 4; [replay]
// samples_per_insert 2, min_size_to_sample 20, requests of 16 rows): every place is asked of
// every shard, which holds the ratio for its 1/K share (K x 2 = 4 per inserted row) and
// serves once it holds ceil(20 / K) = 10 rows. Request 1 waits through 6 rows (the run's
// ratio would allow it; the shard's share of the minimum does not), is served when the 10th
// row is in, request 2 at once (credit 40 - 16), request 3 exactly when 2 more rows are in
// (8 + 2 x 4 = 16; at the run's ratio it would take 4) and its lag's update is there. Actor
// 0's batch is refused (it inserts into shard 0), and the horizon moves with actors 1 and 3.
static wire_buf_t s_shard_batch(uint32_t actor, uint64_t seq, uint32_t n, uint64_t period,
                                int end) {
    float obs[16 * OBS], rewards[16], discounts[16], prio[16];
    int32_t actions[16];
    for (uint32_t i = 0; i < n * OBS; i++) {
        obs[i] = 0.25f * (float)i;
    }
    for (uint32_t i = 0; i < n; i++) {
        rewards[i] = (float)i, discounts[i] = 0.99f, prio[i] = 1.0f, actions[i] = 1;
    }
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = actor,
                               .epoch = 7,
                               .seq = seq,
                               .count = n,
                               .obs_dim = OBS,
                               .obs = obs,
                               .actions = actions,
                               .rewards = rewards,
                               .discounts = discounts,
                               .next_obs = obs,
                               .priorities = prio,
                               .det_period = period + 1,
                               .det_period_end = end};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    return b;
}

static void s_shard_insert(replay_server_t *s, uint32_t actor, uint64_t seq, uint32_t n,
                           uint64_t period, int end) {
    wire_buf_t b = s_shard_batch(actor, seq, n, period, end);
    char id[16];
    snprintf(id, sizeof id, "actor-%u", actor);
    replay_server_handle(s, REPLAY_SOCK_INSERT, id, strlen(id), b.data, b.len, 0);
    wire_buf_fini(&b);
}

START_TEST(test_det_shard_share_of_ratio_and_minimum) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    const char *sets[] = {"run.deterministic=true",
                          "run.out_dir=/nonexistent-check-det",
                          "actor.num_actors=4",
                          "actor.max_pending_batches=8",
                          "learner.prefetch=2",
                          "learner.batch_size=8",
                          "learner.batches_per_request=2",
                          "replay.shards=2",
                          "replay.capacity=1024",
                          "replay.max_batch=64",
                          "replay.samples_per_insert=2",
                          "replay.min_size_to_sample=20"};
    ck_assert_msg(config_load(&cfg, NULL, sets, APEX_ARRAY_LEN(sets), err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(config_select_shard(&cfg, 1), 0);
    s_det_run *run = calloc(1, sizeof *run);
    ck_assert_ptr_nonnull(run);
    run->srv = replay_server_new(&cfg, 0);
    ck_assert_ptr_nonnull(run->srv);
    run->srv->reply_hook = s_det_hook;
    run->srv->reply_hook_arg = run;
    replay_server_t *s = run->srv;
    wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST};
    for (uint64_t i = 1; i <= 3; i++) {
        m.u.sample_request = (wire_sample_request_t){
            .id = WIRE_DET_ID(i, 0), .batch_size = 8, .beta = 0.5f, .batches = 2, .det_index = i};
        s_det_send(s, REPLAY_SOCK_SAMPLE, "learner", &m);
    }
    ck_assert_int_eq(run->n_replies, 0);
    uint64_t bad = s->bad_total;
    s_shard_insert(s, 0, 0, 8, 0, 1); // actor 0 inserts into shard 0
    ck_assert_uint_eq(s->bad_total, bad + 1);
    s_shard_insert(s, 1, 0, 6, 0, 0);
    ck_assert_uint_eq(store_inserted(s->store), 6);
    ck_assert_int_eq(run->n_replies, 0); // 6 rows < 10
    s_shard_insert(s, 1, 1, 4, 0, 1);
    ck_assert_uint_eq(store_inserted(s->store), 10);
    ck_assert_int_eq(run->n_replies, 2); // requests 1 and 2; 3 needs credit and 1's update
    ck_assert_uint_eq(run->replies[0].id, WIRE_DET_ID(1, 0));
    ck_assert_uint_eq(run->replies[0].stats.inserted, 10);
    ck_assert_uint_eq(run->replies[1].stats.inserted, 10);
    ck_assert_uint_eq(detsched_horizon(s->det), 0); // actor 3 has not ended period 0
    for (int b = 0; b < 2; b++) { // request 1's updates (one per batch), empty: other rows
        wire_msg_t u = {.type = WIRE_MSG_PRIORITY_UPDATE};
        u.u.priority_update = (wire_priority_update_t){.count = 0, .det_index = 1};
        s_det_send(s, REPLAY_SOCK_SAMPLE, "learner", &u);
    }
    s_shard_insert(s, 3, 0, 1, 0, 0);
    ck_assert_int_eq(run->n_replies, 2); // 8 + 4 < 16
    s_shard_insert(s, 3, 1, 1, 0, 0);
    ck_assert_int_eq(run->n_replies, 3); // 8 + 8: served before any further insert
    ck_assert_uint_eq(run->replies[2].stats.inserted, 12);
    s_shard_insert(s, 3, 2, 0, 0, 1); // actor 3 ends period 0: the horizon, without 0 and 2
    ck_assert_uint_eq(detsched_horizon(s->det), 1);
    ck_assert_int_eq(detsched_served_at(s->det, 1), 3);
    ck_assert_uint_eq(s->counters.sampled_rows, 48);
    replay_server_destroy(&run->srv);
    free(run);
    // 3 actors on 2 shards: shard 1 has actor 1 alone, a third of the actors, so 3 x 2 = 6 per
    // row and ceil(20 / 3) = 7 rows; shard 0 (actors 0 and 2) 3/2 x 2 = 3 and ceil(40 / 3).
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(config_set(&cfg, "actor.num_actors=3", err, sizeof err), 0);
        ck_assert_int_eq(config_select_shard(&cfg, k), 0);
        replay_server_t *u = replay_server_new(&cfg, 0);
        ck_assert_ptr_nonnull(u);
        ck_assert_double_eq(u->limiter.samples_per_insert, k ? 6.0 : 3.0);
        ck_assert_uint_eq(u->min_size, k ? 7 : 14);
        replay_server_destroy(&u);
    }
}
END_TEST

// The actors' columns of a deterministic run: each period's last batch carries its actor's
// totals and the returns of its episodes; the replay reports them as of the horizon (every
// actor's periods below it), the returns the last 100 in the schedule's order. Two actors:
// period 0 ends with 10 + 12 frames, 2 + 1 episodes, returns {1, 2} then {5}; in period 1
// actor 0's 100 returns of 1 come first, and nothing moves until actor 1 ends it too (with
// a return of 3): then the window is 99 ones and the 3. Versions: the smallest acted with.
static void s_det_end(replay_server_t *s, uint32_t actor, uint64_t seq, uint64_t period,
                      uint64_t frames, uint64_t episodes, const float *ret, uint32_t n,
                      uint64_t version) {
    float obs[OBS] = {0}, r = 0.0f, disc = 0.99f;
    int32_t act = 0;
    wire_msg_t m = {.type = WIRE_MSG_TRANSITION_BATCH};
    m.u.batch = (wire_batch_t){.actor_id = actor,
                               .epoch = 7,
                               .seq = seq,
                               .weights_version = version,
                               .count = 1,
                               .obs_dim = OBS,
                               .obs = obs,
                               .actions = &act,
                               .rewards = &r,
                               .discounts = &disc,
                               .next_obs = obs,
                               .det_period = period + 1,
                               .det_period_end = 1,
                               .det_frames = frames,
                               .det_episodes = episodes,
                               .det_returns = n ? ret : NULL,
                               .det_n_returns = n};
    wire_buf_t b;
    wire_buf_init(&b, 0);
    wire_encode(&m, &b);
    char id[16];
    snprintf(id, sizeof id, "actor-%u", actor);
    replay_server_handle(s, REPLAY_SOCK_INSERT, id, strlen(id), b.data, b.len, 0);
    wire_buf_fini(&b);
}

START_TEST(test_det_actor_columns_as_of_horizon) {
    replay_server_t *s = s_det_server(1); // (2 actors; min_size_to_sample 20: nothing served)
    wire_replay_stats_t st;
    const float r0[2] = {1.0f, 2.0f}, r1[1] = {5.0f}, r3[1] = {3.0f};
    float ones[WIRE_DET_RETURNS_MAX];
    for (int i = 0; i < WIRE_DET_RETURNS_MAX; i++) {
        ones[i] = 1.0f;
    }
    s_det_end(s, 1, 0, 0, 12, 1, r1, 1, (3ull << 32) | 4); // held: actor 0's turn first
    s_det_end(s, 0, 0, 0, 10, 2, r0, 2, (3ull << 32) | 5);
    replay_server_stats(s, &st);
    ck_assert_uint_eq(st.det_horizon, 1);
    ck_assert_uint_eq(st.det_env_frames, 22);
    ck_assert_uint_eq(st.det_episodes, 3);
    ck_assert_double_eq(st.det_return_sum, 8.0);
    ck_assert_uint_eq(st.det_return_n, 3);
    ck_assert_uint_eq(st.det_version_min, (3ull << 32) | 4);
    s_det_end(s, 0, 1, 1, 20, 102, ones, WIRE_DET_RETURNS_MAX, (3ull << 32) | 6);
    replay_server_stats(s, &st); // actor 0's period 1 is in, the horizon is not: as before
    ck_assert_uint_eq(st.det_horizon, 1);
    ck_assert_uint_eq(st.det_env_frames, 22);
    ck_assert_uint_eq(st.det_return_n, 3);
    s_det_end(s, 1, 1, 1, 24, 2, r3, 1, (3ull << 32) | 6);
    replay_server_stats(s, &st);
    ck_assert_uint_eq(st.det_horizon, 2);
    ck_assert_uint_eq(st.det_env_frames, 44);
    ck_assert_uint_eq(st.det_episodes, 104);
    ck_assert_uint_eq(st.det_return_n, WIRE_DET_RETURNS_MAX);
    ck_assert_double_eq(st.det_return_sum, 99.0 + 3.0);
    ck_assert_uint_eq(st.det_version_min, (3ull << 32) | 6);
    replay_server_destroy(&s);
    // Off: zeros.
    s = s_det_server(0);
    replay_server_stats(s, &st);
    ck_assert_uint_eq(st.det_env_frames + st.det_episodes + st.det_return_n, 0);
    replay_server_destroy(&s);
}
END_TEST

Suite *replay_server_suite(void) {
    Suite *s = suite_create("replay_server");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60); // under ASan on a loaded 2-core CI machine, not 20
    tcase_add_test(tc, test_insert_sample_update);
    tcase_add_test(tc, test_limiter_not_ready_then_ok);
    tcase_add_test(tc, test_samples_per_insert_ratio);
    tcase_add_test(tc, test_hostile_input_counted_and_survived);
    tcase_add_test(tc, test_uint8_observations);
    tcase_add_test(tc, test_continuous_actions);
    tcase_add_test(tc, test_several_batches_per_request);
    tcase_add_test(tc, test_capacity_too_large_refused);
    tcase_add_test(tc, test_wal_acked_batches_survive_kill);
    tcase_add_test(tc, test_wal_acks_coalesced_per_actor);
    tcase_add_test(tc, test_restore_keeps_replay_ratio);
    tcase_add_test(tc, test_sample_served_between_insert_slices);
    tcase_add_test(tc, test_insert_served_during_sample_flood);
    tcase_add_test(tc, test_queued_replies_intact_when_learner_stalls);
    tcase_add_test(tc, test_shard_serves_its_actors_without_holds);
    tcase_add_test(tc, test_shard_stats_requests);
    tcase_add_test(tc, test_det_same_replies_any_arrival_order);
    tcase_add_test(tc, test_det_off_replies_follow_arrival_order);
    tcase_add_test(tc, test_det_reask_of_served_request_dropped);
    tcase_add_test(tc, test_det_shard_share_of_ratio_and_minimum);
    tcase_add_test(tc, test_det_actor_columns_as_of_horizon);
    suite_add_tcase(s, tc);
    return s;
}
