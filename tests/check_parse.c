// check_parse.c: decimal integers from text (common/parse.h): what is an integer, the
// whole-string and prefix forms, range bounds, overflow, and errno left alone.
#include "check_apex.h"

#include <errno.h>
#include <stdint.h>

#include "parse.h"

START_TEST(test_whole) {
    int64_t x = 7;
    ck_assert_int_eq(parse_int64("42", 0, 100, &x), 0);
    ck_assert_int_eq(x, 42);
    ck_assert_int_eq(parse_int64("-5", -10, 10, &x), 0);
    ck_assert_int_eq(x, -5);
    ck_assert_int_eq(parse_int64("+5", -10, 10, &x), 0);
    ck_assert_int_eq(x, 5);
    ck_assert_int_eq(parse_int64("  9", 0, 10, &x), 0); // leading blanks, as strtoll
    ck_assert_int_eq(x, 9);
    ck_assert_int_eq(parse_int64("007", 0, 10, &x), 0); // decimal, not octal
    ck_assert_int_eq(x, 7);
    // Not an integer: nothing, a sign alone, trailing characters (a blank too), a float, hex.
    const char *bad[] = {"", " ", "-", "5 ", "5x", "1.5", "1e3", "0x10", "x5", "5,6"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        x = 7;
        ck_assert_msg(parse_int64(bad[i], INT64_MIN, INT64_MAX, &x) == -1, "'%s'", bad[i]);
        ck_assert_int_eq(x, 7); // untouched on failure
    }
}
END_TEST

// [min, max] is inclusive at both ends; int64's own bounds parse, one past them does not.
START_TEST(test_range_and_overflow) {
    int64_t x = 0;
    ck_assert_int_eq(parse_int64("1", 1, 65535, &x), 0);
    ck_assert_int_eq(parse_int64("65535", 1, 65535, &x), 0);
    ck_assert_int_eq(x, 65535);
    x = 3;
    ck_assert_int_eq(parse_int64("0", 1, 65535, &x), -1);
    ck_assert_int_eq(parse_int64("65536", 1, 65535, &x), -1);
    ck_assert_int_eq(x, 3);
    ck_assert_int_eq(parse_int64("9223372036854775807", INT64_MIN, INT64_MAX, &x), 0);
    ck_assert(x == INT64_MAX);
    ck_assert_int_eq(parse_int64("-9223372036854775808", INT64_MIN, INT64_MAX, &x), 0);
    ck_assert(x == INT64_MIN);
    ck_assert_int_eq(parse_int64("9223372036854775808", INT64_MIN, INT64_MAX, &x), -1);
    ck_assert_int_eq(parse_int64("-9223372036854775809", INT64_MIN, INT64_MAX, &x), -1);
    ck_assert_int_eq(parse_int64("99999999999999999999999", 0, 10, &x), -1);
}
END_TEST

// The prefix form stops after the digits and says where; a list is read with it.
START_TEST(test_prefix) {
    int64_t x = 0;
    const char *end = NULL;
    const char *s = "256, 128,x";
    ck_assert_int_eq(parse_int64_prefix(s, &x, &end), 0);
    ck_assert_int_eq(x, 256);
    ck_assert_ptr_eq(end, s + 3);
    ck_assert_int_eq(parse_int64_prefix(end + 1, &x, &end), 0); // " 128": blanks skipped
    ck_assert_int_eq(x, 128);
    ck_assert_ptr_eq(end, s + 8);
    const char *before = end;
    x = 5;
    ck_assert_int_eq(parse_int64_prefix(end + 1, &x, &end), -1); // "x"
    ck_assert_int_eq(x, 5);
    ck_assert_ptr_eq(end, before);
    ck_assert_int_eq(parse_int64_prefix("123\n", &x, &end), 0); // a line of a file
    ck_assert_int_eq(x, 123);
    ck_assert_int_eq(*end, '\n');
    ck_assert_int_eq(parse_int64_prefix("18446744073709551616 ", &x, &end), -1);
}
END_TEST

// A caller's errno survives both success and failure (overflow sets ERANGE inside).
START_TEST(test_errno_kept) {
    int64_t x;
    const char *end;
    errno = EBADF;
    ck_assert_int_eq(parse_int64("99999999999999999999", 0, 10, &x), -1);
    ck_assert_int_eq(errno, EBADF);
    errno = 0;
    ck_assert_int_eq(parse_int64_prefix("12", &x, &end), 0);
    ck_assert_int_eq(errno, 0);
}
END_TEST

Suite *parse_suite(void) {
    Suite *s = suite_create("parse");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_whole);
    tcase_add_test(tc, test_range_and_overflow);
    tcase_add_test(tc, test_prefix);
    tcase_add_test(tc, test_errno_kept);
    suite_add_tcase(s, tc);
    return s;
}
