// check_config.c: defaults, file loading, overrides, and every error class with its
// file:line: [section] key: reason message; the config modules directly: the schema's
// lookups, the checks between keys, and the sharded replay's derivation and check.
#include "check_apex.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "config_shard.h"
#include "config_check.h"
#include "config_schema.h"
#include "nn.h"
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
    // The weights endpoint's keys were renamed when it stopped being a PUB: an old config
    // says so, with the new name.
    s_expect_error("[endpoints]\nlearner_pub_bind = tcp://127.0.0.1:5552\n",
                   ":2: [endpoints] learner_pub_bind: renamed learner_weights_bind: the learner "
                   "answers weights requests on a ROUTER, it publishes nothing (the same value "
                   "works under the new name)");
    s_expect_error("[endpoints]\nlearner_pub = tcp://127.0.0.1:5552\n",
                   ":2: [endpoints] learner_pub: renamed learner_weights: actors and apex-eval ask "
                   "the learner for weights, they do not subscribe (the same value works under "
                   "the new name)");
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
                   "MountainCar-v0, Pendulum-v1, MountainCarContinuous-v0, MinAtar/Asterix-v0, "
                   "MinAtar/Breakout-v0, MinAtar/Freeway-v0, "
                   "MinAtar/Seaquest-v0, MinAtar/SpaceInvaders-v0, MinAtar/Asterix-render84-v0, "
                   "MinAtar/Breakout-render84-v0, MinAtar/Freeway-render84-v0, "
                   "MinAtar/Seaquest-render84-v0, MinAtar/SpaceInvaders-render84-v0, "
                   "HalfCheetah-v4, Hopper-v4, "
                   "Walker2d-v4, Ant-v4, InvertedPendulum-v4, InvertedDoublePendulum-v4, or "
                   "python, or external)");
    // The external environment's keys: both needed; built-in ids keep their own shape and
    // float32 observations.
    s_expect_error("[env]\nid = external\nobs_dim = 8\n",
                   ": [env] id = external needs discrete actions (n_actions >= 2) or continuous "
                   "ones (action_dim >= 1 with action_low and action_high), one of them (have "
                   "n_actions 0, action_dim 0)");
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
    // The rendered MinAtar frames are 84x84x1 uint8 images, whatever the keys say.
    s_expect_error("[env]\nid = MinAtar/Breakout-render84-v0\nobs_dtype = float32\n",
                   ":3: [env] obs_dtype: MinAtar/Breakout-render84-v0's observations are uint8");
    s_expect_error("[env]\nid = MinAtar/Seaquest-render84-v0\nobs_dim = 1000\n",
                   ": [env] obs_dim, n_actions and action_dim are for id = python or external; "
                   "MinAtar/Seaquest-render84-v0 has 7056, 6 and 0");
    s_expect_error(
        "[env]\nid = MinAtar/Breakout-render84-v0\n[network]\nconv = 16x8s4,32x4s2,64x9s1,"
        "64x3s1\n",
        ":4: [network] conv: layer 4 (64x3s1) has a kernel larger than its 1x1 input");
    s_expect_error("[env]\nid = CartPole-v1\nobs_dim = 5\n",
                   ": [env] obs_dim, n_actions and action_dim are for id = python or external; "
                   "CartPole-v1 has 4, 2 and 0");
    // Continuous actions for id = external: action_dim with both bounds, one number for every
    // component or one per component.
    s_expect_error("[env]\nid = CartPole-v1\naction_low = -1\n",
                   ":3: [env] action_low and action_high are for id = python or external; "
                   "CartPole-v1's are [0, 0]");
    s_expect_error("[env]\nid = external\nobs_dim = 3\nn_actions = 2\naction_dim = 1\n",
                   ": [env] id = external needs discrete actions (n_actions >= 2) or continuous "
                   "ones (action_dim >= 1 with action_low and action_high), one of them (have "
                   "n_actions 2, action_dim 1)");
    s_expect_error(
        "[env]\nid = external\nobs_dim = 3\naction_dim = 2\naction_low = -1\n"
        "action_high = 1,2,3\n",
        ":6: [env] action_high: '1,2,3' is not one finite number or 2 comma-separated ones");
    s_expect_error(
        "[env]\nid = external\nobs_dim = 3\naction_dim = 2\naction_low = -1\n"
        "action_high = 1,nan\n",
        ":6: [env] action_high: '1,nan' is not one finite number or 2 comma-separated ones");
    s_expect_error("[env]\nid = external\nobs_dim = 3\naction_dim = 2\naction_low = -1,2\n"
                   "action_high = 1\n",
                   ": [env] action_low[1] = 2 is not below action_high[1] = 1");
    s_expect_error("[env]\nid = external\nobs_dim = 3\nn_actions = 2\naction_low = -1\n",
                   ":5: [env] action_low and action_high are for continuous actions "
                   "(action_dim >= 1)");
    s_expect_error("[env]\nid = external\nobs_dim = 16\nobs_shape = 4x4x1\naction_dim = 1\n"
                   "action_low = -2\naction_high = 2\n[network]\nconv = 8x2s1\n",
                   ":9: [network] conv: continuous actions train DPG's actor and critic, MLPs "
                   "over vector observations");
    // The DPG learner's group runs every ZeRO stage (issue #28).
    for (int stage = 0; stage <= 2; stage++) {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN], z[32];
        snprintf(z, sizeof z, "learner.zero_stage=%d", stage);
        const char *sets[] = {"env.id=Pendulum-v1", "learner.ranks=2", z};
        ck_assert_msg(config_load(&cfg, NULL, sets, 3, err, sizeof err) == 0, "%s", err);
    }
    // but stage 3 (parameters sharded) is the DQN learner's: refused at load, with the remedy.
    s_expect_error("[env]\nid = Pendulum-v1\n[learner]\nzero_stage = 3\n",
                   ":4: [learner] zero_stage = 3 (parameters sharded) is the DQN "
                   "learner's; the DPG learner of continuous actions shards optimizer state and "
                   "gradients: set [learner] zero_stage = 0, 1 or 2");
    {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN];
        const char *sets[] = {"env.id=CartPole-v1", "learner.ranks=2", "learner.zero_stage=3"};
        ck_assert_msg(config_load(&cfg, NULL, sets, 3, err, sizeof err) == 0, "%s", err);
        ck_assert_int_eq(cfg.learner.zero_stage, 3);
    }
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
    // Rendered MinAtar: 84x84x1 uint8 frames at 1/255 (the row's float), from the id alone,
    // with the 2013 DQN body.
    const char *pixels[] = {"env.id=MinAtar/SpaceInvaders-render84-v0",
                            "network.conv=16x8s4,32x4s2", "network.hidden=256"};
    ck_assert_msg(config_load(&a, NULL, pixels, 3, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.obs_dtype, CONFIG_OBS_UINT8);
    ck_assert_int_eq(a.env.obs_dim, 7056);
    ck_assert(a.env.obs_h == 84 && a.env.obs_w == 84 && a.env.obs_c == 1);
    ck_assert_int_eq(a.env.n_actions, 6);
    ck_assert_int_eq(a.env.max_episode_steps, 0);
    ck_assert((float)a.env.obs_scale == 1.0f / 255.0f);
    ck_assert_int_eq(a.network.n_conv, 2);
    s_assert_prints_back(&a);
    // Continuous actions: one bound for every component, or one per component; the whole
    // prints back to itself.
    const char *cont[] = {"env.id=external", "env.obs_dim=11", "env.action_dim=3",
                          "env.action_low=-1", "env.action_high=1, 2,0.5"};
    ck_assert_msg(config_load(&a, NULL, cont, 5, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.env.n_actions, 0);
    ck_assert_int_eq(a.env.action_dim, 3);
    ck_assert_float_eq(a.env.action_low[0], -1.0f);
    ck_assert_float_eq(a.env.action_low[2], -1.0f);
    ck_assert_float_eq(a.env.action_high[1], 2.0f);
    ck_assert_float_eq(a.env.action_high[2], 0.5f);
    s_assert_prints_back(&a);
    // The run's network is then DPG's policy: action_dim outputs bounded per component, no
    // dueling head (dueling is the Q-network's: off for continuous actions, even written).
    ck_assert_int_eq(a.network.dueling, 0);
    const char *cont_dueling[] = {"env.id=Pendulum-v1", "network.dueling=true"};
    ck_assert_msg(config_load(&a, NULL, cont_dueling, 2, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(a.network.dueling, 0);
    ck_assert_msg(config_load(&a, NULL, cont, 5, err, sizeof err) == 0, "%s", err);
    nn_config_t pol;
    nn_config_from_run(&pol, &a);
    ck_assert_int_eq(pol.n_actions, 3);
    ck_assert_int_eq(pol.out_bounded, 1);
    ck_assert_int_eq(pol.dueling, 0);
    ck_assert_int_eq(pol.obs_dim, 11);
    ck_assert_float_eq(pol.out_low[1], -1.0f);
    ck_assert_float_eq(pol.out_high[1], 2.0f);
    ck_assert_float_eq(pol.out_high[2], 0.5f);
    char why[256] = "";
    ck_assert_msg(nn_config_check(&pol, why, sizeof why) == 0, "%s", why);
    // A discrete run's network is the Q-network it always was.
    const char *disc[] = {"env.id=CartPole-v1"};
    ck_assert_msg(config_load(&a, NULL, disc, 1, err, sizeof err) == 0, "%s", err);
    nn_config_from_run(&pol, &a);
    ck_assert_int_eq(pol.n_actions, 2);
    ck_assert_int_eq(pol.out_bounded, 0);
    ck_assert_int_eq(pol.dueling, 1);
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
                   "[env] id = python needs obs_dim (or obs_shape) (have 0)");
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
    // A continuous python run's eval_id: its action_dim and bounds must be the run's.
    const char *pd = "[env]\nid = python\nmake = m:f\nobs_dim = 3\naction_dim = 1\n"
                     "eval_id = Pendulum-v1\naction_high = 2\n";
    snprintf(text, sizeof text, "%saction_low = -2\n", pd);
    ck_assert_msg(s_load(text, &cfg, err) == 0, "%s", err);
    snprintf(text, sizeof text, "%saction_low = -1\n", pd);
    s_expect_error(text, "[env] eval_id: Pendulum-v1 has continuous actions of 1 floats in [-2, "
                         "2]; the run's ([env] action_dim, action_low, action_high) are 1 floats, "
                         "the first in [-1, 2]");
    s_expect_error("[env]\nid = python\nmake = m:f\nobs_dim = 3\naction_dim = 1\naction_low = "
                   "-2\naction_high = 2\neval_id = CartPole-v1\n",
                   "[env] eval_id: CartPole-v1 has 4 float32 observation elements and 2 "
                   "actions; the run's ([env] obs_dim, obs_dtype, obs_shape, n_actions) are 3 "
                   "float32 and 0");
    s_expect_error("[env]\nid = CartPole-v1\nmake = m:f\n",
                   "[env] make is for id = python (id is 'CartPole-v1')");
    s_expect_error("[env]\nid = CartPole-v1\neval_id = Acrobot-v1\n",
                   "[env] eval_id is for id = python or external (id is CartPole-v1)");
}
END_TEST

// [env] frame_stack = K: the run's observation is K of the env's frames (obs_dim, obs_c grow
// K-fold; frame_dim and frame_c are one frame's, what the env emits, and what obs_dim,
// obs_shape and eval_id describe); id = external is refused (its actors are the user's);
// --print-config writes the key back and the round trip gives the same dims.
// [replay] frame_storage and compress (issue #27): frame mode with stacks, or with compression
// alone (any frame_stack); compression needs frame storage, a level needs a codec, zstd's
// levels stop at 22; the frame window covers a batch and n + 1 steps of every env.
START_TEST(test_frame_storage_keys) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\nframe_stack = 4\n", &cfg, err) == 0,
                  "%s", err);
    ck_assert(config_frame_mode(&cfg));
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\n[replay]\ncompress = zstd\n"
                         "compress_level = 5\n",
                         &cfg, err) == 0,
                  "%s", err);
    ck_assert(config_frame_mode(&cfg));
    ck_assert_int_eq(cfg.replay.compress, 2);
    ck_assert_int_eq(cfg.replay.compress_level, 5);
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\n", &cfg, err) == 0, "%s", err);
    ck_assert(!config_frame_mode(&cfg));
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\nframe_stack = 4\n[replay]\n"
                         "frame_storage = false\n",
                         &cfg, err) == 0,
                  "%s", err);
    ck_assert(!config_frame_mode(&cfg));
    s_expect_error("[replay]\nframe_storage = false\ncompress = lz4\n",
                   "[replay] compress = lz4 needs frame_storage = true (frames are compressed one "
                   "by one, as they are stored)");
    s_expect_error("[replay]\ncompress = zstd\ncompress_level = 23\n",
                   "[replay] compress_level 23: zstd's levels are 1..22");
    s_expect_error("[replay]\ncompress_level = 3\n",
                   "[replay] compress_level 3 without compress: it would change nothing\n---> "
                   "HINT: set [replay] compress = zstd or lz4, or remove the key");
    s_expect_error(
        "[env]\nid = MinAtar/Breakout-v0\nframe_stack = 4\n[actor]\nenvs_per_actor = "
        "64\n[replay]\nmax_batch = 200\n[learner]\nbatch_size = 32\n[actor]\nsend_batch = 50\n",
        "with frame_storage: a batch must hold the frames of a few steps");
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\nframe_stack = 4\n[actor]\n"
                         "envs_per_actor = 16\nn_step = 3\n[replay]\nmax_batch = 512\n"
                         "[learner]\nbatch_size = 128\n",
                         &cfg, err) == 0,
                  "%s", err);
    // 2 x (512 + 2 x 16 x 5) = 1664 -> 2048.
    ck_assert_uint_eq(config_frame_window(&cfg), 2048);
}
END_TEST

