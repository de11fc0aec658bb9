// dedupe.c: see dedupe.h.
#include "dedupe.h"

#include "apex.h"
#include "xalloc.h"

#include <string.h>

void dedupe_init(dedupe_t *d, uint32_t n_actors) {
    d->n_actors = n_actors;
    d->actors = xcalloc(n_actors ? n_actors : 1, sizeof *d->actors);
}

void dedupe_fini(dedupe_t *d) {
    free(d->actors);
    memset(d, 0, sizeof *d);
}

static int s_bit(const dedupe_actor_t *a, uint64_t seq) {
    uint64_t i = seq % DEDUPE_WINDOW;
    return (int)((a->bits[i / 64] >> (i % 64)) & 1u);
}

int dedupe_seen(const dedupe_t *d, uint32_t actor, uint64_t epoch, uint64_t seq) {
    APEX_ASSERT(actor < d->n_actors);
    const dedupe_actor_t *a = &d->actors[actor];
    if (a->epoch != epoch || a->hwm == 0 || seq >= a->hwm) {
        return 0;
    }
    if (a->hwm - seq > DEDUPE_WINDOW) {
        return 1; // older than the window: the actor cannot still hold it unacknowledged
    }
    return s_bit(a, seq);
}

void dedupe_mark(dedupe_t *d, uint32_t actor, uint64_t epoch, uint64_t seq) {
    APEX_ASSERT(actor < d->n_actors);
    dedupe_actor_t *a = &d->actors[actor];
    if (a->epoch != epoch) {
        memset(a, 0, sizeof *a); // a restarted actor: its old marks mean nothing now
        a->epoch = epoch;
    }
    if (seq >= a->hwm) {
        // Clear the bits of the seqs the window slides over (at most the whole window).
        uint64_t from = a->hwm, n = seq - a->hwm; // seqs from..seq: n + 1 of them
        if (n >= DEDUPE_WINDOW - 1) {
            memset(a->bits, 0, sizeof a->bits);
        } else {
            for (uint64_t k = 0; k <= n; k++) { // counted, so seq near 2^64 cannot wrap it
                uint64_t i = (from + k) % DEDUPE_WINDOW;
                a->bits[i / 64] &= ~(1ull << (i % 64));
            }
        }
        a->hwm = seq + 1; // callers refuse seq == UINT64_MAX
    } else if (a->hwm - seq > DEDUPE_WINDOW) {
        return;
    }
    uint64_t i = seq % DEDUPE_WINDOW;
    a->bits[i / 64] |= 1ull << (i % 64);
}

size_t dedupe_bytes(const dedupe_t *d) {
    return sizeof(uint32_t) * 2 + (size_t)d->n_actors * sizeof(dedupe_actor_t);
}

void dedupe_save(const dedupe_t *d, void *out) {
    uint32_t head[2] = {d->n_actors, DEDUPE_WINDOW};
    memcpy(out, head, sizeof head);
    memcpy((char *)out + sizeof head, d->actors, (size_t)d->n_actors * sizeof *d->actors);
}

int dedupe_load(dedupe_t *d, const void *in, size_t len) {
    uint32_t head[2];
    if (len < sizeof head) {
        return APEX_EINVAL;
    }
    memcpy(head, in, sizeof head);
    if (head[0] != d->n_actors || head[1] != DEDUPE_WINDOW || len != dedupe_bytes(d)) {
        return APEX_EINVAL;
    }
    memcpy(d->actors, (const char *)in + sizeof head, (size_t)d->n_actors * sizeof *d->actors);
    return APEX_OK;
}
