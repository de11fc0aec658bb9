// check_envinfo.c: the one table of env ids (envs/envinfo.h) and the implementation registry
// built from it (envs/env.c): every row has its spec and that spec is the row's, every id
// is found and nothing else is, the list of ids is the table's, the MinAtar rows' shapes
// are their games' (or the rendered 84 x 84 frame's), and the MuJoCo rows' dimensions and
// bounds are Gymnasium's v4 tasks'.
#include "check_apex.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "envinfo.h"
#include "minatar.h"

// Every row's id finds that row and its spec, and the spec's info is that row: the registry
// is keyed by the table, not a second list.
START_TEST(test_every_row_has_its_spec) {
    for (int i = 0; i < ENVINFO_COUNT; i++) {
        const envinfo_t *e = &envinfo_table[i];
        ck_assert_ptr_eq(envinfo_find(e->id), e);
        const env_spec_t *spec = env_find(e->id);
        ck_assert_msg(spec != NULL, "row %d (%s) has no spec", i, e->id);
        ck_assert_msg(spec->info == e, "row %d (%s): its spec's info is %s", i, e->id,
                      spec->info ? spec->info->id : "NULL");
        ck_assert(spec->reset != NULL && spec->observe != NULL);
        // A discrete env steps with step, a continuous one with step_cont, never both.
        ck_assert_msg((spec->step != NULL) == (e->n_actions > 0) &&
                          (spec->step_cont != NULL) == (e->action_dim > 0),
                      "%s: step for discrete actions, step_cont for continuous ones", e->id);
        ck_assert_msg(e->action_dim == 0 || (isfinite(e->action_low) && isfinite(e->action_high) &&
                                             e->action_low < e->action_high),
                      "%s: a continuous row's bounds are finite with low < high", e->id);
        ck_assert_uint_gt(spec->state_bytes, 0);
        ck_assert_uint_eq(env_obs_bytes(spec),
                          (size_t)e->obs_dim * (e->obs_dtype == ENVINFO_OBS_U8 ? 1 : 4));
        for (int j = 0; j < i; j++) { // distinct ids, distinct specs
            ck_assert_str_ne(envinfo_table[j].id, e->id);
            ck_assert_ptr_ne(env_find(envinfo_table[j].id), spec);
        }
    }
}
END_TEST

// The specs the code names directly are their rows' (the other direction: no spec outside
// the table is reachable as a built-in).
START_TEST(test_named_specs_are_rows) {
    const env_spec_t *named[] = {&env_cartpole_spec,
                                 &env_acrobot_spec,
                                 &env_mountaincar_spec,
                                 &env_pendulum_spec,
                                 &env_mountaincar_continuous_spec,
                                 &env_minatar_asterix_spec,
                                 &env_minatar_breakout_spec,
                                 &env_minatar_freeway_spec,
                                 &env_minatar_seaquest_spec,
                                 &env_minatar_space_invaders_spec,
                                 &env_minatar_asterix_render84_spec,
                                 &env_minatar_breakout_render84_spec,
                                 &env_minatar_freeway_render84_spec,
                                 &env_minatar_seaquest_render84_spec,
                                 &env_minatar_space_invaders_render84_spec,
                                 &env_mujoco_half_cheetah_spec,
                                 &env_mujoco_hopper_spec,
                                 &env_mujoco_walker2d_spec,
                                 &env_mujoco_ant_spec,
                                 &env_mujoco_inv_pendulum_spec,
                                 &env_mujoco_inv_double_pendulum_spec};
    ck_assert_int_eq(sizeof named / sizeof named[0], ENVINFO_COUNT);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) {
        ck_assert_ptr_eq(env_find(named[i]->info->id), named[i]);
    }
}
END_TEST

START_TEST(test_unknown_ids) {
    const char *bad[] = {"Pong-v5",
                         "cartpole-v1",
                         "CartPole",
                         "CartPole-v1 ",
                         "",
                         "python",
                         "external",
                         "MinAtar/Breakout",
                         "MinAtar/Breakout-render84",
                         "MinAtar/Breakout-Render84-v0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_ptr_null(envinfo_find(bad[i]));
        ck_assert_ptr_null(env_find(bad[i]));
    }
    ck_assert_ptr_null(envinfo_find(NULL));
    ck_assert_ptr_null(env_find(NULL));
}
END_TEST

