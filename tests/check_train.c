// check_train.c: double-DQN n-step targets, Huber loss and IS weights against a worked
// example, the whole loss's gradient against central differences of the double reference,
// target sync, and a 5-state chain MDP that must converge to its known optimal Q.
#include "check_apex.h"

#include "apex.h"
#include "check_nn_ref.h"
#include "loss.h"
#include "nn.h"
#include "train.h"
#include "xalloc.h"

#include <float.h>
#include <math.h>
#include <string.h>

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

START_TEST(test_loss_worked_example) {
    // B = 3, A = 2, worked by hand:
    //   argmax online(s')  = (1, 0, 0); target(s') at those: (3, 4, 100)
    //   y = R + disc * that = (1 + 0.5*3, 0 + 0.9*4, 2 + 0*100) = (2.5, 3.6, 2.0)
    //   (plain DQN, max over target(s'), would give 1 + 0.5*10 = 6 for sample 0;
    //    sample 2 is terminal: disc 0, so its 100 must not count.)
    //   actions (1, 1, 0): Q(s, a) = (2, -1, 3), delta = y - Q = (0.5, 4.6, -1.0)
    //   huber = (0.5*0.25, 4.6 - 0.5, 0.5*1) = (0.125, 4.1, 0.5)
    //   w = (1, 0.5, 0.25): L = (0.125 + 2.05 + 0.125) / 3 = 2.3 / 3
    //   dq[i, a_i] = -w_i * clamp(delta_i, -1, 1) / 3 = (-0.5/3, -0.5/3, +0.25/3)
    float q[] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};
    float qn_online[] = {0.0f, 1.0f, 2.0f, 1.0f, 5.0f, 4.0f};
    float qn_target[] = {10.0f, 3.0f, 4.0f, 7.0f, 100.0f, 100.0f};
    float rew[] = {1.0f, 0.0f, 2.0f}, disc[] = {0.5f, 0.9f, 0.0f}, w[] = {1.0f, 0.5f, 0.25f};
    int32_t act[] = {1, 1, 0};
    float y[3], dq[6], td[3], prio[3];
    nn_double_dqn_targets(y, qn_online, qn_target, rew, disc, 3, 2);
    float want_y[] = {2.5f, 3.6f, 2.0f};
    ck_assert(check_close_f(y, want_y, 3, 1e-6, 1e-6, "y"));
    float L = loss_huber_td(dq, td, q, y, act, w, 1.0f, 3, 2);
    ck_assert_float_eq_tol(L, 2.3 / 3.0, 1e-6);
    float want_td[] = {0.5f, 4.6f, -1.0f};
    ck_assert(check_close_f(td, want_td, 3, 1e-6, 1e-6, "td"));
    float want_dq[] = {0, -0.5f / 3, 0, -0.5f / 3, 0.25f / 3, 0};
    ck_assert(check_close_f(dq, want_dq, 6, 1e-6, 1e-7, "dq"));
    loss_priorities(prio, td, 0.01f, 3);
    float want_p[] = {0.51f, 4.61f, 1.01f};
    ck_assert(check_close_f(prio, want_p, 3, 1e-6, 1e-6, "priorities"));
}
END_TEST

