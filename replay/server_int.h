// server_int.h: the replay server's state. Internal: included by server.c and by the tests
// that check its scheduling (tests/check_replay_server.c); nothing else.
#ifndef APEX_REPLAY_SERVER_INT_H
#define APEX_REPLAY_SERVER_INT_H

#include <stdatomic.h>
#include <stdint.h>

#include "acks.h"
#include "config.h"
#include "dedupe.h"
#include "detsched.h"
#include "limiter.h"
#include "log.h"
#include "loop.h"
#include "persist.h"
#include "rng.h"
#include "server.h"
#include "store.h"
#include "wire.h"

#define PENDING_MAX 256    // held sample requests; more are answered NOT_READY at once
#define WATCH_MAX 16       // held stats requests (one per sharded learner); more answered at once
#define LIMITER_TICK_MS 10 // how often held requests are re-checked and expired
#define STOP_CHECK_MS 50
#define BAD_LOG_INTERVAL_MS 5000 // at most one line per interval about bad messages
#define MAX_DRAIN 256            // inserts handled per reader call, so timers run
#define INSERT_SLICE 16          // inserts handled between two looks at the sample socket
#define SAMPLE_BURST 64          // sample-socket messages per look, then inserts get a turn
#define REPLY_RING 16            // reply buffers lent to libzmq (zero-copy sends)
#define PEERS_MAX 64             // peers with their own bad-message counter
#define ROUTING_ID_MAX ACKS_ROUTING_ID_MAX

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

// A held stats request of a sharded learner (proto/apex.proto SampleRequest.stats_only):
// answered with the stats once `inserted` reaches req.stats_after, or at the deadline.
typedef struct {
    uint8_t id[ROUTING_ID_MAX];
    size_t id_len;
    wire_sample_request_t req;
    int64_t deadline_ms;
} s_watch;

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
    wire_rows_t rows;
    // Held sample requests: a FIFO ring.
    s_pending *pending;
    int pending_head, pending_len;
    // Held stats requests (sharded replay), in no order.
    s_watch watches[WATCH_MAX];
    int n_watches;
    uint64_t stats_replies;
    int sharded; // [replay] shards > 1: the learner gates sampling (docs: "Sharded replay")
    // Counters: those a restart keeps (persist.h), then this process's own.
    persist_counters_t counters;
    uint64_t not_ready, refused, dropped_replies;
    uint64_t bad[WIRE_MSG_COUNT_];
    uint64_t bad_total;
    s_peer peers[PEERS_MAX];
    int n_peers;
    log_limiter_t bad_log;
    // Frame mode: per actor, when its batches started arriving ahead of a missing one (0:
    // none), and the batches held back so (replay/server.c "frame order").
    int64_t *gap_since_ms;
    uint64_t frames_deferred, frame_gaps_skipped;
    log_limiter_t gap_log;
    s_rate_mark mark;
    limiter_t limiter;         // samples per insert (common/limiter.h); off in a shard
    dedupe_t dedupe;           // exactly-once inserts (replay/dedupe.h)
    acks_t *acks;              // InsertAcks waiting to go out (replay/acks.h)
    persist_t *persist;        // durability (replay/persist.h)
    struct security *security; // CURVE (common/security.h)
    // [run] deterministic (replay/detsched.h): the fixed schedule, the rows of one request,
    // and the log of its divergences (a restarted peer).
    detsched_t *det;
    uint64_t min_size; // live rows before any sample (replay_server_new says which)
    uint32_t det_rows;
    uint64_t det_reasks; // requests asked again after they were served, dropped
    log_limiter_t det_log;
    // The actors' metrics.csv columns in the schedule's order (TransitionBatch.det_frames
    // ...): each actor's totals at its last period's end, the last returns in the order the
    // periods were applied, and their values when the horizon last moved (what the stats say).
    uint64_t *det_act_frames, *det_act_episodes, *det_act_version; // (num_actors)
    float det_ret[WIRE_DET_RETURNS_MAX];
    int det_ret_next, det_ret_n;
    uint64_t det_snap_h;
    wire_replay_stats_t det_snap; // (its det_* actor columns only)
    // Tests: every reply the server sends, as sent (NULL: none).
    void (*reply_hook)(void *arg, const wire_msg_t *m);
    void *reply_hook_arg;
};

// What the loop does with one message that arrived from the peer id on the insert or the
// sample socket (every handler, the acks and the held requests it releases), and what its
// timers do at now_ms. For the handler fuzzer (fuzz/fuzz_replay.c) and tests, on a server
// made with listen = 0: its replies go nowhere (counted as dropped).
typedef enum { REPLAY_SOCK_INSERT, REPLAY_SOCK_SAMPLE } replay_sock;
void replay_server_handle(replay_server_t *s, replay_sock which, const void *id, size_t id_len,
                          const void *payload, size_t len, int64_t now_ms);
void replay_server_tick(replay_server_t *s, int64_t now_ms);

#endif
