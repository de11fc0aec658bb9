// check_detsched.c: the deterministic schedule's bookkeeping (replay/detsched.h) driven
// directly, with batches built by hand (only actor_id, epoch, seq, det_period and
// det_period_end matter to it; their "raw messages" are short distinct strings, checked on
// every peek): inserts come out period-major whatever order they were held in; the horizon
// and the requests served when it got there; re-sends of held batches, a full window, batches
// out of their turn and a restarted actor's later period; requests served strictly by
// det_index within a window; the updates of request i due exactly before request i + lag,
// handed out in order once all of its batches' are held; a restarted learner's schedule and
// a replay's jump to a horizon a learner asks about; a replay shard's own actors' turns.
#include "check_apex.h"

#include <stdio.h>
#include <string.h>

#include "detsched.h"

// ---------------------------------------------------------------------------------------
// Helpers

// A batch as detsched sees it: period p is det_period p + 1 (p < 0: a batch of an actor not
// in deterministic mode, det_period 0).
static wire_batch_t s_b(uint32_t actor, uint64_t epoch, uint64_t seq, int p, int end) {
    return (wire_batch_t){.actor_id = actor,
                          .epoch = epoch,
                          .seq = seq,
                          .det_period = p < 0 ? 0 : (uint64_t)p + 1,
                          .det_period_end = end};
}