// [learner] huber_delta: the loss and its gradient at thresholds 0.5, 1 and 3 against the
// closed form, for TD errors inside, on and outside each threshold (B = 4, A = 1, so
// Q(s, a) = q[i]): huber_k(d) = d^2/2 for |d| <= k, else k (|d| - k/2); dL/dq = -w clamp(d, -k,
// k) / B.
START_TEST(test_huber_delta_closed_form) {
    const float q[] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float y[] = {0.25f, -0.5f, 2.0f, -4.0f}; // d = y - q
    const float w[] = {1.0f, 0.5f, 2.0f, 0.25f};
    const int32_t act[] = {0, 0, 0, 0};
    struct {
        float k, L;
        float dq[4];
    } cases[] = {
        // k = 0.5: d^2/2 = 0.03125, 0.125; k (|d| - k/2) = 0.875, 1.875.
        {0.5f,
         (0.03125f + 0.0625f + 1.75f + 0.46875f) / 4,
         {-0.25f / 4, 0.25f / 4, -1.0f / 4, 0.125f / 4}},
        // k = 1: 0.03125, 0.125, 1.5, 3.5
        {1.0f,
         (0.03125f + 0.0625f + 3.0f + 0.875f) / 4,
         {-0.25f / 4, 0.25f / 4, -2.0f / 4, 0.25f / 4}},
        // k = 3: 0.03125, 0.125, 2.0 (|d| <= 3), 3 (4 - 1.5) = 7.5
        {3.0f,
         (0.03125f + 0.0625f + 4.0f + 1.875f) / 4,
         {-0.25f / 4, 0.25f / 4, -4.0f / 4, 0.75f / 4}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        float dq[4], td[4];
        float L = loss_huber_td(dq, td, q, y, act, w, cases[c].k, 4, 1);
        ck_assert_float_eq_tol(L, cases[c].L, 1e-6);
        ck_assert(check_close_f(dq, cases[c].dq, 4, 1e-6, 1e-7, "dq"));
    }
}
END_TEST

START_TEST(test_terminal_does_not_bootstrap) {
    // Even a non-finite bootstrap value is ignored at a terminal.
    float qn[] = {INFINITY, NAN}, rew[] = {0.7f}, disc[] = {0.0f}, y[1];
    nn_double_dqn_targets(y, qn, qn, rew, disc, 1, 2);
    ck_assert_float_eq(y[0], 0.7f);
}
END_TEST

// Small trainer config used by several tests.
static void s_small_config(train_config_t *tc, int dueling) {
    train_config_default(tc);
    tc->net = (nn_config_t){
        .obs_dim = 3, .n_actions = 3, .n_hidden = 2, .hidden = {12, 10}, .dueling = dueling};
    tc->batch_size = 6;
    tc->seed = 5;
}

typedef struct {
    float obs[6 * 3], next_obs[6 * 3], rew[6], disc[6], w[6];
    int32_t act[6];
    train_batch_t b;
} s_batch_t;

static void s_make_batch(s_batch_t *sb, rng_t *r) {
    s_fill(sb->obs, 18, r, 2.0f);
    s_fill(sb->next_obs, 18, r, 2.0f);
    s_fill(sb->rew, 6, r, 2.0f); // spreads |delta| over both Huber regions
    for (int i = 0; i < 6; i++) {
        sb->disc[i] = i == 4 ? 0.0f : 0.97f;
        sb->w[i] = 0.2f + rng_uniform_f(r);
        sb->act[i] = (int32_t)rng_below(r, 3);
    }
    sb->b = (train_batch_t){sb->obs, sb->act, NULL, sb->rew, sb->disc, sb->next_obs, sb->w, 6};
}

// L(theta) in double with y held fixed (the target is a constant, as in the trainer).
static double s_ref_loss(const nn_config_t *cfg, const double *theta, const s_batch_t *sb,
                         const float *y) {
    double q[6 * 3], L = 0;
    nnref_forward(q, cfg, theta, sb->obs, 6);
    for (int i = 0; i < 6; i++) {
        double d = y[i] - q[i * 3 + sb->act[i]], ad = fabs(d);
        L += sb->w[i] * (ad <= 1 ? 0.5 * d * d : ad - 0.5);
    }
    return L / 6;
}

static void s_whole_loss_gradcheck(int dueling) {
    train_config_t tc;
    s_small_config(&tc, dueling);
    trainer_t *tr = trainer_new(&tc);
    const nn_params_t *p = trainer_online(tr);
    rng_t r;
    rng_init_stream(&r, 21, RNG_ROLE_TEST, (uint64_t)dueling);
    s_batch_t sb;
    s_make_batch(&sb, &r);
    size_t n = p->num_params;
    double *theta = xmalloc(n * sizeof(double)), *num = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        theta[i] = p->data[i];
    }
    // y from the trainer's own pieces (online == target right after trainer_new).
    nn_state_t st;
    nn_state_init(&st, &tc.net, 6, 1);
    float qn[18], y[6];
    nn_forward(&st, p, sb.next_obs, 6, qn);
    nn_double_dqn_targets(y, qn, qn, sb.rew, sb.disc, 6, 3);
    double num_sq = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = theta[i], h = 1e-6;
        theta[i] = keep + h;
        double lp = s_ref_loss(&tc.net, theta, &sb, y);
        theta[i] = keep - h;
        num[i] = (lp - s_ref_loss(&tc.net, theta, &sb, y)) / (2 * h);
        theta[i] = keep;
        num_sq += num[i] * num[i];
    }
    // One trainer step (Adam, lr 1e-4, clip 40): its reported grad norm is ||dL/dtheta||
    // and Adam's first step moves each parameter by -lr * g / (|g| + eps), i.e. by -lr
    // times the sign of the gradient wherever |g| >> eps.
    float prio[6];
    train_stats_t stats;
    float loss = trainer_step(tr, &sb.b, prio, &stats);
    ck_assert_float_eq_tol(loss, s_ref_loss(&tc.net, theta, &sb, y), 1e-5);
    ck_assert_float_eq_tol(stats.grad_norm, sqrt(num_sq), 1e-4 * sqrt(num_sq));
    int checked = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(num[i]) > 1e-4) {
            double step = p->data[i] - theta[i];
            ck_assert_msg(fabs(step + 1e-4 * (num[i] > 0 ? 1 : -1)) < 1e-6,
                          "param %zu: step %g, numerical grad %g", i, step, num[i]);
            checked++;
        }
    }
    ck_assert_int_gt(checked, (int)n / 3);
    nn_state_fini(&st);
    xfree(theta);
    xfree(num);
    trainer_destroy(&tr);
    ck_assert_ptr_null(tr);
}

