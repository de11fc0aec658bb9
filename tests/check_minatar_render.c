// check_minatar_render.c: the rendered MinAtar envs, MinAtar/<Game>-render84-v0
// (envs/minatar_render.h), through the env interface and the daemons' code.
//
// The reference here is the documented rule, not the env's code: s_render below draws a
// 10 x 10 x C grid pixel by pixel with plain loops, from the two statements of the docs
// (pixel (y, x) shows cell (floor(y * 10 / 84), floor(x * 10 / 84)); a cell shows the level
// of its highest channel set, 0 when none is) and the gray tables written out in the docs
// (s_levels), not from the formula the env computes them with. The env draws cell by cell
// with overlapping 8-byte stores and copied rows; the two share nothing but the rule.
//
// - the mapping's cell widths and the tables, as the docs list them;
// - minatar_render on random grids (many cells with several channels set) against s_render;
// - each game's rendered env stepped beside its plain env (vecenv, same seed, same actions,
//   several episodes each): equal rewards, terminations and truncations, and every frame
//   (the step's, the one to act on after a reset, observe's) is s_render of the plain env's
//   grid; the bytes only take the documented levels;
// - apex-eval --trace of a rendered id is the plain id's, line for line;
// - configs/minatar-breakout-pixels.ini (the 2013 DQN body on 84 x 84 x 1) through the
//   evaluator and, when APEX_BIN names the binaries, apex-eval --checkpoint; and apex-actor
//   in a thread feeding a real replay server its 7 KB frames.
#include "check_apex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "actor.h"
#include "ckpt.h"
#include "clock.h"
#include "config.h"
#include "env.h"
#include "evaluator.h"
#include "minatar.h"
#include "minatar_render.h"
#include "nn.h"
#include "rng.h"
#include "server.h"
#include "wire.h"

enum { S_PX = 84, S_CELLS = 10 };

// ck_assert_msg for inner loops: a passing ck_assert costs the forked test a write to Check's
// parent (its mark point), and the loops below check ~100 000 frames.
#define S_REQUIRE(cond, ...)                                                                       \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            ck_abort_msg(__VA_ARGS__);                                                             \
        }                                                                                          \
    } while (0)

// ---------------------------------------------------------------------------------------
// The documented rule, restated

// The gray levels of the docs (minatar_render.h, README.md), by channel count.
static const uint8_t *s_levels(int channels) {
    static const uint8_t c4[] = {63, 127, 191, 255};
    static const uint8_t c6[] = {42, 85, 127, 170, 212, 255};
    static const uint8_t c7[] = {36, 72, 109, 145, 182, 218, 255};
    static const uint8_t c10[] = {25, 51, 76, 102, 127, 153, 178, 204, 229, 255};
    switch (channels) {
    case 4:
        return c4;
    case 6:
        return c6;
    case 7:
        return c7;
    case 10:
        return c10;
    default:
        ck_abort_msg("no documented table for %d channels", channels);
        return NULL;
    }
}

// Draws grid (10 x 10 x C, [y][x][c]) into frame (84 x 84) pixel by pixel.
static void s_render(const uint8_t *grid, int channels, uint8_t *frame) {
    const uint8_t *level = s_levels(channels);
    for (int y = 0; y < S_PX; y++) {
        for (int x = 0; x < S_PX; x++) {
            const int cy = y * S_CELLS / S_PX, cx = x * S_CELLS / S_PX;
            uint8_t v = 0;
            for (int c = 0; c < channels; c++) { // a later (higher) channel overwrites
                if (grid[(cy * S_CELLS + cx) * channels + c]) {
                    v = level[c];
                }
            }
            frame[y * S_PX + x] = v;
        }
    }
}