START_TEST(test_frame_stack) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(s_load("[env]\nid = MinAtar/Breakout-v0\nframe_stack = 4\n", &cfg, err) == 0,
                  "%s", err);
    ck_assert_int_eq(cfg.env.frame_dim, 400);
    ck_assert_int_eq(cfg.env.frame_c, 4);
    ck_assert_int_eq(cfg.env.obs_dim, 1600);
    ck_assert_int_eq(cfg.env.obs_h, 10);
    ck_assert_int_eq(cfg.env.obs_c, 16);
    ck_assert_msg(s_load("[env]\nid = python\nmake = m:f\nobs_shape = 84x84x1\nobs_dtype = uint8\n"
                         "n_actions = 6\nframe_stack = 4\neval_id = \n",
                         &cfg, err) == 0,
                  "%s", err);
    ck_assert_int_eq(cfg.env.frame_dim, 7056);
    ck_assert_int_eq(cfg.env.obs_dim, 4 * 7056);
    ck_assert_int_eq(cfg.env.obs_c, 4);
    ck_assert_msg(s_load("[env]\nid = CartPole-v1\n", &cfg, err) == 0, "%s", err);
    ck_assert_int_eq(cfg.env.frame_dim, 4);
    ck_assert_int_eq(cfg.env.obs_dim, 4);
    ck_assert_int_eq(cfg.env.obs_c, 0);
    s_expect_error("[env]\nid = external\nobs_dim = 4\nn_actions = 2\nframe_stack = 2\n",
                   ":5: [env] frame_stack = 2 with id = external: your own actors send the "
                   "observations; stack them there and give the stack's obs_shape\n---> HINT: "
                   "set [env] frame_stack = 1");
    s_expect_error("[env]\nid = CartPole-v1\nframe_stack = 17\n",
                   ":3: [env] frame_stack: 17 is out of range [1, 16]");
    // A python run's eval_id is compared frame to frame.
    ck_assert_msg(s_load("[env]\nid = python\nmake = m:f\nobs_dim = 4\nn_actions = 2\n"
                         "eval_id = CartPole-v1\nframe_stack = 3\n",
                         &cfg, err) == 0,
                  "%s", err);
    ck_assert_int_eq(cfg.env.obs_dim, 12);
}
END_TEST