START_TEST(test_whole_loss_gradient) {
    s_whole_loss_gradcheck(0);
    s_whole_loss_gradcheck(1);
}
END_TEST

START_TEST(test_loss_gradient_through_nn) {
    // dq from loss_huber_td through nn_backward vs central differences of the whole loss,
    // parameter by parameter, on a fresh trainer's network.
    train_config_t tc;
    s_small_config(&tc, 1);
    trainer_t *tr = trainer_new(&tc);
    const nn_params_t *p = trainer_online(tr);
    rng_t r;
    rng_init_stream(&r, 22, RNG_ROLE_TEST, 0);
    s_batch_t sb;
    s_make_batch(&sb, &r);
    nn_state_t st;
    nn_params_t g;
    nn_state_init(&st, &tc.net, 6, 1);
    nn_params_init(&g, &tc.net);
    float q[18], y[6], dq[18], td[6];
    nn_forward(&st, p, sb.next_obs, 6, q);
    nn_double_dqn_targets(y, q, q, sb.rew, sb.disc, 6, 3);
    nn_forward(&st, p, sb.obs, 6, q);
    loss_huber_td(dq, td, q, y, sb.act, sb.w, 1.0f, 6, 3);
    nn_backward(&st, p, &g, dq, 6);
    size_t n = p->num_params;
    double *theta = xmalloc(n * sizeof(double)), *num = xmalloc(n * sizeof(double));
    double *ana = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < n; i++) {
        theta[i] = p->data[i];
        ana[i] = g.data[i];
    }
    for (size_t i = 0; i < n; i++) {
        double keep = theta[i], h = 1e-6;
        theta[i] = keep + h;
        double lp = s_ref_loss(&tc.net, theta, &sb, y);
        theta[i] = keep - h;
        num[i] = (lp - s_ref_loss(&tc.net, theta, &sb, y)) / (2 * h);
        theta[i] = keep;
    }
    ck_assert(check_close_d(ana, num, n, 1e-4, 1e-6, "dL/dtheta"));
    xfree(theta);
    xfree(num);
    xfree(ana);
    nn_params_fini(&g);
    nn_state_fini(&st);
    trainer_destroy(&tr);
}
END_TEST

START_TEST(test_target_sync_and_priorities) {
    train_config_t tc;
    s_small_config(&tc, 1);
    tc.target_update = 3;
    tc.priority_eps = 0.01f;
    trainer_t *tr = trainer_new(&tc);
    size_t n = trainer_num_params(tr);
    float *init = xmalloc(n * sizeof(float));
    memcpy(init, trainer_online(tr)->data, n * sizeof(float));
    ck_assert_int_eq(memcmp(init, trainer_target(tr)->data, n * sizeof(float)), 0);
    rng_t r;
    rng_init_stream(&r, 23, RNG_ROLE_TEST, 0);
    s_batch_t sb;
    s_make_batch(&sb, &r);
    // Priorities of the first step by hand: online == target, so double DQN is max.
    nn_state_t st;
    nn_state_init(&st, &tc.net, 6, 1);
    float want[6], prio[6];
    nn_td_priorities(want, &st, trainer_online(tr), sb.obs, sb.act, sb.rew, sb.disc, sb.next_obs,
                     0.01f, 6);
    train_stats_t stats;
    for (int s = 1; s <= 7; s++) {
        trainer_step(tr, &sb.b, prio, &stats);
        if (s == 1) {
            ck_assert(check_close_f(prio, want, 6, 1e-5, 1e-6, "priorities"));
            ck_assert(stats.forward_ns >= 0 && stats.backward_ns >= 0 && stats.optim_ns >= 0);
        }
        const float *target = trainer_target(tr)->data, *online = trainer_online(tr)->data;
        int synced = memcmp(target, online, n * sizeof(float)) == 0;
        ck_assert_int_eq(synced, s % 3 == 0);
        if (s < 3) {
            ck_assert_int_eq(memcmp(target, init, n * sizeof(float)), 0);
        }
    }
    ck_assert_int_eq(trainer_steps(tr), 7);
    ck_assert_int_eq(trainer_optim(tr)->step, 7);
    nn_state_fini(&st);
    xfree(init);
    trainer_destroy(&tr);
}
END_TEST