// The stand-in raw message of batch b (distinct per actor, epoch, seq and period) and its
// sender's routing id.
static size_t s_raw(char *buf, size_t cap, const wire_batch_t *b) {
    int n = snprintf(buf, cap, "batch a%u e%llu s%llu p%llu", b->actor_id,
                     (unsigned long long)b->epoch, (unsigned long long)b->seq,
                     (unsigned long long)b->det_period);
    ck_assert(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static size_t s_id(char *buf, size_t cap, uint32_t actor) {
    int n = snprintf(buf, cap, "actor-%u", actor);
    ck_assert(n > 0 && (size_t)n < cap);
    return (size_t)n;
}

static detsched_hold_result s_hold(detsched_t *d, const wire_batch_t *b) {
    char raw[96], id[32];
    size_t len = s_raw(raw, sizeof raw, b), id_len = s_id(id, sizeof id, b->actor_id);
    return detsched_hold_insert(d, b, (const uint8_t *)id, id_len, raw, len);
}

// Asserts that the turn's batch is b (its bytes, its sender) and pops it; returns what
// detsched_pop_insert returned.
static int s_pop(detsched_t *d, const wire_batch_t *b) {
    const void *raw;
    size_t len, id_len;
    const uint8_t *id;
    ck_assert_msg(detsched_peek_insert(d, &raw, &len, &id, &id_len) == 1,
                  "nothing to peek, expected actor %u seq %llu", b->actor_id,
                  (unsigned long long)b->seq);
    char want[96], want_id[32];
    size_t want_len = s_raw(want, sizeof want, b),
           want_id_len = s_id(want_id, sizeof want_id, b->actor_id);
    ck_assert_msg(len == want_len && memcmp(raw, want, len) == 0, "peeked \"%.*s\", want \"%s\"",
                  (int)len, (const char *)raw, want);
    ck_assert_uint_eq(id_len, want_id_len);
    ck_assert(memcmp(id, want_id, id_len) == 0);
    return detsched_pop_insert(d, b);
}

static void s_peek_none(detsched_t *d) {
    const void *raw;
    size_t len, id_len;
    const uint8_t *id;
    ck_assert_int_eq(detsched_peek_insert(d, &raw, &len, &id, &id_len), 0);
}

// Holds request `index` (SampleRequest id 100 + index, from routing id "learner").
static int s_hold_req(detsched_t *d, uint64_t index) {
    wire_sample_request_t q = {
        .id = 100 + index, .batch_size = 8, .beta = 0.5f, .batches = 1, .det_index = index};
    return detsched_hold_request(d, (const uint8_t *)"learner", 7, &q);
}

// Asserts that the next request is held and is `index`'s, and serves it.
static void s_serve_next(detsched_t *d, uint64_t index) {
    const uint8_t *id;
    size_t id_len;
    const wire_sample_request_t *q;
    ck_assert_uint_eq(detsched_next_index(d), index);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 1);
    ck_assert_uint_eq(q->det_index, index);
    ck_assert_uint_eq(q->id, 100 + index);
    ck_assert_uint_eq(id_len, 7);
    ck_assert(memcmp(id, "learner", 7) == 0);
    detsched_served(d);
    ck_assert_uint_eq(detsched_next_index(d), index + 1);
}

// Holds and serves k requests, as the server does when each one's turn comes.
static void s_serve(detsched_t *d, int k) {
    for (int i = 0; i < k; i++) {
        uint64_t index = detsched_next_index(d);
        ck_assert_int_eq(s_hold_req(d, index), 0);
        s_serve_next(d, index);
    }
}

static int s_hold_upd(detsched_t *d, uint64_t index, const char *text) {
    return detsched_hold_update(d, index, text, strlen(text));
}

// Asserts that the next due update is `text`.
static void s_take(detsched_t *d, const char *text) {
    const void *raw;
    size_t len;
    ck_assert_msg(detsched_take_update(d, &raw, &len) == 1, "no update, expected %s", text);
    ck_assert_msg(len == strlen(text) && memcmp(raw, text, len) == 0, "took \"%.*s\", want \"%s\"",
                  (int)len, (const char *)raw, text);
}

static void s_take_none(detsched_t *d) {
    const void *raw;
    size_t len;
    ck_assert_int_eq(detsched_take_update(d, &raw, &len), 0);
}

static detsched_stats_t s_stats(const detsched_t *d) {
    detsched_stats_t st;
    detsched_stats(d, &st);
    return st;
}

// ---------------------------------------------------------------------------------------
// Inserts

// Three actors with different numbers of batches per period; actor 2's two periods arrive
// first, then actor 1's, then actor 0's (its first batch alone first). Nothing comes out
// before actor 0's first batch, and then everything comes out period-major: actor 0, 1, 2 of
// period 0, then of period 1. The horizon moves exactly after the last actor's period end,
// and the requests served at that moment are what served_at reports from then on.
START_TEST(test_inserts_period_major) {
    enum { A = 3, P = 2 };
    static const int n[A][P] = {{2, 1}, {1, 3}, {3, 2}}; // batches of actor a in period p
    detsched_t *d = detsched_new(A, 8, 2, 1);
    wire_batch_t order[32];
    int n_order = 0;
    wire_batch_t by_actor[A][8];
    int n_actor[A] = {0};
    for (int p = 0; p < P; p++) {
        for (uint32_t a = 0; a < A; a++) {
            for (int k = 0; k < n[a][p]; k++) {
                wire_batch_t b = s_b(a, 7, (uint64_t)n_actor[a], p, k == n[a][p] - 1);
                order[n_order++] = b;
                by_actor[a][n_actor[a]++] = b;
            }
        }
    }
    s_peek_none(d);
    for (int a = A - 1; a >= 1; a--) {
        for (int k = 0; k < n_actor[a]; k++) {
            ck_assert_int_eq(s_hold(d, &by_actor[a][k]), DETSCHED_HELD);
            s_peek_none(d); // actor 0's turn, and it has sent nothing
        }
    }
    ck_assert_int_eq(s_hold(d, &by_actor[0][0]), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &order[0]), 0);
    s_peek_none(d); // actor 0's second batch of period 0 is not here; the others wait
    ck_assert_uint_eq(detsched_horizon(d), 0);
    for (int k = 1; k < n_actor[0]; k++) {
        ck_assert_int_eq(s_hold(d, &by_actor[0][k]), DETSCHED_HELD);
    }
    // The rest in period-major order; between pops, some requests are served.
    int64_t served_at[P + 1] = {0};
    int served = 0;
    for (int i = 1; i < n_order; i++) {
        int k = i % 3;
        s_serve(d, k);
        served += k;
        ck_assert_int_eq(s_pop(d, &order[i]), 0);
        uint64_t h = detsched_horizon(d);
        int last_of_period = order[i].det_period_end && order[i].actor_id == A - 1;
        ck_assert_uint_eq(h, order[i].det_period - (last_of_period ? 0 : 1));
        if (last_of_period) {
            served_at[h] = served;
        }
        for (uint64_t g = 0; g <= h; g++) {
            ck_assert_int_eq(detsched_served_at(d, g), served_at[g]);
        }
        ck_assert_int_eq(detsched_served_at(d, h + 1), -1); // not reached
    }
    s_peek_none(d);
    ck_assert_uint_eq(detsched_horizon(d), P);
    ck_assert_int_eq(served_at[1], 1 + 2 + 0 + 1 + 2); // pops 1..5 (period 0 is 6 batches)
    detsched_stats_t st = s_stats(d);
    ck_assert_uint_eq(st.held_inserts, (uint64_t)n_order);
    ck_assert_uint_eq(st.out_of_turn, 0);
    ck_assert_uint_eq(st.duplicates, 0);
    detsched_destroy(&d);
    ck_assert_ptr_null(d);
    detsched_destroy(&d); // NULL: nothing
    detsched_destroy(NULL);
}
END_TEST