// Fails unless every byte of frame is 0 or one of the levels of C channels; counts the
// bytes by value into seen.
static void s_check_levels(const uint8_t *frame, int channels, long *seen, const char *what) {
    const uint8_t *level = s_levels(channels);
    int bad = -1;
    for (int i = 0; i < S_PX * S_PX; i++) {
        int ok = frame[i] == 0;
        for (int c = 0; c < channels && !ok; c++) {
            ok = frame[i] == level[c];
        }
        if (!ok && bad < 0) {
            bad = i;
        }
        seen[frame[i]]++;
    }
    S_REQUIRE(bad < 0, "%s: byte %d is %d, not a documented level", what, bad,
              bad < 0 ? 0 : frame[bad]);
}

static const char *s_src(const char *rel, char *buf, size_t len) {
    const char *root = getenv("APEX_SRC_DIR");
    snprintf(buf, len, "%s/%s", root && *root ? root : ".", rel);
    return buf;
}

// ---------------------------------------------------------------------------------------
// The rule's constants and minatar_render on grids

// The widths the docs list (9 8 9 8 8 9 8 9 8 8, first pixels 0 9 17 ...) are the floor rule's,
// and the tables are distinct, nonzero and the env's.
START_TEST(test_documented_mapping_and_levels) {
    static const int width[S_CELLS] = {9, 8, 9, 8, 8, 9, 8, 9, 8, 8};
    static const int first[S_CELLS] = {0, 9, 17, 26, 34, 42, 51, 59, 68, 76};
    int count[S_CELLS] = {0}, seen_first[S_CELLS];
    for (int p = S_PX - 1; p >= 0; p--) {
        count[p * S_CELLS / S_PX]++;
        seen_first[p * S_CELLS / S_PX] = p;
    }
    for (int k = 0; k < S_CELLS; k++) {
        ck_assert_int_eq(count[k], width[k]);
        ck_assert_int_eq(seen_first[k], first[k]);
    }
    const int channels[] = {4, 6, 7, 10};
    for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++) {
        const int C = channels[i];
        const uint8_t *level = s_levels(C);
        for (int c = 0; c < C; c++) {
            ck_assert_int_gt(level[c], 0);
            ck_assert(c == 0 || level[c] > level[c - 1]);
            ck_assert_int_eq(minatar_render_gray(C, c), level[c]);
        }
        ck_assert_int_eq(level[C - 1], 255);
    }
    // Each game's channel count is one the docs tabulate.
    for (int g = 0; g < minatar_game_count(); g++) {
        ck_assert_ptr_nonnull(s_levels(minatar_game_at(g)->channels));
    }
}
END_TEST