// Issue #26: observations near FLT_MAX are finite, so the wire takes them, but they overflow
// the forward pass: with CartPole's network (and this seed) one such row makes the loss and
// the gradient NaN. Stepping it made about half the parameters NaN for good (and the learner
// then published weights every actor refuses). It must be skipped, the parameters kept bit
// for bit, and the next normal batch trained as ever.
START_TEST(test_nonfinite_gradient_skipped) {
    train_config_t tc;
    train_config_default(&tc);
    tc.net = (nn_config_t){
        .obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {32, 32}, .dueling = 1};
    tc.batch_size = 6;
    tc.seed = 1;
    trainer_t *tr = trainer_new(&tc);
    size_t n = trainer_num_params(tr);
    float *before = xmalloc(n * sizeof(float));
    memcpy(before, trainer_online(tr)->data, n * sizeof(float));
    float obs[6 * 4], next_obs[6 * 4], rew[6], disc[6], w[6], prio[6];
    int32_t act[6];
    for (int i = 0; i < 6 * 4; i++) {
        obs[i] = 0.1f * (float)(i % 5) - 0.2f;
        next_obs[i] = -obs[i];
    }
    for (int i = 0; i < 6; i++) {
        rew[i] = 1.0f, disc[i] = 0.97f, w[i] = 1.0f, act[i] = i % 2;
    }
    float keep[4];
    memcpy(keep, obs, sizeof keep);
    for (int j = 0; j < 4; j++) {
        obs[j] = FLT_MAX; // row 0
    }
    train_batch_t b = {obs, act, NULL, rew, disc, next_obs, w, 6};
    train_stats_t st;
    trainer_step(tr, &b, prio, &st);
    ck_assert_msg(isnan(st.grad_norm), "the batch must make the gradient NaN (norm %g)",
                  st.grad_norm);
    ck_assert_int_eq(memcmp(before, trainer_online(tr)->data, n * sizeof(float)), 0);
    ck_assert_int_eq(trainer_steps(tr), 1);
    ck_assert_uint_eq(trainer_skipped_steps(tr), 1);
    ck_assert_int_eq(trainer_optim(tr)->step, 0); // Adam's moments untouched
    // The same rows without the overflow: stepped, every parameter finite.
    memcpy(obs, keep, sizeof keep);
    trainer_step(tr, &b, prio, &st);
    ck_assert(isfinite(st.grad_norm) && isfinite(st.loss));
    ck_assert_int_ne(memcmp(before, trainer_online(tr)->data, n * sizeof(float)), 0);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(isfinite(trainer_online(tr)->data[i]), "parameter %zu is %g", i,
                      (double)trainer_online(tr)->data[i]);
    }
    ck_assert_int_eq(trainer_steps(tr), 2);
    ck_assert_uint_eq(trainer_skipped_steps(tr), 1);
    ck_assert_int_eq(trainer_optim(tr)->step, 1);
    xfree(before);
    trainer_destroy(&tr);
}
END_TEST

// [learner] lr_end / lr_steps: update t (1-based) uses lr + (lr_end - lr) min(1, t / lr_steps),
// and that is the rate the optimizer applies. Adam's first step has a closed form: with
// m = g and v = g^2 after bias correction, each parameter moves by lr g / (|g| + eps), so
// the largest move is lr to within eps / |g|.
START_TEST(test_lr_schedule) {
    train_config_t tc;
    s_small_config(&tc, 1);
    tc.optim.lr = 0.01f;
    tc.lr_end = 0.001f;
    tc.lr_steps = 4;
    trainer_t *tr = trainer_new(&tc);
    rng_t r;
    rng_init_stream(&r, 29, RNG_ROLE_TEST, 0);
    s_batch_t sb;
    s_make_batch(&sb, &r);
    float prio[6];
    for (int s = 0; s < 7; s++) {
        double f = (s + 1) / 4.0;
        double want = 0.01 + (0.001 - 0.01) * (f < 1 ? f : 1);
        ck_assert_msg(fabs(trainer_lr(tr) - want) < 1e-9, "step %d: lr %g, want %g", s,
                      (double)trainer_lr(tr), want);
        trainer_step(tr, &sb.b, prio, NULL);
    }
    trainer_destroy(&tr);

    // lr_steps = 1: the very first update already runs at lr_end; lr_steps = 0: at lr.
    for (int steps = 0; steps <= 1; steps++) {
        tc.lr_steps = steps;
        tr = trainer_new(&tc);
        size_t n = trainer_num_params(tr);
        float *before = xmalloc(n * sizeof(float));
        memcpy(before, trainer_online(tr)->data, n * sizeof(float));
        trainer_step(tr, &sb.b, prio, NULL);
        double moved = 0;
        for (size_t i = 0; i < n; i++) {
            double d = fabs((double)trainer_online(tr)->data[i] - before[i]);
            moved = d > moved ? d : moved;
        }
        double lr = steps ? 0.001 : 0.01;
        ck_assert_msg(moved <= lr * (1 + 1e-4) && moved >= lr * (1 - 1e-3),
                      "lr_steps %d: largest move %g, want %g", steps, moved, lr);
        xfree(before);
        trainer_destroy(&tr);
    }
    // An annealed rate needs a positive end.
    tc.lr_steps = 10;
    tc.lr_end = 0;
    ck_assert_ptr_null(trainer_new(&tc));
}
END_TEST