// The ring of served counts: each of 5000 horizons remembered until DETSCHED_HORIZONS newer
// ones came, then -1.
START_TEST(test_served_at_ring) {
    detsched_t *d = detsched_new(1, 1, 1, 1);
    enum { H = 5000 };
    for (int p = 0; p < H; p++) {
        s_serve(d, 1 + p % 2);
        wire_batch_t b = s_b(0, 1, (uint64_t)p, p, 1);
        ck_assert_int_eq(s_hold(d, &b), DETSCHED_HELD);
        ck_assert_int_eq(s_pop(d, &b), 0);
    }
    ck_assert_uint_eq(detsched_horizon(d), H);
    for (uint64_t h = H - DETSCHED_HORIZONS + 1; h <= H; h++) {
        // served before horizon h: sum over p < h of 1 + p % 2
        int64_t want = (int64_t)h + (int64_t)(h / 2);
        ck_assert_int_eq(detsched_served_at(d, h), want);
    }
    ck_assert_int_eq(detsched_served_at(d, H - DETSCHED_HORIZONS), -1);
    ck_assert_int_eq(detsched_served_at(d, 0), -1);
    ck_assert_int_eq(detsched_served_at(d, H + 1), -1);
    detsched_destroy(&d);
}
END_TEST

// A re-send of a batch still held (same epoch, seq at most the newest held) is dropped; a
// new seq, or a restarted actor's new epoch, is held. Once nothing is held, the module has
// nothing to compare with (applied batches are the server's dedupe's business).
START_TEST(test_duplicates_of_held_dropped) {
    detsched_t *d = detsched_new(2, 8, 1, 1);
    wire_batch_t b[4];
    for (int k = 0; k < 4; k++) {
        b[k] = s_b(1, 5, (uint64_t)k, 0, k == 3);
    }
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(s_hold(d, &b[k]), DETSCHED_HELD);
    }
    ck_assert_int_eq(s_hold(d, &b[1]), DETSCHED_DUPLICATE);
    ck_assert_int_eq(s_hold(d, &b[2]), DETSCHED_DUPLICATE);
    ck_assert_int_eq(s_hold(d, &b[0]), DETSCHED_DUPLICATE);
    ck_assert_int_eq(s_hold(d, &b[3]), DETSCHED_HELD);
    wire_batch_t other_epoch = s_b(1, 6, 0, 1, 1); // seq 0 of a restarted actor
    ck_assert_int_eq(s_hold(d, &other_epoch), DETSCHED_HELD);
    wire_batch_t a0 = s_b(0, 5, 1, 0, 1); // another actor's seq 1: not a duplicate
    ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
    ck_assert_uint_eq(s_stats(d).duplicates, 3);
    ck_assert_uint_eq(s_stats(d).held_inserts, 6);
    // Each held once: actor 0's period 0, actor 1's four, then actor 1's epoch 6 batch.
    ck_assert_int_eq(s_pop(d, &a0), 0);
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(s_pop(d, &b[k]), 0);
    }
    ck_assert_uint_eq(detsched_horizon(d), 1);
    s_peek_none(d); // actor 0's turn in period 1
    // Actor 1's queue still holds the epoch 6 batch: a re-send of it is a duplicate.
    ck_assert_int_eq(s_hold(d, &other_epoch), DETSCHED_DUPLICATE);
    // Actor 0's queue is empty: a re-send of its applied batch is held again.
    ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
    ck_assert_uint_eq(s_stats(d).duplicates, 4);
    detsched_destroy(&d);
}
END_TEST