// The list for messages is every row's id, in table order, comma-separated, nothing else.
START_TEST(test_known_ids) {
    char want[1024] = "";
    for (int i = 0; i < ENVINFO_COUNT; i++) {
        if (i) {
            strcat(want, ", ");
        }
        strcat(want, envinfo_table[i].id);
    }
    ck_assert_str_eq(envinfo_known_ids(), want);
    ck_assert_str_eq(
        envinfo_known_ids(),
        "CartPole-v1, Acrobot-v1, MountainCar-v0, Pendulum-v1, MountainCarContinuous-v0, "
        "MinAtar/Asterix-v0, MinAtar/Breakout-v0, MinAtar/Freeway-v0, MinAtar/Seaquest-v0, "
        "MinAtar/SpaceInvaders-v0, MinAtar/Asterix-render84-v0, MinAtar/Breakout-render84-v0, "
        "MinAtar/Freeway-render84-v0, MinAtar/Seaquest-render84-v0, "
        "MinAtar/SpaceInvaders-render84-v0, HalfCheetah-v4, Hopper-v4, Walker2d-v4, Ant-v4, "
        "InvertedPendulum-v4, InvertedDoublePendulum-v4");
}
END_TEST

// Values the daemons validate with, as Gymnasium and MinAtar define them (an independent
// restatement: a typo in the table fails here).
START_TEST(test_known_values) {
    const envinfo_t *cp = envinfo_find("CartPole-v1"), *ab = envinfo_find("Acrobot-v1");
    const envinfo_t *mc = envinfo_find("MountainCar-v0");
    ck_assert(cp->obs_dim == 4 && cp->n_actions == 2 && cp->max_episode_steps == 500);
    ck_assert(ab->obs_dim == 6 && ab->n_actions == 3 && ab->max_episode_steps == 500);
    ck_assert(mc->obs_dim == 2 && mc->n_actions == 3 && mc->max_episode_steps == 200);
    // Continuous: Box(-2, 2, (1,)) and Box(-1, 1, (1,)) actions.
    const envinfo_t *pd = envinfo_find("Pendulum-v1");
    const envinfo_t *mcc = envinfo_find("MountainCarContinuous-v0");
    ck_assert(pd->obs_dim == 3 && pd->n_actions == 0 && pd->action_dim == 1 &&
              pd->action_low == -2.0f && pd->action_high == 2.0f && pd->max_episode_steps == 200);
    ck_assert(mcc->obs_dim == 2 && mcc->n_actions == 0 && mcc->action_dim == 1 &&
              mcc->action_low == -1.0f && mcc->action_high == 1.0f &&
              mcc->max_episode_steps == 999);
    const envinfo_t *classic[] = {cp, ab, mc, pd, mcc};
    for (size_t i = 0; i < sizeof classic / sizeof classic[0]; i++) {
        const envinfo_t *e = classic[i];
        ck_assert(e->obs_dtype == ENVINFO_OBS_F32 && e->obs_h == 0 && e->obs_w == 0 &&
                  e->obs_c == 0 && e->obs_scale == 1.0f);
        ck_assert(i < 3 ? e->action_dim == 0 : e->action_dim > 0);
    }
}
END_TEST

