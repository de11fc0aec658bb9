// check_pyenv_image.c: image observations over the Python env bridge (issue #27), with the
// real worker (python/apex_env.py under /usr/bin/python3) and tests/pyenv_frames.py's square,
// whose 84x84 frames are a closed form of (seed, episode, step) computed here too (s_frame),
// with the frame's identity in its first three pixels and actions that change nothing, so
// that every row the bridge or the actor hands out can be rebuilt here and compared byte for
// byte:
//   - single 84x84x1 frames stacked by the actor ([env] frame_stack = 4): an actor in a thread
//     against a stub replay (a ROUTER here decoding its TransitionBatches); every row's obs
//     and next_obs are the frame-major stacks built here from the env's frames;
//   - 84x84x4 stacks the env makes channels last go through the bridge as they are, and
//     (4, 84, 84) channels-first ones (Gymnasium's FrameStackObservation) are refused with
//     obs_layout hwc and arrive transposed to the same channels-last bytes with chw;
//   - (84, 84) frames are 84x84x1; other shapes and dtypes are refused naming both sides;
//   - python/apex_atari.py's life-loss and clipping logic (tests/apex_atari_check.py).
// Waits are bounded by WAIT_MS and wait for conditions.
#include "check_apex.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "actor.h"
#include "clock.h"
#include "config.h"
#include "log.h"
#include "pyenv.h"
#include "wire.h"

#define PYTHON "/usr/bin/python3"
#define FRAMES "tests/pyenv_frames.py"
#define SZ 84
#define PX (SZ * SZ) // bytes of one frame
#define K 4
#define STEP_MS 30000
#define WAIT_MS 60000
#define SEED 500

// ---------------------------------------------------------------------------------------
// tests/pyenv_frames.py's frames, restated

static int s_len(int s) { return 5 + s % 3; }

// frame(s, ep, t) of pyenv_frames.py: (SZ, SZ) bytes.
static void s_frame(uint8_t *f, int s, int ep, int t) {
    for (int r = 0; r < SZ; r++) {
        for (int c = 0; c < SZ; c++) {
            f[r * SZ + c] = r == 0 ? 0 : (uint8_t)((s + 3 * ep + c) % 64);
        }
    }
    int r0 = (3 * t + 11 * ep + s) % (SZ - 8) + 1, c0 = (5 * t + 7 * s + ep) % (SZ - 8);
    for (int r = r0; r < r0 + 8; r++) {
        for (int c = c0; c < c0 + 8; c++) {
            f[r * SZ + c] = (uint8_t)(128 + (s + ep + t) % 128);
        }
    }
    f[0] = (uint8_t)(s % 256), f[1] = (uint8_t)(ep % 256), f[2] = (uint8_t)(t % 256);
}

// The K frames ending at t of episode ep, oldest first, the first frame repeated before it.
static void s_frames(uint8_t *out, int s, int ep, int t) {
    for (int j = 0; j < K; j++) {
        int u = t - (K - 1) + j;
        s_frame(out + (size_t)j * PX, s, ep, u < 0 ? 0 : u);
    }
}

// The same K frames channels last: (SZ, SZ, K), channel j = frame j.
static void s_hwc(uint8_t *out, int s, int ep, int t) {
    static uint8_t f[K * PX];
    s_frames(f, s, ep, t);
    for (int p = 0; p < PX; p++) {
        for (int j = 0; j < K; j++) {
            out[p * K + j] = f[j * PX + p];
        }
    }
}

// ---------------------------------------------------------------------------------------
// The bridge alone

static void s_opts(pyenv_opts_t *o, const char *kwargs, int h, int w, int c, int layout,
                   int dtype) {
    pyenv_opts_defaults(o);
    snprintf(o->python, sizeof o->python, PYTHON);
    snprintf(o->make, sizeof o->make, FRAMES ":square");
    snprintf(o->kwargs, sizeof o->kwargs, "%s", kwargs);
    o->workers = 1;
    o->envs_per_worker = 2;
    o->groups = 1;
    o->obs_h = h, o->obs_w = w, o->obs_c = c;
    o->obs_dim = h ? h * w * c : SZ * SZ;
    o->obs_layout = layout;
    o->obs_dtype = dtype;
    o->n_actions = 3;
    o->seed = SEED;
    o->hello_timeout_ms = WAIT_MS;
}

