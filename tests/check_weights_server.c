// check_weights_server.c: common/weights_server.h with real DEALER clients on loopback, the
// way actors and apex-eval --follow ask (and common/weights_client.h against a ROUTER): an older version is answered at once, the current
// one held until the next version or the heartbeat, one entry per peer, a full hold table
// drops (counted), everything that is not a WeightsRequest is refused and counted, and
// versions only increase; in a deterministic run, a request for a target held until the
// target is set and its version published, answered with that version's floats (one of the
// last WEIGHTS_SERVER_DET_KEEP) and det_target, the heartbeat's answer the current weights.
// Every wait is for a condition, with a generous deadline.
#include "check_apex.h"

#include <signal.h>
#include <string.h>
#include <zmq.h>

#include "clock.h"
#include "weights_client.h"
#include "weights_server.h"
#include "wire.h"

#define WAIT_MS 20000
#define NP 5

typedef struct {
    void *ctx;
    weights_server_t *w;
    wire_decoder_t *dec; // what a client reads: Weights of NP parameters
    wire_buf_t buf;
    float params[NP];
} s_fix;

static void s_setup(s_fix *f, int hold_max) {
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    f->w = weights_server_new(f->ctx, NULL, "tcp://127.0.0.1:*", hold_max);
    ck_assert_ptr_nonnull(f->w);
    ck_assert(strncmp(weights_server_endpoint(f->w), "tcp://127.0.0.1:", 16) == 0);
    wire_limits_t lim = {.num_params = NP, .max_count = 1};
    f->dec = wire_decoder_new(&lim);
    wire_buf_init(&f->buf, 0);
    for (int i = 0; i < NP; i++) {
        f->params[i] = 0.25f * (float)i;
    }
}

static void s_teardown(s_fix *f) {
    weights_server_destroy(&f->w);
    ck_assert_ptr_null(f->w);
    zmq_ctx_term(f->ctx);
    wire_decoder_destroy(&f->dec);
    wire_buf_fini(&f->buf);
}

static void *s_client(s_fix *f, const char *id) {
    return check_dealer(f->ctx, weights_server_endpoint(f->w), id, 0);
}

static void s_ask(void *client, uint64_t have) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request.have_version = have;
    check_send_msg(client, &m);
}

// Runs the server's reader until it has taken `requests` valid requests and `refused` bad
// messages in all (the messages cross a TCP connection: wait for them, not for a time).
static void s_serve_until(s_fix *f, uint64_t requests, uint64_t refused) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    weights_server_stats_t st;
    for (;;) {
        weights_server_read(f->w, 64, clock_now_ms());
        weights_server_stats(f->w, &st);
        if (st.requests >= requests && st.refused >= refused) {
            break;
        }
        ck_assert_msg(clock_now_ms() < deadline, "requests %llu of %llu, refused %llu of %llu",
                      (unsigned long long)st.requests, (unsigned long long)requests,
                      (unsigned long long)st.refused, (unsigned long long)refused);
        zmq_pollitem_t it = {.socket = weights_server_socket(f->w), .events = ZMQ_POLLIN};
        zmq_poll(&it, 1, 10);
    }
    ck_assert_uint_eq(st.requests, requests);
    ck_assert_uint_eq(st.refused, refused);
}

