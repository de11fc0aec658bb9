// dedupe.h: exactly-once inserts: which (actor, epoch, seq) batches are already stored.
//
// Actors re-send a batch until it is acknowledged, so the replay server can receive one
// twice (an ack lost with a dying connection, a timeout that fired just before the ack
// arrived). For each actor the table keeps its current epoch (one run of the actor
// process; seq restarts at 0 in a new one), the highest seq seen plus one (hwm), and a bitmap
// of which of the DEDUPE_WINDOW seqs below hwm were seen. A seq below the window counts as a
// duplicate: actors never keep more than [actor] max_pending_batches <= DEDUPE_WINDOW
// batches unacknowledged. A new epoch resets the actor's marks.
// Plain data (init/fini); serialisable for replay snapshots. Not thread-safe.
#ifndef APEX_DEDUPE_H
#define APEX_DEDUPE_H

#include <stddef.h>
#include <stdint.h>

#define DEDUPE_WINDOW 8192

typedef struct {
    uint64_t epoch;
    uint64_t hwm; // 1 + highest seq seen in this epoch; 0 = none yet
    uint64_t bits[DEDUPE_WINDOW / 64];
} dedupe_actor_t;

typedef struct {
    uint32_t n_actors;
    dedupe_actor_t *actors; // (n_actors)
} dedupe_t;

void dedupe_init(dedupe_t *d, uint32_t n_actors);
void dedupe_fini(dedupe_t *d);

// Returns 1 when (actor, epoch, seq) was already seen, else 0 and nothing changes.
// actor must be < n_actors (callers validate).
int dedupe_seen(const dedupe_t *d, uint32_t actor, uint64_t epoch, uint64_t seq);
// Records (actor, epoch, seq) as stored.
void dedupe_mark(dedupe_t *d, uint32_t actor, uint64_t epoch, uint64_t seq);

// Serialisation: bytes needed, write, and read back (APEX_EINVAL when the bytes do not
// describe a table of n_actors, e.g. a snapshot from a run with another [actor] num_actors;
// then the table is left empty).
size_t dedupe_bytes(const dedupe_t *d);
void dedupe_save(const dedupe_t *d, void *out);
int dedupe_load(dedupe_t *d, const void *in, size_t len);

#endif