// [env] obs_layout: chw (the workers transpose channels-first observations) needs id = python
// and an obs_shape, whose H x W x C it then reads as (C, H, W); the default is hwc.
START_TEST(test_obs_layout) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(s_load("[env]\nid = python\nmake = m:f\nobs_shape = 84x84x4\nobs_dtype = uint8\n"
                         "n_actions = 6\nobs_layout = chw\n",
                         &cfg, err) == 0,
                  "%s", err);
    ck_assert_int_eq(cfg.env.obs_layout, CONFIG_OBS_CHW);
    ck_assert_int_eq(cfg.env.obs_c, 4);
    ck_assert_msg(s_load("[env]\nid = CartPole-v1\n", &cfg, err) == 0, "%s", err);
    ck_assert_int_eq(cfg.env.obs_layout, CONFIG_OBS_HWC);
    s_expect_error("[env]\nid = CartPole-v1\nobs_layout = chw\n",
                   ":3: [env] obs_layout = chw is for id = python with an obs_shape HxWxC (the env "
                   "workers transpose (C, H, W) observations to it); id is 'CartPole-v1'");
    s_expect_error("[env]\nid = python\nmake = m:f\nobs_dim = 4\nn_actions = 2\nobs_layout = chw\n",
                   ":6: [env] obs_layout = chw is for id = python with an obs_shape HxWxC (the env "
                   "workers transpose (C, H, W) observations to it); id is 'python', obs_shape is "
                   "empty");
    s_expect_error("[env]\nid = CartPole-v1\nobs_layout = whc\n",
                   ":3: [env] obs_layout: 'whc' is not one of hwc|chw");
}
END_TEST