// An actor's queue holds at most `window` batches: the next is FULL (not remembered, so the
// actor's re-send is held once there is room); a re-send of a held one is still a duplicate.
START_TEST(test_full_window) {
    detsched_t *d = detsched_new(2, 3, 1, 1);
    wire_batch_t b[5];
    for (int k = 0; k < 5; k++) {
        b[k] = s_b(1, 1, (uint64_t)k, 0, k == 4);
    }
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(s_hold(d, &b[k]), DETSCHED_HELD);
    }
    ck_assert_int_eq(s_hold(d, &b[3]), DETSCHED_FULL);
    ck_assert_int_eq(s_hold(d, &b[4]), DETSCHED_FULL);
    ck_assert_int_eq(s_hold(d, &b[2]), DETSCHED_DUPLICATE);
    // Actor 0's queue is its own.
    wire_batch_t a0 = s_b(0, 1, 0, 0, 1);
    ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
    ck_assert_uint_eq(s_stats(d).full, 2);
    ck_assert_int_eq(s_pop(d, &a0), 0);
    ck_assert_int_eq(s_pop(d, &b[0]), 0);
    ck_assert_int_eq(s_hold(d, &b[3]), DETSCHED_HELD); // room for one
    ck_assert_int_eq(s_hold(d, &b[4]), DETSCHED_FULL);
    for (int k = 1; k < 4; k++) {
        ck_assert_int_eq(s_pop(d, &b[k]), 0);
    }
    ck_assert_int_eq(s_hold(d, &b[4]), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &b[4]), 0);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    ck_assert_uint_eq(s_stats(d).full, 3);
    detsched_destroy(&d);
}
END_TEST

// A batch of a period below the turn, or of an actor not in deterministic mode (det_period
// 0), is applied out of turn: pop says 1, and it moves neither the turn nor the horizon even
// when it ends its period.
START_TEST(test_out_of_turn) {
    detsched_t *d = detsched_new(1, 8, 1, 1);
    wire_batch_t p0 = s_b(0, 1, 0, 0, 1);
    ck_assert_int_eq(s_hold(d, &p0), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &p0), 0);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    wire_batch_t late = s_b(0, 2, 0, 0, 1);    // period 0 again (a restarted actor's)
    wire_batch_t nondet = s_b(0, 2, 1, -1, 0); // det_period 0
    wire_batch_t p1 = s_b(0, 2, 2, 1, 1);
    ck_assert_int_eq(s_hold(d, &late), DETSCHED_HELD);
    ck_assert_int_eq(s_hold(d, &nondet), DETSCHED_HELD);
    ck_assert_int_eq(s_hold(d, &p1), DETSCHED_HELD);
    ck_assert_int_eq(detsched_skip_stale_turn(d, &late), 0); // not later than the turn
    ck_assert_int_eq(s_pop(d, &late), 1);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    ck_assert_int_eq(detsched_skip_stale_turn(d, &nondet), 0);
    ck_assert_int_eq(s_pop(d, &nondet), 1);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    ck_assert_int_eq(detsched_skip_stale_turn(d, &p1), 0);
    ck_assert_int_eq(s_pop(d, &p1), 0);
    ck_assert_uint_eq(detsched_horizon(d), 2);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 2);
    detsched_destroy(&d);
}
END_TEST

// A restarted actor whose next batch is of a later period than the turn never ends the
// turn's period: detsched_skip_stale_turn moves the turn on without it (and the horizon when
// it was the last actor), until the turn reaches that batch's period, where it is applied in
// its turn.
START_TEST(test_skip_stale_turn) {
    detsched_t *d = detsched_new(2, 8, 1, 1);
    wire_batch_t late = s_b(1, 9, 0, 2, 1); // actor 1, restarted, at period 2
    ck_assert_int_eq(s_hold(d, &late), DETSCHED_HELD);
    for (int p = 0; p < 2; p++) {
        wire_batch_t a0 = s_b(0, 1, (uint64_t)p, p, 1);
        ck_assert_int_eq(detsched_skip_stale_turn(d, &a0), 0);
        ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
        ck_assert_int_eq(s_pop(d, &a0), 0);
        ck_assert_uint_eq(detsched_horizon(d), (uint64_t)p);
        // Actor 1's turn in period p: its head is of period 2.
        const void *raw;
        size_t len, id_len;
        const uint8_t *id;
        ck_assert_int_eq(detsched_peek_insert(d, &raw, &len, &id, &id_len), 1);
        ck_assert_int_eq(detsched_skip_stale_turn(d, &late), 1);
        ck_assert_uint_eq(detsched_horizon(d), (uint64_t)p + 1);
        s_peek_none(d); // actor 0's turn in period p + 1
    }
    wire_batch_t a0 = s_b(0, 1, 2, 2, 1);
    ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &a0), 0);
    ck_assert_int_eq(detsched_skip_stale_turn(d, &late), 0); // its turn now
    ck_assert_int_eq(s_pop(d, &late), 0);
    ck_assert_uint_eq(detsched_horizon(d), 3);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 2);
    detsched_destroy(&d);
}
END_TEST

