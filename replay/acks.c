// acks.c: see acks.h.
#include "acks.h"

#include "apex.h"
#include "wire.h"
#include "xalloc.h"

#include <string.h>

#define GROUPS_MAX 64 // peers one coalescing pass handles (more: another pass)

typedef struct {
    uint8_t id[ACKS_ROUTING_ID_MAX];
    size_t id_len;
    uint32_t actor_id;
    uint64_t seq;
} s_ack;

typedef struct {
    s_ack *a;
    int n, cap;
} s_queue;

struct acks {
    acks_send_fn send;
    void *arg;
    s_queue ready, waiting, flight;
    uint64_t flight_id;
    int *next;      // ACKS_WAITING_MAX: per-peer chains while coalescing
    uint64_t *seqs; // WIRE_ACK_MAX_SEQS: the seqs of one InsertAck
};

static void s_queue_init(s_queue *q, int cap, int touch) {
    // Not zeroed: an entry is written before it is read. The ready queue is used by every
    // server: touched now, so that the resident size does not grow later when bursts get long
    // (tests/smoke/flood.sh watches VmRSS). The wal queues (1.1 MB each) stay untouched, not
    // resident, unless the log is on (and a sanitizer's calloc, which zeroes them, does not
    // cost every server made in a test or fuzz input 2 MB of page faults).
    q->a = xmalloc((size_t)cap * sizeof *q->a);
    if (touch) {
        memset(q->a, 0, (size_t)cap * sizeof *q->a);
    }
    q->n = 0;
    q->cap = cap;
}

acks_t *acks_new(acks_send_fn send, void *arg) {
    acks_t *self = xcalloc(1, sizeof *self);
    self->send = send;
    self->arg = arg;
    s_queue_init(&self->ready, ACKS_READY_MAX, 1);
    s_queue_init(&self->waiting, ACKS_WAITING_MAX, 0);
    s_queue_init(&self->flight, ACKS_WAITING_MAX, 0);
    self->next = xmalloc(ACKS_WAITING_MAX * sizeof *self->next);
    self->seqs = xmalloc(WIRE_ACK_MAX_SEQS * sizeof *self->seqs);
    return self;
}

void acks_destroy(acks_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    acks_t *self = *self_p;
    free(self->ready.a);
    free(self->waiting.a);
    free(self->flight.a);
    free(self->next);
    free(self->seqs);
    free(self);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Coalescing: the acks of each (peer, actor) chained in arrival order, one message each.

typedef struct {
    uint64_t key;   // s_key of its acks
    int head, tail; // its first and last ack
} s_group;

static uint64_t s_key(const s_ack *a) { // FNV-1a over (routing id, actor)
    uint64_t h = 1469598103934665603ull ^ a->actor_id;
    for (size_t i = 0; i < a->id_len; i++) {
        h = (h ^ a->id[i]) * 1099511628211ull;
    }
    return h;
}

static int s_same_peer(const s_ack *a, const s_ack *b) {
    return a->id_len == b->id_len && a->actor_id == b->actor_id &&
           memcmp(a->id, b->id, a->id_len) == 0;
}

// Sends the acks of one peer: the chain from acks[head] through self->next.
static void s_send_chain(acks_t *self, const s_ack *acks, int head) {
    const s_ack *a = &acks[head];
    uint32_t n = 0;
    for (int i = head; i >= 0; i = self->next[i]) {
        if (n == WIRE_ACK_MAX_SEQS) {
            self->send(self->arg, a->id, a->id_len, a->actor_id, self->seqs, n);
            n = 0;
        }
        self->seqs[n++] = acks[i].seq;
    }
    self->send(self->arg, a->id, a->id_len, a->actor_id, self->seqs, n);
}

// Sends and empties q; returns how many acks it held.
static int s_send_queue(acks_t *self, s_queue *q) {
    const s_ack *acks = q->a;
    const int n = q->n;
    s_group g[GROUPS_MAX];
    // A pass that meets more than GROUPS_MAX peers sends what it has and goes on from there.
    for (int i0 = 0, i = 0; i0 < n; i0 = i) {
        int ng = 0;
        for (i = i0; i < n; i++) {
            uint64_t key = s_key(&acks[i]);
            int k = 0;
            while (k < ng && (g[k].key != key || !s_same_peer(&acks[g[k].head], &acks[i]))) {
                k++;
            }
            if (k == ng) {
                if (ng == GROUPS_MAX) {
                    break;
                }
                g[ng++] = (s_group){key, i, i};
            } else {
                self->next[g[k].tail] = i;
                g[k].tail = i;
            }
            self->next[i] = -1;
        }
        for (int k = 0; k < ng; k++) {
            s_send_chain(self, acks, g[k].head);
        }
    }
    q->n = 0;
    return n;
}

static void s_push(s_queue *q, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq) {
    APEX_ASSERT(q->n < q->cap);
    s_ack *a = &q->a[q->n++];
    memcpy(a->id, id, id_len);
    a->id_len = id_len;
    a->actor_id = actor;
    a->seq = seq;
}

// ---------------------------------------------------------------------------------------
// Queues

void acks_ready(acks_t *self, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq) {
    if (id_len > ACKS_ROUTING_ID_MAX) {
        return;
    }
    if (self->ready.n == self->ready.cap) {
        s_send_queue(self, &self->ready);
    }
    s_push(&self->ready, id, id_len, actor, seq);
}

void acks_send_ready(acks_t *self) { s_send_queue(self, &self->ready); }

int acks_wait(acks_t *self, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq) {
    if (id_len <= ACKS_ROUTING_ID_MAX) {
        s_push(&self->waiting, id, id_len, actor, seq);
    }
    return self->waiting.n == self->waiting.cap;
}

int acks_waiting(const acks_t *self) { return self->waiting.n; }
int acks_in_flight(const acks_t *self) { return self->flight.n; }
uint64_t acks_flight_id(const acks_t *self) { return self->flight_id; }

void acks_take_off(acks_t *self, uint64_t commit_id) {
    APEX_ASSERT(self->flight.n == 0);
    s_queue t = self->flight; // swap the arrays: no copy
    self->flight = self->waiting;
    self->waiting = t;
    self->flight_id = commit_id;
}

int acks_send_flight(acks_t *self) { return s_send_queue(self, &self->flight); }
int acks_send_waiting(acks_t *self) { return s_send_queue(self, &self->waiting); }

int acks_flush(acks_t *self) {
    int n = s_send_queue(self, &self->ready);
    n += s_send_queue(self, &self->flight); // the older ones first
    return n + s_send_queue(self, &self->waiting);
}
