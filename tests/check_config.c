// check_config.c: defaults, file loading, overrides, and every error class with its
// file:line: [section] key: reason message.
#include "check_apex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "wire.h"

static char s_path[256];

// Writes text to a fresh temp file and returns its path.
static const char *s_write(const char *text) {
    snprintf(s_path, sizeof s_path, "/tmp/apex_cfg_XXXXXX");
    int fd = mkstemp(s_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    return s_path;
}

static int s_load(const char *text, apex_config_t *cfg, char *err) {
    const char *p = s_write(text);
    int rc = config_load(cfg, p, NULL, 0, err, CONFIG_ERR_LEN);
    unlink(p);
    return rc;
}

START_TEST(test_defaults_valid) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    ck_assert_int_eq(config_load(&cfg, NULL, NULL, 0, err, sizeof err), 0);
    ck_assert_str_eq(cfg.env.id, "CartPole-v1");
    ck_assert_int_eq(cfg.env.obs_dim, 4);
    ck_assert_int_eq(cfg.env.n_actions, 2);
    ck_assert_int_eq(cfg.network.n_hidden, 2);
    ck_assert_int_eq(cfg.network.hidden[1], 256);
    ck_assert_int_eq(cfg.replay.capacity, 1 << 20);
    ck_assert_double_eq_tol(cfg.replay.alpha, 0.6, 1e-12);
    ck_assert_int_eq(cfg.learner.optimizer, CONFIG_OPTIM_ADAM);
    ck_assert_int_eq(cfg.actor.n_step, 3);
}
END_TEST

START_TEST(test_file_values) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    int rc = s_load("; comment\n[run]\nname = t1\nseed = 9\n\n[network]\nhidden = 64, 32,16\n"
                    "dueling = false\n[learner]\noptimizer = rmsprop\nlr = 2.5e-4\n"
                    "[env]\nid = Acrobot-v1\n",
                    &cfg, err);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_str_eq(cfg.run.name, "t1");
    ck_assert_int_eq(cfg.run.seed, 9);
    ck_assert_int_eq(cfg.network.n_hidden, 3);
    ck_assert_int_eq(cfg.network.hidden[0], 64);
    ck_assert_int_eq(cfg.network.hidden[2], 16);
    ck_assert_int_eq(cfg.network.dueling, 0);
    ck_assert_int_eq(cfg.learner.optimizer, CONFIG_OPTIM_RMSPROP);
    ck_assert_double_eq_tol(cfg.learner.lr, 2.5e-4, 1e-15);
    ck_assert_int_eq(cfg.env.obs_dim, 6);
    ck_assert_int_eq(cfg.env.n_actions, 3);
}
END_TEST

// Each bad file must fail with exactly this message suffix (after the temp path).
static void s_expect_error(const char *text, const char *suffix) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_int_eq(s_load(text, &cfg, err), -1);
    size_t n = strlen(err), m = strlen(suffix);
    ck_assert_msg(n >= m && strcmp(err + n - m, suffix) == 0, "got '%s', want suffix '%s'", err,
                  suffix);
    ck_assert_msg(strncmp(err, "/tmp/apex_cfg_", 14) == 0, "no file name in '%s'", err);
}