// A period far ahead of the turn (a hostile peer's number, up to WIRE_SEQ_MAX) moves the turn
// there in one jump, not a step per actor and period (which took seconds at 10^7 and never
// ended at WIRE_SEQ_MAX); and a jump past DETSCHED_HORIZONS horizons still records the
// served count of the horizon it lands on.
START_TEST(test_far_ahead_jumps) {
    detsched_t *d = detsched_new(1, 8, 1, 1);
    wire_batch_t far = s_b(0, 1, 0, 0, 1);
    far.det_period = WIRE_SEQ_MAX;
    ck_assert_int_eq(s_hold(d, &far), DETSCHED_HELD);
    int steps = 0;
    while (detsched_skip_stale_turn(d, &far)) {
        ck_assert_int_lt(++steps, 3);
    }
    ck_assert_int_eq(s_pop(d, &far), 0); // in its turn now
    ck_assert_uint_eq(detsched_horizon(d), WIRE_SEQ_MAX);
    detsched_destroy(&d);

    d = detsched_new(1, 8, 1, 1);
    wire_sample_request_t q = {.det_index = 1};
    for (int i = 0; i < 3; i++) {
        q.det_index = (uint64_t)i + 1;
        ck_assert_int_eq(detsched_hold_request(d, (const uint8_t *)"l", 1, &q), 0);
        detsched_served(d);
    }
    detsched_fast_forward(d, 1 + DETSCHED_HORIZONS + 1);
    ck_assert_int_eq(detsched_served_at(d, 1 + DETSCHED_HORIZONS + 1), 3);
    ck_assert_int_eq(detsched_served_at(d, 3), 3);
    detsched_destroy(&d);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Requests and updates

// Requests held in any order come out strictly by det_index; only indices in [next, next +
// 2 lag + 2) are held, the rest (a restarted learner's or replay's) are -1.
START_TEST(test_requests_in_order) {
    enum { LAG = 2, WIN = 2 * LAG + 2 };
    detsched_t *d = detsched_new(1, 1, LAG, 1);
    const uint8_t *id;
    size_t id_len;
    const wire_sample_request_t *q;
    ck_assert_uint_eq(detsched_next_index(d), 1);
    ck_assert_int_eq(s_hold_req(d, 0), -1);
    ck_assert_int_eq(s_hold_req(d, 1 + WIN), -1);
    ck_assert_int_eq(s_hold_req(d, UINT64_MAX), -1);
    ck_assert_int_eq(s_hold_req(d, 3), 0);
    ck_assert_int_eq(s_hold_req(d, WIN), 0);
    ck_assert_int_eq(s_hold_req(d, 2), 0);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 0); // 1 is not here
    ck_assert_int_eq(s_hold_req(d, 1), 0);
    s_serve_next(d, 1);
    s_serve_next(d, 2);
    s_serve_next(d, 3);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 0); // 4 is not here
    ck_assert_int_eq(s_hold_req(d, 3), -1);                          // served already
    ck_assert_int_eq(s_hold_req(d, 4 + WIN), -1);
    ck_assert_int_eq(s_hold_req(d, 3 + WIN), 0); // the window moved on
    // A routing id longer than libzmq's is not held.
    uint8_t long_id[DETSCHED_ID_MAX + 1];
    memset(long_id, 'x', sizeof long_id);
    wire_sample_request_t r4 = {.id = 104, .batch_size = 8, .batches = 1, .det_index = 4};
    ck_assert_int_eq(detsched_hold_request(d, long_id, sizeof long_id, &r4), -1);
    ck_assert_int_eq(detsched_hold_request(d, long_id, DETSCHED_ID_MAX, &r4), 0);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 1);
    ck_assert_uint_eq(id_len, DETSCHED_ID_MAX);
    ck_assert_uint_eq(q->id, 104);
    detsched_served(d);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 0); // 5 is not here
    ck_assert_int_eq(s_hold_req(d, 5), 0);
    s_serve_next(d, 5);
    s_serve_next(d, WIN);
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 0);
    ck_assert_int_eq(s_hold_req(d, WIN + 1), 0);
    s_serve_next(d, WIN + 1);
    ck_assert_int_eq(s_hold_req(d, WIN + 2), 0);
    s_serve_next(d, WIN + 2);
    s_serve_next(d, 3 + WIN); // held since next was 4
    ck_assert_uint_eq(s_stats(d).held_requests, 4 + 1 + 1 + 1 + 1 + 1);
    detsched_destroy(&d);
}
END_TEST