// The version of the Weights waiting for client within wait_ms, or 0 when none came.
static uint64_t s_answer(s_fix *f, void *client, int wait_ms) {
    zmq_pollitem_t it = {.socket = client, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, wait_ms) <= 0) {
        return 0;
    }
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    ck_assert_int_ge(zmq_msg_recv(&msg, client, 0), 0);
    ck_assert(!zmq_msg_more(&msg));
    wire_msg_t m;
    ck_assert_int_eq(wire_decode(f->dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
    ck_assert_int_eq(m.type, WIRE_MSG_WEIGHTS);
    ck_assert_mem_eq(m.u.weights.params, f->params, sizeof f->params);
    uint64_t v = m.u.weights.version;
    zmq_msg_close(&msg);
    return v;
}

static void s_publish(s_fix *f, uint64_t version) {
    wire_weights_t w = {
        .version = version, .learner_step = 7, .num_params = NP, .params = f->params};
    weights_server_publish(f->w, &w);
    ck_assert_uint_eq(weights_server_version(f->w), version);
}

START_TEST(test_answer_hold_publish_heartbeat) {
    s_fix f;
    s_setup(&f, 16);
    void *a = s_client(&f, "actor-0"), *b = s_client(&f, "actor-1");
    // Before any version: held (nothing to answer with).
    s_ask(a, 0);
    s_serve_until(&f, 1, 0);
    ck_assert_uint_eq(s_answer(&f, a, 50), 0);
    // The first version answers it.
    s_publish(&f, 5);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 5);
    // Older than the current: answered at once. The current one: held.
    s_ask(b, 4);
    s_ask(a, 5);
    s_ask(a, 5); // a repeated request from the same peer is held once
    s_serve_until(&f, 4, 0);
    ck_assert_uint_eq(s_answer(&f, b, WAIT_MS), 5);
    ck_assert_uint_eq(s_answer(&f, a, 50), 0);
    weights_server_stats_t st;
    weights_server_stats(f.w, &st);
    ck_assert_int_eq(st.held, 1);
    // A newer version held by the client (a learner started afresh): held, not answered.
    s_ask(b, 9);
    s_serve_until(&f, 5, 0);
    weights_server_stats(f.w, &st);
    ck_assert_int_eq(st.held, 2);
    // The heartbeat answers only the requests held long enough.
    weights_server_heartbeat(f.w, clock_now_ms() - WEIGHTS_SERVER_HOLD_MS - 10000);
    ck_assert_uint_eq(s_answer(&f, a, 50), 0);
    weights_server_heartbeat(f.w, clock_now_ms() + WEIGHTS_SERVER_HOLD_MS);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 5);
    ck_assert_uint_eq(s_answer(&f, b, WAIT_MS), 5);
    weights_server_stats(f.w, &st);
    ck_assert_int_eq(st.held, 0);
    // A new version answers every held request, once.
    s_ask(a, 5);
    s_ask(b, 5);
    s_serve_until(&f, 7, 0);
    s_publish(&f, 6);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 6);
    ck_assert_uint_eq(s_answer(&f, b, WAIT_MS), 6);
    ck_assert_uint_eq(s_answer(&f, a, 50), 0);
    weights_server_stats(f.w, &st);
    ck_assert_uint_eq(st.answers, 6);
    // The egress: six messages of one size (versions 5 and 6 encode alike), each the NP
    // floats and a few bytes of header.
    ck_assert_uint_eq(st.bytes % 6, 0);
    ck_assert(st.bytes / 6 >= NP * sizeof(float) && st.bytes / 6 <= NP * sizeof(float) + 64);
    ck_assert_uint_eq(st.refused, 0);
    ck_assert_uint_eq(st.unheld, 0);
    zmq_close(a);
    zmq_close(b);
    s_teardown(&f);
}
END_TEST

static void s_fill(void *arg, void *dst) {
    memcpy(dst, ((s_fix *)arg)->params, sizeof((s_fix *)arg)->params);
}

// weights_server_publish_fill (the learner writes the floats into the message itself): the
// held request is answered with that version and those floats, decoded as any Weights.
START_TEST(test_publish_fill) {
    s_fix f;
    s_setup(&f, 4);
    void *a = s_client(&f, "actor-0");
    s_ask(a, 0);
    s_serve_until(&f, 1, 0);
    wire_weights_t w = {.version = 3, .learner_step = 9, .num_params = NP};
    weights_server_publish_fill(f.w, &w, s_fill, &f);
    ck_assert_uint_eq(weights_server_version(f.w), 3);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 3); // s_answer compares the floats
    s_publish(&f, 4);                               // and the two ways mix: versions only increase
    s_ask(a, 3);
    s_serve_until(&f, 2, 0);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 4);
    zmq_close(a);
    s_teardown(&f);
}
END_TEST

