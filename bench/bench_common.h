// bench_common.h: what the benchmarks share. Not a benchmark itself: the Makefile links
// bench_common.o into every build/bench/<name> and builds no binary of its own from it.
//
//   timing          the median of a window's rates, a sleep that survives signals, CPU
//                   seconds of a clock (thread, process).
//   replay clients  what bench_replay_tcp and bench_replay_shards send and receive as actors
//                   and learners: random CartPole-like rows (obs_dim 4, 2 actions) laid out
//                   as an actor's batch, their TransitionBatch encoding, a DEALER, the
//                   draining of InsertAcks.
//   replay servers  a real replay_server_t (replay/server.h) running its loop in a thread on
//                   ephemeral loopback ports, configured as those benchmarks measure it.
//
// What it does not do: measure anything, or print BENCH lines (each benchmark names its own).
// Nothing here is thread-safe beyond what its arguments are: each thread uses its own rows,
// buffers, decoders and sockets.
#ifndef APEX_BENCH_COMMON_H
#define APEX_BENCH_COMMON_H

#include "rng.h"
#include "server.h"
#include "wire.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

// ---------------------------------------------------------------------------------------
// Timing

// The median of v[0..n) (n >= 1; the mean of the middle two when n is even). Sorts v in
// place, so v[0] and v[n - 1] are the min and max afterwards.
double bench_median(double *v, int n);
// Sleeps s seconds (s >= 0), resuming after a signal until the whole time has passed.
void bench_sleep_s(double s);
// The CPU seconds of clock `which` (CLOCK_THREAD_CPUTIME_ID, CLOCK_PROCESS_CPUTIME_ID).
double bench_cpu_s(clockid_t which);

// ---------------------------------------------------------------------------------------
// Replay clients: CartPole-v1's shapes

#define BENCH_OBS_DIM 4
#define BENCH_N_ACTIONS 2
#define BENCH_FILL_N 4096u // rows per batch while pre-filling (= [replay] max_batch)

// n rows, (n, BENCH_OBS_DIM) observations like an actor's batch.
typedef struct {
    uint32_t n;
    float *obs, *next_obs, *rewards, *discounts, *prio;
    int32_t *actions;
} bench_rows_t;

// Allocates n random rows drawn from rng: observations N(0, 0.1^2), the 3-step return of
// rewards 1, 1 in 20 terminal, priorities in [1e-3, 2 + 1e-3), uniform actions. Release with
// bench_rows_fini.
void bench_rows_init(bench_rows_t *r, uint32_t n, rng_t *rng);
void bench_rows_fini(bench_rows_t *r);
// Encodes rows [off, off + n) of r as TransitionBatch (actor, seq) into out.
void bench_encode_rows(wire_buf_t *out, const bench_rows_t *r, uint32_t off, uint32_t n,
                       uint32_t actor, uint64_t seq);
// The limits every replay client decodes with: CartPole shapes, BENCH_FILL_N rows.
wire_limits_t bench_limits(void);
// A DEALER on ctx connected to ep, with ZMQ_LINGER 0 and routing id id (NULL: libzmq's
// own); prepare (may be NULL) sets further options before the connect (CURVE keys) and
// returns 0 or -1. Returns NULL when any step fails. The caller closes it with zmq_close.
void *bench_dealer(void *ctx, const char *ep, const char *id, int (*prepare)(void *sock));
// Receives every InsertAck waiting on sock without blocking; returns how many batches they
// acknowledge (one InsertAck can carry many seqs), or -1 on a socket error or on anything
// but an InsertAck (errno EPROTO).
int bench_drain_acks(void *sock, wire_decoder_t *dec);

// ---------------------------------------------------------------------------------------
// Replay servers

typedef struct {
    replay_server_t *server; // NULL when not running
    pthread_t thread;        // its loop
} bench_server_t;

// Starts a replay server for CartPole (the learner's batch of 512, actors' batches of 50, at
// most 1000 actors, max_batch 4096, sampling from 1000 rows, no ratio, stats every minute),
// bound to ephemeral loopback ports, with the "section.key=value" strings sets[0..n_sets)
// applied after those (capacity, shards, durability, ...), as shard `shard` of the run
// (0 when unsharded). Returns 0, or -1 with a message in err.
int bench_server_start(bench_server_t *s, const char *const *sets, int n_sets, int shard, char *err,
                       size_t err_len);
// Stops the server, joins its thread, writes its final counters to *st (may be NULL) and
// destroys it. No-op when s->server is NULL.
void bench_server_stop(bench_server_t *s, wire_replay_stats_t *st);

#endif