// Request i's updates (batches of them) are due exactly before request i + lag is served:
// not before (taking gives nothing, even with them held), and then ready only once all of
// them are held, handed out in the order held. Updates of requests not served, of requests
// already applied, or more than a request's batches are -1.
START_TEST(test_updates_due_at_lag) {
    enum { LAG = 2, BATCHES = 2 };
    detsched_t *d = detsched_new(1, 1, LAG, BATCHES);
    ck_assert_int_eq(s_hold_upd(d, 0, "u0"), -1);
    ck_assert_int_eq(s_hold_upd(d, 1, "u1"), -1); // not served
    ck_assert(detsched_updates_ready(d));         // nothing due
    s_take_none(d);
    s_serve(d, 1);                                // next 2
    ck_assert_int_eq(s_hold_upd(d, 2, "u2"), -1); // not served
    ck_assert_int_eq(s_hold_upd(d, 1, "u1a"), 0);
    ck_assert_int_eq(s_hold_upd(d, 1, "u1b"), 0);
    ck_assert_int_eq(s_hold_upd(d, 1, "u1c"), -1); // more than BATCHES
    ck_assert(detsched_updates_ready(d));          // 1's are due before 3, not before 2
    s_take_none(d);
    s_serve(d, 1); // next 3: request 1's are due now
    ck_assert_int_eq(s_hold_upd(d, 2, "u2a"), 0);
    s_take(d, "u1a");
    s_take(d, "u1b");
    s_take_none(d);                                // request 2's are due before 4
    ck_assert_int_eq(s_hold_upd(d, 1, "u1d"), -1); // applied already
    s_serve(d, 1);                                 // next 4
    ck_assert(!detsched_updates_ready(d));         // one of request 2's two
    ck_assert_int_eq(s_hold_upd(d, 2, "u2b"), 0);
    ck_assert(detsched_updates_ready(d));
    s_take(d, "u2a");
    s_take(d, "u2b");
    s_take_none(d);
    ck_assert(detsched_updates_ready(d));
    // Several due at once (requests 4, 5 and 6 served with no update of 3, 4 or 5 here):
    // ready only when all are, and handed out by request, each request's in the order held.
    s_serve(d, 3); // next 7: 3, 4 and 5 due
    ck_assert(!detsched_updates_ready(d));
    ck_assert_int_eq(s_hold_upd(d, 6, "u6a"), 0); // not due
    ck_assert_int_eq(s_hold_upd(d, 5, "u5a"), 0);
    ck_assert_int_eq(s_hold_upd(d, 5, "u5b"), 0);
    ck_assert_int_eq(s_hold_upd(d, 4, "u4a"), 0);
    ck_assert_int_eq(s_hold_upd(d, 4, "u4b"), 0);
    ck_assert_int_eq(s_hold_upd(d, 3, "u3a"), 0);
    ck_assert(!detsched_updates_ready(d));
    ck_assert_int_eq(s_hold_upd(d, 3, "u3b"), 0);
    ck_assert(detsched_updates_ready(d));
    const char *want[] = {"u3a", "u3b", "u4a", "u4b", "u5a", "u5b"};
    for (size_t k = 0; k < APEX_ARRAY_LEN(want); k++) {
        s_take(d, want[k]);
    }
    s_take_none(d);
    ck_assert_uint_eq(s_stats(d).held_updates, 2 + 2 + 7);
    detsched_destroy(&d);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Restarts and the horizon

// A restarted learner's schedule: requests from the given index, nothing held of the old one
// (requests or updates), no update of an old request waited for, the horizons reached read as
// reached before any request; the turn and horizon are the actors', untouched.
START_TEST(test_restart) {
    enum { LAG = 2 };
    detsched_t *d = detsched_new(1, 4, LAG, 1);
    s_serve(d, 3); // next 4
    ck_assert_int_eq(s_hold_upd(d, 1, "u1"), 0);
    ck_assert_int_eq(s_hold_upd(d, 2, "u2"), 0);
    ck_assert_int_eq(s_hold_upd(d, 3, "u3"), 0);
    s_take(d, "u1");
    wire_batch_t p0 = s_b(0, 1, 0, 0, 1);
    ck_assert_int_eq(s_hold(d, &p0), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &p0), 0);
    ck_assert_int_eq(detsched_served_at(d, 1), 3);
    ck_assert_int_eq(s_hold_req(d, 4), 0);
    ck_assert_int_eq(s_hold_req(d, 5), 0);
    wire_batch_t p1 = s_b(0, 1, 1, 1, 1); // waiting its turn across the restart
    ck_assert_int_eq(s_hold(d, &p1), DETSCHED_HELD);

    // A learner restarted from the start: its requests from 2 (its first was 1: served).
    detsched_restart(d, 2);
    ck_assert_uint_eq(detsched_next_index(d), 2);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    ck_assert_int_eq(detsched_served_at(d, 1), 0);
    ck_assert_int_eq(detsched_served_at(d, 0), 0);
    ck_assert(detsched_updates_ready(d));
    s_take_none(d);
    ck_assert_int_eq(s_hold_upd(d, 1, "u1 again"), -1); // before the new schedule
    ck_assert_int_eq(s_hold_upd(d, 2, "u2 new"), -1);   // not served in the new one
    s_serve(d, 2);                                      // 2, 3: next 4
    const uint8_t *id;
    size_t id_len;
    const wire_sample_request_t *q;
    ck_assert_int_eq(detsched_next_request(d, &id, &id_len, &q), 0); // the old 4 is gone
    ck_assert(!detsched_updates_ready(d)); // the new 2's are due before 4 (the old u2 gone)
    ck_assert_int_eq(s_hold_upd(d, 2, "u2 new"), 0);
    ck_assert(detsched_updates_ready(d));
    s_take(d, "u2 new");
    s_take_none(d); // the old u3 is gone too: 3's are due before 5
    s_serve(d, 1);  // next 5
    ck_assert(!detsched_updates_ready(d));
    ck_assert_int_eq(s_hold_upd(d, 3, "u3 new"), 0);
    s_take(d, "u3 new");
    // The actors' side went on: period 1 in its turn, its served count of the new schedule.
    ck_assert_int_eq(s_pop(d, &p1), 0);
    ck_assert_uint_eq(detsched_horizon(d), 2);
    ck_assert_int_eq(detsched_served_at(d, 2), 4);
    ck_assert_int_eq(detsched_served_at(d, 1), 0);

    // A replay restarted under a running learner: its schedule from 40, nothing before it
    // waited for.
    detsched_restart(d, 40);
    ck_assert_uint_eq(detsched_next_index(d), 40);
    ck_assert_int_eq(detsched_served_at(d, 2), 0);
    ck_assert_int_eq(s_hold_req(d, 39), -1);
    ck_assert_int_eq(s_hold_upd(d, 39, "u39"), -1);
    ck_assert(detsched_updates_ready(d));
    s_serve(d, LAG);
    ck_assert(!detsched_updates_ready(d)); // 40's are due before 42
    ck_assert_int_eq(s_hold_upd(d, 40, "u40"), 0);
    s_take(d, "u40");
    s_take_none(d);
    detsched_destroy(&d);
}
END_TEST

