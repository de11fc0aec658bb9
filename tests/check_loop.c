// check_loop.c: common/loop.c's drain readers over real (inproc) ZeroMQ sockets: the loop
// blocks on a drain reader's ZMQ_FD instead of asking libzmq, so these check that no input
// is ever left unseen: input a reader leaves behind, and input whose wake-up signal another
// handler consumed (announced with loop_recheck).
#include "check_apex.h"

#include <errno.h>
#include <zmq.h>

#include "loop.h"

typedef struct {
    void *ctx, *push, *pull;
    int received; // messages the drain reader took
    int per_call; // most it takes per call
    int want;     // stop the loop once this many were received
    int sent;
    int send_total; // the sending timer sends this many in all, burst per tick
    int burst;
    int steal; // the stealing timer: send 2, receive 1 itself, once
    int stolen;
    int recheck; // whether the stealing timer calls loop_recheck
} s_fix;

static void s_fix_init(s_fix *f) {
    *f = (s_fix){0};
    f->ctx = zmq_ctx_new();
    f->push = zmq_socket(f->ctx, ZMQ_PUSH);
    f->pull = zmq_socket(f->ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(f->push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(f->pull, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(f->pull, "inproc://check-loop"), 0);
    ck_assert_int_eq(zmq_connect(f->push, "inproc://check-loop"), 0);
}

static void s_fix_fini(s_fix *f) {
    zmq_close(f->push);
    zmq_close(f->pull);
    zmq_ctx_term(f->ctx);
}

// Takes at most per_call messages; LOOP_DRAINED only when a receive said EAGAIN.
static int s_drain(loop_t *loop, void *sock, void *arg) {
    s_fix *f = arg;
    for (int i = 0; i < f->per_call; i++) {
        char b[8];
        if (zmq_recv(sock, b, sizeof b, ZMQ_DONTWAIT) < 0) {
            ck_assert_int_eq(zmq_errno(), EAGAIN);
            return LOOP_DRAINED;
        }
        if (++f->received == f->want) {
            loop_stop(loop);
            return 0;
        }
    }
    return 0;
}

static int s_send_burst(loop_t *loop, void *arg) {
    (void)loop;
    s_fix *f = arg;
    for (int i = 0; i < f->burst && f->sent < f->send_total; i++, f->sent++) {
        ck_assert_int_eq(zmq_send(f->push, "m", 1, 0), 1);
    }
    return 0;
}

// Once: two messages arrive, and this handler (not the reader) receives the first. Its
// receive processes the socket's wake-up signal, so the fd will not fire for the second.
static int s_steal(loop_t *loop, void *arg) {
    s_fix *f = arg;
    if (!f->steal || f->stolen) {
        return 0;
    }
    ck_assert_int_eq(zmq_send(f->push, "a", 1, 0), 1);
    ck_assert_int_eq(zmq_send(f->push, "b", 1, 0), 1);
    char b[8];
    ck_assert_int_eq(zmq_recv(f->pull, b, sizeof b, 0), 1);
    f->stolen = 1;
    if (f->recheck) {
        loop_recheck(loop, f->pull);
    }
    return 0;
}

static int s_give_up(loop_t *loop, void *arg) {
    (void)arg;
    loop_stop(loop);
    return 0;
}

// Bursts of 7 against a reader that takes 3 per call: the reader leaves input behind on
// most calls (it returns 0, not LOOP_DRAINED) and every message must still be seen.
START_TEST(test_drain_reader_sees_every_message) {
    s_fix f;
    s_fix_init(&f);
    f.per_call = 3;
    f.burst = 7;
    f.send_total = 700;
    f.want = 700;
    loop_t *loop = loop_new();
    ck_assert_int_eq(loop_add_drain_reader(loop, f.pull, s_drain, &f), 0);
    loop_add_timer(loop, 1, s_send_burst, &f);
    loop_add_timer(loop, 20000, s_give_up, &f); // a hang fails the test instead of timing out
    ck_assert_int_eq(loop_run(loop), 0);
    ck_assert_int_eq(f.received, 700);
    loop_destroy(&loop);
    s_fix_fini(&f);
}
END_TEST

// Input left on a drain reader's socket by another handler is delivered once that handler
// calls loop_recheck (without it the loop would block on an fd that never fires).
START_TEST(test_recheck_after_outside_receive) {
    s_fix f;
    s_fix_init(&f);
    f.per_call = 64;
    f.want = 1; // the second message, "b"
    f.steal = 1;
    f.recheck = 1;
    loop_t *loop = loop_new();
    ck_assert_int_eq(loop_add_drain_reader(loop, f.pull, s_drain, &f), 0);
    loop_add_timer(loop, 5, s_steal, &f);
    loop_add_timer(loop, 2000, s_give_up, &f);
    ck_assert_int_eq(loop_run(loop), 0);
    ck_assert_int_eq(f.stolen, 1);
    ck_assert_int_eq(f.received, 1);
    loop_destroy(&loop);
    s_fix_fini(&f);
}
END_TEST

// The reader itself uses its socket after its last receive (the replay sends acks after a
// slice of inserts): the use consumes the wake-up signal of input that arrives meanwhile, so
// its loop_recheck must override the LOOP_DRAINED it returns.
static int s_drain_then_use(loop_t *loop, void *sock, void *arg) {
    s_fix *f = arg;
    char b[8];
    for (;;) {
        if (zmq_recv(sock, b, sizeof b, ZMQ_DONTWAIT) < 0) {
            ck_assert_int_eq(zmq_errno(), EAGAIN);
            loop_drained(loop, sock);
            if (!f->stolen) {
                ck_assert_int_eq(zmq_send(f->push, "a", 1, 0), 1);
                ck_assert_int_eq(zmq_send(f->push, "b", 1, 0), 1);
                ck_assert_int_eq(zmq_recv(sock, b, sizeof b, 0), 1);
                f->stolen = 1;
                loop_recheck(loop, sock);
            }
            return LOOP_DRAINED;
        }
        if (++f->received == f->want) {
            loop_stop(loop);
            return 0;
        }
    }
}

START_TEST(test_recheck_inside_reader_overrides_drained) {
    s_fix f;
    s_fix_init(&f);
    f.want = 2; // "x", then "b"
    loop_t *loop = loop_new();
    ck_assert_int_eq(loop_add_drain_reader(loop, f.pull, s_drain_then_use, &f), 0);
    loop_add_timer(loop, 2000, s_give_up, &f);
    ck_assert_int_eq(zmq_send(f.push, "x", 1, 0), 1);
    ck_assert_int_eq(loop_run(loop), 0);
    ck_assert_int_eq(f.stolen, 1);
    ck_assert_int_eq(f.received, 2);
    loop_destroy(&loop);
    s_fix_fini(&f);
}
END_TEST

// A plain reader (loop_add_reader) needs no recheck: the loop asks libzmq every time.
static int s_plain(loop_t *loop, void *sock, void *arg) {
    s_fix *f = arg;
    char b[8];
    if (zmq_recv(sock, b, sizeof b, ZMQ_DONTWAIT) >= 0 && ++f->received == f->want) {
        loop_stop(loop);
    }
    return 0;
}

START_TEST(test_plain_reader_after_outside_receive) {
    s_fix f;
    s_fix_init(&f);
    f.want = 1;
    f.steal = 1;
    loop_t *loop = loop_new();
    ck_assert_int_eq(loop_add_reader(loop, f.pull, s_plain, &f), 0);
    loop_add_timer(loop, 5, s_steal, &f);
    loop_add_timer(loop, 2000, s_give_up, &f);
    ck_assert_int_eq(loop_run(loop), 0);
    ck_assert_int_eq(f.received, 1);
    loop_destroy(&loop);
    s_fix_fini(&f);
}
END_TEST

Suite *loop_suite(void) {
    Suite *s = suite_create("loop");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_drain_reader_sees_every_message);
    tcase_add_test(tc, test_recheck_after_outside_receive);
    tcase_add_test(tc, test_plain_reader_after_outside_receive);
    tcase_add_test(tc, test_recheck_inside_reader_overrides_drained);
    suite_add_tcase(s, tc);
    return s;
}
