// server_int.h: the replay server's state, shared by server.c (sockets, sampling, the
// limiter) and persist.c (snapshots, the write-ahead log, restore, dumps). Internal to
// replay/: nothing outside includes it.
#ifndef APEX_REPLAY_SERVER_INT_H
#define APEX_REPLAY_SERVER_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "config.h"
#include "dedupe.h"
#include "durable.h"
#include "log.h"
#include "loop.h"
#include "rng.h"
#include "server.h"
#include "store.h"
#include "wire.h"

#define PENDING_MAX 256    // held sample requests; more are answered NOT_READY at once
#define LIMITER_TICK_MS 10 // how often held requests are re-checked and expired
#define STOP_CHECK_MS 50
#define BAD_LOG_INTERVAL_MS 5000 // at most one line per interval about bad messages
#define MAX_DRAIN 256            // inserts handled per reader call, so timers run
#define INSERT_SLICE 16          // inserts handled between two looks at the sample socket
#define SAMPLE_BURST 64          // sample-socket messages per look, then inserts get a turn
#define REPLY_RING 16            // reply buffers lent to libzmq (zero-copy sends)
#define PEERS_MAX 64             // peers with their own bad-message counter
#define ROUTING_ID_MAX 256
#define ACKS_MAX 4096 // acks waiting for a log commit; more force a sync at once
#define SNAPSHOT_POLL_MS 100
#define SNAPSHOT_RETRY_MS 1000 // while degraded, how often a snapshot is tried
#define BLOB_COUNTERS 4        // u64 counters saved ahead of the dedupe table
#define ACK_GROUPS_MAX 64      // peers whose acks one pass coalesces (more: another pass)
#define READY_MAX MAX_DRAIN    // acks due at once, held until their burst has been drained

typedef struct {
    uint8_t id[ROUTING_ID_MAX];
    size_t id_len;
    wire_sample_request_t req;
    int64_t deadline_ms;
} s_pending;

typedef struct {
    uint8_t id[ROUTING_ID_MAX];
    size_t id_len;
    uint64_t bad;
} s_peer;

// An InsertAck waiting for the log record of its batch to reach the disk (wal mode).
typedef struct {
    uint8_t id[ROUTING_ID_MAX];
    size_t id_len;
    uint32_t actor_id;
    uint64_t seq;
} s_ack;

// An encoded SampleReply lent to libzmq without a copy (zmq_msg_init_data). libzmq's I/O
// thread calls the free callback once the bytes are on the socket (or the message is
// dropped), which hands the buffer back: in_use is the only state that crosses threads.
typedef struct {
    wire_buf_t buf;
    atomic_int in_use;
} s_reply_buf;

typedef struct {
    int64_t at_ms;
    uint64_t inserted, sampled, updated;
} s_rate_mark;

struct replay_server {
    apex_config_t cfg;
    void *ctx;
    void *insert_sock;
    void *sample_sock;
    char insert_ep[CONFIG_STR_LEN];
    char sample_ep[CONFIG_STR_LEN];
    store_t *store;
    rng_t rng;
    wire_decoder_t *dec;
    wire_buf_t out;
    s_reply_buf *replies; // REPLY_RING buffers; a copying send when all are lent out
    int reply_next;
    uint64_t reply_copies; // replies sent by copy because every ring buffer was in flight
    loop_t *loop;
    atomic_int stop_requested;
    // Gather buffers for one reply, sized for [replay] max_batch (S8: nothing allocated
    // while serving).
    uint64_t *keys;
    float *is_w, *rewards, *discounts;
    void *obs, *next_obs; // max_batch observations of the run's dtype
    int32_t *actions;
    // Held sample requests: a FIFO ring.
    s_pending *pending;
    int pending_head, pending_len;
    // Counters.
    uint64_t sampled_rows, updated, limiter_waits, not_ready, refused, dropped_replies;
    uint64_t bad[WIRE_MSG_COUNT_];
    uint64_t bad_total;
    s_peer peers[PEERS_MAX];
    int n_peers;
    log_limiter_t bad_log;
    s_rate_mark mark;
    // Durability (replay/durable.h) and exactly-once inserts (replay/dedupe.h).
    durable_t *durable;
    dedupe_t dedupe;
    // wal: acks wait in acks[] until a commit is started, then in acks_flight[] until
    // commit flight_id has ended (one commit is in flight at a time, see durable.h).
    s_ack *acks, *acks_flight;
    int n_acks, n_flight;
    uint64_t flight_id;
    int64_t first_ack_ms; // when the oldest ack in acks[] was queued
    // Acks due now (durability none/snapshot, or wal while degraded), sent coalesced per
    // peer when the burst of inserts that produced them has been handled.
    s_ack *acks_ready;
    int n_ready;
    int *ack_next;               // ACKS_MAX: per-peer chains while coalescing (server_send_acks)
    uint64_t *ack_seqs;          // WIRE_ACK_MAX_SEQS: the seqs of one InsertAck
    void *commit_rx, *commit_tx; // inproc PAIR: the log's writer thread wakes the loop
    uint8_t *blob;               // snapshot blob: counters + dedupe table
    size_t blob_cap;
    int64_t last_snapshot_try_ms;
    struct security *security; // CURVE (common/security.h)
    uint64_t duplicate_batches, acks_without_durability;
};

// Defined in server.c; used by persist.c to replay the log through the live code paths.
// raw == NULL: applying a record at start-up (nothing is appended to the log).
int server_apply_batch(replay_server_t *s, const wire_batch_t *b, const void *raw, size_t len);
void server_apply_update(replay_server_t *s, const wire_priority_update_t *u, const void *raw,
                         size_t len);
void server_flush_acks(replay_server_t *s); // every queued ack (after durable_sync)
void server_send_acks(replay_server_t *s, const s_ack *acks, int n); // coalesced per peer
void server_send_ready_acks(replay_server_t *s); // the acks due at once (acks_ready)

// Defined in persist.c.
int persist_restore(replay_server_t *s);         // at start-up; 0 or -1 (logged)
int persist_start(replay_server_t *s);           // wal: the writer thread; 0 or -1 (logged)
void persist_stop(replay_server_t *s);           // joins it (idempotent)
void persist_commit(replay_server_t *s);         // wal: acks of ended commits; start the next
int persist_timer_sync(loop_t *loop, void *arg); // wal: group commit, then the acks
int persist_timer_snapshot(loop_t *loop, void *arg);
int persist_timer_poll(loop_t *loop, void *arg);
void persist_shutdown(replay_server_t *s); // final sync and snapshot

#endif