// [env] model_xml: a MuJoCo id needs it (only its presence: the file is loaded where the env
// is stepped, check_mujoco), every other id refuses it, python and external ones included.
START_TEST(test_model_xml) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(s_load("[env]\nid = Hopper-v4\nmodel_xml = assets/hopper.xml\n", &cfg, err) == 0,
                  "%s", err);
    ck_assert_str_eq(cfg.env.model_xml, "assets/hopper.xml");
    ck_assert_int_eq(cfg.env.obs_dim, 11);
    ck_assert_int_eq(cfg.env.max_episode_steps, 1000);
    s_expect_error("[env]\nid = Hopper-v4\n",
                   "[env] model_xml: Hopper-v4 is a MuJoCo task and needs the path of its MuJoCo "
                   "model (normally Gymnasium's own, which scripts/fetch-mujoco-models installs "
                   "into models/mujoco/; apex ships none)");
    s_expect_error("[env]\nid = Acrobot-v1\nmodel_xml = hopper.xml\n",
                   ":3: [env] model_xml is for the MuJoCo ids (id is Acrobot-v1)");
    s_expect_error("[env]\nid = external\nobs_dim = 4\nn_actions = 2\nmodel_xml = h.xml\n",
                   ":5: [env] model_xml is for the MuJoCo ids (id is external)");
}
END_TEST

