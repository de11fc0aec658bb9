// fuzz.h: shared by the libFuzzer harnesses (fuzz/fuzz_*.c) and by the Check suite that
// replays their corpus and regressions under gcc (tests/check_fuzz_regressions.c).
//
// Each harness is one function `int fuzz_<target>_one(const uint8_t *data, size_t size)`
// that must return 0 for every input; a broken invariant calls FUZZ_CHECK, which prints
// what failed (and, in the replay suite, which file) and aborts. libFuzzer reports the
// abort as a crash with its reproducer; Check reports it as a failed test.
// Unless FUZZ_NO_ENTRY is defined, each harness file also defines LLVMFuzzerTestOneInput,
// so the replay suite includes the harness .c files with FUZZ_NO_ENTRY set.
#ifndef APEX_FUZZ_H
#define APEX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int fuzz_wire_one(const uint8_t *data, size_t size);
int fuzz_config_one(const uint8_t *data, size_t size);
int fuzz_pywire_one(const uint8_t *data, size_t size);
int fuzz_replay_one(const uint8_t *data, size_t size);
int fuzz_learner_one(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Name of the input being replayed, set by the replay suite so that a failure names its
// file; NULL under libFuzzer, which prints the reproducer path itself. Test-only state.
static const char *fuzz_input_name;

static inline _Noreturn void fuzz_fail(const char *file, int line, const char *what) {
    fprintf(stderr, "%s:%d: fuzz invariant failed: %s%s%s\n", file, line, what,
            fuzz_input_name ? " (input " : "", fuzz_input_name ? fuzz_input_name : "");
    if (fuzz_input_name) {
        fprintf(stderr, ")\n");
    }
    abort();
}

// Not APEX_ASSERT: an invariant of the code under test, checked from outside it, whose
// failure must be reported as a finding of the fuzzer rather than a bug in the harness.
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fuzz_fail(__FILE__, __LINE__, #cond);                                                  \
        }                                                                                          \
    } while (0)

#endif
