// check_apex.h: included by every tests/check_*.c. Declares all suites (from the
// generated suites.h) and the small helpers the suites share.
//
// Convention: each test file defines exactly one "Suite *<module>_suite(void)" starting at
// the beginning of a line; the Makefile finds it there and adds it to the runner.
#ifndef APEX_CHECK_APEX_H
#define APEX_CHECK_APEX_H

#include <check.h>
#include <stddef.h>

#include "suites.h"

#define DECLARE_SUITE(name) Suite *name(void);
APEX_SUITES(DECLARE_SUITE)
#undef DECLARE_SUITE

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

// A writable temp directory for this test (mkdtemp under $TMPDIR or /tmp); path is static
// storage that lives until the next call. Removed by check_rmtree.
const char *check_tmpdir(void);
void check_rmtree(const char *path);

#endif