START_TEST(test_error_classes) {
    s_expect_error("[run]\nname = a\nnmae = b\n",
                   ":3: [run] nmae: unknown key (see --help-config)");
    s_expect_error("[run]\nseed = 1\nseed = 2\n", ":3: [run] seed: duplicate key");
    s_expect_error("[replay]\n\ncapacity = 12x\n",
                   ":3: [replay] capacity: '12x' is not an integer");
    s_expect_error("[replay]\ncapacity = 0\n",
                   ":2: [replay] capacity: 0 is out of range [1, 1073741824]");
    // The store's own limit is the schema's (it once said 2^31 and "needs 0.0 MiB").
    s_expect_error("[replay]\ncapacity = 2000000000\n",
                   ":2: [replay] capacity: 2000000000 is out of range [1, 1073741824]");
    // A missing ']' is named as such, not as an unknown key of the section before.
    s_expect_error("[replay]\ncapacity = 5\n[learner\nlr = 1\n",
                   ":3: '[learner' is not a section header (missing ']')");
    s_expect_error("[replay]\ncapacity = 5\n[learner\n",
                   ":3: '[learner' is not a section header (missing ']')");
    // A retired key says why it went.
    s_expect_error("[replay]\nreset_limiter_on_restore = true\n",
                   ":2: [replay] reset_limiter_on_restore: removed: a restore now brings the rate "
                   "limiter's state back with the data, so the learner keeps the configured "
                   "replay ratio across a replay restart (delete the line)");
    s_expect_error("[replay]\nalpha = 1.5\n", ":2: [replay] alpha: 1.5 is out of range [0, 1]");
    s_expect_error("[replay]\nalpha = nan\n", ":2: [replay] alpha: 'nan' is not a finite number");
    s_expect_error("[network]\ndueling = maybe\n",
                   ":2: [network] dueling: 'maybe' is not a boolean (true/false)");
    s_expect_error("[learner]\noptimizer = sgd\n",
                   ":2: [learner] optimizer: 'sgd' is not one of adam|rmsprop");
    s_expect_error("[network]\nhidden = 64,,32\n",
                   ":2: [network] hidden: '64,,32' is not a comma-separated list of integers");
    s_expect_error("[network]\nhidden = 1,2,3,4,5\n",
                   ":2: [network] hidden: at most 4 values allowed");
    s_expect_error("[bogus]\nx = 1\n", ":2: [bogus] x: unknown section");
    s_expect_error("[run]\nthis line has no equals\n",
                   ":2: syntax error (expected '[section]' or 'key = value')");
    s_expect_error("[run]\nname = a\n  continued\n",
                   ":3: [run] name: indented continuation lines are not supported");
    s_expect_error("[env]\nid = Pong-v5\n",
                   ": [env] id: unknown environment 'Pong-v5' (known: CartPole-v1, Acrobot-v1, "
                   "MountainCar-v0, MinAtar/Asterix-v0, MinAtar/Breakout-v0, MinAtar/Freeway-v0, "
                   "MinAtar/Seaquest-v0, MinAtar/SpaceInvaders-v0, or python, or external)");
    // The external environment's keys: both needed; built-in ids keep their own shape and
    // float32 observations.
    s_expect_error("[env]\nid = external\nobs_dim = 8\n",
                   ": [env] id = external needs obs_dim (or obs_shape) and n_actions >= 2 (have 8 "
                   "and 0)");
    // Observation shapes, scales and conv layers.
    s_expect_error("[env]\nid = external\nn_actions = 2\nobs_shape = 84x84\n",
                   ":4: [env] obs_shape: '84x84' is not HxWxC (positive, at most 2^20 elements)");
    s_expect_error("[env]\nid = external\nn_actions = 2\nobs_dim = 10\nobs_shape = 2x2x2\n",
                   ":5: [env] obs_shape: 2x2x2 is 8 elements, obs_dim is 10");
    s_expect_error("[env]\nid = MinAtar/Breakout-v0\nobs_dtype = float32\n",
                   ":3: [env] obs_dtype: MinAtar/Breakout-v0's observations are uint8");
    s_expect_error("[env]\nid = MinAtar/Breakout-v0\nobs_shape = 10x10x3\n",
                   ":3: [env] obs_shape: MinAtar/Breakout-v0's observations are images");
    s_expect_error("[network]\nconv = 16x3\n",
                   ":2: [network] conv: '16x3' is not a list of FILTERSxKERNELsSTRIDE (e.g. 16x3s1 "
                   "or 32x8s4,64x4s2,64x3s1; filters 1..4096, kernel and stride 1..256)");
    s_expect_error("[network]\nconv = 16x3s1\n",
                   ":2: [network] conv: conv layers need an image observation; CartPole-v1's is "
                   "a vector of 4 (for id = external, set [env] obs_shape)");
    s_expect_error("[env]\nid = MinAtar/Breakout-v0\n[network]\nconv = 16x8s1,16x4s1\n",
                   ":4: [network] conv: layer 2 (16x4s1) has a kernel larger than its 3x3 input");
    s_expect_error("[env]\nid = CartPole-v1\nobs_dim = 5\n",
                   ": [env] obs_dim and n_actions are for id = external; CartPole-v1 has 4 and 2");
    s_expect_error("[env]\nid = CartPole-v1\nobs_dtype = uint8\n",
                   ": [env] obs_dtype: CartPole-v1's observations are float32");
    s_expect_error("[replay]\ncapacity = 10\nmin_size_to_sample = 11\n",
                   ":2; the learner would wait forever)"); // capacity's line, in the message
    {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN] = "";
        ck_assert_int_eq(s_load("[replay]\ncapacity = 10\nmin_size_to_sample = 11\n", &cfg, err),
                         -1);
        ck_assert_msg(strstr(err, ":3: [replay] min_size_to_sample: 11 exceeds capacity 10 (/tmp/"),
                      "%s", err);
    }
}
END_TEST