START_TEST(test_invalid_config) {
    train_config_t tc;
    train_config_default(&tc); // network left unset
    ck_assert_ptr_null(trainer_new(&tc));
    trainer_destroy(NULL);
}
END_TEST

// 5-state chain, states 0..4, one-hot obs (4 live states), actions 0 = left, 1 = right.
// Right from s goes to s+1, left to max(s-1, 0). Entering state 4 pays 1 and ends the
// episode; every other step pays 0. gamma = 0.9, 1-step targets. Optimal values:
//   Q*(s, right) = 0.9^(3-s)              = 0.729, 0.81, 0.9, 1.0
//   Q*(s, left)  = 0.9 * V*(max(s-1, 0))  = 0.6561, 0.6561, 0.729, 0.81
START_TEST(test_chain_mdp_converges) {
    train_config_t tc;
    train_config_default(&tc);
    tc.net = (nn_config_t){
        .obs_dim = 4, .n_actions = 2, .n_hidden = 2, .hidden = {32, 32}, .dueling = 1};
    tc.batch_size = 8;
    tc.optim.lr = 3e-3f;
    tc.target_update = 25;
    tc.seed = 1;
    trainer_t *tr = trainer_new(&tc);
    // The fixed dataset: every (state, action) pair once.
    float obs[8 * 4] = {0}, next_obs[8 * 4] = {0}, rew[8], disc[8], w[8], prio[8];
    int32_t act[8];
    for (int s = 0; s < 4; s++) {
        for (int a = 0; a < 2; a++) {
            int i = 2 * s + a, s2 = a ? s + 1 : (s > 0 ? s - 1 : 0);
            obs[i * 4 + s] = 1.0f;
            if (s2 < 4) {
                next_obs[i * 4 + s2] = 1.0f; // the terminal's obs stays all zero
            }
            act[i] = a;
            rew[i] = s2 == 4 ? 1.0f : 0.0f;
            disc[i] = s2 == 4 ? 0.0f : 0.9f;
            w[i] = 1.0f;
        }
    }
    train_batch_t b = {obs, act, NULL, rew, disc, next_obs, w, 8};
    for (int step = 0; step < 3000; step++) {
        trainer_step(tr, &b, prio, NULL);
    }
    // Reaches ~2e-5 of Q* with this seed; 2e-3 leaves margin for other BLAS kernels.
    static const float want[8] = {0.6561f, 0.729f, 0.6561f, 0.81f, 0.729f, 0.9f, 0.81f, 1.0f};
    nn_state_t st;
    nn_state_init(&st, &tc.net, 8, 1);
    float q[8 * 2], got[8];
    nn_forward(&st, trainer_online(tr), obs, 8, q);
    for (int i = 0; i < 8; i++) {
        got[i] = q[i * 2 + act[i]];
    }
    ck_assert(check_close_f(got, want, 8, 0.0, 2e-3, "chain Q"));
    nn_state_fini(&st);
    trainer_destroy(&tr);
}
END_TEST

Suite *train_suite(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_loss_worked_example);
    tcase_add_test(tc, test_terminal_does_not_bootstrap);
    tcase_add_test(tc, test_huber_delta_closed_form);
    tcase_add_test(tc, test_whole_loss_gradient);
    tcase_add_test(tc, test_loss_gradient_through_nn);
    tcase_add_test(tc, test_target_sync_and_priorities);
    tcase_add_test(tc, test_nonfinite_gradient_skipped);
    tcase_add_test(tc, test_lr_schedule);
    tcase_add_test(tc, test_invalid_config);
    tcase_add_test(tc, test_chain_mdp_converges);
    suite_add_tcase(s, tc);
    return s;
}