// [run] deterministic: what the fixed schedule needs, each refused naming the key, and a
// config that has it loads.
static int s_err_has(const char *text, const char *want) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    int rc = s_load(text, &cfg, err);
    ck_assert_msg(rc == -1 && strstr(err, want), "got rc %d '%s', want '%s'", rc, err, want);
    return 1;
}

START_TEST(test_deterministic_needs) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(
        s_load("[run]\ndeterministic = true\n[replay]\nsamples_per_insert = 8\n", &cfg, err) == 0,
        "%s", err);
    ck_assert_int_eq(cfg.run.deterministic, 1);
    s_err_has("[run]\ndeterministic = true\n",
              ":2: [run] deterministic needs [replay] samples_per_insert > 0");
    // Several replay shards need periods longer than an actor's held-back n-step windows.
    s_err_has("[run]\ndeterministic = true\n[replay]\nsamples_per_insert = 8\nshards = 2\n"
              "[actor]\nnum_actors = 2\nenvs_per_actor = 8\nn_step = 3\nweight_sync_steps = 20\n",
              "needs [actor] weight_sync_steps >= n_step x envs_per_actor (20 < 3 x 8)");
    // Several replay shards are part of the schedule (every place asked of each shard).
    ck_assert_msg(s_load("[run]\ndeterministic = true\n[replay]\nsamples_per_insert = 8\n"
                         "shards = 2\n[actor]\nnum_actors = 2\n",
                         &cfg, err) == 0,
                  "%s", err);
    s_err_has("[run]\ndeterministic = true\n[replay]\nsamples_per_insert = 8\n[endpoints]\n"
              "relay = ipc:///tmp/r.sock\n",
              "[run] deterministic with [endpoints] relay");
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

// [replay] shards: the endpoint rule of config.h, case by case.
static void s_ep_ok(const char *value, int k, int K, const char *want) {
    char out[CONFIG_STR_LEN], err[CONFIG_ERR_LEN] = "";
    ck_assert_msg(config_shard_endpoint(value, k, K, out, sizeof out, err, sizeof err) == 0,
                  "%s k %d K %d: %s", value, k, K, err);
    ck_assert_msg(strcmp(out, want) == 0, "%s k %d K %d: got %s, want %s", value, k, K, out, want);
}

static void s_ep_bad(const char *value, int k, int K, const char *want_in_err) {
    char out[CONFIG_STR_LEN], err[CONFIG_ERR_LEN] = "";
    ck_assert_int_eq(config_shard_endpoint(value, k, K, out, sizeof out, err, sizeof err), -1);
    ck_assert_msg(strstr(err, want_in_err), "%s: got '%s', want '%s'", value, err, want_in_err);
}

