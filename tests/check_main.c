// check_main.c: one SRunner over every suite in tests/check_*.c (STYLE S21).
//
// The suite list comes from build/gen/suites.h, which the Makefile generates from the
// "Suite *name_suite(void)" definitions, so a new test file is picked up automatically.
// Exits non-zero when any test fails. CK_RUN_SUITE=name / CK_RUN_CASE=name select tests.
#include <stdlib.h>

#include "check_apex.h"

int main(void) {
    SRunner *sr = srunner_create(NULL);
#define ADD_SUITE(name) srunner_add_suite(sr, name());
    APEX_SUITES(ADD_SUITE)
#undef ADD_SUITE
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
