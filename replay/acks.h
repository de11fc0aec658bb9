// acks.h: the replay server's InsertAcks: the queues they wait in, and their coalescing.
//
// An ack is (routing id, actor, seq). It waits in one of three queues:
//   ready    due now (durability none or snapshot, or wal while the log is degraded); held
//            only until the burst of inserts that produced it has been handled, then sent;
//   waiting  wal: its batch's log record is buffered but not yet handed to a commit;
//   flight   wal: handed to commit flight_id, sent once that commit has ended (one commit is
//            in flight at a time, see durable.h).
// Sending coalesces: the acks due to one (peer, actor) at one moment go out as one InsertAck
// (seq plus the packed seqs, at most WIRE_ACK_MAX_SEQS each), in arrival order. At full load
// that is one message per actor per commit (wal) or per burst (none/snapshot) instead of one
// per batch, which matters most under CURVE, where each message is encrypted on its own.
//
// What it does not do: encode or send messages (the server's send callback does), or decide
// when a commit starts or ends (replay/persist.c does, calling acks_take_off and
// acks_send_flight). Memory is fixed at acks_new. Not thread-safe: the server's thread.
#ifndef APEX_ACKS_H
#define APEX_ACKS_H

#include <stddef.h>
#include <stdint.h>

#define ACKS_ROUTING_ID_MAX 256
#define ACKS_WAITING_MAX 4096 // acks waiting for a log commit; more force a sync at once
#define ACKS_READY_MAX 256    // acks due at once within one burst; more are sent right away

// Sends one InsertAck to the peer `id` for `actor` holding seqs[0..n) (n >= 1).
typedef void (*acks_send_fn)(void *arg, const uint8_t *id, size_t id_len, uint32_t actor,
                             const uint64_t *seqs, uint32_t n);

typedef struct acks acks_t;

// Allocates every queue (aborts on OOM). Caller destroys.
acks_t *acks_new(acks_send_fn send, void *arg);
void acks_destroy(acks_t **self_p);

// Queues an ack that is due now; a full ready queue is sent first. Ids longer than
// ACKS_ROUTING_ID_MAX (libzmq's are <= 255 bytes) are ignored.
void acks_ready(acks_t *self, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq);
// Sends the ready queue (end of a burst).
void acks_send_ready(acks_t *self);

// Queues an ack that waits for the log. Returns 1 when the queue is full afterwards: the
// caller must make everything durable and call acks_flush before the next acks_wait.
int acks_wait(acks_t *self, const uint8_t *id, size_t id_len, uint32_t actor, uint64_t seq);
int acks_waiting(const acks_t *self);   // acks in the waiting queue
int acks_in_flight(const acks_t *self); // acks in the flight queue
uint64_t acks_flight_id(const acks_t *self);
// Moves the waiting acks to the (empty) flight queue, tagged with commit id.
void acks_take_off(acks_t *self, uint64_t commit_id);
// Sends the flight queue (its commit ended) / the waiting queue (nothing new had to be
// written, or the log is degraded). Each returns how many acks it sent.
int acks_send_flight(acks_t *self);
int acks_send_waiting(acks_t *self);
// Sends every queued ack, oldest first: ready, flight, waiting. Returns how many.
int acks_flush(acks_t *self);

#endif
