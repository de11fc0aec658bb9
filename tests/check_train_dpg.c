// check_train_dpg.c: the DPG / TD3 learner update (learner/train_dpg.h, issue #28) against
// PyTorch on the same weights, batch and smoothing noise (tests/fixtures/dpg_torch.bin,
// written by gen_dpg_torch.py: a TD3 case and a DDPG case), the smoothing noise's draws from
// the learner's RNG, the skip of a non-finite gradient, and checkpoints: a bit-exact resume
// and every refusal leaving the trainer unchanged.
#include "check_apex.h"

#include "apex.h"
#include "ckpt.h"
#include "nn.h"
#include "rng.h"
#include "train_dpg.h"
#include "xalloc.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// the PyTorch fixture: a cursor over the file (layout in gen_dpg_torch.py)

typedef struct {
    uint8_t *buf;
    size_t len, off;
} s_fix_t;

static void s_fix_load(s_fix_t *f) {
    const char *root = getenv("APEX_SRC_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/dpg_torch.bin", root && *root ? root : ".");
    f->buf = check_slurp(path, &f->len);
    ck_assert_msg(f->buf != NULL, "cannot open %s (run from the repo root or set APEX_SRC_DIR)",
                  path);
    ck_assert_uint_ge(f->len, 12);
    ck_assert_int_eq(memcmp(f->buf, "APEXDPG1", 8), 0);
    f->off = 8;
    const uint32_t one = 1;
    uint8_t first_byte;
    memcpy(&first_byte, &one, 1);
    ck_assert_msg(first_byte == 1, "the fixture reader assumes a little-endian host");
}

// Copies n bytes at the cursor into dst (the data is not aligned) and advances.
static void s_fix_bytes(s_fix_t *f, void *dst, size_t n) {
    ck_assert_msg(f->off + n <= f->len, "fixture truncated at %zu (+%zu of %zu)", f->off, n,
                  f->len);
    memcpy(dst, f->buf + f->off, n);
    f->off += n;
}

static int32_t s_fix_i32(s_fix_t *f) {
    int32_t v;
    s_fix_bytes(f, &v, 4);
    return v;
}

static float s_fix_f32(s_fix_t *f) {
    float v;
    s_fix_bytes(f, &v, 4);
    return v;
}

// n floats, malloc'd (the caller frees).
static float *s_fix_floats(s_fix_t *f, size_t n) {
    float *p = xmalloc(APEX_MAX(n, (size_t)1) * sizeof(float));
    s_fix_bytes(f, p, n * sizeof(float));
    return p;
}

// Compares two scalars within rtol, atol.
static void s_close(double got, double want, double rtol, double atol, const char *what, int c,
                    int step) {
    ck_assert_msg(fabs(got - want) <= atol + rtol * fabs(want),
                  "case %d step %d %s: got %.9g, PyTorch %.9g", c, step, what, got, want);
}