// A learner asking about a horizon past the next one (the replay restarted): the turn jumps
// to that period's actor 0, the horizon to it with the requests served now; batches of
// earlier periods are then out of turn. A jump backwards is nothing.
START_TEST(test_fast_forward) {
    detsched_t *d = detsched_new(2, 8, 1, 1);
    s_serve(d, 2);
    detsched_fast_forward(d, 0);
    ck_assert_uint_eq(detsched_horizon(d), 0);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 0);
    wire_batch_t old = s_b(0, 1, 0, 1, 1); // period 1, held before the jump
    ck_assert_int_eq(s_hold(d, &old), DETSCHED_HELD);
    detsched_fast_forward(d, 3);
    ck_assert_uint_eq(detsched_horizon(d), 3);
    ck_assert_int_eq(detsched_served_at(d, 3), 2);
    ck_assert_int_eq(detsched_served_at(d, 4), -1);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 1);
    ck_assert_int_eq(s_pop(d, &old), 1); // period 1 < 3
    ck_assert_uint_eq(detsched_horizon(d), 3);
    s_serve(d, 1);
    wire_batch_t a1 = s_b(1, 1, 0, 3, 1), a0 = s_b(0, 1, 1, 3, 1);
    ck_assert_int_eq(s_hold(d, &a1), DETSCHED_HELD);
    s_peek_none(d); // actor 0's turn in period 3
    ck_assert_int_eq(s_hold(d, &a0), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &a0), 0);
    ck_assert_uint_eq(detsched_horizon(d), 3);
    ck_assert_int_eq(s_pop(d, &a1), 0);
    ck_assert_uint_eq(detsched_horizon(d), 4);
    ck_assert_int_eq(detsched_served_at(d, 4), 3);
    ck_assert_int_eq(detsched_served_at(d, 3), 2);
    detsched_fast_forward(d, 2); // behind the horizon: nothing
    detsched_fast_forward(d, 4); // at it: nothing
    ck_assert_uint_eq(detsched_horizon(d), 4);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 2);
    detsched_destroy(&d);
}
END_TEST