// Steps 2 envs for 20 steps (episodes of 5 and 6 steps end on the way) and compares every
// row to act on with want(seed, episode, step) (the episode's first row after an end).
static void s_step_and_check(pyenv_opts_t *o, void (*want)(uint8_t *, int, int, int)) {
    pyenv_t *p = pyenv_new(o);
    ck_assert_ptr_nonnull(p);
    size_t row = (size_t)o->obs_dim;
    uint8_t *next = malloc(2 * row), *act = malloc(2 * row), *ref = malloc(row);
    float rew[2];
    uint8_t term[2], trunc[2], status[2];
    int32_t a[2] = {1, 2};
    pyenv_results_t r = {next, act, rew, term, trunc, status};
    ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r), 0);
    int ep[2] = {0, 0}, t[2] = {0, 0};
    for (int step = 0; step <= 20; step++) {
        for (int j = 0; j < 2; j++) {
            int s = SEED + j;
            if (step > 0) {
                ck_assert_int_eq(status[j], PYENV_OK);
                t[j]++;
                ck_assert_int_eq(term[j], t[j] == s_len(s));
                want(ref, s, ep[j], t[j]); // the step's own observation
                ck_assert_msg(memcmp(next + j * row, ref, row) == 0, "env %d ep %d t %d: next_obs",
                              j, ep[j], t[j]);
                if (term[j]) {
                    ep[j]++, t[j] = 0;
                }
            }
            want(ref, s, ep[j], t[j]);
            ck_assert_msg(memcmp(act + j * row, ref, row) == 0, "env %d ep %d t %d: obs", j, ep[j],
                          t[j]);
        }
        if (step < 20) {
            ck_assert_int_eq(pyenv_send_actions(p, 0, a), 2);
            ck_assert_int_eq(pyenv_recv_results(p, 0, STEP_MS, &r), 2);
        }
    }
    ck_assert_int_ge(ep[0] + ep[1], 6);
    pyenv_destroy(&p);
    free(next), free(act), free(ref);
}

static void s_frame_only(uint8_t *out, int s, int ep, int t) { s_frame(out, s, ep, t); }

// Single frames, (84, 84, 1) and (84, 84): the bytes of the frame, for an 84x84x1 run.
START_TEST(test_single_frames) {
    pyenv_opts_t o;
    s_opts(&o, "{\"layout\": \"hwc1\"}", SZ, SZ, 1, CONFIG_OBS_HWC, CONFIG_OBS_UINT8);
    s_step_and_check(&o, s_frame_only);
    s_opts(&o, "{\"layout\": \"hw\"}", SZ, SZ, 1, CONFIG_OBS_HWC, CONFIG_OBS_UINT8);
    s_step_and_check(&o, s_frame_only);
}
END_TEST

// Stacks the env makes channels last, (84, 84, 4), go through as they are.
START_TEST(test_hwc_stacks) {
    pyenv_opts_t o;
    s_opts(&o, "{\"layout\": \"hwck\"}", SZ, SZ, K, CONFIG_OBS_HWC, CONFIG_OBS_UINT8);
    s_step_and_check(&o, s_hwc);
}
END_TEST

// (4, 84, 84) channels first with obs_layout chw: the worker sends each transposed, the rows
// are the channels-last stacks, byte for byte.
START_TEST(test_chw_transposed) {
    pyenv_opts_t o;
    s_opts(&o, "{\"layout\": \"chwk\"}", SZ, SZ, K, CONFIG_OBS_CHW, CONFIG_OBS_UINT8);
    s_step_and_check(&o, s_hwc);
}
END_TEST