START_TEST(test_missing_file) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN];
    ck_assert_int_eq(config_load(&cfg, "/nonexistent/x.ini", NULL, 0, err, sizeof err), -1);
    ck_assert_str_eq(err, "/nonexistent/x.ini: cannot open config: No such file or directory");
}
END_TEST

START_TEST(test_overrides) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    const char *p = s_write("[learner]\nlr = 0.1\n");
    const char *sets[] = {"learner.lr=1e-4", "network.hidden=8", "run.name=over"};
    ck_assert_int_eq(config_load(&cfg, p, sets, 3, err, sizeof err), 0);
    ck_assert_double_eq_tol(cfg.learner.lr, 1e-4, 1e-18);
    ck_assert_int_eq(cfg.network.n_hidden, 1);
    ck_assert_str_eq(cfg.run.name, "over");
    const char *bad1[] = {"learner.lrr=1"};
    ck_assert_int_eq(config_load(&cfg, p, bad1, 1, err, sizeof err), -1);
    ck_assert_str_eq(err, "--set: [learner] lrr: unknown key (see --help-config)");
    const char *bad2[] = {"learner.lr=-1"};
    ck_assert_int_eq(config_load(&cfg, p, bad2, 1, err, sizeof err), -1);
    ck_assert_str_eq(err, "--set: [learner] lr: -1 is out of range [1e-12, 10]");
    // Strings that --print-config could not write back are refused.
    const char *bad4[] = {"run.name=;x"};
    ck_assert_int_eq(config_load(&cfg, p, bad4, 1, err, sizeof err), -1);
    ck_assert_str_eq(err,
                     "--set: [run] name: must not start with ';' or '#' or start/end with blanks");
    char longv[300] = "run.out_dir=";
    memset(longv + 12, 'a', 200);
    const char *bad5[] = {longv};
    ck_assert_int_eq(config_load(&cfg, p, bad5, 1, err, sizeof err), -1);
    ck_assert_str_eq(err, "--set: [run] out_dir: too long for one INI line (198 characters)");
    // A check between keys blames where each value came from: --set, a line, or a default.
    const char *bad6[] = {"replay.max_batch=32"};
    ck_assert_int_eq(config_load(&cfg, p, bad6, 1, err, sizeof err), -1);
    char want[512];
    snprintf(want, sizeof want,
             "%s (default): [learner] batch_size: 512 exceeds [replay] max_batch 32 (--set "
             "replay.max_batch)",
             p);
    ck_assert_str_eq(err, want);
    const char *bad3[] = {"nodot=1"};
    ck_assert_int_eq(config_load(&cfg, p, bad3, 1, err, sizeof err), -1);
    ck_assert_str_eq(err, "--set nodot=1: expected section.key=value");
    unlink(p);
}
END_TEST

// The printed config is itself a valid config that loads to the same values.
static void s_assert_prints_back(const apex_config_t *a) {
    apex_config_t b;
    char err[CONFIG_ERR_LEN] = "";
    char path[] = "/tmp/apex_cfgp_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    config_print(a, f);
    fclose(f);
    ck_assert_msg(config_load(&b, path, NULL, 0, err, sizeof err) == 0, "%s", err);
    unlink(path);
    // (Where values came from differs by design: every key is on a line of the printed file.)
    memcpy(b.source, a->source, sizeof a->source);
    memcpy(b.origin_line, a->origin_line, sizeof a->origin_line);
    memcpy(b.origin_set, a->origin_set, sizeof a->origin_set);
    ck_assert_mem_eq(a, &b, sizeof b);
}

START_TEST(test_print_round_trip) {
    apex_config_t a;
    char err[CONFIG_ERR_LEN] = "";
    const char *sets[] = {"network.hidden=3,5", "learner.optimizer=rmsprop", "run.seed=77",
                          "replay.alpha=0.123456789"};
    ck_assert_int_eq(config_load(&a, NULL, sets, 4, err, sizeof err), 0);
    s_assert_prints_back(&a);
}
END_TEST

