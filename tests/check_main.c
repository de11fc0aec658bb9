// check_main.c: one SRunner per suite of tests/check_*.c (STYLE S21), each timed.
//
// The suite list comes from build/gen/suites.h, which the Makefile generates from the
// "Suite *name_suite(void)" definitions, so a new test file is picked up automatically.
// One runner per suite (rather than one for all) so that each suite's wall time is printed
// ("suite <name>: <s> s"): tests/README.md keeps what each suite costs in CI, and a suite
// that grows slow shows up in the CI log. Exits non-zero when any test fails.
// CK_RUN_SUITE=name / CK_RUN_CASE=name select tests, as Check does. APEX_CHECK_SHARD=i/n
// runs only the suites whose position in the list is i mod n (0 <= i < n): `make unit` runs
// n shards side by side, one per core (CI has 30 minutes on 2 cores; the suites are
// independent: temporary directories and ephemeral ports of their own, nothing timed). With
// APEX_CHECK_QUEUE=path as well, the shards take the suites as they finish instead (s_claim):
// by position, the two heaviest (group, keys) fell on one shard, which ran 295 s under ASan
// while the other was done at 193.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "check_apex.h"

static double s_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int s_shard_i, s_shard_n = 1, s_pos;
static const char *s_queue; // APEX_CHECK_QUEUE
static int s_mine = -1;     // the position this shard claimed last

// The next suite position no shard has claimed: a counter in the file at path, read and
// advanced under flock by every shard. Exits on an I/O error (the run then fails).
static int s_claim(const char *path) {
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        fprintf(stderr, "APEX_CHECK_QUEUE=%s: cannot open and lock it\n", path);
        exit(EXIT_FAILURE);
    }
    char buf[32] = {0};
    int next = pread(fd, buf, sizeof buf - 1, 0) > 0 ? atoi(buf) : 0;
    int len = snprintf(buf, sizeof buf, "%d\n", next + 1);
    if (pwrite(fd, buf, (size_t)len, 0) != len) {
        fprintf(stderr, "APEX_CHECK_QUEUE=%s: cannot write it\n", path);
        exit(EXIT_FAILURE);
    }
    flock(fd, LOCK_UN);
    close(fd);
    return next;
}

// Whether the suite at the next position is this shard's.
static int s_ours(void) {
    int pos = s_pos++;
    if (!s_queue) {
        return pos % s_shard_n == s_shard_i;
    }
    if (s_mine < pos) {
        s_mine = s_claim(s_queue); // positions are claimed in order: s_mine >= pos
    }
    return s_mine == pos;
}

static int s_run(Suite *(*make)(void), const char *name, int *ran) {
    if (!s_ours()) {
        return 0;
    }
    char want[128];
    snprintf(want, sizeof want, "%s", name);
    char *tail = strstr(want, "_suite");
    if (tail && tail[6] == '\0') {
        *tail = '\0';
    }
    // Check would run every other suite's runner with nothing selected and print an empty
    // summary for each; skip them (each suite is named after its function: actor_suite
    // creates "actor").
    const char *only = getenv("CK_RUN_SUITE");
    if (only && *only && strcmp(only, want) != 0) {
        return 0;
    }
    Suite *suite = make();
    SRunner *sr = srunner_create(suite);
    srunner_set_fork_status(sr, CK_FORK);
    double t0 = s_now();
    srunner_run_all(sr, CK_NORMAL);
    int n = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    if (n > 0) {
        printf("suite %s: %d checks, %d failed, %.1f s\n", want, n, failed, s_now() - t0);
        fflush(stdout);
        *ran += n;
    }
    srunner_free(sr);
    return failed;
}

int main(void) {
    const char *shard = getenv("APEX_CHECK_SHARD");
    if (shard && *shard &&
        (sscanf(shard, "%d/%d", &s_shard_i, &s_shard_n) != 2 || s_shard_n < 1 || s_shard_i < 0 ||
         s_shard_i >= s_shard_n)) {
        fprintf(stderr, "APEX_CHECK_SHARD=%s: want i/n with 0 <= i < n\n", shard);
        return EXIT_FAILURE;
    }
    const char *queue = getenv("APEX_CHECK_QUEUE");
    s_queue = shard && *shard && queue && *queue ? queue : NULL;
    int failed = 0, ran = 0;
    double t0 = s_now();
#define RUN_SUITE(name) failed += s_run(name, #name, &ran);
    APEX_SUITES(RUN_SUITE)
#undef RUN_SUITE
    printf("all suites%s%s: %d checks, %d failed, %.1f s\n", shard && *shard ? " of shard " : "",
           shard && *shard ? shard : "", ran, failed, s_now() - t0);
    return failed == 0 && ran > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
