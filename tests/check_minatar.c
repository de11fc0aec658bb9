// check_minatar.c: the MinAtar port against trajectories recorded from the reference
// (tests/fixtures/gen_minatar.py runs kenjyoung/MinAtar 4241f24 and writes
// tests/fixtures/minatar_<game>.bin; the format is described in the generator's header).
//
// Every recorded step is replayed: the action goes through minatar_act (sticky draw
// included), then the applied action, reward, terminal flag and the observation's hash are
// compared, and the whole observation where a frame was stored. The first mismatch fails
// the test with game, run, seed and step, and prints a cell-by-cell diff of the frame when
// the fixture has one at that step (otherwise the C frame and the last reference frame).
// Fixtures are read at run time from $APEX_SRC_DIR/tests/fixtures (default: the current
// directory, the repo root under `make unit`).
#include "check_apex.h"

#include "apex.h"
#include "env.h"
#include "minatar.h"
#include "rng.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------
// Fixture reader

typedef struct {
    const uint8_t *p, *end;
    int bad; // read past the end
} s_cursor_t;

static const uint8_t *s_take(s_cursor_t *c, size_t n) {
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *at = c->p;
    c->p += n;
    return at;
}

static uint64_t s_le(s_cursor_t *c, int n) {
    const uint8_t *b = s_take(c, (size_t)n);
    uint64_t v = 0;
    for (int i = 0; b && i < n; i++) {
        v |= (uint64_t)b[i] << (8 * i);
    }
    return v;
}