// Runs every case of the fixture: the C trainer from PyTorch's initial parameters, the same
// batch and noise, each update's losses, norms, priorities, gradients, parameters and
// targets against PyTorch's after it. The tolerances are float32 rounding through a few Adam
// steps (Adam's normalised steps make a parameter's error about lr times the relative error
// of its moments): a wrong sign, a missing term or a step on the wrong schedule is orders
// of magnitude larger (shown by breaking the trainer: the noise's sign, the twin minimum,
// the Polyak rate, the policy delay's phase, Huber's 1/2, the value clip).
START_TEST(test_matches_pytorch) {
    s_fix_t f;
    s_fix_load(&f);
    uint32_t n_cases;
    s_fix_bytes(&f, &n_cases, 4);
    ck_assert_uint_eq(n_cases, 2);
    for (int c = 0; c < (int)n_cases; c++) {
        train_dpg_config_t cfg;
        train_dpg_config_default(&cfg);
        nn_config_t *a = &cfg.actor;
        a->obs_dim = s_fix_i32(&f);
        a->n_actions = s_fix_i32(&f);
        a->n_hidden = s_fix_i32(&f);
        ck_assert(a->n_hidden >= 1 && a->n_hidden <= NN_MAX_HIDDEN);
        for (int l = 0; l < a->n_hidden; l++) {
            a->hidden[l] = s_fix_i32(&f);
        }
        int u8 = s_fix_i32(&f);
        a->in_dtype = u8 ? NN_INPUT_U8 : NN_INPUT_F32;
        cfg.twin = s_fix_i32(&f);
        cfg.policy_delay = s_fix_i32(&f);
        cfg.target_update = s_fix_i32(&f);
        int n_steps = s_fix_i32(&f), B = s_fix_i32(&f);
        cfg.batch_size = B;
        a->in_scale = s_fix_f32(&f);
        cfg.actor_optim.lr = s_fix_f32(&f);
        cfg.critic_optim.lr = s_fix_f32(&f);
        cfg.grad_clip = s_fix_f32(&f);
        cfg.actor_grad_value_clip = s_fix_f32(&f);
        cfg.huber_delta = s_fix_f32(&f);
        cfg.target_noise = s_fix_f32(&f);
        cfg.target_noise_clip = s_fix_f32(&f);
        cfg.tau = s_fix_f32(&f);
        cfg.priority_eps = s_fix_f32(&f);
        const int O = a->obs_dim, A = a->n_actions;
        a->out_bounded = 1;
        s_fix_bytes(&f, a->out_low, (size_t)A * sizeof(float));
        s_fix_bytes(&f, a->out_high, (size_t)A * sizeof(float));
        uint32_t n_total;
        s_fix_bytes(&f, &n_total, 4);
        train_dpg_t *tr = train_dpg_new(&cfg);
        ck_assert_ptr_nonnull(tr);
        ck_assert_uint_eq(train_dpg_num_params(tr), n_total);
        ck_assert_int_eq(train_dpg_n_critics(tr), cfg.twin ? 2 : 1);
        float *p0 = s_fix_floats(&f, n_total);
        train_dpg_set_params(tr, p0, NULL);
        size_t obs_bytes = (size_t)B * O * (u8 ? 1 : sizeof(float));
        void *obs = xmalloc(obs_bytes), *next_obs = xmalloc(obs_bytes);
        s_fix_bytes(&f, obs, obs_bytes);
        float *act = s_fix_floats(&f, (size_t)B * A), *rew = s_fix_floats(&f, (size_t)B);
        float *disc = s_fix_floats(&f, (size_t)B), *w = s_fix_floats(&f, (size_t)B);
        s_fix_bytes(&f, next_obs, obs_bytes);
        train_dpg_batch_t batch = {.obs = obs,
                                   .actions = act,
                                   .rewards = rew,
                                   .discounts = disc,
                                   .next_obs = next_obs,
                                   .is_weights = w,
                                   .size = B};
        float prio[64];
        ck_assert_int_le(B, 64);
        int policy_steps = 0;
        for (int s = 0; s < n_steps; s++) {
            float *z = s_fix_floats(&f, (size_t)B * A);
            batch.target_noise = z;
            float want_closs = s_fix_f32(&f), want_aloss = s_fix_f32(&f);
            int want_pstep = s_fix_i32(&f);
            float want_cnorm = s_fix_f32(&f), want_anorm = s_fix_f32(&f);
            float *want_prio = s_fix_floats(&f, (size_t)B), *want_g = s_fix_floats(&f, n_total);
            float *want_on = s_fix_floats(&f, n_total), *want_tg = s_fix_floats(&f, n_total);
            train_dpg_stats_t st;
            float loss = train_dpg_step(tr, &batch, prio, &st);
            char what[64];
            snprintf(what, sizeof what, "case %d step %d", c, s);
            ck_assert_float_eq(loss, st.critic_loss);
            s_close(st.critic_loss, want_closs, 1e-5, 1e-6, "critic loss", c, s);
            ck_assert_int_eq(st.policy_step, want_pstep);
            // The schedule itself: every policy_delay-th update from the first.
            ck_assert_int_eq(want_pstep, s % cfg.policy_delay == 0);
            policy_steps += st.policy_step;
            s_close(st.actor_loss, want_aloss, 1e-5, 1e-6, "actor loss", c, s);
            s_close(st.critic_grad_norm, want_cnorm, 1e-5, 1e-6, "critic grad norm", c, s);
            s_close(st.actor_grad_norm, want_anorm, 1e-5, 1e-6, "actor grad norm", c, s);
            ck_assert_msg(check_close_f(prio, want_prio, (size_t)B, 1e-5, 1e-6, what),
                          "priorities, %s", what);
            ck_assert_msg(check_close_f(train_dpg_grads(tr), want_g, n_total, 1e-4, 1e-6, what),
                          "gradients, %s", what);
            ck_assert_msg(check_close_f(train_dpg_online(tr), want_on, n_total, 1e-5, 1e-6, what),
                          "parameters, %s", what);
            ck_assert_msg(check_close_f(train_dpg_target(tr), want_tg, n_total, 1e-5, 1e-6, what),
                          "targets, %s", what);
            ck_assert_int_eq(train_dpg_steps(tr), s + 1);
            xfree(z), xfree(want_prio), xfree(want_g), xfree(want_on), xfree(want_tg);
        }
        ck_assert_uint_eq(train_dpg_skipped_steps(tr), 0);
        ck_assert_int_eq(train_dpg_critic_optim(tr)->step, n_steps);
        ck_assert_int_eq(train_dpg_actor_optim(tr)->step, policy_steps);
        xfree(p0), xfree(obs), xfree(next_obs), xfree(act), xfree(rew), xfree(disc), xfree(w);
        train_dpg_destroy(&tr);
        ck_assert_ptr_null(tr);
    }
    ck_assert_uint_eq(f.off, f.len);
    free(f.buf);
}
END_TEST