// A replay shard's schedule (detsched_members: shard 1 of 2 holds actors 1 and 3 of 4): the
// turns are actor 1's then actor 3's in each period, and the horizon moves when actor 3 ends
// a period; actors 0 and 2, which insert elsewhere, are never waited for. A fast-forward
// puts the turn back on the first member.
START_TEST(test_shard_members) {
    detsched_t *d = detsched_new(4, 8, 1, 1);
    detsched_members(d, 1, 2);
    wire_batch_t a3 = s_b(3, 1, 0, 0, 1), a1 = s_b(1, 1, 0, 0, 1), a1b = s_b(1, 1, 1, 1, 1),
                 a3b = s_b(3, 1, 1, 1, 1);
    ck_assert_int_eq(s_hold(d, &a3), DETSCHED_HELD);
    s_peek_none(d); // actor 1's turn
    ck_assert_int_eq(s_hold(d, &a1), DETSCHED_HELD);
    ck_assert_int_eq(s_hold(d, &a1b), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &a1), 0);
    ck_assert_uint_eq(detsched_horizon(d), 0);
    ck_assert_int_eq(s_pop(d, &a3), 0);
    ck_assert_uint_eq(detsched_horizon(d), 1);
    ck_assert_int_eq(s_pop(d, &a1b), 0);
    s_peek_none(d); // actor 3's turn in period 1
    ck_assert_int_eq(s_hold(d, &a3b), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &a3b), 0);
    ck_assert_uint_eq(detsched_horizon(d), 2);
    detsched_fast_forward(d, 5);
    wire_batch_t a3c = s_b(3, 1, 2, 5, 1), a1c = s_b(1, 1, 2, 5, 1);
    ck_assert_int_eq(s_hold(d, &a3c), DETSCHED_HELD);
    s_peek_none(d); // actor 1's turn again, not actor 0's
    ck_assert_int_eq(s_hold(d, &a1c), DETSCHED_HELD);
    ck_assert_int_eq(s_pop(d, &a1c), 0);
    ck_assert_int_eq(s_pop(d, &a3c), 0);
    ck_assert_uint_eq(detsched_horizon(d), 6);
    ck_assert_uint_eq(s_stats(d).out_of_turn, 1); // the jump
    detsched_destroy(&d);
}
END_TEST

Suite *detsched_suite(void) {
    Suite *s = suite_create("detsched");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_inserts_period_major);
    tcase_add_test(tc, test_served_at_ring);
    tcase_add_test(tc, test_duplicates_of_held_dropped);
    tcase_add_test(tc, test_full_window);
    tcase_add_test(tc, test_out_of_turn);
    tcase_add_test(tc, test_skip_stale_turn);
    tcase_add_test(tc, test_far_ahead_jumps);
    tcase_add_test(tc, test_requests_in_order);
    tcase_add_test(tc, test_updates_due_at_lag);
    tcase_add_test(tc, test_restart);
    tcase_add_test(tc, test_fast_forward);
    tcase_add_test(tc, test_shard_members);
    suite_add_tcase(s, tc);
    return s;
}