// Random grids, each channel set with probability 1/3 (most cells hold several), and the
// empty and full grids: minatar_render writes every byte, as s_render draws it.
START_TEST(test_render_random_grids) {
    const int channels[] = {4, 6, 7, 10};
    rng_t r;
    rng_init_stream(&r, 3, RNG_ROLE_TEST, 0);
    uint8_t grid[MINATAR_MAX_OBS], got[MINATAR_RENDER_BYTES], want[MINATAR_RENDER_BYTES];
    for (size_t i = 0; i < sizeof channels / sizeof channels[0]; i++) {
        const int C = channels[i], n = S_CELLS * S_CELLS * C;
        for (int trial = 0; trial < 40; trial++) {
            for (int j = 0; j < n; j++) {
                grid[j] = trial == 0 ? 0 : trial == 1 ? 1 : rng_below(&r, 3) == 0;
            }
            memset(got, 0x5a, sizeof got); // 90: no level of any table
            minatar_render(grid, C, got);
            s_render(grid, C, want);
            S_REQUIRE(memcmp(got, want, sizeof got) == 0, "%d channels, grid %d", C, trial);
        }
    }
    // A single cell's block, by hand: cell (2, 7) of Breakout's ball channel (1) covers
    // rows 17..25 and columns 59..67 at 127; everything else stays 0.
    memset(grid, 0, sizeof grid);
    grid[(2 * S_CELLS + 7) * 4 + 1] = 1;
    minatar_render(grid, 4, got);
    for (int y = 0; y < S_PX; y++) {
        for (int x = 0; x < S_PX; x++) {
            const int in = y >= 17 && y <= 25 && x >= 59 && x <= 67;
            want[y * S_PX + x] = in ? 127 : 0;
        }
    }
    ck_assert(memcmp(got, want, sizeof got) == 0);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The rendered envs beside the plain ones

static const env_spec_t *const s_plain[] = {&env_minatar_asterix_spec, &env_minatar_breakout_spec,
                                            &env_minatar_freeway_spec, &env_minatar_seaquest_spec,
                                            &env_minatar_space_invaders_spec};

// The rendered spec of plain, found by its id (the naming the docs give).
static const env_spec_t *s_rendered_of(const env_spec_t *plain) {
    char id[96];
    const char *v = strstr(plain->info->id, "-v0");
    ck_assert_ptr_nonnull(v);
    snprintf(id, sizeof id, "%.*s-render84-v0", (int)(v - plain->info->id), plain->info->id);
    const env_spec_t *spec = env_find(id);
    ck_assert_msg(spec != NULL, "%s is not an id", id);
    return spec;
}

// Game _i, NV envs of each kind from the same seed and first index, the same random actions:
// at least 400 steps and until every env has ended an episode (Freeway's take 2 501 steps).
START_TEST(test_steps_match_plain) {
    enum { NV = 3, T_MIN = 400, T_MAX = 3000 };
    const env_spec_t *plain = s_plain[_i], *rend = s_rendered_of(plain);
    const int C = plain->info->obs_c;
    ck_assert_int_eq(rend->info->n_actions, plain->info->n_actions);
    ck_assert_int_eq(rend->info->max_episode_steps, plain->info->max_episode_steps);
    vecenv_t vp, vr;
    vecenv_init(&vp, plain, NV, 17, 5, 4 * NV);
    vecenv_init(&vr, rend, NV, 17, 5, 4 * NV);
    ck_assert_uint_eq(vr.obs_bytes, MINATAR_RENDER_BYTES);
    static uint8_t want[MINATAR_RENDER_BYTES], frame[MINATAR_RENDER_BYTES];
    static long seen[256];
    memset(seen, 0, sizeof seen);
    // The reset frames.
    for (int i = 0; i < NV; i++) {
        s_render(vp.obs + (size_t)i * vp.obs_bytes, C, want);
        S_REQUIRE(memcmp(vr.obs + (size_t)i * vr.obs_bytes, want, sizeof want) == 0,
                  "%s env %d: the reset frame", rend->info->id, i);
    }
    rng_t r;
    rng_init_stream(&r, 9, RNG_ROLE_TEST, (uint64_t)_i);
    int32_t act[NV];
    float rp[NV], rr[NV];
    uint8_t tp[NV], tr[NV], up[NV], ur[NV];
    int ended[NV] = {0}, all_ended = 0, t = 0;
    double ret = 0;
    for (; t < T_MAX && (t < T_MIN || !all_ended); t++) {
        for (int i = 0; i < NV; i++) {
            act[i] = (int32_t)rng_below(&r, MINATAR_N_ACTIONS);
        }
        vecenv_step(&vp, act, rp, tp, up);
        vecenv_step(&vr, act, rr, tr, ur);
        all_ended = 1;
        for (int i = 0; i < NV; i++) {
            S_REQUIRE(rp[i] == rr[i] && tp[i] == tr[i] && up[i] == ur[i],
                      "%s step %d env %d: reward %g/%g terminated %d/%d truncated %d/%d",
                      rend->info->id, t, i, (double)rr[i], (double)rp[i], tr[i], tp[i], ur[i],
                      up[i]);
            ret += rp[i];
            const int end = tp[i] || up[i];
            ended[i] += end;
            all_ended &= ended[i] > 0;
            // The step's frame (the final one when the episode ended) ...
            s_render(vecenv_next_obs(&vp, i, end), C, want);
            const uint8_t *got = vecenv_next_obs(&vr, i, end);
            S_REQUIRE(memcmp(got, want, sizeof want) == 0,
                      "%s step %d env %d: the frame is not the grid's drawing", rend->info->id, t,
                      i);
            s_check_levels(got, C, seen, rend->info->id);
            // ... and the one to act on, after a reset where there was one, also as observe
            // writes it from the state.
            s_render(vp.obs + (size_t)i * vp.obs_bytes, C, want);
            S_REQUIRE(memcmp(vr.obs + (size_t)i * vr.obs_bytes, want, sizeof want) == 0,
                      "%s step %d env %d: the frame to act on", rend->info->id, t, i);
            rend->observe(vr.state + (size_t)i * rend->state_bytes, frame);
            S_REQUIRE(memcmp(frame, want, sizeof want) == 0, "%s step %d env %d: observe",
                      rend->info->id, t, i);
        }
        vp.done_count = vr.done_count = 0; // counted below through vecenv's totals
    }
    ck_assert_msg(all_ended, "%s: an env never ended an episode in %d steps", rend->info->id, t);
    ck_assert_uint_eq(vr.episodes, vp.episodes);
    ck_assert_uint_eq(vr.steps, vp.steps);
    // The games' states went the same way: the rendered envs' minatar_t are the plain ones'.
    ck_assert(memcmp(vr.state, vp.state, (size_t)NV * plain->state_bytes) == 0);
    // Background, and more than one level: the frames are not blank.
    int levels = 0;
    for (int v = 1; v < 256; v++) {
        levels += seen[v] > 0;
    }
    ck_assert_int_gt(seen[0], 0);
    ck_assert_int_ge(levels, 2);
    vecenv_fini(&vp);
    vecenv_fini(&vr);
}
END_TEST

// apex-eval --trace prints the game's own lines for a rendered id: the plain id's trace.
START_TEST(test_trace_is_the_plain_trace) {
    for (size_t g = 0; g < sizeof s_plain / sizeof s_plain[0]; g++) {
        char *text[2] = {NULL, NULL};
        size_t len[2];
        const char *ids[2] = {s_plain[g]->info->id, s_rendered_of(s_plain[g])->info->id};
        for (int k = 0; k < 2; k++) {
            apex_config_t cfg;
            char kv[128], err[CONFIG_ERR_LEN];
            snprintf(kv, sizeof kv, "env.id=%s", ids[k]);
            const char *sets[] = {kv};
            ck_assert_msg(config_load(&cfg, NULL, sets, 1, err, sizeof err) == 0, "%s", err);
            FILE *f = open_memstream(&text[k], &len[k]);
            ck_assert_int_eq(evaluator_trace(&cfg, 5, 300, NULL, f), 0);
            fclose(f);
        }
        ck_assert_uint_gt(len[0], 0);
        ck_assert_msg(len[0] == len[1] && memcmp(text[0], text[1], len[0]) == 0,
                      "%s: the trace differs from %s's", ids[1], ids[0]);
        free(text[0]);
        free(text[1]);
    }
}
END_TEST

// ---------------------------------------------------------------------------------------
// configs/minatar-breakout-pixels.ini through the evaluator and the actor

// Loads the shipped config with sets on top; the test skips (returns 0) when run outside the
// repository (make unit runs from its root; APEX_SRC_DIR names it otherwise).
static int s_pixels_config(apex_config_t *cfg, const char *const *sets, int n) {
    char path[1024], err[CONFIG_ERR_LEN];
    s_src("configs/minatar-breakout-pixels.ini", path, sizeof path);
    if (access(path, R_OK) != 0) {
        check_reference_missing("minatar_render", path);
        return 0;
    }
    ck_assert_msg(config_load(cfg, path, sets, n, err, sizeof err) == 0, "%s", err);
    return 1;
}

// The config's id and network: 84 x 84 x 1 bytes at 1/255, conv 16x8s4 then 32x4s2 (9 x 9 x
// 32 = 2592 features) and 256. A random network of it evaluated on the rendered env, and
// written as a checkpoint that apex-eval --checkpoint evaluates to the same mean.
START_TEST(test_pixels_config_evaluates) {
    apex_config_t cfg;
    const char *sets[] = {"eval.max_episode_steps=300"};
    if (!s_pixels_config(&cfg, sets, 1)) {
        return;
    }
    ck_assert_str_eq(cfg.env.id, "MinAtar/Breakout-render84-v0");
    ck_assert_int_eq(cfg.env.obs_dim, 84 * 84);
    ck_assert_int_eq(cfg.env.obs_h, 84);
    ck_assert_int_eq(cfg.env.obs_w, 84);
    ck_assert_int_eq(cfg.env.obs_c, 1);
    ck_assert_int_eq(cfg.env.obs_dtype, CONFIG_OBS_UINT8);
    ck_assert((float)cfg.env.obs_scale == 1.0f / 255.0f);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    ck_assert_int_eq(nn_config_check(&nc, NULL, 0), APEX_OK);
    ck_assert_int_eq(nc.n_conv, 2);
    ck_assert(nc.conv[0].filters == 16 && nc.conv[0].kernel == 8 && nc.conv[0].stride == 4);
    ck_assert(nc.conv[1].filters == 32 && nc.conv[1].kernel == 4 && nc.conv[1].stride == 2);
    ck_assert(nc.n_hidden == 1 && nc.hidden[0] == 256);
    // (16 * 64 + 16) + (32 * 256 + 32) + (2592 * 256 + 256) + the dueling head (256 * 7 + 7).
    ck_assert_uint_eq(nn_num_params(&nc), 1040 + 8224 + 663808 + 1799);
    nn_params_t p;
    nn_params_init(&p, &nc);
    rng_t rng;
    rng_init_stream(&rng, 77, RNG_ROLE_TEST, 0);
    nn_params_init_random(&p, &rng);
    enum { N = 3 };
    eval_opts_t o;
    evaluator_opts_from_run(&o, &cfg);
    o.episodes = N;
    o.parallel = N; // as apex-eval --episodes N sets it
    nn_state_t st;
    nn_state_init(&st, &nc, N, 0);
    eval_result_t res;
    evaluator_run(env_find(cfg.env.id), &p, &st, &o, &res);
    ck_assert_int_eq(res.episodes, N);
    ck_assert(isfinite(res.mean) && res.min >= 0.0);
    const char *bin = getenv("APEX_BIN");
    if (bin) {
        const char *dir = check_tmpdir();
        char path[600], cfg_path[1024], cmd[4096], line[512];
        snprintf(path, sizeof path, "%s/pixels.ckpt", dir);
        ckpt_header_t h;
        ckpt_header_init(&h, &nc);
        const float *one[1] = {p.data};
        ck_assert_int_eq(ckpt_write(path, &h, one, 1), APEX_OK);
        snprintf(cmd, sizeof cmd,
                 "%s/apex-eval -c %s --set eval.max_episode_steps=300 --checkpoint %s "
                 "--episodes %d 2>&1",
                 bin, s_src("configs/minatar-breakout-pixels.ini", cfg_path, sizeof cfg_path), path,
                 N);
        FILE *f = popen(cmd, "r");
        ck_assert_ptr_nonnull(f);
        double got = NAN;
        while (fgets(line, sizeof line, f)) {
            const char *m = strstr(line, "  mean ");
            if (m && strstr(line, "MinAtar/Breakout-render84-v0 checkpoint")) {
                got = strtod(m + 7, NULL);
            }
        }
        ck_assert_int_eq(pclose(f), 0);
        ck_assert_msg(fabs(got - res.mean) < 0.006, "apex-eval printed mean %.2f, evaluator %.4f",
                      got, res.mean);
        check_rmtree(dir);
    }
    nn_state_fini(&st);
    nn_params_fini(&p);
}
END_TEST

static int s_actor_rc = -2; // actor_run's status, read after the join

static void *s_actor_main(void *arg) {
    s_actor_rc = actor_run(arg, 0);
    return NULL;
}

// apex-actor on the pixels config in a thread: a real replay server takes its batches of
// 7 KB frames whole (each transition's obs_dim is 7056), and it takes a stub learner's
// weights of the conv network. Small replay and batches; waits on counters, not on time.
START_TEST(test_actor_feeds_replay) {
    apex_config_t cfg;
    const char *sets[] = {"actor.num_actors=1",
                          "actor.envs_per_actor=4",
                          "actor.send_batch=16",
                          "actor.weight_sync_steps=20",
                          "actor.stats_interval_ms=50",
                          "actor.max_steps_per_s=0",
                          "replay.capacity=256",
                          "replay.max_batch=64",
                          "replay.min_size_to_sample=1",
                          "learner.batch_size=16",
                          "endpoints.replay_insert_bind=tcp://127.0.0.1:*",
                          "endpoints.replay_sample_bind=tcp://127.0.0.1:*"};
    if (!s_pixels_config(&cfg, sets, (int)(sizeof sets / sizeof sets[0]))) {
        return;
    }
    char err[CONFIG_ERR_LEN], kv[CONFIG_STR_LEN + 64], weights_ep[256];
    check_replay_t rs;
    check_replay_start(&rs, &cfg);
    void *ctx = zmq_ctx_new();
    void *router = check_weights_router(ctx, weights_ep, sizeof weights_ep);
    snprintf(kv, sizeof kv, "endpoints.replay_insert=%s", replay_server_insert_endpoint(rs.server));
    ck_assert_msg(config_set(&cfg, kv, err, sizeof err) == 0, "%s", err);
    snprintf(kv, sizeof kv, "endpoints.learner_weights=%s", weights_ep);
    ck_assert_msg(config_set(&cfg, kv, err, sizeof err) == 0, "%s", err);
    nn_config_t nc;
    nn_config_from_run(&nc, &cfg);
    nn_params_t w;
    nn_params_init(&w, &nc);
    rng_t rng;
    rng_init_stream(&rng, 5, RNG_ROLE_TEST, 0);
    nn_params_init_random(&w, &rng);
    wire_buf_t answer;
    wire_buf_init(&answer, 0);
    check_encode_weights(&answer, 3, w.data, (uint32_t)w.num_params);
    actor_t *actor = actor_new(&cfg, 0);
    ck_assert_ptr_nonnull(actor);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, s_actor_main, actor), 0);
    actor_stats_t st;
    const int64_t deadline = clock_now_ms() + 60000; // a failure, not a measurement
    for (;;) {
        check_weights_answer(router, &answer, NULL);
        actor_get_stats(actor, &st);
        if (st.batches_acked >= 3 && st.weights_version == 3) {
            break;
        }
        ck_assert_msg(clock_now_ms() < deadline, "steps %llu acked %llu weights v%llu",
                      (unsigned long long)st.steps, (unsigned long long)st.batches_acked,
                      (unsigned long long)st.weights_version);
        nanosleep(&(struct timespec){0, 20 * 1000000L}, NULL);
    }
    actor_stop(actor);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(s_actor_rc, 0);
    actor_get_stats(actor, &st);
    actor_destroy(&actor);
    wire_replay_stats_t rst;
    check_replay_stop(&rs, &rst);
    ck_assert_uint_eq(st.bad_messages, 0);
    ck_assert_uint_ge(rst.inserted, 3 * 16);
    ck_assert_uint_eq(rst.bad_messages, 0);
    wire_buf_fini(&answer);
    nn_params_fini(&w);
    zmq_close(router);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *minatar_render_suite(void) {
    Suite *s = suite_create("minatar_render");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_documented_mapping_and_levels);
    tcase_add_test(tc, test_render_random_grids);
    tcase_add_loop_test(tc, test_steps_match_plain, 0, 5);
    tcase_add_test(tc, test_trace_is_the_plain_trace);
    tcase_add_test(tc, test_pixels_config_evaluates);
    tcase_add_test(tc, test_actor_feeds_replay);
    suite_add_tcase(s, tc);
    return s;
}