START_TEST(test_full_hold_table_drops) {
    s_fix f;
    s_setup(&f, 2);
    void *c[3];
    char id[32];
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof id, "actor-%d", i);
        c[i] = s_client(&f, id);
        s_ask(c[i], 0);
        s_serve_until(&f, (uint64_t)i + 1, 0); // in this order
    }
    weights_server_stats_t st;
    weights_server_stats(f.w, &st);
    ck_assert_int_eq(st.held, 2);
    ck_assert_uint_eq(st.unheld, 1);
    s_publish(&f, 1);
    ck_assert_uint_eq(s_answer(&f, c[0], WAIT_MS), 1);
    ck_assert_uint_eq(s_answer(&f, c[1], WAIT_MS), 1);
    ck_assert_uint_eq(s_answer(&f, c[2], 50), 0); // dropped: it asks again after its timeout
    for (int i = 0; i < 3; i++) {
        zmq_close(c[i]);
    }
    s_teardown(&f);
}
END_TEST

START_TEST(test_refuses_what_is_not_a_request) {
    s_fix f;
    s_setup(&f, 4);
    s_publish(&f, 3);
    void *a = s_client(&f, "actor-0");
    // Garbage; a valid message of another kind; two frames; an empty frame.
    ck_assert_int_eq(zmq_send(a, "garbage", 7, 0), 7);
    wire_msg_t m = {.type = WIRE_MSG_ACTOR_STATS};
    check_send_msg(a, &m);
    ck_assert_int_eq(zmq_send(a, "x", 1, ZMQ_SNDMORE), 1);
    ck_assert_int_eq(zmq_send(a, "y", 1, 0), 1);
    ck_assert_int_eq(zmq_send(a, "", 0, 0), 0);
    s_serve_until(&f, 0, 4);
    ck_assert_uint_eq(s_answer(&f, a, 50), 0);
    // Routing ids a ROUTER never hands out (empty, longer than libzmq's bound).
    uint8_t body[8];
    wire_msg_t r = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    wire_encode(&r, &f.buf);
    ck_assert_uint_le(f.buf.len, sizeof body);
    memcpy(body, f.buf.data, f.buf.len);
    static uint8_t long_id[300];
    weights_server_handle(f.w, long_id, 0, body, f.buf.len, 0, clock_now_ms());
    weights_server_handle(f.w, long_id, sizeof long_id, body, f.buf.len, 0, clock_now_ms());
    weights_server_handle(f.w, "actor-9", 7, body, f.buf.len, 1, clock_now_ms());
    weights_server_stats_t st;
    weights_server_stats(f.w, &st);
    ck_assert_uint_eq(st.refused, 7);
    ck_assert_uint_eq(st.requests, 0);
    ck_assert_int_eq(st.held, 0);
    // The same client is served normally afterwards.
    s_ask(a, 0);
    s_serve_until(&f, 1, 7);
    ck_assert_uint_eq(s_answer(&f, a, WAIT_MS), 3);
    zmq_close(a);
    s_teardown(&f);
}
END_TEST

// Versions only increase: publishing an older one is the caller's programming error.
START_TEST(test_older_version_asserts) {
    s_fix f;
    s_setup(&f, 4);
    s_publish(&f, 3);
    s_publish(&f, 3);
}
END_TEST

START_TEST(test_bind_error) {
    void *ctx = zmq_ctx_new();
    ck_assert_ptr_null(weights_server_new(ctx, NULL, "nonsense://x", 4));
    weights_server_t *a = weights_server_new(ctx, NULL, "tcp://127.0.0.1:*", 4);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(weights_server_new(ctx, NULL, weights_server_endpoint(a), 4)); // in use
    weights_server_destroy(&a);
    weights_server_destroy(&a); // NULL: a no-op
    zmq_ctx_term(ctx);
}
END_TEST