// ----------------------------------------------------------------------------
// a small TD3 problem for the tests below

enum { T_O = 3, T_A = 2, T_B = 8 };

typedef struct {
    float obs[T_B * T_O], next_obs[T_B * T_O], act[T_B * T_A], rew[T_B], disc[T_B], w[T_B];
} s_rows_t;

static void s_td3_config(train_dpg_config_t *cfg) {
    train_dpg_config_default(cfg);
    cfg->actor = (nn_config_t){
        .obs_dim = T_O, .n_actions = T_A, .n_hidden = 2, .hidden = {16, 12}, .out_bounded = 1};
    cfg->actor.out_low[0] = -1.0f, cfg->actor.out_high[0] = 1.0f;
    cfg->actor.out_low[1] = -0.5f, cfg->actor.out_high[1] = 2.0f;
    cfg->batch_size = T_B;
    cfg->actor_optim.lr = 1e-3f;
    cfg->critic_optim.lr = 1e-3f;
    cfg->tau = 0.1f;
    cfg->seed = 7;
}

// Batch k of a fixed sequence (rows from the test stream (7, k)).
static void s_rows(s_rows_t *r, int k, train_dpg_batch_t *b) {
    rng_t g;
    rng_init_stream(&g, 7, RNG_ROLE_TEST, (uint64_t)k);
    for (int i = 0; i < T_B * T_O; i++) {
        r->obs[i] = 2.0f * rng_uniform_f(&g) - 1.0f;
        r->next_obs[i] = 2.0f * rng_uniform_f(&g) - 1.0f;
    }
    for (int i = 0; i < T_B * T_A; i++) {
        r->act[i] = i % 2 ? -0.5f + 2.5f * rng_uniform_f(&g) : 2.0f * rng_uniform_f(&g) - 1.0f;
    }
    for (int i = 0; i < T_B; i++) {
        r->rew[i] = 2.0f * rng_uniform_f(&g) - 1.0f;
        r->disc[i] = i == 3 ? 0.0f : 0.97f;
        r->w[i] = 0.5f + 0.5f * rng_uniform_f(&g);
    }
    *b = (train_dpg_batch_t){.obs = r->obs,
                             .actions = r->act,
                             .rewards = r->rew,
                             .discounts = r->disc,
                             .next_obs = r->next_obs,
                             .is_weights = r->w,
                             .size = T_B};
}