START_TEST(test_external_env) {
    // id = external takes its shape and dtype from the keys, and prints back to itself.
    apex_config_t a;
    char err[CONFIG_ERR_LEN] = "";
    const char *sets[] = {"env.id=external", "env.obs_dim=7056", "env.n_actions=6",
                          "env.obs_dtype=uint8"};
    ck_assert_msg(config_load(&a, NULL, sets, 4, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.obs_dim, 7056);
    ck_assert_int_eq(a.env.n_actions, 6);
    ck_assert_int_eq(a.env.obs_dtype, CONFIG_OBS_UINT8);
    ck_assert_int_eq(wire_obs_elem_bytes((uint32_t)a.env.obs_dtype), 1);
    ck_assert_int_eq(a.env.max_episode_steps, 0);
    s_assert_prints_back(&a);
    // A built-in id: the derived shape, which the keys may repeat but not contradict.
    const char *same[] = {"env.id=Acrobot-v1", "env.obs_dim=6", "env.n_actions=3"};
    ck_assert_msg(config_load(&a, NULL, same, 3, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.obs_dtype, CONFIG_OBS_FLOAT32);
    ck_assert_int_eq(wire_obs_elem_bytes((uint32_t)a.env.obs_dtype), 4);
    ck_assert_double_eq(a.env.obs_scale, 1.0);
    // Atari-shaped external frames: the shape gives obs_dim, uint8 defaults to 1/255, the
    // Nature DQN body parses, and the whole prints back to itself.
    const char *atari[] = {"env.id=external",
                           "env.obs_shape=84x84x4",
                           "env.n_actions=6",
                           "env.obs_dtype=uint8",
                           "network.conv=32x8s4, 64x4s2,64x3s1",
                           "network.hidden=512"};
    ck_assert_msg(config_load(&a, NULL, atari, 6, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.obs_dim, 84 * 84 * 4);
    ck_assert_int_eq(a.env.obs_h, 84);
    ck_assert_int_eq(a.env.obs_c, 4);
    ck_assert_double_eq(a.env.obs_scale, 1.0 / 255.0);
    ck_assert_int_eq(a.network.n_conv, 3);
    ck_assert_int_eq(a.network.conv[0].filters, 32);
    ck_assert_int_eq(a.network.conv[0].kernel, 8);
    ck_assert_int_eq(a.network.conv[0].stride, 4);
    ck_assert_int_eq(a.network.conv[2].kernel, 3);
    s_assert_prints_back(&a);
    // MinAtar: uint8 10x10xC frames at scale 1, from the id alone.
    const char *minatar[] = {"env.id=MinAtar/Seaquest-v0", "network.conv=16x3s1"};
    ck_assert_msg(config_load(&a, NULL, minatar, 2, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.obs_dtype, CONFIG_OBS_UINT8);
    ck_assert_int_eq(a.env.obs_dim, 1000);
    ck_assert_int_eq(a.env.obs_c, 10);
    ck_assert_double_eq(a.env.obs_scale, 1.0);
    s_assert_prints_back(&a);
}
END_TEST

// [env] id = python: the observation keys of id = external, the factory and [python]'s
// keys, each cross-check with its own message.
START_TEST(test_python_env) {
    const char *py = "[env]\nid = python\nmake = m:f\nobs_dim = 4\nn_actions = 2\n";
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "", text[512];
    ck_assert_msg(s_load(py, &cfg, err) == 0, "%s", err);
    ck_assert_int_eq(cfg.env.obs_dim, 4);
    ck_assert_int_eq(cfg.env.obs_dtype, CONFIG_OBS_FLOAT32);
    ck_assert_int_eq(cfg.python.workers, 1);
    ck_assert_int_eq(cfg.python.groups, 2);
    ck_assert_int_eq(cfg.python.spawn, 1);
    ck_assert_int_eq(cfg.python.transport, CONFIG_PY_LOCAL);
    ck_assert_int_eq(cfg.python.step_timeout_ms, 10000);
    s_expect_error("[env]\nid = python\nobs_dim = 4\nn_actions = 2\n",
                   "[env] make: id = python needs the env factory as MODULE:CALLABLE (have ''), "
                   "e.g. apex_cartpole:CartPoleEnv");
    s_expect_error("[env]\nid = python\nmake = m:f\nn_actions = 2\n",
                   "[env] id = python needs obs_dim (or obs_shape) and n_actions >= 2 (have 0 "
                   "and 2)");
    snprintf(text, sizeof text, "%s[python]\nworkers = 3\n", py);
    s_expect_error(text, " (default)): each worker steps envs_per_actor / workers envs in groups "
                         "of equal size");
    snprintf(text, sizeof text, "%s[python]\nspawn = false\n", py);
    s_expect_error(text, "spawn = false); workers started by hand connect with transport = zmq");
    snprintf(text, sizeof text, "%s[python]\nspawn = false\ntransport = zmq\n", py);
    s_expect_error(text, "[python] bind: 'tcp://127.0.0.1:*' has an ephemeral port; workers "
                         "started by hand (spawn = false) need a fixed one to connect to");
    snprintf(text, sizeof text, "%skwargs = [1]\n", py);
    s_expect_error(text, "[env] kwargs: '[1]' is not a JSON object {...}");
    snprintf(text, sizeof text, "%seval_id = Acrobot-v1\n", py);
    s_expect_error(text, "[env] eval_id: Acrobot-v1 has 6 float32 observation elements and 3 "
                         "actions; the run's ([env] obs_dim, obs_dtype, obs_shape, n_actions) "
                         "are 4 float32 and 2");
    snprintf(text, sizeof text, "%seval_id = CartPole-v1\n", py);
    ck_assert_msg(s_load(text, &cfg, err) == 0, "%s", err);
    s_expect_error("[env]\nid = CartPole-v1\nmake = m:f\n",
                   "[env] make is for id = python (id is 'CartPole-v1')");
    s_expect_error("[env]\nid = CartPole-v1\neval_id = Acrobot-v1\n",
                   "[env] eval_id is for id = python or external (id is CartPole-v1)");
}
END_TEST

START_TEST(test_batches_per_request_auto) {
    // 0 (the default) resolves at load: up to 4, within max_batch and a 1 MiB reply; an
    // explicit value is kept, and one that overflows max_batch is an error.
    struct {
        const char *sets[4];
        int n;
        int64_t want;
    } cases[] = {
        {{"learner.batch_size=512"}, 1, 4},  // CartPole: 28 KB a batch
        {{"learner.batch_size=2048"}, 1, 2}, // max_batch 4096
        {{"learner.batch_size=4096"}, 1, 1},
        {{"env.id=external", "env.obs_dim=7056", "env.n_actions=6", "env.obs_dtype=uint8"},
         4,
         1}, // 7 MB a batch
        {{"env.id=external", "env.obs_dim=1024", "env.n_actions=6", "learner.batch_size=32"},
         4,
         3}, // 263 KB a batch
        {{"learner.batches_per_request=1"}, 1, 1},
        {{"learner.batches_per_request=8"}, 1, 8},
    };
    for (size_t i = 0; i < APEX_ARRAY_LEN(cases); i++) {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN] = "";
        ck_assert_msg(config_load(&cfg, NULL, cases[i].sets, cases[i].n, err, sizeof err) == 0,
                      "case %zu: %s", i, err);
        ck_assert_msg(cfg.learner.batches_per_request == cases[i].want,
                      "case %zu: %lld batches per request, want %lld", i,
                      (long long)cfg.learner.batches_per_request, (long long)cases[i].want);
        s_assert_prints_back(&cfg);
    }
    s_expect_error("[learner]\nbatch_size = 2048\nbatches_per_request = 3\n",
                   ": [learner] batches_per_request: 3 batches of 2048 exceed [replay] max_batch "
                   "4096 (the rows of one reply)");
}
END_TEST

START_TEST(test_shipped_configs_load) {
    // Every configs/*.ini must load cleanly (they are the user's starting point).
    const char *files[] = {"configs/cartpole.ini", "configs/smoke.ini",
                           "configs/python-cartpole.ini"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (access(files[i], R_OK) != 0) {
            continue; // run from another directory; make test runs from the repo root
        }
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN] = "";
        ck_assert_msg(config_load(&cfg, files[i], NULL, 0, err, sizeof err) == 0, "%s", err);
    }
}
END_TEST

Suite *config_suite(void) {
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_defaults_valid);
    tcase_add_test(tc, test_file_values);
    tcase_add_test(tc, test_error_classes);
    tcase_add_test(tc, test_missing_file);
    tcase_add_test(tc, test_overrides);
    tcase_add_test(tc, test_print_round_trip);
    tcase_add_test(tc, test_external_env);
    tcase_add_test(tc, test_python_env);
    tcase_add_test(tc, test_batches_per_request_auto);
    tcase_add_test(tc, test_shipped_configs_load);
    suite_add_tcase(s, tc);
    return s;
}
