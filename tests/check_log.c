// check_log.c: the rate limiter, level parsing, line format, that asserts fire, and apex.h's
// error names and messages.
#include "check_apex.h"
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apex.h"
#include "log.h"

START_TEST(test_limiter_first_call_allowed) {
    log_limiter_t lim = {0};
    uint64_t sup = 99;
    ck_assert_int_eq(log_limiter_allow(&lim, 1000, 500, &sup), 1);
    ck_assert_uint_eq(sup, 0);
}
END_TEST

START_TEST(test_limiter_suppresses_and_counts) {
    log_limiter_t lim = {0};
    uint64_t sup = 0;
    ck_assert_int_eq(log_limiter_allow(&lim, 1000, 500, &sup), 1);
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(log_limiter_allow(&lim, 1000 + i * 10, 500, &sup), 0);
    }
    ck_assert_int_eq(log_limiter_allow(&lim, 1499, 500, &sup), 0);
    ck_assert_int_eq(log_limiter_allow(&lim, 1500, 500, &sup), 1);
    ck_assert_uint_eq(sup, 11);
    // The counter restarts after a line is written.
    ck_assert_int_eq(log_limiter_allow(&lim, 1600, 500, &sup), 0);
    ck_assert_int_eq(log_limiter_allow(&lim, 2000, 500, &sup), 1);
    ck_assert_uint_eq(sup, 1);
}
END_TEST

START_TEST(test_parse_level) {
    log_level l;
    ck_assert_int_eq(log_parse_level("debug", &l), 0);
    ck_assert_int_eq(l, LOG_DEBUG);
    ck_assert_int_eq(log_parse_level("warn", &l), 0);
    ck_assert_int_eq(l, LOG_WARN);
    ck_assert_int_eq(log_parse_level("loud", &l), -1);
}
END_TEST

START_TEST(test_line_format_and_filter) {
    char path[] = "/tmp/apex_log_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(log_open_file(path), 0);
    log_set_role("apex-test");
    log_set_level(LOG_INFO);
    log_debug("hidden %d", 1);
    log_warn("visible %d", 2);
    log_limiter_t lim = {0};
    for (int i = 0; i < 5; i++) {
        log_every(&lim, 60000, LOG_WARN, "repeated %d", i);
    }
    log_close_file();
    FILE *f = fopen(path, "r");
    char line[512];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    // 2026-05-01T12:00:00.123Z apex-test[pid] W apex: visible 2
    ck_assert_int_eq(line[4], '-');
    ck_assert_int_eq(line[10], 'T');
    ck_assert_int_eq(line[23], 'Z');
    char expect[64];
    snprintf(expect, sizeof expect, " apex-test[%d] W apex: visible 2\n", (int)getpid());
    ck_assert_str_eq(line + 24, expect);
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    ck_assert_ptr_nonnull(strstr(line, "repeated 0"));
    ck_assert_ptr_null(fgets(line, sizeof line, f)); // the other four were suppressed
    fclose(f);
    unlink(path);
}
END_TEST

START_TEST(test_assert_aborts) {
    int x = 1;
    APEX_ASSERT(x == 2);
}
END_TEST

START_TEST(test_strerror) {
    ck_assert_str_eq(apex_strerror(APEX_OK), "ok");
    ck_assert_str_eq(apex_strerror(APEX_EVERSION), "protocol version mismatch");
    ck_assert_str_eq(apex_strerror(1234), "unknown error");
}
END_TEST

static int s_verrf_caller(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = apex_verrf(err, errlen, APEX_EPROTO, fmt, ap);
    va_end(ap);
    return rc;
}

// apex_errf returns the code it is given and leaves the formatted message, truncated to the
// buffer and terminated; a zero-length buffer is not written (and may be NULL).
START_TEST(test_errf) {
    char err[16];
    memset(err, 'x', sizeof err);
    ck_assert_int_eq(apex_errf(err, sizeof err, -1, "%s:%d: %s", "a.ini", 7, "bad"), -1);
    ck_assert_str_eq(err, "a.ini:7: bad");
    ck_assert_int_eq(apex_errf(err, sizeof err, APEX_EINVAL, "%d", 1234567), APEX_EINVAL);
    ck_assert_str_eq(err, "1234567");
    memset(err, 'x', sizeof err);
    ck_assert_int_eq(apex_errf(err, 6, 0, "%s", "much too long"), 0);
    ck_assert_str_eq(err, "much ");
    ck_assert_int_eq(err[6], 'x'); // nothing past the 6 bytes given
    ck_assert_int_eq(apex_errf(NULL, 0, 3, "%s", "nowhere"), 3);
    ck_assert_int_eq(s_verrf_caller(err, sizeof err, "v%c%d", 'x', 2), APEX_EPROTO);
    ck_assert_str_eq(err, "vx2");
}
END_TEST

Suite *log_suite(void) {
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_limiter_first_call_allowed);
    tcase_add_test(tc, test_limiter_suppresses_and_counts);
    tcase_add_test(tc, test_parse_level);
    tcase_add_test(tc, test_line_format_and_filter);
    tcase_add_test(tc, test_strerror);
    tcase_add_test(tc, test_errf);
    tcase_add_test_raise_signal(tc, test_assert_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
