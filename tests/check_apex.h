// check_apex.h: included by every tests/check_*.c. Declares all suites (from the
// generated suites.h) and the small helpers the suites share.
//
// Convention: each test file defines exactly one "Suite *<module>_suite(void)" starting at
// the beginning of a line; the Makefile finds it there and adds it to the runner.
#ifndef APEX_CHECK_APEX_H
#define APEX_CHECK_APEX_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "suites.h"

#define DECLARE_SUITE(name) Suite *name(void);
APEX_SUITES(DECLARE_SUITE)
#undef DECLARE_SUITE

// 1 when built with AddressSanitizer (make asan; GCC's macro or clang's feature test), else
// 0. Checks that cannot mean anything under it (glibc's heap counters) skip, saying so.
#if defined(__SANITIZE_ADDRESS__)
#define CHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHECK_ASAN 1
#endif
#endif
#ifndef CHECK_ASAN
#define CHECK_ASAN 0
#endif

// Compares n floats with |got - want| <= atol + rtol * |want|. On mismatch prints the first
// 5 differing indices and the largest difference (llm.c check_tensor), and returns 0.
int check_close_f(const float *got, const float *want, size_t n, double rtol, double atol,
                  const char *what);
int check_close_d(const double *got, const double *want, size_t n, double rtol, double atol,
                  const char *what);

// A replay server running its loop in a thread, for tests that talk to it over sockets.
#include <pthread.h>

#include "server.h"

typedef struct {
    replay_server_t *server;
    pthread_t thread;
} check_replay_t;

// Creates the server (asserting that it starts) and runs it in a thread.
void check_replay_start(check_replay_t *r, const apex_config_t *cfg);
// Stops, joins and destroys the server, returning its final counters in *st (may be NULL).
void check_replay_stop(check_replay_t *r, wire_replay_stats_t *st);

// ---- clients of a replay server over sockets

// A DEALER on ctx connected to ep (asserted), with ZMQ_LINGER 0, ZMQ_RCVTIMEO rcvtimeo_ms
// and routing id id (NULL: libzmq's own). The caller closes it with zmq_close.
void *check_dealer(void *ctx, const char *ep, const char *id, int rcvtimeo_ms);

// Encodes m and sends it on sock as one frame, asserting that all of it went.
void check_send_msg(void *sock, const wire_msg_t *m);

// The rows of one TransitionBatch of float observations, filled in by the test: row j's
// observation is obs[j * obs_dim .. (j + 1) * obs_dim).
#define CHECK_ROWS_MAX 64
#define CHECK_OBS_MAX 4
typedef struct {
    float obs[CHECK_ROWS_MAX * CHECK_OBS_MAX], next_obs[CHECK_ROWS_MAX * CHECK_OBS_MAX];
    float rewards[CHECK_ROWS_MAX], discounts[CHECK_ROWS_MAX], prio[CHECK_ROWS_MAX];
    int32_t actions[CHECK_ROWS_MAX];
} check_rows_t;

// Sends rows [0, n) of r, obs_dim floats each, as TransitionBatch (actor, seq) on sock with
// the priorities prio (n of them, e.g. r->prio; NULL: none, the replay's maximum applies).
void check_send_rows(void *sock, const check_rows_t *r, uint32_t n, uint32_t obs_dim,
                     uint32_t actor, uint64_t seq, const float *prio);

// A writable temp directory for this test (mkdtemp under $TMPDIR or /tmp); path is static
// storage that lives until the next call. Removed by check_rmtree.
const char *check_tmpdir(void);
void check_rmtree(const char *path);
// The first 64 KiB of a text file (a log the test directed with log_open_file), NUL-ended,
// in static storage that lives until the next call. Fails the test when it cannot be read.
const char *check_read_file(const char *path);

// A test's outside reference (a file or program outside the repo, a Python module) is
// missing. Under CI=true (.ci/run exports it), where every reference must be present, this
// fails the test, naming test and missing; elsewhere it prints "<test> SKIPPED: <missing>"
// to stderr and returns, and the caller returns (a skip shows in the log, never silently).
void check_reference_missing(const char *test, const char *missing);

// ---- a stand-in for the learner's weights endpoint, for suites that test its clients
// (the actor; apex-eval --follow). The learner binds a ROUTER that reads [routing id]
// [WeightsRequest] and answers [routing id][Weights] (docs/architecture.md "Weights",
// common/weights_client.h). The stand-in is a plain ROUTER of the test's; these functions read
// the requests on it, fail the test on anything a client must not send there, and answer.
// Unlike the learner they never hold a request: a test answers when it chooses to (at once,
// later, or never), which a client must cope with anyway.

// A ROUTER on ctx bound to an ephemeral loopback port, with ZMQ_LINGER 0; the endpoint it
// bound goes to ep (ep_len bytes). The caller closes it with zmq_close.
void *check_weights_router(void *ctx, char *ep, size_t ep_len);

// One request read from the ROUTER: who asked (to address the answer) and what it holds.
typedef struct {
    uint8_t id[256]; // routing id (libzmq's are at most 255 bytes)
    size_t id_len;
    uint64_t have_version;
} check_weights_request_t;

// Waits until the monotonic time deadline_ms (clock_now_ms) for one request. Returns 1 with
// *req filled, 0 when the deadline passed first. Anything but [routing id][one WeightsRequest
// frame] fails the test.
int check_weights_wait_request(void *router, int64_t deadline_ms, check_weights_request_t *req);

// A client that reconnects (its silent link revived, weights_client_revive): waits until
// deadline_ms for a first request, then for one over another connection (a routing id other
// than the first's), every request saying it holds have; *q is the one over the new
// connection. Fails the test, saying how many requests came, when the deadline passes first.
void check_weights_wait_reconnect(void *router, int64_t deadline_ms, uint64_t have,
                                  check_weights_request_t *q);

// Sends [to's routing id][data, len bytes] on router. flags 0 ends the message; ZMQ_SNDMORE
// leaves it open for frames the caller adds with zmq_send (a malformed answer). A ROUTER does
// not block: a message to a peer that is gone or whose queue is full is dropped.
void check_weights_send(void *router, const check_weights_request_t *to, const void *data,
                        size_t len, int flags);

// Answers every request already waiting on router (without waiting for one) with the encoded
// message in answer, e.g. from check_encode_weights. Returns how many were answered; when
// that is > 0 and have is not NULL, *have is the last request's have_version.
int check_weights_answer(void *router, const wire_buf_t *answer, uint64_t *have);

// Encodes Weights{version, learner_step = 100 * version, params[0..num_params)} into out
// (initialised by the caller with wire_buf_init).
void check_encode_weights(wire_buf_t *out, uint64_t version, const float *params,
                          uint32_t num_params);

// ---- the fuzz harnesses' inputs, replayed under gcc (check_fuzz_*.c)

// Runs every regular file of <root>/fuzz/<kind>/<target> (root: $APEX_SRC_DIR, else the
// working directory) through fn, asserting that it returns 0; *name holds the file's path
// while it runs (the including file's fuzz_input_name, which a failed FUZZ_CHECK prints).
// Returns how many files ran (0 for a missing directory).
typedef int (*check_fuzz_fn)(const uint8_t *data, size_t size);
// A whole file, malloc'd (the caller frees it), its length in *len; NULL when unreadable.
uint8_t *check_slurp(const char *path, size_t *len);
int check_fuzz_dir(const char *kind, const char *target, check_fuzz_fn fn, const char **name);

#endif