// The whole trainer state a resume must restore: parameters, targets, moments, steps, RNG.
static void s_assert_same_state(train_dpg_t *x, train_dpg_t *y) {
    size_t n = train_dpg_num_params(x);
    ck_assert_uint_eq(n, train_dpg_num_params(y));
    ck_assert_int_eq(memcmp(train_dpg_online(x), train_dpg_online(y), n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(train_dpg_target(x), train_dpg_target(y), n * sizeof(float)), 0);
    const optim_t *ox[2] = {train_dpg_actor_optim(x), train_dpg_critic_optim(x)};
    const optim_t *oy[2] = {train_dpg_actor_optim(y), train_dpg_critic_optim(y)};
    for (int k = 0; k < 2; k++) {
        ck_assert_uint_eq(ox[k]->n, oy[k]->n);
        ck_assert_int_eq(ox[k]->step, oy[k]->step);
        ck_assert_int_eq(memcmp(ox[k]->m, oy[k]->m, ox[k]->n * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(ox[k]->v, oy[k]->v, ox[k]->n * sizeof(float)), 0);
    }
    ck_assert_int_eq(train_dpg_steps(x), train_dpg_steps(y));
    ck_assert_int_eq(memcmp(train_dpg_rng(x)->s, train_dpg_rng(y)->s, sizeof(rng_t)), 0);
}

// In production the smoothing noise comes from the learner's RNG, z = (float)rng_normal
// sample by sample: a trainer given those very draws through the test hook makes the same
// update bit for bit, and the hook draws nothing. Without smoothing nothing is drawn.
START_TEST(test_noise_from_rng) {
    train_dpg_config_t cfg;
    s_td3_config(&cfg);
    train_dpg_t *x = train_dpg_new(&cfg), *y = train_dpg_new(&cfg);
    s_rows_t r;
    train_dpg_batch_t b;
    float px[T_B], py[T_B], z[T_B * T_A];
    for (int k = 0; k < 3; k++) {
        s_rows(&r, k, &b);
        rng_t copy = *train_dpg_rng(x), y_rng = *train_dpg_rng(y);
        for (int i = 0; i < T_B * T_A; i++) {
            z[i] = (float)rng_normal(&copy);
        }
        train_dpg_step(x, &b, px, NULL);
        ck_assert_int_eq(memcmp(train_dpg_rng(x)->s, copy.s, sizeof copy.s), 0);
        b.target_noise = z;
        train_dpg_step(y, &b, py, NULL);
        ck_assert_int_eq(memcmp(train_dpg_rng(y)->s, y_rng.s, sizeof y_rng.s), 0); // no draw
        ck_assert_int_eq(memcmp(px, py, sizeof px), 0);
        size_t n = train_dpg_num_params(x);
        ck_assert_int_eq(memcmp(train_dpg_online(x), train_dpg_online(y), n * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(train_dpg_target(x), train_dpg_target(y), n * sizeof(float)), 0);
    }
    // The noise matters: other draws give other priorities (the targets moved).
    s_rows(&r, 3, &b);
    for (int i = 0; i < T_B * T_A; i++) {
        z[i] = 1.0f;
    }
    b.target_noise = z;
    train_dpg_step(x, &b, px, NULL);
    for (int i = 0; i < T_B * T_A; i++) {
        z[i] = -1.0f;
    }
    train_dpg_step(y, &b, py, NULL);
    ck_assert_int_ne(memcmp(px, py, sizeof px), 0);
    train_dpg_destroy(&x);
    train_dpg_destroy(&y);
    // target_noise 0: no draws at all.
    cfg.target_noise = 0.0f;
    x = train_dpg_new(&cfg);
    rng_t before = *train_dpg_rng(x);
    s_rows(&r, 0, &b);
    train_dpg_step(x, &b, px, NULL);
    ck_assert_int_eq(memcmp(train_dpg_rng(x)->s, before.s, sizeof before.s), 0);
    train_dpg_destroy(&x);
}
END_TEST

// Issue #26 for the DPG trainer: observations near FLT_MAX are finite but overflow the
// critics, the critic gradient's norm is not finite, and the update steps nothing: online
// parameters and both optimizers' moments bit for bit, the skip counted; the step counts and
// its priorities go back. The next normal batch trains as ever.
START_TEST(test_nonfinite_gradient_skipped) {
    train_dpg_config_t cfg;
    s_td3_config(&cfg);
    cfg.tau = 0.0f;
    cfg.target_update = 1000; // no target copy in this test: targets stay put as well
    cfg.policy_delay = 1;     // the policy's turn comes on the bad batch too
    train_dpg_t *tr = train_dpg_new(&cfg);
    size_t n = train_dpg_num_params(tr);
    float *before = xmalloc(n * sizeof(float)), *tbefore = xmalloc(n * sizeof(float));
    memcpy(before, train_dpg_online(tr), n * sizeof(float));
    memcpy(tbefore, train_dpg_target(tr), n * sizeof(float));
    s_rows_t r;
    train_dpg_batch_t b;
    s_rows(&r, 0, &b);
    float keep[T_O], prio[T_B];
    memcpy(keep, r.obs, sizeof keep);
    for (int j = 0; j < T_O; j++) {
        r.obs[j] = j % 2 ? -FLT_MAX : FLT_MAX; // row 0
    }
    train_dpg_stats_t st;
    train_dpg_step(tr, &b, prio, &st);
    ck_assert_msg(!isfinite(st.critic_grad_norm), "the batch must overflow the critic (norm %g)",
                  (double)st.critic_grad_norm);
    ck_assert_int_eq(st.policy_step, 0);
    ck_assert_int_eq(memcmp(before, train_dpg_online(tr), n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(tbefore, train_dpg_target(tr), n * sizeof(float)), 0);
    ck_assert_int_eq(train_dpg_steps(tr), 1);
    ck_assert_uint_eq(train_dpg_skipped_steps(tr), 1);
    const optim_t *oa = train_dpg_actor_optim(tr), *oc = train_dpg_critic_optim(tr);
    ck_assert_int_eq(oa->step, 0);
    ck_assert_int_eq(oc->step, 0);
    for (size_t i = 0; i < oa->n; i++) {
        ck_assert(oa->m[i] == 0.0f && oa->v[i] == 0.0f);
    }
    for (size_t i = 0; i < oc->n; i++) {
        ck_assert(oc->m[i] == 0.0f && oc->v[i] == 0.0f);
    }
    for (int i = 1; i < T_B; i++) { // the other rows' priorities are finite
        ck_assert(isfinite(prio[i]));
    }
    // The same rows without the overflow: both networks step, every parameter finite.
    memcpy(r.obs, keep, sizeof keep);
    train_dpg_step(tr, &b, prio, &st);
    ck_assert(isfinite(st.critic_grad_norm) && isfinite(st.critic_loss));
    ck_assert_int_eq(st.policy_step, 1);
    ck_assert_int_ne(memcmp(before, train_dpg_online(tr), n * sizeof(float)), 0);
    // Both networks moved: the policy's range and the critics'.
    size_t n_mu = train_dpg_policy(tr)->num_params;
    ck_assert_int_ne(memcmp(before, train_dpg_online(tr), n_mu * sizeof(float)), 0);
    ck_assert_int_ne(memcmp(before + n_mu, train_dpg_online(tr) + n_mu, (n - n_mu) * sizeof(float)),
                     0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(train_dpg_online(tr)[i]), "parameter %zu is %g", i,
                      (double)train_dpg_online(tr)[i]);
    }
    ck_assert_int_eq(train_dpg_steps(tr), 2);
    ck_assert_uint_eq(train_dpg_skipped_steps(tr), 1);
    ck_assert_int_eq(oa->step, 1);
    ck_assert_int_eq(oc->step, 1);
    xfree(before), xfree(tbefore);
    train_dpg_destroy(&tr);
}
END_TEST

// Save after 3 updates, train 4 more; a trainer of another seed that loads the file and
// trains the same 4 batches ends in the same state bit for bit (parameters, targets, both
// optimizers' moments and steps, the RNG that draws the smoothing noise), with the same
// priorities; extra comes back with the actor-step slot cleared.
START_TEST(test_save_load_resume) {
    train_dpg_config_t cfg;
    s_td3_config(&cfg);
    train_dpg_t *x = train_dpg_new(&cfg);
    s_rows_t r;
    train_dpg_batch_t b;
    float px[T_B], py[T_B];
    for (int k = 0; k < 3; k++) {
        s_rows(&r, k, &b);
        train_dpg_step(x, &b, px, NULL);
    }
    char path[1200];
    const char *dir = check_tmpdir();
    snprintf(path, sizeof path, "%s/dpg.ckpt", dir);
    ckpt_extra_t extra;
    memset(&extra, 0, sizeof extra);
    extra.user[CKPT_USER_FRAMES] = 12345;
    extra.user[CKPT_USER_EPISODES] = 67;
    ck_assert_int_eq(train_dpg_save(x, path, &extra), APEX_OK);
    train_dpg_config_t cfg_y = cfg;
    cfg_y.seed = 99; // other initial weights and RNG: everything must come from the file
    train_dpg_t *y = train_dpg_new(&cfg_y);
    ck_assert_int_ne(
        memcmp(train_dpg_online(x), train_dpg_online(y), train_dpg_num_params(x) * sizeof(float)),
        0);
    ckpt_extra_t got;
    ck_assert_int_eq(train_dpg_load(y, path, &got), APEX_OK);
    ck_assert_uint_eq(got.user[CKPT_USER_FRAMES], 12345);
    ck_assert_uint_eq(got.user[CKPT_USER_EPISODES], 67);
    ck_assert_uint_eq(got.user[TRAIN_DPG_CKPT_ACTOR_STEP], 0);
    s_assert_same_state(x, y);
    ck_assert_int_eq(train_dpg_actor_optim(y)->step, 2); // updates 0 and 2
    ck_assert_int_eq(train_dpg_critic_optim(y)->step, 3);
    for (int k = 3; k < 7; k++) {
        s_rows(&r, k, &b);
        train_dpg_step(x, &b, px, NULL);
        train_dpg_step(y, &b, py, NULL);
        ck_assert_int_eq(memcmp(px, py, sizeof px), 0);
    }
    s_assert_same_state(x, y);
    train_dpg_destroy(&x);
    train_dpg_destroy(&y);
    check_rmtree(dir);
}
END_TEST

// A snapshot of a trainer's state, to show a refused load changed nothing.
typedef struct {
    float *online, *target, *m, *v;
    int64_t step, a_step, c_step;
    rng_t rng;
} s_snap_t;

static void s_snap(s_snap_t *s, train_dpg_t *t) {
    size_t n = train_dpg_num_params(t);
    const optim_t *oa = train_dpg_actor_optim(t);
    s->online = xmalloc(n * sizeof(float)), s->target = xmalloc(n * sizeof(float));
    s->m = xmalloc(n * sizeof(float)), s->v = xmalloc(n * sizeof(float));
    memcpy(s->online, train_dpg_online(t), n * sizeof(float));
    memcpy(s->target, train_dpg_target(t), n * sizeof(float));
    memcpy(s->m, oa->m, n * sizeof(float)); // both optimizers' moments are one array
    memcpy(s->v, oa->v, n * sizeof(float));
    s->step = train_dpg_steps(t);
    s->a_step = oa->step;
    s->c_step = train_dpg_critic_optim(t)->step;
    s->rng = *train_dpg_rng(t);
}

static void s_snap_check(const s_snap_t *s, train_dpg_t *t) {
    size_t n = train_dpg_num_params(t);
    const optim_t *oa = train_dpg_actor_optim(t);
    ck_assert_int_eq(memcmp(s->online, train_dpg_online(t), n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(s->target, train_dpg_target(t), n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(s->m, oa->m, n * sizeof(float)), 0);
    ck_assert_int_eq(memcmp(s->v, oa->v, n * sizeof(float)), 0);
    ck_assert_int_eq(s->step, train_dpg_steps(t));
    ck_assert_int_eq(s->a_step, oa->step);
    ck_assert_int_eq(s->c_step, train_dpg_critic_optim(t)->step);
    ck_assert_int_eq(memcmp(s->rng.s, train_dpg_rng(t)->s, sizeof s->rng.s), 0);
    xfree(s->online), xfree(s->target), xfree(s->m), xfree(s->v);
}

// Refused files, the trainer unchanged by each: another hidden size, one critic where the
// file has two (same policy shape, another whole-model count), another optimizer kind, a
// Q-network's checkpoint of the policy's very shape (its magic), a missing file.
START_TEST(test_load_refusals) {
    train_dpg_config_t cfg;
    s_td3_config(&cfg);
    train_dpg_t *src = train_dpg_new(&cfg);
    s_rows_t r;
    train_dpg_batch_t b;
    float prio[T_B];
    s_rows(&r, 0, &b);
    train_dpg_step(src, &b, prio, NULL);
    const char *dir = check_tmpdir();
    char path[1200], qpath[1200], missing[1200];
    snprintf(path, sizeof path, "%s/dpg.ckpt", dir);
    snprintf(qpath, sizeof qpath, "%s/q.ckpt", dir);
    snprintf(missing, sizeof missing, "%s/none.ckpt", dir);
    ck_assert_int_eq(train_dpg_save(src, path, NULL), APEX_OK);
    // A Q-network checkpoint of the policy's shape (obs 3, 16-12, 2 outputs).
    nn_config_t qnet = cfg.actor;
    qnet.out_bounded = 0;
    nn_params_t qp;
    nn_params_init(&qp, &qnet);
    ckpt_header_t qh;
    ckpt_header_init(&qh, &qnet);
    const float *qarr[2] = {qp.data, qp.data};
    ck_assert_int_eq(ckpt_write(qpath, &qh, qarr, 2), APEX_OK);
    nn_params_fini(&qp);

    train_dpg_config_t cfgs[4];
    for (int k = 0; k < 4; k++) {
        s_td3_config(&cfgs[k]);
        cfgs[k].seed = 50 + (uint64_t)k;
    }
    cfgs[0].actor.hidden[1] = 13;                              // another shape
    cfgs[1].twin = 0;                                          // one critic
    optim_config_default(&cfgs[2].actor_optim, OPTIM_RMSPROP); // another optimizer
    cfgs[2].critic_optim = cfgs[2].actor_optim;
    for (int k = 0; k < 4; k++) {
        train_dpg_t *t = train_dpg_new(&cfgs[k]);
        ck_assert_ptr_nonnull(t);
        s_rows(&r, 1, &b);
        train_dpg_step(t, &b, prio, NULL); // a state that is not the initial one
        s_snap_t s;
        const char *files[3] = {path, qpath, missing};
        for (int f = k < 3 ? 0 : 1; f < 3; f++) { // k = 3: a matching config, other files
            s_snap(&s, t);
            ckpt_extra_t extra;
            int rc = train_dpg_load(t, files[f], &extra);
            ck_assert_msg(rc != APEX_OK, "config %d loaded %s", k, files[f]);
            if (k == 2 && f == 0) {
                ck_assert_int_eq(rc, APEX_EINVAL);
            }
            s_snap_check(&s, t);
        }
        train_dpg_destroy(&t);
    }
    // The same config loads the file (the refusals were the mismatches, not the file).
    train_dpg_t *t = train_dpg_new(&cfg);
    ck_assert_int_eq(train_dpg_load(t, path, NULL), APEX_OK);
    s_assert_same_state(src, t);
    train_dpg_destroy(&t);
    // And a Q-network's reader refuses the DPG file by its magic.
    nn_config_t pol = cfg.actor;
    ckpt_header_t h;
    float *arr[4];
    size_t n = train_dpg_num_params(src);
    for (int k = 0; k < 4; k++) {
        arr[k] = xmalloc(n * sizeof(float));
    }
    ck_assert_int_ne(ckpt_read(path, &pol, &h, arr, 4), APEX_OK);
    for (int k = 0; k < 4; k++) {
        xfree(arr[k]);
    }
    train_dpg_destroy(&src);
    check_rmtree(dir);
}
END_TEST

// Configs train_dpg_new refuses (logged, NULL): a policy without a bounded head, a conv
// policy, policy_delay 0, mixed optimizer kinds, tau out of range, hard targets with
// target_update 0.
START_TEST(test_config_refusals) {
    train_dpg_config_t ok, c;
    s_td3_config(&ok);
    train_dpg_t *t = train_dpg_new(&ok);
    ck_assert_ptr_nonnull(t);
    train_dpg_destroy(&t);
    c = ok, c.actor.out_bounded = 0;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.actor.action_inputs = 2;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.policy_delay = 0;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.critic_optim.kind = OPTIM_RMSPROP;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.tau = 1.5f;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.tau = 0.0f, c.target_update = 0;
    ck_assert_ptr_null(train_dpg_new(&c));
    c = ok, c.batch_size = 0;
    ck_assert_ptr_null(train_dpg_new(&c));
}
END_TEST

Suite *train_dpg_suite(void) {
    Suite *s = suite_create("train_dpg");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_matches_pytorch);
    tcase_add_test(tc, test_noise_from_rng);
    tcase_add_test(tc, test_nonfinite_gradient_skipped);
    tcase_add_test(tc, test_save_load_resume);
    tcase_add_test(tc, test_load_refusals);
    tcase_add_test(tc, test_config_refusals);
    suite_add_tcase(s, tc);
    return s;
}