START_TEST(test_shard_endpoints) {
    s_ep_ok("tcp://127.0.0.1:5550", 0, 1, "tcp://127.0.0.1:5550"); // K = 1: as written
    s_ep_ok("anything,at all", 0, 1, "anything,at all");
    s_ep_ok("tcp://127.0.0.1:5550", 0, 3, "tcp://127.0.0.1:5550"); // one endpoint: port + 10 k
    s_ep_ok("tcp://127.0.0.1:5550", 2, 3, "tcp://127.0.0.1:5570");
    s_ep_ok("tcp://*:5550", 1, 2, "tcp://*:5560");
    s_ep_ok("tcp://127.0.0.1:*", 1, 2, "tcp://127.0.0.1:*"); // ephemeral stays ephemeral
    s_ep_ok("tcp://[::1]:5550", 1, 2, "tcp://[::1]:5560");
    s_ep_ok("ipc:///tmp/r", 0, 2, "ipc:///tmp/r");
    s_ep_ok("ipc:///tmp/r", 1, 2, "ipc:///tmp/r-1");
    // A list: the k-th; a missing scheme is the first's, a missing tcp port the first's + 10 k.
    s_ep_ok("tcp://node1:5550,node2,node3:6000", 0, 3, "tcp://node1:5550");
    s_ep_ok("tcp://node1:5550,node2,node3:6000", 1, 3, "tcp://node2:5560");
    s_ep_ok("tcp://node1:5550,node2,node3:6000", 2, 3, "tcp://node3:6000");
    s_ep_ok("tcp://a:1,tcp://b:7", 1, 2, "tcp://b:7");
    s_ep_ok("tcp://[::1]:5550,[::2]", 1, 2, "tcp://[::2]:5560");
    s_ep_ok("tcp://*:5550,*", 1, 2, "tcp://*:5560");
    s_ep_ok("ipc:///tmp/a,/tmp/b", 1, 2, "ipc:///tmp/b");
    s_ep_bad("tcp://a:1,tcp://b:2", 0, 3, "has 2 endpoints; [replay] shards is 3");
    s_ep_bad("tcp://host", 1, 2, "'tcp://host' has no port");
    s_ep_bad("tcp://[::1]", 1, 2, "has no port");
    s_ep_bad("tcp://h:65535", 1, 2, "port '65535' + 10 is not a port");
    s_ep_bad("host:1,tcp://x:2", 1, 2, "the first endpoint needs a scheme");
    s_ep_bad("tcp://a:1,", 1, 2, "endpoint 1 is empty");
}
END_TEST