// What does not fit is refused at start-up, naming the env's and the run's shape (or dtype).
START_TEST(test_refused_naming_both) {
    const char *dir = check_tmpdir();
    char logpath[600];
    snprintf(logpath, sizeof logpath, "%s/log", dir);
    ck_assert_int_eq(log_open_file(logpath), 0);
    static const struct {
        const char *kwargs;
        int h, w, c, layout, dtype;
    } cases[] = {
        // channels first, read as channels last: the misreading this refusal prevents
        {"{\"layout\": \"chwk\"}", SZ, SZ, K, CONFIG_OBS_HWC, CONFIG_OBS_UINT8},
        // channels last, declared channels first
        {"{\"layout\": \"hwck\"}", SZ, SZ, K, CONFIG_OBS_CHW, CONFIG_OBS_UINT8},
        // a frame for a vector run of as many elements
        {"{\"layout\": \"hwc1\"}", 0, 0, 0, CONFIG_OBS_HWC, CONFIG_OBS_UINT8},
        // float32 frames for a uint8 run
        {"{\"layout\": \"hwc1\", \"dtype\": \"float32\"}", SZ, SZ, 1, CONFIG_OBS_HWC,
         CONFIG_OBS_UINT8},
        // a stack for a run of single frames
        {"{\"layout\": \"hwck\"}", SZ, SZ, 1, CONFIG_OBS_HWC, CONFIG_OBS_UINT8},
        // a wider image of as many elements
        {"{\"layout\": \"hwc1\", \"size\": 84}", 42, 168, 1, CONFIG_OBS_HWC, CONFIG_OBS_UINT8},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pyenv_opts_t o;
        s_opts(&o, cases[i].kwargs, cases[i].h, cases[i].w, cases[i].c, cases[i].layout,
               cases[i].dtype);
        ck_assert_msg(pyenv_new(&o) == NULL, "case %zu started", i);
    }
    log_close_file();
    const char *log = check_read_file(logpath);
    const char *want[] = {
        "does not fit this run: the env's observation_space is (4, 84, 84) uint8; the run's "
        "[env] obs_shape is 84x84x4 (channels last: the shape (84, 84, 4))\n---> HINT: the env's "
        "observations are channels first: set [env] obs_layout = chw",
        "does not fit this run: the env's observation_space is (84, 84, 4) uint8; the run's "
        "[env] obs_shape is 84x84x4 with obs_layout = chw (channels first: the shape (4, 84, 84), "
        "transposed by the worker)\n---> HINT: the env's observations are channels last already: "
        "[env] obs_layout = hwc",
        "the env's observation_space is (84, 84, 1) uint8; the run's [env] obs_dim is 7056 (a "
        "vector, no obs_shape: the shape (7056,))\n---> HINT: give the run the env's shape, [env] "
        "obs_shape = HxWxC",
        "it has float32 observations of shape (84, 84, 1) (7056 elements) and 3 discrete actions; "
        "the run expects uint8 observations of shape 84x84x1, channels last ([env] obs_shape, "
        "obs_dtype) and 3 actions ([env] n_actions)\n---> HINT: set [env] obs_dtype = float32",
        "it has uint8 observations of shape (84, 84, 4) (28224 elements) and 3 discrete actions; "
        "the run expects uint8 observations of shape 84x84x1, channels last",
        "the env's observation_space is (84, 84, 1) uint8; the run's [env] obs_shape is 42x168x1 "
        "(channels last: the shape (42, 168, 1))\n---> HINT: set [env] obs_shape"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ck_assert_msg(strstr(log, want[i]) != NULL, "log lacks \"%s\":\n%s", want[i], log);
    }
    check_rmtree(dir);
}
END_TEST

// ---------------------------------------------------------------------------------------
// The actor stacks single frames ([env] frame_stack = 4)

#define ENVS 4
#define NSTEP 2

static void s_set(apex_config_t *cfg, const char *kv) {
    char err[CONFIG_ERR_LEN];
    ck_assert_msg(config_set(cfg, kv, err, sizeof err) == 0, "%s: %s", kv, err);
}

