// check_framestack.c: actor/framestack.h against stacks written out by hand: the first frame
// K times at a reset, the oldest frame dropped at each push, the final stack of an ended
// episode without touching the env's own, envs independent, K = 1 a plain copy. (The actor
// and the evaluator with [env] frame_stack: check_dpg_actor.c's test_frame_stack_rows.)
#include "check_apex.h"

#include "framestack.h"

#include <string.h>

START_TEST(test_stacks_by_hand) {
    framestack_t fs;
    framestack_init(&fs, 2, 3, 2);
    ck_assert_uint_eq(fs.stack_bytes, 6);
    const uint8_t f1[2] = {1, 11}, f2[2] = {2, 12}, f3[2] = {3, 13}, f4[2] = {4, 14},
                  f5[2] = {5, 15}, g1[2] = {91, 92};
    framestack_reset(&fs, 0, f1);
    framestack_reset(&fs, 1, g1);
    const uint8_t s1[6] = {1, 11, 1, 11, 1, 11};
    ck_assert(memcmp(framestack_obs(&fs, 0), s1, 6) == 0);
    framestack_push(&fs, 0, f2);
    const uint8_t s2[6] = {1, 11, 1, 11, 2, 12};
    ck_assert(memcmp(framestack_obs(&fs, 0), s2, 6) == 0);
    framestack_push(&fs, 0, f3);
    framestack_push(&fs, 0, f4);
    const uint8_t s4[6] = {2, 12, 3, 13, 4, 14};
    ck_assert(memcmp(framestack_obs(&fs, 0), s4, 6) == 0);
    uint8_t fin[6];
    framestack_final(&fs, 0, f5, fin);
    const uint8_t s5[6] = {3, 13, 4, 14, 5, 15};
    ck_assert(memcmp(fin, s5, 6) == 0);
    ck_assert(memcmp(framestack_obs(&fs, 0), s4, 6) == 0); // unchanged
    const uint8_t t1[6] = {91, 92, 91, 92, 91, 92};
    ck_assert(memcmp(framestack_obs(&fs, 1), t1, 6) == 0); // env 1 untouched by env 0
    framestack_reset(&fs, 0, f5);
    const uint8_t r5[6] = {5, 15, 5, 15, 5, 15};
    ck_assert(memcmp(framestack_obs(&fs, 0), r5, 6) == 0);
    framestack_fini(&fs);
    framestack_init(&fs, 1, 1, 2);
    framestack_reset(&fs, 0, f1);
    framestack_push(&fs, 0, f2);
    ck_assert(memcmp(framestack_obs(&fs, 0), f2, 2) == 0);
    framestack_final(&fs, 0, f3, fin);
    ck_assert(memcmp(fin, f3, 2) == 0);
    framestack_fini(&fs);
}
END_TEST

Suite *framestack_suite(void) {
    Suite *s = suite_create("framestack");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_stacks_by_hand);
    suite_add_tcase(s, tc);
    return s;
}