static double s_f64(s_cursor_t *c) {
    uint64_t bits = s_le(c, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static uint8_t *s_slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            ck_assert_ptr_nonnull(buf);
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

// ---------------------------------------------------------------------------------------
// Mismatch reports

static const char *const s_channel_names[][MINATAR_MAX_CHANNELS] = {
    {"player", "enemy", "trail", "gold"},
    {"paddle", "ball", "trail", "brick"},
    {"chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5"},
    {"sub_front", "sub_back", "friendly_bullet", "trail", "enemy_bullet", "enemy_fish", "enemy_sub",
     "oxygen_guage", "diver_guage", "diver"},
    {"cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet"},
};

static void s_unpack(uint8_t *obs, const uint8_t *packed, size_t n) {
    for (size_t i = 0; i < n; i++) {
        obs[i] = (uint8_t)(packed[i / 8] >> (i % 8) & 1u);
    }
}

// One line per row; a cell shows the set channels as hex digits, '.' when empty.
static void s_print_frame(const char *title, const uint8_t *obs, int channels) {
    fprintf(stderr, "  %s:\n", title);
    for (int y = 0; y < MINATAR_SIZE; y++) {
        fprintf(stderr, "    ");
        for (int x = 0; x < MINATAR_SIZE; x++) {
            char cell[MINATAR_MAX_CHANNELS + 1];
            int k = 0;
            for (int c = 0; c < channels; c++) {
                if (obs[(y * MINATAR_SIZE + x) * channels + c]) {
                    cell[k++] = "0123456789"[c];
                }
            }
            cell[k] = '\0';
            fprintf(stderr, "%-*s ", channels > 6 ? 4 : 3, k ? cell : ".");
        }
        fprintf(stderr, "\n");
    }
}

static void s_print_diff(const uint8_t *got, const uint8_t *want, int channels, int game_index) {
    int shown = 0;
    for (int i = 0; i < MINATAR_SIZE * MINATAR_SIZE * channels; i++) {
        if (got[i] != want[i] && shown++ < 24) {
            int c = i % channels, x = i / channels % MINATAR_SIZE, y = i / channels / MINATAR_SIZE;
            fprintf(stderr, "    y=%d x=%d c=%d (%s): C %d, reference %d\n", y, x, c,
                    s_channel_names[game_index][c], got[i], want[i]);
        }
    }
    s_print_frame("C frame", got, channels);
    s_print_frame("reference frame", want, channels);
}

// ---------------------------------------------------------------------------------------
// Replay

typedef struct {
    int runs, records, acts, frames, rewards, terminals, resets;
} s_replay_stats_t;

// Replays one game's fixture; fails at the first mismatch.
static s_replay_stats_t s_replay_fixture(int game_index) {
    const minatar_game_t *game = minatar_game_at(game_index);
    const char *root = getenv("APEX_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/minatar_%s.bin", root && *root ? root : ".",
             game->name);
    size_t len = 0;
    uint8_t *data = s_slurp(path, &len);
    ck_assert_msg(data != NULL, "cannot read %s (run from the repo root or set APEX_SRC_DIR)",
                  path);
    s_cursor_t c = {data, data + len, 0};

    const uint8_t *magic = s_take(&c, 4);
    ck_assert_msg(magic && memcmp(magic, "MNTR", 4) == 0, "%s: bad magic", path);
    ck_assert_int_eq((int)s_le(&c, 1), 1);
    int name_len = (int)s_le(&c, 1);
    const uint8_t *name = s_take(&c, (size_t)name_len);
    ck_assert_msg(name && (size_t)name_len == strlen(game->name) &&
                      memcmp(name, game->name, (size_t)name_len) == 0,
                  "%s: not a %s fixture", path, game->name);
    int channels = (int)s_le(&c, 1);
    ck_assert_int_eq(channels, game->channels);
    (void)s_le(&c, 2); // frame_every: informative
    int n_runs = (int)s_le(&c, 2);

    s_replay_stats_t st = {0};
    size_t n_obs = (size_t)MINATAR_SIZE * MINATAR_SIZE * (size_t)channels;
    uint8_t obs[MINATAR_MAX_OBS], want[MINATAR_MAX_OBS], last_ref[MINATAR_MAX_OBS];
    minatar_t m;
    for (int run = 0; run < n_runs; run++) {
        uint32_t seed = (uint32_t)s_le(&c, 4);
        uint32_t action_seed = (uint32_t)s_le(&c, 4);
        double sticky = s_f64(&c);
        int ramping = (int)s_le(&c, 1);
        uint32_t n_records = (uint32_t)s_le(&c, 4);
        ck_assert_msg(!c.bad, "%s: truncated in run %d", path, run);
        minatar_init(&m, game, sticky, ramping);
        minatar_seed(&m, seed);
        int64_t step = 0; // acts since the last reset
        int last_ref_step = -1;
        for (uint32_t k = 0; k < n_records; k++) {
            uint8_t a = (uint8_t)s_le(&c, 1);
            uint32_t hash = (uint32_t)s_le(&c, 4);
            int extra = a & 0x80 ? (int)s_le(&c, 1) : 0;
            int reward = extra & 2 ? (int8_t)s_le(&c, 1) : 0;
            const uint8_t *frame = extra & 1 ? s_take(&c, (n_obs + 7) / 8) : NULL;
            ck_assert_msg(!c.bad, "%s: truncated in run %d record %u", path, run, k);
            int action = a & 7, applied = a >> 3 & 7, terminal = a >> 6 & 1;

            char where[160];
            int got_applied = 7, got_terminal = 0;
            float got_reward = 0.0f;
            if (action == 7) {
                minatar_reset(&m);
                step = 0;
                st.resets++;
                snprintf(where, sizeof where, "%s run %d (seed %u, sticky %g, ramping %d): reset",
                         game->name, run, seed, sticky, ramping);
            } else {
                minatar_act(&m, action, &got_reward, &got_terminal);
                got_applied = m.last_action;
                step++;
                st.acts++;
                snprintf(where, sizeof where,
                         "%s run %d (seed %u, sticky %g, ramping %d, action seed %u): act %lld "
                         "(action %d)",
                         game->name, run, seed, sticky, ramping, action_seed, (long long)step,
                         action);
            }
            minatar_observe(&m, obs);
            int ok_hash = (uint32_t)minatar_fnv1a64(obs, n_obs) == hash;
            int ok_frame = 1;
            if (frame) {
                s_unpack(want, frame, n_obs);
                ok_frame = memcmp(obs, want, n_obs) == 0;
            }
            if (!ok_hash || !ok_frame || got_applied != applied || got_reward != (float)reward ||
                got_terminal != terminal) {
                fprintf(stderr, "minatar mismatch: %s\n", where);
                fprintf(stderr,
                        "  applied action C %d ref %d, reward C %g ref %d, terminal C %d "
                        "ref %d, obs hash %s, frame %s\n",
                        got_applied, applied, (double)got_reward, reward, got_terminal, terminal,
                        ok_hash ? "equal" : "differs",
                        frame ? (ok_frame ? "equal" : "differs") : "not stored");
                if (frame) {
                    s_print_diff(obs, want, channels, game_index);
                } else {
                    s_print_frame("C frame", obs, channels);
                    if (last_ref_step >= 0) {
                        fprintf(stderr, "  (last reference frame: act %d)\n", last_ref_step);
                        s_print_frame("reference frame then", last_ref, channels);
                    }
                }
                ck_abort_msg("%s: C differs from the reference (details on stderr)", where);
            }
            if (frame) {
                memcpy(last_ref, want, n_obs);
                last_ref_step = (int)step;
                st.frames++;
            }
            st.rewards += reward != 0;
            st.terminals += terminal && action != 7;
            st.records++;
        }
        st.runs++;
    }
    ck_assert_msg(c.p == c.end, "%s: %zu bytes after the last run", path, (size_t)(c.end - c.p));
    free(data);
    fprintf(stderr, "minatar %s: %d runs, %d acts, %d resets, %d frames, %d rewarded steps ok\n",
            game->name, st.runs, st.acts, st.resets, st.frames, st.rewards);
    return st;
}

START_TEST(test_reference_fixture) {
    s_replay_stats_t st = s_replay_fixture(_i);
    // The generator's plan (gen_minatar.py runs_for): 22 runs, 24 episodes.
    ck_assert_int_ge(st.runs, 22);
    ck_assert_int_ge(st.resets, 24);
    ck_assert_int_gt(st.rewards, 0);
    ck_assert_int_gt(st.terminals, 0);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The fast path against the plain one

START_TEST(test_vecenv_matches_plain_steps) {
    // The actor's path (vecenv over the spec's step_batch, auto-reset, final observations
    // set apart) must equal minatar_act + minatar_observe env by env, the path the fixtures
    // above check against the reference: the same rewards, terminal flags, observations the
    // steps produced, and observations to act on after resets. Several thousand steps per
    // game, so every game ends many episodes (Freeway's 2 500-step limit included) and the
    // envs' states drift apart from their common start. Both sides run the same game code
    // (minatar_act_inline, game->observe): this checks the plumbing (frames written in place
    // into dirty buffers, Asterix's skipped memset, final_obs, resets); exactness to the
    // reference is test_reference_fixture's.
    static const env_spec_t *const specs[] = {&env_minatar_asterix_spec, &env_minatar_breakout_spec,
                                              &env_minatar_freeway_spec, &env_minatar_seaquest_spec,
                                              &env_minatar_space_invaders_spec};
    enum { NV = 7, T = 6000 };
    const env_spec_t *spec = specs[_i];
    vecenv_t v;
    vecenv_init(&v, spec, NV, 21, 3, NV);
    static minatar_t plain[NV];
    memcpy(plain, v.state, sizeof plain); // seeded and reset as vecenv did it
    const size_t O = v.obs_bytes;
    int32_t act[NV];
    float rew[NV];
    uint8_t term[NV], trunc[NV], obs[MINATAR_MAX_OBS];
    rng_t r;
    rng_init_stream(&r, 5, RNG_ROLE_TEST, (uint64_t)_i);
    int ends = 0;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < NV; i++) {
            act[i] = (int32_t)rng_below(&r, MINATAR_N_ACTIONS);
        }
        vecenv_step(&v, act, rew, term, trunc);
        v.done_count = 0; // episode reports are not looked at here
        for (int i = 0; i < NV; i++) {
            float pr;
            int pt;
            minatar_act(&plain[i], act[i], &pr, &pt);
            minatar_observe(&plain[i], obs);
            ck_assert_msg(pr == rew[i] && pt == term[i] && !trunc[i],
                          "%s step %d env %d: reward %g/%g, terminal %d/%d", spec->info->id, t, i,
                          (double)rew[i], (double)pr, term[i], pt);
            ck_assert_msg(memcmp(vecenv_next_obs(&v, i, term[i]), obs, O) == 0,
                          "%s step %d env %d: the step's observation differs", spec->info->id, t,
                          i);
            if (pt) {
                minatar_reset(&plain[i]);
                minatar_observe(&plain[i], obs);
                ends++;
            }
            ck_assert_msg(memcmp(v.obs + (size_t)i * O, obs, O) == 0,
                          "%s step %d env %d: the observation to act on differs", spec->info->id, t,
                          i);
        }
    }
    ck_assert_int_gt(ends, NV);
    vecenv_fini(&v);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The wrapper's rules, directly

START_TEST(test_table) {
    static const char *const names[] = {"asterix", "breakout", "freeway", "seaquest",
                                        "space_invaders"};
    static const int channels[] = {4, 4, 7, 10, 6};
    ck_assert_int_eq(minatar_game_count(), 5);
    for (int i = 0; i < 5; i++) {
        const minatar_game_t *g = minatar_find(names[i]);
        ck_assert_ptr_eq(g, minatar_game_at(i));
        ck_assert_str_eq(g->name, names[i]);
        ck_assert_int_eq(g->channels, channels[i]);
        ck_assert_int_ge(g->n_minimal_actions, 3);
    }
    ck_assert_ptr_null(minatar_find("Breakout"));
    ck_assert_ptr_null(minatar_find("pong"));
    ck_assert_ptr_null(minatar_find(NULL));
}
END_TEST

START_TEST(test_sticky_draw_even_when_terminal) {
    // Breakout with sticky 0: the ball starts in a corner and, with the paddle still, is
    // missed within a few steps. After that every act still draws one rand() (two words).
    minatar_t m;
    minatar_init(&m, minatar_find("breakout"), 0.0, 1);
    minatar_seed(&m, 3);
    minatar_reset(&m);
    int term = 0, steps = 0;
    float r;
    while (!term) {
        minatar_act(&m, MINATAR_NOOP, &r, &term);
        ck_assert_int_lt(++steps, 100);
    }
    nprandom_t shadow = m.rng;
    minatar_t before = m;
    for (int i = 0; i < 5; i++) {
        minatar_act(&m, MINATAR_FIRE, &r, &term);
        ck_assert(r == 0.0f);
        ck_assert_int_eq(term, 1);
        (void)nprandom_rand(&shadow);
    }
    ck_assert_int_eq(memcmp(&m.rng, &shadow, sizeof shadow), 0);
    ck_assert_int_eq(m.last_action, MINATAR_FIRE);
    ck_assert_int_eq(memcmp(&m.s.breakout, &before.s.breakout, sizeof m.s.breakout), 0);
}
END_TEST

START_TEST(test_sticky_repeats_last_action_across_reset) {
    // With probability 1 every act repeats last_action, which starts at 0 and survives
    // a reset: the paddle never moves.
    minatar_t m;
    minatar_init(&m, minatar_find("breakout"), 1.0, 1);
    minatar_seed(&m, 1);
    minatar_reset(&m);
    for (int i = 0; i < 3; i++) {
        minatar_act(&m, MINATAR_LEFT, NULL, NULL);
        ck_assert_int_eq(m.last_action, MINATAR_NOOP);
        ck_assert_int_eq(m.s.breakout.pos, 4);
    }
    m.last_action = MINATAR_RIGHT;
    minatar_reset(&m);
    minatar_act(&m, MINATAR_LEFT, NULL, NULL);
    ck_assert_int_eq(m.last_action, MINATAR_RIGHT);
    ck_assert_int_eq(m.s.breakout.pos, 5);
}
END_TEST

START_TEST(test_seed_does_not_reset) {
    minatar_t m;
    minatar_init(&m, minatar_find("freeway"), 0.1, 1);
    minatar_seed(&m, 7);
    minatar_reset(&m);
    for (int i = 0; i < 10; i++) {
        minatar_act(&m, MINATAR_UP, NULL, NULL);
    }
    minatar_freeway_t g = m.s.freeway;
    minatar_seed(&m, 8);
    ck_assert_int_eq(memcmp(&g, &m.s.freeway, sizeof g), 0);
}
END_TEST

START_TEST(test_freeway_ends_on_act_2501) {
    minatar_t m;
    minatar_init(&m, minatar_find("freeway"), 0.1, 1);
    minatar_seed(&m, 11);
    minatar_reset(&m);
    int term = 0;
    for (int t = 1; t <= 2501; t++) {
        minatar_act(&m, MINATAR_NOOP, NULL, &term);
        ck_assert_int_eq(term, t == 2501);
    }
}
END_TEST

START_TEST(test_lcg_and_format) {
    // First actions of the fixtures' LCG from state 1 (printed by gen_minatar.py's Lcg).
    static const int want[10] = {2, 3, 0, 0, 0, 5, 2, 4, 3, 4};
    uint64_t s = 1;
    for (int i = 0; i < 10; i++) {
        ck_assert_int_eq(minatar_lcg_action(&s), want[i]);
    }
    ck_assert_uint_eq(minatar_fnv1a64((const uint8_t *)"a", 1), 0xaf63dc4c8601ec8cull);

    uint8_t obs[MINATAR_MAX_OBS] = {0};
    obs[0] = 1;
    obs[9] = 1;
    obs[399] = 1;
    char line[MINATAR_TRACE_LINE_MAX];
    int n = minatar_format_step(line, sizeof line, 12, 3, 0, 1.0f, 1, obs, 4);
    ck_assert_int_eq(n, (int)strlen(line));
    char expect[MINATAR_TRACE_LINE_MAX];
    int k = snprintf(expect, sizeof expect, "t=12 a=3 ea=0 r=1 term=1 obs=0102");
    for (int i = 2; i < 49; i++) {
        k += snprintf(expect + k, sizeof expect - (size_t)k, "00");
    }
    snprintf(expect + k, sizeof expect - (size_t)k, "80");
    ck_assert_str_eq(line, expect);
    // Truncation reports the full length and keeps the buffer terminated.
    char small[20];
    ck_assert_int_eq(minatar_format_step(small, sizeof small, 12, 3, 0, 1.0f, 1, obs, 4), n);
    ck_assert_uint_lt(strlen(small), sizeof small);
}
END_TEST

// Compares line with the next line of f.
static void s_expect_line(FILE *f, const char *line, int *n) {
    char ref[MINATAR_TRACE_LINE_MAX + 2];
    ck_assert_msg(fgets(ref, sizeof ref, f) != NULL, "trace ends before line %d", *n);
    ref[strcspn(ref, "\n")] = '\0';
    ck_assert_msg(strcmp(line, ref) == 0, "trace line %d:\n C   %s\n ref %s", *n, line, ref);
    (*n)++;
}

START_TEST(test_reference_trace_lines) {
    // tests/fixtures/minatar_trace_breakout.txt is `gen_minatar.py --trace breakout 5 80`
    // from the reference. This is the loop of its trace(): LCG actions seeded with the env
    // seed, a reset (and a reset line) after each terminal step.
    const char *root = getenv("APEX_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/minatar_trace_breakout.txt",
             root && *root ? root : ".");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    const int seed = 5, steps = 80, channels = 4;
    minatar_t m;
    minatar_init(&m, minatar_find("breakout"), MINATAR_STICKY_PROB_DEFAULT, 1);
    minatar_seed(&m, seed);
    minatar_reset(&m);
    uint64_t lcg = seed;
    uint8_t obs[MINATAR_MAX_OBS];
    char line[MINATAR_TRACE_LINE_MAX];
    int n = 0, episodes = 1;
    minatar_observe(&m, obs);
    minatar_format_step(line, sizeof line, 0, -1, -1, 0.0f, 0, obs, channels);
    s_expect_line(f, line, &n);
    for (int t = 1; t <= steps; t++) {
        int a = minatar_lcg_action(&lcg), term;
        float r;
        minatar_act(&m, a, &r, &term);
        minatar_observe(&m, obs);
        minatar_format_step(line, sizeof line, t, a, m.last_action, r, term, obs, channels);
        s_expect_line(f, line, &n);
        if (term) {
            minatar_reset(&m);
            minatar_observe(&m, obs);
            minatar_format_step(line, sizeof line, t, -1, -1, 0.0f, 0, obs, channels);
            s_expect_line(f, line, &n);
            episodes++;
        }
    }
    char rest[8];
    ck_assert_msg(fgets(rest, sizeof rest, f) == NULL, "trace longer than %d lines", n);
    fclose(f);
    ck_assert_int_gt(episodes, 2); // the trace crosses episode boundaries
}
END_TEST

START_TEST(test_bad_action_asserts) {
    minatar_t m;
    minatar_init(&m, minatar_find("asterix"), 0.1, 1);
    minatar_act(&m, 6, NULL, NULL);
}
END_TEST

Suite *minatar_suite(void) {
    Suite *s = suite_create("minatar");
    TCase *tc = tcase_create("reference");
    tcase_set_timeout(tc, 120); // about 10^5 replayed steps; much slower under ASan
    tcase_add_loop_test(tc, test_reference_fixture, 0, 5);
    tcase_add_test(tc, test_reference_trace_lines);
    suite_add_tcase(s, tc);

    tc = tcase_create("vecenv");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_vecenv_matches_plain_steps, 0, 5);
    suite_add_tcase(s, tc);

    tc = tcase_create("wrapper");
    tcase_add_test(tc, test_table);
    tcase_add_test(tc, test_sticky_draw_even_when_terminal);
    tcase_add_test(tc, test_sticky_repeats_last_action_across_reset);
    tcase_add_test(tc, test_seed_does_not_reset);
    tcase_add_test(tc, test_freeway_ends_on_act_2501);
    tcase_add_test(tc, test_lcg_and_format);
    tcase_add_test_raise_signal(tc, test_bad_action_asserts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