// The MuJoCo v4 rows: observation lengths of the default options (Gymnasium's observation
// spaces), nu and the actuators' ctrlrange of Gymnasium's assets, TimeLimit 1000; only they
// are envinfo_is_mujoco.
START_TEST(test_mujoco_values) {
    static const struct {
        const char *id;
        int obs_dim, action_dim;
        float low, high;
    } want[] = {{"HalfCheetah-v4", 17, 6, -1.0f, 1.0f},
                {"Hopper-v4", 11, 3, -1.0f, 1.0f},
                {"Walker2d-v4", 17, 6, -1.0f, 1.0f},
                {"Ant-v4", 27, 8, -1.0f, 1.0f},
                {"InvertedPendulum-v4", 4, 1, -3.0f, 3.0f},
                {"InvertedDoublePendulum-v4", 11, 1, -1.0f, 1.0f}};
    int n_mujoco = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const envinfo_t *e = envinfo_find(want[i].id);
        ck_assert_msg(e != NULL, "%s", want[i].id);
        ck_assert_int_eq(e->obs_dim, want[i].obs_dim);
        ck_assert_int_eq(e->action_dim, want[i].action_dim);
        ck_assert_int_eq(e->n_actions, 0);
        ck_assert(e->action_low == want[i].low && e->action_high == want[i].high);
        ck_assert_int_eq(e->max_episode_steps, 1000);
        ck_assert(e->obs_dtype == ENVINFO_OBS_F32 && e->obs_h == 0 && e->obs_scale == 1.0f);
        ck_assert_int_eq(envinfo_is_mujoco(e), 1);
    }
    for (int i = 0; i < ENVINFO_COUNT; i++) {
        n_mujoco += envinfo_is_mujoco(&envinfo_table[i]);
    }
    ck_assert_int_eq(n_mujoco, 6);
    ck_assert_int_eq(envinfo_is_mujoco(envinfo_find("CartPole-v1")), 0);
    ck_assert_int_eq(envinfo_is_mujoco(NULL), 0);
}
END_TEST

// A MinAtar row's shape and actions are its game's: 10 x 10 x channels bytes at scale 1, or
// for MinAtar/<Game>-render84-v0 one 84 x 84 byte frame at 1/255 (minatar_render.h), the
// game of MinAtar/<Game>-v0 in the same state type.
START_TEST(test_minatar_rows_are_their_games) {
    int games = 0, rendered = 0;
    for (int i = 0; i < ENVINFO_COUNT; i++) {
        const env_spec_t *spec = env_find(envinfo_table[i].id);
        const minatar_game_t *game = env_minatar_game(spec);
        const envinfo_t *e = spec->info;
        if (!game) {
            ck_assert_msg(strncmp(e->id, "MinAtar/", 8) != 0, "%s has no game", e->id);
            continue;
        }
        games++;
        ck_assert_int_eq(e->obs_dtype, ENVINFO_OBS_U8);
        const char *r84 = strstr(e->id, "-render84-v0");
        if (r84) {
            rendered++;
            ck_assert_str_eq(r84, "-render84-v0");
            ck_assert(e->obs_h == 84 && e->obs_w == 84 && e->obs_c == 1 && e->obs_dim == 7056);
            ck_assert(e->obs_scale == 1.0f / 255.0f);
            char plain[64];
            snprintf(plain, sizeof plain, "%.*s-v0", (int)(r84 - e->id), e->id);
            ck_assert_ptr_eq(env_minatar_game(env_find(plain)), game);
        } else {
            ck_assert_int_eq(e->obs_h, MINATAR_SIZE);
            ck_assert_int_eq(e->obs_w, MINATAR_SIZE);
            ck_assert_int_eq(e->obs_c, game->channels);
            ck_assert_int_eq(e->obs_dim, MINATAR_SIZE * MINATAR_SIZE * game->channels);
            ck_assert(e->obs_scale == 1.0f);
        }
        ck_assert_int_eq(e->n_actions, MINATAR_N_ACTIONS);
        ck_assert_int_eq(e->max_episode_steps, 0);
        ck_assert_uint_eq(spec->state_bytes, sizeof(minatar_t));
    }
    ck_assert_int_eq(games, 10);
    ck_assert_int_eq(rendered, 5);
}
END_TEST

Suite *envinfo_suite(void) {
    Suite *s = suite_create("envinfo");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_every_row_has_its_spec);
    tcase_add_test(tc, test_named_specs_are_rows);
    tcase_add_test(tc, test_unknown_ids);
    tcase_add_test(tc, test_known_ids);
    tcase_add_test(tc, test_known_values);
    tcase_add_test(tc, test_mujoco_values);
    tcase_add_test(tc, test_minatar_rows_are_their_games);
    suite_add_tcase(s, tc);
    return s;
}
