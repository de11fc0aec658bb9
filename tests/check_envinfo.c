// check_envinfo.c: the dimensions every daemon validates messages with (common/envinfo.c)
// agree with the environments the actors actually step (actor/env.c).
#include "check_apex.h"

#include <string.h>

#include "env.h"
#include "envinfo.h"

START_TEST(test_tables_agree) {
    const char *ids[] = {"CartPole-v1",         "Acrobot-v1",
                         "MountainCar-v0",      "MinAtar/Asterix-v0",
                         "MinAtar/Breakout-v0", "MinAtar/Freeway-v0",
                         "MinAtar/Seaquest-v0", "MinAtar/SpaceInvaders-v0"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        const envinfo_t *info = envinfo_find(ids[i]);
        const env_spec_t *spec = env_find(ids[i]);
        ck_assert_ptr_nonnull(info);
        ck_assert_ptr_nonnull(spec);
        ck_assert_int_eq(info->obs_dim, spec->obs_dim);
        ck_assert_int_eq(info->n_actions, spec->n_actions);
        ck_assert_int_eq(info->max_episode_steps, spec->max_episode_steps);
        ck_assert_int_eq(info->obs_dtype, spec->obs_dtype);
        ck_assert_int_eq(info->obs_h, spec->obs_h);
        ck_assert_int_eq(info->obs_w, spec->obs_w);
        ck_assert_int_eq(info->obs_c, spec->obs_c);
        ck_assert_float_eq(info->obs_scale, spec->obs_scale);
    }
    ck_assert_str_eq(envinfo_known_ids(), env_known_ids());
    ck_assert_ptr_null(envinfo_find("Pong-v5"));
}
END_TEST

Suite *envinfo_suite(void) {
    Suite *s = suite_create("envinfo");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_tables_agree);
    suite_add_tcase(s, tc);
    return s;
}
