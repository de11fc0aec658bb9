// detsched.c: see detsched.h.
#include "detsched.h"

#include "apex.h"
#include "xalloc.h"

#include <string.h>

// One held message: a copy of its bytes in a buffer that only grows.
typedef struct {
    uint8_t *data;
    size_t len, cap;
} s_msg;

static void s_copy(s_msg *m, const void *raw, size_t len) {
    if (len > m->cap) {
        free(m->data);
        m->cap = len > 2 * m->cap ? len : 2 * m->cap;
        m->data = xmalloc(m->cap);
    }
    memcpy(m->data, raw, len);
    m->len = len;
}

// One actor's batches waiting their turn, in arrival order (= seq order: one connection).
typedef struct {
    s_msg *ring;
    int head, len;
    uint64_t epoch, last_seq; // of the newest held, to drop re-sends of held batches
    int any;
    uint8_t id[DETSCHED_ID_MAX]; // the actor's routing id, as last seen
    size_t id_len;
} s_queue;

// A request held until its turn.
typedef struct {
    uint64_t index; // 0: empty
    uint8_t id[DETSCHED_ID_MAX];
    size_t id_len;
    wire_sample_request_t req;
} s_req;

// The updates of one request.
typedef struct {
    uint64_t index; // 0: empty
    int n;
    s_msg *msgs; // batches of them
} s_upd;

struct detsched {
    int n_actors, window, lag, batches;
    int first, stride; // the actors whose turns these are: first, first + stride, ...
    s_queue *queues;
    uint64_t period; // the turn: period, then actor
    int actor;
    uint64_t horizon;
    uint64_t served_at[DETSCHED_HORIZONS];
    // Requests: index next is served next; ring slots by index. The updates of request i are
    // due before request i + lag is served.
    uint64_t next;
    uint64_t base; // the first request of this schedule (1, or where it last restarted)
    s_req *reqs;
    int n_reqs;
    // Updates: those of requests up to next - 1 - lag are due before next is served; applied
    // is the highest request index whose updates went out.
    s_upd *upds;
    int n_upds;
    uint64_t applied;
    int take_k;   // the due request's updates handed out so far (detsched_take_update)
    int diverged; // a restart or a jump happened: the schedule is no longer the seed's
    detsched_stats_t st;
};

detsched_t *detsched_new(int n_actors, int window, int lag, int batches) {
    APEX_ASSERT(n_actors >= 1 && window >= 1 && lag >= 1 && batches >= 1);
    detsched_t *d = xcalloc(1, sizeof *d);
    d->n_actors = n_actors;
    d->window = window;
    d->lag = lag;
    d->batches = batches;
    d->stride = 1;
    d->queues = xcalloc((size_t)n_actors, sizeof *d->queues);
    for (int a = 0; a < n_actors; a++) {
        d->queues[a].ring = xcalloc((size_t)window, sizeof(s_msg));
    }
    d->next = d->base = 1;
    // Requests in flight are at most lag ahead of the next; updates at most lag behind it.
    d->n_reqs = 2 * lag + 2;
    d->reqs = xcalloc((size_t)d->n_reqs, sizeof *d->reqs);
    d->n_upds = 2 * lag + 2;
    d->upds = xcalloc((size_t)d->n_upds, sizeof *d->upds);
    for (int i = 0; i < d->n_upds; i++) {
        d->upds[i].msgs = xcalloc((size_t)batches, sizeof(s_msg));
    }
    return d;
}

void detsched_members(detsched_t *self, int first, int stride) {
    APEX_ASSERT(first >= 0 && first < self->n_actors && stride >= 1);
    self->first = first;
    self->stride = stride;
    self->actor = first;
}