// Reads requests on router until one comes from a connection other than `other` (its
// routing id), calling weights_client_ask with a clock advanced by WEIGHTS_RESEND_MS each
// round so that a request lost with a closing connection is sent again. Fails the test at
// the deadline.
static void s_request_from_new_connection(void *router, weights_client_t *c, uint64_t have,
                                          int64_t *clock, const check_weights_request_t *other,
                                          check_weights_request_t *q) {
    int64_t deadline = clock_now_ms() + WAIT_MS;
    for (;;) {
        ck_assert_msg(clock_now_ms() < deadline, "no request over a new connection");
        weights_client_ask(c, have, *clock);
        *clock += WEIGHTS_RESEND_MS;
        if (check_weights_wait_request(router, clock_now_ms() + 20, q) &&
            (!other || q->id_len != other->id_len || memcmp(q->id, other->id, q->id_len) != 0)) {
            ck_assert_uint_eq(q->have_version, have);
            return;
        }
    }
}

// weights_client (the actors', the relay's and apex-eval's side of the endpoint): one request
// in flight, none more until WEIGHTS_RESEND_MS; a link heard from within WEIGHTS_SILENT_MS is
// left alone, one silent longer is reconnected, its request dropped, and the next request
// goes over a new connection (a new routing id at the ROUTER). The clock is the test's:
// nothing waits for 5 s.
START_TEST(test_client_resend_and_revive) {
    void *ctx = zmq_ctx_new();
    char ep[256];
    void *router = check_weights_router(ctx, ep, sizeof ep);
    weights_client_t c;
    ck_assert_int_eq(weights_client_open(&c, ctx, NULL, ep, 1 << 20), 0);
    ck_assert_str_eq(c.endpoint, ep);
    int64_t t = c.heard_ms, clock = t;
    check_weights_request_t first, q;
    s_request_from_new_connection(router, &c, 3, &clock, NULL, &first);
    ck_assert(c.in_flight);
    int64_t sent = c.sent_ms;
    weights_client_ask(&c, 3, sent + WEIGHTS_RESEND_MS - 1); // in flight: nothing sent
    ck_assert_int_eq(check_weights_wait_request(router, clock_now_ms() + 50, &q), 0);
    ck_assert_int_eq(c.sent_ms, sent);
    weights_client_heard(&c, t + 1000);
    ck_assert_int_eq(weights_client_revive(&c, t + 1000 + WEIGHTS_SILENT_MS), 0);
    ck_assert(c.in_flight);
    ck_assert_int_eq(weights_client_revive(&c, t + 1001 + WEIGHTS_SILENT_MS), 1);
    ck_assert(!c.in_flight);
    ck_assert_int_eq(c.heard_ms, t + 1001 + WEIGHTS_SILENT_MS);
    ck_assert_int_eq(weights_client_revive(&c, t + 1002 + WEIGHTS_SILENT_MS), 0);
    s_request_from_new_connection(router, &c, 4, &clock, &first, &q);
    weights_client_close(&c);
    zmq_close(router);
    zmq_ctx_term(ctx);
}
END_TEST