static void *s_bound(void *ctx, int type, char *ep, size_t ep_len) {
    void *s = zmq_socket(ctx, type);
    ck_assert_ptr_nonnull(s);
    int zero = 0, timeout = 100;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    ck_assert_int_eq(zmq_bind(s, "tcp://127.0.0.1:*"), 0);
    ck_assert_int_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &ep_len), 0);
    return s;
}

typedef struct {
    actor_t *actor;
    int rc;
} s_thread_arg;

static void *s_actor_main(void *arg) {
    s_thread_arg *x = arg;
    x->rc = actor_run(x->actor, 0);
    return NULL;
}

// An actor of [python] groups G on single 84x84x1 uint8 frames with frame_stack 4: every
// row's obs is the stack of the frame it names (its newest frame's first pixels: seed,
// episode, step) and the 3 before it in its episode (the first one repeated at the start);
// its next_obs is the stack NSTEP steps on, or the final stack where the episode ended
// (terminated: discount 0); rewards are the n-step sums of the env's 1s.
START_TEST(test_actor_stacks_single_frames) {
    const int G = _i;
    apex_config_t cfg;
    char groups[64];
    snprintf(groups, sizeof groups, "python.groups=%d", G);
    const char *sets[] = {
        "env.id=python", "env.make=" FRAMES ":square", "env.kwargs={\"layout\": \"hwc1\"}",
        "env.obs_shape=84x84x1", "env.obs_dtype=uint8", "env.n_actions=3", "env.frame_stack=4",
        // whole stacks in the rows, which this test reads (frame storage
        // from a Python env's frames is the same actor code:
        // check_actor_frames.c)
        "replay.frame_storage=false", "python.workers=1", groups, "python.interpreter=" PYTHON,
        "network.conv=4x8s8", "network.hidden=8", "actor.num_actors=1", "actor.envs_per_actor=4",
        "actor.n_step=2", "actor.gamma=0.5", "actor.send_batch=4",
        "actor.weight_sync_steps=1000000", "actor.max_pending_batches=64",
        "actor.max_steps_per_s=1000", "replay.max_batch=1024", "run.seed=9"};
    char err[CONFIG_ERR_LEN];
    ck_assert_msg(
        config_load(&cfg, NULL, sets, (int)(sizeof sets / sizeof sets[0]), err, sizeof err) == 0,
        "%s", err);
    ck_assert_int_eq(cfg.env.obs_dim, K * PX);
    ck_assert_int_eq(cfg.env.frame_dim, PX);
    void *ctx = zmq_ctx_new();
    char ins_ep[256], weights_ep[256], stats_ep[256], kv[400];
    void *replay = s_bound(ctx, ZMQ_ROUTER, ins_ep, sizeof ins_ep);
    void *weights = check_weights_router(ctx, weights_ep, sizeof weights_ep);
    void *pull = s_bound(ctx, ZMQ_PULL, stats_ep, sizeof stats_ep);
    snprintf(kv, sizeof kv, "endpoints.replay_insert=%s", ins_ep);
    s_set(&cfg, kv);
    snprintf(kv, sizeof kv, "endpoints.learner_weights=%s", weights_ep);
    s_set(&cfg, kv);
    snprintf(kv, sizeof kv, "endpoints.learner_stats=%s", stats_ep);
    s_set(&cfg, kv);
    wire_limits_t lim = {.obs_dim = (uint32_t)cfg.env.obs_dim,
                         .obs_dtype = (uint32_t)cfg.env.obs_dtype,
                         .n_actions = 3,
                         .max_count = 64,
                         .max_episodes = 4096};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    s_thread_arg x = {.actor = actor_new(&cfg, 0), .rc = -2};
    ck_assert_ptr_nonnull(x.actor);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, s_actor_main, &x), 0);
    static uint8_t want[K * PX];
    int rows = 0, ended = 0, late = 0, seen_env[ENVS] = {0};
    int64_t deadline = clock_now_ms() + WAIT_MS;
    while (rows < 60 || ended < 8 || late < 8) {
        ck_assert_msg(clock_now_ms() < deadline, "%d rows, %d ended, %d late", rows, ended, late);
        zmq_msg_t id, msg;
        zmq_msg_init(&id);
        if (zmq_msg_recv(&id, replay, 0) < 0) {
            zmq_msg_close(&id);
            continue;
        }
        zmq_msg_init(&msg);
        ck_assert_int_ge(zmq_msg_recv(&msg, replay, 0), 0);
        wire_msg_t m;
        ck_assert_int_eq(wire_decode(dec, zmq_msg_data(&msg), zmq_msg_size(&msg), &m), APEX_OK);
        ck_assert_int_eq(m.type, WIRE_MSG_TRANSITION_BATCH);
        const wire_batch_t *b = &m.u.batch;
        ck_assert_uint_eq(b->obs_dtype, WIRE_OBS_UINT8);
        for (uint32_t r = 0; r < b->count; r++) {
            const uint8_t *obs = (const uint8_t *)b->obs + (size_t)r * K * PX;
            const uint8_t *nx = (const uint8_t *)b->next_obs + (size_t)r * K * PX;
            const uint8_t *newest = obs + (size_t)(K - 1) * PX;
            int s = newest[0], ep = newest[1], t = newest[2]; // seeds 9 + env: below 256
            ck_assert_int_ge(s, 9);
            ck_assert_int_lt(s, 9 + ENVS);
            s_frames(want, s, ep, t);
            ck_assert_msg(memcmp(obs, want, sizeof want) == 0,
                          "row %u (seed %d ep %d t %d): obs is not the stack", r, s, ep, t);
            int L = s_len(s), tn = t + NSTEP < L ? t + NSTEP : L;
            s_frames(want, s, ep, tn);
            ck_assert_msg(memcmp(nx, want, sizeof want) == 0,
                          "row %u (seed %d ep %d t %d): next_obs is not the stack of t %d", r, s,
                          ep, t, tn);
            float disc = tn == L ? 0.0f : 0.25f, ret = tn - t == 2 ? 1.5f : 1.0f;
            ck_assert_msg(b->discounts[r] == disc && b->rewards[r] == ret,
                          "row %u (seed %d ep %d t %d): discount %g return %g", r, s, ep, t,
                          (double)b->discounts[r], (double)b->rewards[r]);
            rows++;
            ended += tn == L;
            late += t >= K; // stacks of 4 distinct frames
            seen_env[s - 9] = 1;
        }
        zmq_msg_close(&id);
        zmq_msg_close(&msg);
    }
    actor_stop(x.actor);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_int_eq(x.rc, 0);
    actor_stats_t st;
    actor_get_stats(x.actor, &st);
    ck_assert_uint_eq(st.env_faults + st.episodes_dropped, 0);
    for (int e = 0; e < ENVS; e++) {
        ck_assert_msg(seen_env[e], "no row of env %d", e);
    }
    actor_destroy(&x.actor);
    wire_decoder_destroy(&dec);
    zmq_close(replay);
    zmq_close(weights);
    zmq_close(pull);
    zmq_ctx_term(ctx);
}
END_TEST

// python/apex_atari.py's own logic without gymnasium or ROMs (tests/apex_atari_check.py):
// reward clipping, a lost life as the end of a training episode with a no-op step instead of
// a reset, the module importable without gymnasium, and the training env through the
// worker's own stepping.
START_TEST(test_atari_factory_logic) {
    FILE *f = popen(PYTHON " tests/apex_atari_check.py 2>&1", "r");
    ck_assert_ptr_nonnull(f);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    int status = pclose(f);
    ck_assert_msg(status == 0 && strcmp(out, "OK\n") == 0, "status %d:\n%s", status, out);
}
END_TEST

Suite *pyenv_image_suite(void) {
    Suite *s = suite_create("pyenv_image");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_single_frames);
    tcase_add_test(tc, test_hwc_stacks);
    tcase_add_test(tc, test_chw_transposed);
    tcase_add_test(tc, test_refused_naming_both);
    tcase_add_loop_test(tc, test_actor_stacks_single_frames, 1, 3);
    tcase_add_test(tc, test_atari_factory_logic);
    suite_add_tcase(s, tc);
    return s;
}