void detsched_destroy(detsched_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    detsched_t *d = *self_p;
    for (int a = 0; a < d->n_actors; a++) {
        for (int i = 0; i < d->window; i++) {
            free(d->queues[a].ring[i].data);
        }
        free(d->queues[a].ring);
    }
    free(d->queues);
    for (int i = 0; i < d->n_upds; i++) {
        for (int k = 0; k < d->batches; k++) {
            free(d->upds[i].msgs[k].data);
        }
        free(d->upds[i].msgs);
    }
    free(d->upds);
    free(d->reqs);
    free(d);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Inserts

detsched_hold_result detsched_hold_insert(detsched_t *self, const wire_batch_t *b,
                                          const uint8_t *id, size_t id_len, const void *raw,
                                          size_t len) {
    APEX_ASSERT((int)b->actor_id < self->n_actors); // the decoder bounds actor ids
    s_queue *q = &self->queues[b->actor_id];
    if (q->len > 0 && q->any && b->epoch == q->epoch && b->seq <= q->last_seq) {
        self->st.duplicates++;
        return DETSCHED_DUPLICATE;
    }
    if (q->len == self->window) {
        self->st.full++;
        return DETSCHED_FULL;
    }
    s_copy(&q->ring[(q->head + q->len) % self->window], raw, len);
    q->id_len = id_len < DETSCHED_ID_MAX ? id_len : DETSCHED_ID_MAX;
    memcpy(q->id, id, q->id_len);
    q->len++;
    q->epoch = b->epoch;
    q->last_seq = b->seq;
    q->any = 1;
    self->st.held_inserts++;
    return DETSCHED_HELD;
}

int detsched_peek_insert(detsched_t *self, const void **raw, size_t *len, const uint8_t **id,
                         size_t *id_len) {
    if (self->diverged) {
        // A schedule that restarted keeps liveness only: batches go in as they came, from
        // whichever actor has one (the turn's actor may have sent its period's end to a
        // process that died, and would never send it again).
        for (int k = 0; k < self->n_actors && self->queues[self->actor].len == 0; k++) {
            self->actor = (self->actor + 1) % self->n_actors;
        }
    }
    const s_queue *q = &self->queues[self->actor];
    if (q->len == 0) {
        return 0;
    }
    const s_msg *m = &q->ring[q->head];
    *raw = m->data;
    *len = m->len;
    *id = q->id;
    *id_len = q->id_len;
    return 1;
}

// The turn passes to the next actor, and after the last to the next period: the horizon.
static void s_next_turn(detsched_t *self) {
    self->actor += self->stride;
    if (self->actor < self->n_actors) {
        return;
    }
    self->actor = self->first;
    self->period++;
    self->horizon = self->period;
    self->served_at[self->horizon % DETSCHED_HORIZONS] = self->next - 1;
}

int detsched_pop_insert(detsched_t *self, const wire_batch_t *b) {
    s_queue *q = &self->queues[self->actor];
    APEX_ASSERT(q->len > 0);
    q->head = (q->head + 1) % self->window;
    q->len--;
    if (self->diverged) {
        // The horizon follows the furthest period an actor ended: actors wait for no more
        // than their own progress.
        if (b->det_period_end && b->det_period > self->horizon) {
            detsched_fast_forward(self, b->det_period);
        }
        return 0;
    }
    if (b->det_period == 0 || b->det_period - 1 < self->period) {
        self->st.out_of_turn++;
        return 1;
    }
    if (b->det_period_end) {
        s_next_turn(self);
    }
    return 0;
}

int detsched_skip_stale_turn(detsched_t *self, const wire_batch_t *b) {
    uint64_t q = b->det_period - 1; // the batch's period
    if (self->diverged || b->det_period == 0 || q <= self->period) {
        return 0;
    }
    if (q - self->period > 1) {
        // Periods far ahead (a peer's numbers, not an actor's next): the turn jumps to the
        // one before, at once, rather than a step per actor and period (counted there).
        detsched_fast_forward(self, q - 1);
        return 1;
    }
    self->st.out_of_turn++;
    s_next_turn(self);
    return 1;
}

// ---------------------------------------------------------------------------------------
// Requests and updates

int detsched_hold_request(detsched_t *self, const uint8_t *id, size_t id_len,
                          const wire_sample_request_t *req) {
    uint64_t i = req->det_index;
    if (i < self->next || i >= self->next + (uint64_t)self->n_reqs ||
        id_len > sizeof self->reqs[0].id) {
        return -1;
    }
    s_req *r = &self->reqs[i % (uint64_t)self->n_reqs];
    r->index = i;
    memcpy(r->id, id, id_len);
    r->id_len = id_len;
    r->req = *req;
    self->st.held_requests++;
    return 0;
}

int detsched_next_request(detsched_t *self, const uint8_t **id, size_t *id_len,
                          const wire_sample_request_t **req) {
    s_req *r = &self->reqs[self->next % (uint64_t)self->n_reqs];
    if (r->index != self->next) {
        return 0;
    }
    *id = r->id;
    *id_len = r->id_len;
    *req = &r->req;
    return 1;
}

uint64_t detsched_next_index(const detsched_t *self) { return self->next; }
uint64_t detsched_base_index(const detsched_t *self) { return self->base; }

void detsched_restart(detsched_t *self, uint64_t index) {
    for (int i = 0; i < self->n_reqs; i++) {
        self->reqs[i].index = 0;
    }
    for (int i = 0; i < self->n_upds; i++) {
        self->upds[i].index = 0;
        self->upds[i].n = 0;
    }
    self->diverged = 1;
    self->next = self->base = index;
    self->applied = index - 1; // (no update of the old schedule's requests is waited for)
    self->take_k = 0;
    // The horizons reached so far count the old schedule's requests, which the new learner
    // never trained: they name its first weights now, so that actors waiting for them go on.
    memset(self->served_at, 0, sizeof self->served_at);
}

int detsched_hold_update(detsched_t *self, uint64_t index, const void *raw, size_t len) {
    if (index <= self->applied || index >= self->next) {
        return -1; // applied already, or of a request not served: not of this schedule
    }
    s_upd *u = &self->upds[index % (uint64_t)self->n_upds];
    if (u->index != index) {
        u->index = index;
        u->n = 0;
    }
    if (u->n == self->batches) {
        return -1; // more updates than the request had batches
    }
    s_copy(&u->msgs[u->n++], raw, len);
    self->st.held_updates++;
    return 0;
}

// The request whose updates are due next, or 0 when none is before next's turn.
static uint64_t s_due(const detsched_t *self) {
    uint64_t i = self->applied + 1;
    return i + (uint64_t)self->lag <= self->next ? i : 0;
}

int detsched_updates_ready(const detsched_t *self) {
    for (uint64_t i = self->applied + 1; i + (uint64_t)self->lag <= self->next; i++) {
        const s_upd *u = &self->upds[i % (uint64_t)self->n_upds];
        if (u->index != i || u->n < self->batches) {
            return 0;
        }
    }
    return 1;
}

int detsched_take_update(detsched_t *self, const void **raw, size_t *len) {
    uint64_t i = s_due(self);
    if (i == 0) {
        return 0;
    }
    s_upd *u = &self->upds[i % (uint64_t)self->n_upds];
    APEX_ASSERT(u->index == i && u->n == self->batches); // detsched_updates_ready said so
    *raw = u->msgs[self->take_k].data;
    *len = u->msgs[self->take_k].len;
    if (++self->take_k == self->batches) {
        self->take_k = 0;
        u->index = 0;
        u->n = 0;
        self->applied = i;
    }
    return 1;
}

void detsched_served(detsched_t *self) {
    self->reqs[self->next % (uint64_t)self->n_reqs].index = 0;
    self->next++;
}

// ---------------------------------------------------------------------------------------
// The horizon

uint64_t detsched_horizon(const detsched_t *self) { return self->horizon; }

int detsched_diverged(const detsched_t *self) { return self->diverged; }

void detsched_fast_forward(detsched_t *self, uint64_t h) {
    if (h <= self->horizon) {
        return;
    }
    // The skipped horizons too, the newest DETSCHED_HORIZONS of them (h may be any number).
    uint64_t n = h - self->horizon < DETSCHED_HORIZONS ? h - self->horizon : DETSCHED_HORIZONS;
    for (uint64_t i = 0; i < n; i++) {
        self->served_at[(h - i) % DETSCHED_HORIZONS] = self->next - 1;
    }
    self->period = self->horizon = h;
    self->actor = self->first;
    self->st.out_of_turn++;
}

int64_t detsched_served_at(const detsched_t *self, uint64_t h) {
    if (h > self->horizon || self->horizon - h >= DETSCHED_HORIZONS) {
        return -1;
    }
    return h == 0 ? 0 : (int64_t)self->served_at[h % DETSCHED_HORIZONS];
}

void detsched_stats(const detsched_t *self, detsched_stats_t *out) { *out = self->st; }