// An endpoint longer than the client keeps is refused, not cut.
START_TEST(test_client_endpoint_too_long) {
    void *ctx = zmq_ctx_new();
    char ep[WEIGHTS_ENDPOINT_LEN + 8];
    memset(ep, 'x', sizeof ep - 1);
    memcpy(ep, "tcp://", 6);
    ep[sizeof ep - 1] = 0;
    weights_client_t c;
    ck_assert_int_eq(weights_client_open(&c, ctx, NULL, ep, 1 << 20), -1);
    weights_client_close(&c);
    zmq_ctx_term(ctx);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Deterministic runs (weights_server_det_enable): a request with det_target t is answered
// with the version the learner named for t (weights_server_det_set), in a message whose
// det_target is t. Each version published here has parameters of its own (s_det_param), so
// an answer says which version's floats it carries. "Not answered" is read off the
// server's answer counter (an answer is counted when it is handed to the socket), never
// from a wait that times out; what was handed out is then read in order from the DEALER.

static float s_det_param(uint64_t version, int i) { return (float)(version * 16 + (uint64_t)i); }

typedef struct {
    uint64_t version;
} s_det_fill_arg;

static void s_det_fill(void *arg, void *dst) {
    uint64_t v = ((const s_det_fill_arg *)arg)->version;
    for (int i = 0; i < NP; i++) {
        float x = s_det_param(v, i);
        memcpy((uint8_t *)dst + 4 * i, &x, 4); // dst may be unaligned
    }
}

// Publishes version the way a deterministic learner does (kept for targets).
static void s_det_publish(s_fix *f, uint64_t version) {
    s_det_fill_arg a = {version};
    wire_weights_t w = {.version = version, .learner_step = version * 10, .num_params = NP};
    weights_server_publish_fill(f->w, &w, s_det_fill, &a);
    ck_assert_uint_eq(weights_server_version(f->w), version);
}

static void s_ask_det(void *client, uint64_t have, uint64_t target) {
    wire_msg_t m = {.type = WIRE_MSG_WEIGHTS_REQUEST};
    m.u.weights_request = (wire_weights_request_t){.have_version = have, .det_target = target};
    check_send_msg(client, &m);
}

static uint64_t s_answers(const s_fix *f) {
    weights_server_stats_t st;
    weights_server_stats(f->w, &st);
    return st.answers;
}

static int s_held(const s_fix *f) {
    weights_server_stats_t st;
    weights_server_stats(f->w, &st);
    return st.held;
}

// Receives the next answer the client has been sent (it was handed to the socket: it comes),
// checks that its floats are those of the version it names, and returns that version and
// its det_target.
static void s_det_recv(s_fix *f, void *client, uint64_t *version, uint64_t *target) {
    zmq_pollitem_t it = {.socket = client, .events = ZMQ_POLLIN};
    ck_assert_msg(zmq_poll(&it, 1, WAIT_MS) == 1, "an answer handed to the socket never came");
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    ck_assert_int_ge(zmq_msg_recv(&msg, client, 0), 0);
    ck_assert(!zmq_msg_more(&msg));
    wire_msg_t m;
    ck_assert_int_eq(wire_decode(f->dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
    ck_assert_int_eq(m.type, WIRE_MSG_WEIGHTS);
    ck_assert_uint_eq(m.u.weights.num_params, NP);
    ck_assert_uint_eq(m.u.weights.learner_step, m.u.weights.version * 10);
    for (int i = 0; i < NP; i++) {
        ck_assert_msg(m.u.weights.params[i] == s_det_param(m.u.weights.version, i),
                      "param %d of version %llu: %g", i, (unsigned long long)m.u.weights.version,
                      (double)m.u.weights.params[i]);
    }
    *version = m.u.weights.version;
    *target = m.u.weights.det_target;
    zmq_msg_close(&msg);
}

// The next answer is version's, for target.
static void s_det_expect(s_fix *f, void *client, uint64_t version, uint64_t target) {
    uint64_t v, t;
    s_det_recv(f, client, &v, &t);
    ck_assert_msg(v == version && t == target,
                  "version %llu for target %llu, expected %llu for %llu", (unsigned long long)v,
                  (unsigned long long)t, (unsigned long long)version, (unsigned long long)target);
}

static void s_det_setup(s_fix *f) {
    s_setup(f, 16);
    weights_server_det_enable(f->w);
}

// A request for a target not set yet is held, whatever has been published; once set to a
// version already published, it is answered at once with that version for that target; a
// request for a target already set is answered at once, as often as it is asked.
START_TEST(test_det_held_until_set) {
    s_fix f;
    s_det_setup(&f);
    void *a = s_client(&f, "actor-0");
    s_det_publish(&f, 1);
    s_det_publish(&f, 2);
    s_ask_det(a, 0, 1);
    s_serve_until(&f, 1, 0);
    ck_assert_uint_eq(s_answers(&f), 0);
    ck_assert_int_eq(s_held(&f), 1);
    // Another target being set does not answer it.
    weights_server_det_set(f.w, 2, 2);
    ck_assert_uint_eq(s_answers(&f), 0);
    ck_assert_int_eq(s_held(&f), 1);
    // Its own, naming the older of the two versions: version 1's floats, not the current ones.
    weights_server_det_set(f.w, 1, 1);
    ck_assert_uint_eq(s_answers(&f), 1);
    ck_assert_int_eq(s_held(&f), 0);
    s_det_expect(&f, a, 1, 1);
    // Asked again (a client that lost it): at once, and with any have_version.
    s_ask_det(a, 0, 1);
    s_serve_until(&f, 2, 0);
    ck_assert_uint_eq(s_answers(&f), 2);
    s_det_expect(&f, a, 1, 1);
    s_ask_det(a, 2, 1);
    s_ask_det(a, 1, 2);
    s_serve_until(&f, 4, 0);
    ck_assert_uint_eq(s_answers(&f), 4);
    s_det_expect(&f, a, 1, 1);
    s_det_expect(&f, a, 2, 2);
    ck_assert_int_eq(s_held(&f), 0);
    zmq_close(a);
    s_teardown(&f);
}
END_TEST

// A target set to a version not yet published is answered when that version is published,
// not when it is set, and not with a version published before it.
START_TEST(test_det_set_before_publish) {
    s_fix f;
    s_det_setup(&f);
    void *a = s_client(&f, "actor-0"), *b = s_client(&f, "actor-1");
    s_det_publish(&f, 1);
    s_ask_det(a, 0, 3);
    s_serve_until(&f, 1, 0);
    weights_server_det_set(f.w, 3, 2);
    ck_assert_uint_eq(s_answers(&f), 0);
    ck_assert_int_eq(s_held(&f), 1);
    s_det_publish(&f, 2);
    ck_assert_uint_eq(s_answers(&f), 1);
    ck_assert_int_eq(s_held(&f), 0);
    s_det_expect(&f, a, 2, 3);
    // A target set two versions ahead: versions published before its own may answer its
    // request with det_target 0 (the current weights; the client asks again), never with its
    // target. Each answer handed out is read, and the request made again while none is held,
    // as weights_client does.
    s_ask_det(b, 0, 4);
    s_serve_until(&f, 2, 0);
    weights_server_det_set(f.w, 4, 4);
    uint64_t sent = s_answers(&f), got = sent, requests = 2;
    ck_assert_uint_eq(sent, 1);
    s_det_publish(&f, 3);
    while (got < s_answers(&f)) {
        uint64_t v, t;
        s_det_recv(&f, b, &v, &t);
        ck_assert_msg(t == 0 && v == 3, "version %llu for target %llu before version 4",
                      (unsigned long long)v, (unsigned long long)t);
        got++;
    }
    if (s_held(&f) == 0) {
        s_ask_det(b, 0, 4);
        s_serve_until(&f, ++requests, 0);
        ck_assert_uint_eq(s_answers(&f), got); // held again, not answered
    }
    ck_assert_int_eq(s_held(&f), 1);
    s_det_publish(&f, 4);
    ck_assert_uint_eq(s_answers(&f), got + 1);
    s_det_expect(&f, b, 4, 4);
    ck_assert_int_eq(s_held(&f), 0);
    // And a request for it afterwards: at once.
    s_ask_det(a, 0, 4);
    s_serve_until(&f, requests + 1, 0);
    s_det_expect(&f, a, 4, 4);
    zmq_close(a);
    zmq_close(b);
    s_teardown(&f);
}
END_TEST

// The last WEIGHTS_SERVER_DET_KEEP versions published are kept: a target set to the oldest
// of them after all the others were published answers with its floats; a target's message
// stays its version's while later versions are published; a target set to a version no
// longer kept is still answered (with one version's floats, for that target: the .c falls
// back to the newest kept one); a target pushed out of the table of targets by another is
// not answered with the other's weights.
START_TEST(test_det_kept_versions) {
    s_fix f;
    s_det_setup(&f);
    void *a = s_client(&f, "actor-0");
    uint64_t requests = 0;
    const uint64_t base = (3ull << 32); // an incarnation above 0: versions are not counters alone
    for (uint64_t v = 1; v <= WEIGHTS_SERVER_DET_KEEP; v++) {
        s_det_publish(&f, base | v);
    }
    for (uint64_t t = 1; t <= WEIGHTS_SERVER_DET_KEEP; t++) {
        weights_server_det_set(f.w, t, base | (WEIGHTS_SERVER_DET_KEEP + 1 - t)); // oldest first
    }
    for (uint64_t t = 1; t <= WEIGHTS_SERVER_DET_KEEP; t++) {
        s_ask_det(a, 0, t);
        s_serve_until(&f, ++requests, 0);
        s_det_expect(&f, a, base | (WEIGHTS_SERVER_DET_KEEP + 1 - t), t);
    }
    // Later versions: the targets' messages stay.
    for (uint64_t v = WEIGHTS_SERVER_DET_KEEP + 1; v <= WEIGHTS_SERVER_DET_KEEP + 3; v++) {
        s_det_publish(&f, base | v);
    }
    s_ask_det(a, 0, WEIGHTS_SERVER_DET_KEEP);
    s_serve_until(&f, ++requests, 0);
    s_det_expect(&f, a, base | 1, WEIGHTS_SERVER_DET_KEEP);
    // Version 1 is no longer kept (KEEP + 3 published since): a target naming it is answered
    // at once all the same, for its target, with a version's own floats.
    const uint64_t late = WEIGHTS_SERVER_DET_KEEP + 1;
    weights_server_det_set(f.w, late, base | 1);
    s_ask_det(a, 0, late);
    s_serve_until(&f, ++requests, 0);
    uint64_t v, t;
    s_det_recv(&f, a, &v, &t);
    ck_assert_uint_eq(t, late);
    ck_assert_uint_ge(v, base | 1);
    // Target late shares its slot with target 1 (WEIGHTS_SERVER_DET_TARGETS apart): target 1
    // is gone. A client asking for it (far behind the others: only after a restart) is not
    // left waiting for ever: it is answered at once, under its own target (never with late's
    // message), with the current weights.
    ck_assert_uint_eq(late % WEIGHTS_SERVER_DET_TARGETS, 1 % WEIGHTS_SERVER_DET_TARGETS);
    uint64_t sent = s_answers(&f);
    s_ask_det(a, 0, 1);
    s_serve_until(&f, ++requests, 0);
    ck_assert_uint_eq(s_answers(&f), sent + 1);
    ck_assert_int_eq(s_held(&f), 0);
    s_det_expect(&f, a, base | (WEIGHTS_SERVER_DET_KEEP + 3), 1);
    zmq_close(a);
    s_teardown(&f);
}
END_TEST

// The heartbeat answers a det request held WEIGHTS_SERVER_HOLD_MS with the current weights
// and det_target 0 (the link is alive; the client asks again), and not before.
START_TEST(test_det_heartbeat) {
    s_fix f;
    s_det_setup(&f);
    void *a = s_client(&f, "actor-0");
    s_det_publish(&f, 1);
    s_det_publish(&f, 2);
    int64_t t0 = clock_now_ms();
    s_ask_det(a, 0, 7);
    s_serve_until(&f, 1, 0); // held at a time >= t0
    weights_server_heartbeat(f.w, t0 + WEIGHTS_SERVER_HOLD_MS - 1);
    ck_assert_uint_eq(s_answers(&f), 0);
    ck_assert_int_eq(s_held(&f), 1);
    // A new version does not answer a request held for a target (only the heartbeat checks
    // its link): no full weights per version to an actor that waits for its own.
    s_det_publish(&f, 3);
    ck_assert_uint_eq(s_answers(&f), 0);
    ck_assert_int_eq(s_held(&f), 1);
    weights_server_heartbeat(f.w, clock_now_ms() + WEIGHTS_SERVER_HOLD_MS);
    ck_assert_uint_eq(s_answers(&f), 1);
    ck_assert_int_eq(s_held(&f), 0);
    s_det_expect(&f, a, 3, 0);
    // Asked again, then the target set: answered with its version, not the current one.
    s_ask_det(a, 0, 7);
    s_serve_until(&f, 2, 0);
    ck_assert_uint_eq(s_answers(&f), 1);
    weights_server_det_set(f.w, 7, 1);
    ck_assert_uint_eq(s_answers(&f), 2);
    s_det_expect(&f, a, 1, 7);
    // A heartbeat with nothing held sends nothing.
    weights_server_heartbeat(f.w, clock_now_ms() + 10 * WEIGHTS_SERVER_HOLD_MS);
    ck_assert_uint_eq(s_answers(&f), 2);
    zmq_close(a);
    s_teardown(&f);
}
END_TEST

// With det enabled, a request without det_target behaves as before (answered at once when
// older, held until the next version otherwise, with det_target 0), and setting a target
// answers only the requests held for it.
START_TEST(test_det_plain_requests_unchanged) {
    s_fix f;
    s_det_setup(&f);
    void *a = s_client(&f, "actor-0"), *e = s_client(&f, "eval");
    s_det_publish(&f, 1);
    s_ask_det(e, 0, 0);
    s_serve_until(&f, 1, 0);
    ck_assert_uint_eq(s_answers(&f), 1);
    s_det_expect(&f, e, 1, 0);
    s_ask_det(e, 1, 0); // the current one: held
    s_ask_det(a, 0, 2);
    s_serve_until(&f, 3, 0);
    ck_assert_uint_eq(s_answers(&f), 1);
    ck_assert_int_eq(s_held(&f), 2);
    weights_server_det_set(f.w, 2, 1);
    ck_assert_uint_eq(s_answers(&f), 2);
    ck_assert_int_eq(s_held(&f), 1); // the plain request waits for the next version
    s_det_expect(&f, a, 1, 2);
    s_det_publish(&f, 2);
    ck_assert_uint_eq(s_answers(&f), 3);
    ck_assert_int_eq(s_held(&f), 0);
    s_det_expect(&f, e, 2, 0);
    // weights_server_publish (not kept for targets) still answers plain requests.
    s_ask_det(e, 2, 0);
    s_serve_until(&f, 4, 0);
    wire_weights_t w = {.version = 3, .learner_step = 30, .num_params = NP};
    float p[NP];
    for (int i = 0; i < NP; i++) {
        p[i] = s_det_param(3, i);
    }
    w.params = p;
    weights_server_publish(f.w, &w);
    ck_assert_uint_eq(s_answers(&f), 4);
    s_det_expect(&f, e, 3, 0);
    zmq_close(a);
    zmq_close(e);
    s_teardown(&f);
}
END_TEST

Suite *weights_server_suite(void) {
    Suite *s = suite_create("weights_server");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_answer_hold_publish_heartbeat);
    tcase_add_test(tc, test_publish_fill);
    tcase_add_test(tc, test_full_hold_table_drops);
    tcase_add_test(tc, test_refuses_what_is_not_a_request);
    tcase_add_test_raise_signal(tc, test_older_version_asserts, SIGABRT);
    tcase_add_test(tc, test_bind_error);
    tcase_add_test(tc, test_client_resend_and_revive);
    tcase_add_test(tc, test_client_endpoint_too_long);
    tcase_add_test(tc, test_det_held_until_set);
    tcase_add_test(tc, test_det_set_before_publish);
    tcase_add_test(tc, test_det_kept_versions);
    tcase_add_test(tc, test_det_heartbeat);
    tcase_add_test(tc, test_det_plain_requests_unchanged);
    suite_add_tcase(s, tc);
    return s;
}