START_TEST(test_shards_config) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    // The defaults with K = 3: every endpoint by the port rule, capacity shares that sum up.
    const char *sets[] = {"replay.shards=3", "replay.capacity=10", "actor.num_actors=4",
                          "replay.min_size_to_sample=5"};
    ck_assert_msg(config_load(&cfg, NULL, sets, 4, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(config_shard_capacity(&cfg, 0), 4);
    ck_assert_int_eq(config_shard_capacity(&cfg, 1), 3);
    ck_assert_int_eq(config_shard_capacity(&cfg, 2), 3);
    ck_assert_int_eq(config_actor_shard(&cfg, 0), 0);
    ck_assert_int_eq(config_actor_shard(&cfg, 3), 0);
    ck_assert_int_eq(config_actor_shard(&cfg, 2), 2);
    s_assert_prints_back(&cfg);
    apex_config_t sh = cfg;
    ck_assert_int_eq(config_select_shard(&sh, 3), -1);
    ck_assert_int_eq(config_select_shard(&sh, 2), 0);
    ck_assert_int_eq(sh.replay.shard, 2);
    ck_assert_int_eq(sh.replay.capacity, 3);
    ck_assert_str_eq(sh.endpoints.replay_insert_bind, "tcp://127.0.0.1:5570");
    ck_assert_str_eq(sh.endpoints.replay_sample, "tcp://127.0.0.1:5571");
    ck_assert_str_eq(sh.endpoints.learner_weights,
                     cfg.endpoints.learner_weights); // not a replay key
    // K = 1: selecting shard 0 changes nothing.
    ck_assert_int_eq(config_load(&cfg, NULL, NULL, 0, err, sizeof err), 0);
    sh = cfg;
    ck_assert_int_eq(config_select_shard(&sh, 0), 0);
    ck_assert_mem_eq(&sh, &cfg, sizeof sh);
    // Host lists, as a cluster launcher writes them, print back to themselves.
    const char *hosts[] = {"replay.shards=2", "endpoints.replay_insert_bind=tcp://*:5550",
                           "endpoints.replay_insert=tcp://node-a:5550,node-b",
                           "endpoints.replay_sample_bind=tcp://*:5551",
                           "endpoints.replay_sample=tcp://node-a:5551,node-b"};
    ck_assert_msg(config_load(&cfg, NULL, hosts, 5, err, sizeof err) == 0, "%s", err);
    s_assert_prints_back(&cfg);
    sh = cfg;
    config_select_shard(&sh, 1);
    ck_assert_str_eq(sh.endpoints.replay_insert, "tcp://node-b:5560");
    ck_assert_str_eq(sh.endpoints.replay_sample_bind, "tcp://*:5561");
    // Errors name the key and where it came from.
    s_expect_error(
        "[replay]\nshards = 2\n[endpoints]\nreplay_sample = tcp://a:1,tcp://a:1\n",
        ":4: [endpoints] replay_sample: shard 1 is at tcp://a:1, which another replay shard uses");
    s_expect_error("[replay]\nshards = 3\n[actor]\nnum_actors = 3\n[endpoints]\nreplay_insert = "
                   "tcp://a:1,tcp://b:1\n",
                   ":6: [endpoints] replay_insert: shard 0: 'tcp://a:1,tcp://b:1' has 2 "
                   "endpoints; [replay] shards is 3 (give one endpoint, or one per shard, comma "
                   "separated)");
    // The port rule clears the default ports, but not any port: a clash with the learner.
    s_expect_error("[replay]\nshards = 2\n[endpoints]\nreplay_sample = tcp://127.0.0.1:5542\n",
                   ":4: [endpoints] replay_sample: shard 1 is at tcp://127.0.0.1:5552, which the "
                   "learner uses");
    ck_assert_int_eq(s_load("[replay]\nshards = 3\n", &cfg, err), -1);
    ck_assert_msg(strstr(err, ":2: [replay] shards: 3 shards need a capacity and [actor] "
                              "num_actors of at least 3 (num_actors is 2: /tmp/"),
                  "%s", err);
}
END_TEST

// The defaults, as a config filled in code starts (its messages name the source "code").
static void s_code_defaults(apex_config_t *cfg) {
    config_defaults(cfg);
    snprintf(cfg->source, sizeof cfg->source, "code");
}

// config_check on a config filled in code (no file, no --set): the environment's values are
// derived from [env] id, and checking a checked config again changes nothing (checked configs
// are handed around: config_select_shard's, --print-config's). A failure blames the value's
// origin, here a default.
START_TEST(test_check_direct) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    s_code_defaults(&cfg);
    snprintf(cfg.env.id, sizeof cfg.env.id, "MinAtar/Breakout-v0");
    snprintf(cfg.network.conv_spec, sizeof cfg.network.conv_spec, "16x3s1, 8x2s2");
    cfg.learner.batch_size = 512;
    ck_assert_msg(config_check(&cfg, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cfg.env.obs_dim, 400);
    ck_assert_int_eq(cfg.env.n_actions, 6);
    ck_assert_int_eq(cfg.env.obs_h, 10);
    ck_assert_int_eq(cfg.env.obs_w, 10);
    ck_assert_int_eq(cfg.env.obs_c, 4);
    ck_assert_int_eq(cfg.env.obs_dtype, CONFIG_OBS_UINT8); // auto resolved
    ck_assert_double_eq(cfg.env.obs_scale, 1.0);           // 0 resolved to the env's
    ck_assert_int_eq(cfg.env.ext_obs_dim, 400);
    ck_assert_int_eq(cfg.network.n_conv, 2);
    ck_assert_int_eq(cfg.network.conv[1].filters, 8);
    ck_assert_int_eq(cfg.network.conv[1].kernel, 2);
    ck_assert_int_eq(cfg.network.conv[1].stride, 2);
    // 0 resolved: 2 batches of 512 rows of 2 x 400 + 24 bytes stay within a 1 MiB reply.
    ck_assert_int_eq(cfg.learner.batches_per_request, 2);
    apex_config_t again = cfg;
    ck_assert_msg(config_check(&again, err, sizeof err) == 0, "%s", err);
    ck_assert_mem_eq(&again, &cfg, sizeof cfg);
    // The 10x10 input leaves 8x8 after the first layer and 4x4 after the second; a third
    // with kernel 5 does not fit.
    snprintf(cfg.network.conv_spec, sizeof cfg.network.conv_spec, "16x3s1,8x2s2,4x5s1");
    ck_assert_int_eq(config_check(&cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "code (default): [network] conv: layer 3 (4x5s1) has a kernel larger "
                          "than its 4x4 input");
}
END_TEST

// Where a value came from, as the checks' messages say it: the file's line, a --set (which
// wins over the file), or the default.
START_TEST(test_schema_where) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "", buf[CONFIG_WHERE_LEN];
    const char *p = s_write("[run]\nseed = 3\n\n[actor]\ngamma = 0.9\nn_step = 2\n");
    const char *sets[] = {"actor.n_step=4"};
    ck_assert_msg(config_load(&cfg, p, sets, 1, err, sizeof err) == 0, "%s", err);
    char want[CONFIG_WHERE_LEN];
    snprintf(want, sizeof want, "%s:5", p);
    ck_assert_str_eq(config_schema_where(&cfg, "actor", "gamma", buf, sizeof buf), want);
    ck_assert_str_eq(config_schema_where(&cfg, "actor", "n_step", buf, sizeof buf),
                     "--set actor.n_step");
    snprintf(want, sizeof want, "%s (default)", p);
    ck_assert_str_eq(config_schema_where(&cfg, "replay", "alpha", buf, sizeof buf), want);
    unlink(p);
    // Lookups: rows, sections, retired keys.
    const config_row_t *r = config_schema_find("replay", "alpha");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, T_FLOAT);
    ck_assert_str_eq(r->def, "0.6");
    ck_assert_ptr_null(config_schema_find("replay", "nope"));
    ck_assert_ptr_null(config_schema_find("alpha", "replay"));
    ck_assert_int_eq(config_schema_has_section("python"), 1);
    ck_assert_int_eq(config_schema_has_section("pythons"), 0);
    ck_assert_ptr_nonnull(config_schema_retired("replay", "reset_limiter_on_restore"));
    ck_assert_ptr_null(config_schema_retired("replay", "alpha"));
    ck_assert_int_eq((int)config_schema_len, config_key_count());
}
END_TEST

// config_shard_check's edges: one shard is never checked (it binds what it is given),
// ephemeral ports never clash (each bind gets its own), binds and connects are separate sets.
START_TEST(test_shard_check) {
    apex_config_t cfg;
    char err[CONFIG_ERR_LEN] = "";
    s_code_defaults(&cfg);
    snprintf(cfg.endpoints.replay_sample_bind, CONFIG_STR_LEN, "%s",
             cfg.endpoints.learner_weights_bind);
    ck_assert_int_eq(config_shard_check(&cfg, err, sizeof err), 0); // K = 1
    cfg.replay.shards = 2;
    ck_assert_int_eq(config_shard_check(&cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "code (default): [endpoints] replay_sample_bind: shard 0 is at "
                          "tcp://127.0.0.1:5552, which the learner uses");
    s_code_defaults(&cfg);
    cfg.replay.shards = 4;
    cfg.actor.num_actors = 4;
    char *eps[] = {cfg.endpoints.replay_insert_bind, cfg.endpoints.replay_insert,
                   cfg.endpoints.replay_sample_bind, cfg.endpoints.replay_sample};
    const char *vals[] = {"tcp://127.0.0.1:*", "tcp://h:7000", "tcp://127.0.0.1:*", "tcp://h:7100"};
    for (int i = 0; i < 4; i++) {
        snprintf(eps[i], CONFIG_STR_LEN, "%s", vals[i]);
    }
    ck_assert_msg(config_shard_check(&cfg, err, sizeof err) == 0, "%s", err);
    // Inserts connect to 7000, 7010, 7020, 7030: samples from 7010 on meet the second.
    snprintf(cfg.endpoints.replay_sample, CONFIG_STR_LEN, "tcp://h:7010");
    ck_assert_int_eq(config_shard_check(&cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "code (default): [endpoints] replay_sample: shard 0 is at "
                          "tcp://h:7010, which another replay shard uses");
    // Too few transitions for the shards.
    snprintf(cfg.endpoints.replay_sample, CONFIG_STR_LEN, "tcp://h:7100");
    cfg.replay.capacity = 3;
    ck_assert_int_eq(config_shard_check(&cfg, err, sizeof err), -1);
    ck_assert_str_eq(err, "code (default): [replay] shards: 4 shards need a capacity and [actor] "
                          "num_actors of at least 4 (capacity is 3: code (default))");
}
END_TEST

START_TEST(test_shipped_configs_load) {
    // Every configs/*.ini must load cleanly (they are the user's starting point): all of
    // them, found by the pattern, so a new config is checked without a list to extend.
    glob_t g;
    if (glob("configs/*.ini", 0, NULL, &g) != 0) {
        return; // run from another directory; make test runs from the repo root
    }
    ck_assert_uint_ge(g.gl_pathc, 18); // as many as were shipped with the pixels config
    int pixels = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN] = "";
        ck_assert_msg(config_load(&cfg, g.gl_pathv[i], NULL, 0, err, sizeof err) == 0, "%s: %s",
                      g.gl_pathv[i], err);
        pixels += strcmp(cfg.env.id, "MinAtar/Breakout-render84-v0") == 0 && cfg.env.obs_h == 84;
    }
    ck_assert_int_eq(pixels, 1); // configs/minatar-breakout-pixels.ini
    globfree(&g);
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
    tcase_add_test(tc, test_frame_stack);
    tcase_add_test(tc, test_frame_storage_keys);
    tcase_add_test(tc, test_obs_layout);
    tcase_add_test(tc, test_batches_per_request_auto);
    tcase_add_test(tc, test_deterministic_needs);
    tcase_add_test(tc, test_shipped_configs_load);
    tcase_add_test(tc, test_shard_endpoints);
    tcase_add_test(tc, test_shards_config);
    tcase_add_test(tc, test_check_direct);
    tcase_add_test(tc, test_schema_where);
    tcase_add_test(tc, test_shard_check);
    tcase_add_test(tc, test_model_xml);
    suite_add_tcase(s, tc);
    return s;
}
