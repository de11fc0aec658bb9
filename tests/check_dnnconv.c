// check_dnnconv.c: conv layers on oneDNN's primitives (model/dnnconv.h, [run] blas_library =
// onednn) through nn.c's real interface: forward against the independent double-precision
// reference (check_nn_ref.c), gradients against conv.c's path (itself checked by central
// differences in check_nn.c), the learner's paired forward, ZeRO's gradient pieces, batches
// the body was not made for, frame-major observations, and layouts with padding (channels
// not a multiple of oneDNN's block) and with space to depth (the Nature body's first layer).
#include "check_apex.h"
#include "check_nn_ref.h"

#include "apex.h"
#include "bf16.h"
#include "blas.h"
#include "config.h"
#include "cpu.h"
#include "dnnconv.h"
#include "nn.h"
#include "rng.h"
#include "xalloc.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// oneDNN loaded (Debian's libdnnl2; install-deps.sh installs it): 1, or 0 after saying why
// (a failure on CI, where every reference must be there).
static int s_onednn(const char *test) {
    char err[256];
    if (blas_use_library("onednn", 1, 1, err, sizeof err) != 0) {
        check_reference_missing(test, err);
        return 0;
    }
    if (!dnnconv_enabled()) { // built without oneDNN's header (libdnnl-dev)
        check_reference_missing(test, "oneDNN's convolutions are not built in");
        return 0;
    }
    return 1;
}

// Shapes: the Nature body's first layer in small (8x8 stride 4: space to depth) with frame-
// major or channels-last rows; stride 2 with a kernel that is not a multiple (direct);
// channel counts that leave padding in 16-channel blocks; float and byte inputs; a single
// conv layer (the top is the first); non-square inputs whose last rows no window reaches.
static const nn_config_t s_shapes[] = {
    {.obs_dim = 36 * 36 * 4,
     .in_h = 36,
     .in_w = 36,
     .in_c = 4,
     .in_dtype = NN_INPUT_U8,
     .in_scale = 1.0f / 255.0f,
     .n_conv = 3,
     .conv = {{16, 8, 4}, {32, 4, 2}, {16, 3, 1}},
     .n_actions = 6,
     .n_hidden = 1,
     .hidden = {24},
     .dueling = 1},
    {.obs_dim = 13 * 11 * 3,
     .in_h = 13,
     .in_w = 11,
     .in_c = 3,
     .in_scale = 0.5f,
     .n_conv = 2,
     .conv = {{5, 3, 2}, {7, 2, 1}},
     .n_actions = 3,
     .n_hidden = 1,
     .hidden = {8},
     .dueling = 0},
    {.obs_dim = 10 * 10 * 7,
     .in_h = 10,
     .in_w = 10,
     .in_c = 7,
     .n_conv = 1,
     .conv = {{16, 3, 1}},
     .n_actions = 4,
     .n_hidden = 1,
     .hidden = {16},
     .dueling = 1},
    {.obs_dim = 22 * 23 * 2,
     .in_h = 22,
     .in_w = 23,
     .in_c = 2,
     .in_dtype = NN_INPUT_U8,
     .in_scale = 1.0f / 255.0f,
     .n_conv = 2,
     .conv = {{20, 4, 2}, {17, 3, 2}},
     .n_actions = 2,
     .n_hidden = 2,
     .hidden = {6, 5},
     .dueling = 1},
};

static void s_fill(float *x, size_t n, rng_t *r, float scale) {
    for (size_t i = 0; i < n; i++) {
        x[i] = scale * (2.0f * rng_uniform_f(r) - 1.0f);
    }
}

static void *s_obs(const nn_config_t *cfg, int B, rng_t *r) {
    size_t n = (size_t)B * cfg->obs_dim;
    if (cfg->in_dtype == NN_INPUT_U8) {
        uint8_t *u = xmalloc(n);
        for (size_t i = 0; i < n; i++) {
            u[i] = (uint8_t)rng_below(r, 256);
        }
        return u;
    }
    float *f = xmalloc(n * sizeof(float));
    s_fill(f, n, r, 2.0f);
    return f;
}

// q (B rows of the network's outputs) against the double-precision reference on the same
// parameters and observations (check_nn_ref reads channels-last rows only).
static int s_against_ref(const nn_config_t *cfg, const nn_params_t *p, const void *obs, int B,
                         const float *q, const char *what) {
    const size_t n = (size_t)B * cfg->n_actions;
    double *theta = xmalloc(p->num_params * sizeof(double));
    double *want = xmalloc(n * sizeof(double)), *got = xmalloc(n * sizeof(double));
    for (size_t i = 0; i < p->num_params; i++) {
        theta[i] = p->data[i];
    }
    nnref_forward(want, cfg, theta, obs, B);
    for (size_t i = 0; i < n; i++) {
        got[i] = q[i];
    }
    int ok = check_close_d(got, want, n, 1e-4, 1e-5, what);
    xfree(got);
    xfree(want);
    xfree(theta);
    return ok;
}

// A state on oneDNN (asserted: a body that silently fell back would test conv.c twice), or
// on conv.c (dnn 0); dnn 2: a body without the input's gather table (dnnconv_set_enabled).
// Bodies the product would not make accepted here (dnnconv_accept_any): these shapes are small
// (below DNNCONV_MIN_WORK), and their padded layouts take oneDNN's reference loops for some
// passes. Not in test_nature_body and test_no_reference_loops.
static void s_state(nn_state_t *s, const nn_config_t *cfg, int max_batch, int train, int dnn) {
    dnnconv_set_enabled(dnn);
    dnnconv_accept_any(DNNCONV_ACCEPT_SMALL | DNNCONV_ACCEPT_REF);
    nn_state_init(s, cfg, max_batch, train);
    dnnconv_accept_any(0);
    dnnconv_set_enabled(1);
    ck_assert_msg(dnn ? s->dnn != NULL : s->dnn == NULL, "oneDNN body %s",
                  dnn ? "missing" : "present");
    if (dnn == 2) {
        ck_assert_str_ne(dnnconv_input_path(s->dnn), "gather");
    }
}

// Forward of every shape at its body's batch and at a smaller one (conv.c's path on the same
// state), against the double-precision reference.
START_TEST(test_forward_matches_reference) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 41, RNG_ROLE_TEST, 0);
    cpu_features_t cpu;
    cpu_detect(&cpu);
    for (size_t k = 0; k < APEX_ARRAY_LEN(s_shapes); k++) {
        const nn_config_t *cfg = &s_shapes[k];
        const int B = 5, A = cfg->n_actions;
        nn_params_t p;
        nn_params_init(&p, cfg);
        nn_params_init_random(&p, &r);
        nn_state_t st, tr;
        s_state(&st, cfg, B, 0, 1);
        s_state(&tr, cfg, B, 1, 1);
        // Space to depth where the kernel is a multiple of the stride, in a train body; a
        // forward-only one keeps the layer direct where oneDNN has a JIT kernel for it (on
        // AVX-512 it has, for these channel counts)
        int s2d = cfg->conv[0].kernel % cfg->conv[0].stride == 0 && cfg->conv[0].stride > 1;
        ck_assert_str_eq(dnnconv_first_layer(tr.dnn), s2d ? "s2d" : "direct");
        if (!s2d || cpu.avx512f) {
            ck_assert_str_eq(dnnconv_first_layer(st.dnn), "direct");
        }
        nn_state_fini(&tr);
        void *obs = s_obs(cfg, B, &r);
        for (int b = B; b >= B - 2; b -= 2) { // the body's batch, then conv.c's path
            float q[64];
            ck_assert_int_le(b * A, 64);
            nn_forward(&st, &p, obs, b, q);
            ck_assert_int_eq(st.dnn_pass, b == B);
            char what[96];
            snprintf(what, sizeof what, "shape %zu, batch %d", k, b);
            ck_assert(s_against_ref(cfg, &p, obs, b, q, what));
        }
        free(obs);
        nn_state_fini(&st);
        nn_params_fini(&p);
    }
}
END_TEST

// Gradients (accumulated into grads holding earlier values, as nn_backward's contract says)
// against conv.c's, for every shape, channels-last and frame-major rows, with the input
// written through the gather table and through oneDNN's reorder.
START_TEST(test_backward_matches_conv_c) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 43, RNG_ROLE_TEST, 0);
    for (size_t k = 0; k < APEX_ARRAY_LEN(s_shapes); k++) {
        for (int mode = 0; mode < 4; mode++) {
            int frames = mode % 2 ? 2 : 0, dnn = mode < 2 ? 1 : 2;
            nn_config_t cfg = s_shapes[k];
            if (frames && cfg.in_c % frames) {
                continue;
            }
            cfg.in_frames = frames;
            const int B = 6, A = cfg.n_actions;
            nn_params_t p, g_dnn, g_ref;
            nn_params_init(&p, &cfg);
            nn_params_init(&g_dnn, &cfg);
            nn_params_init(&g_ref, &cfg);
            nn_params_init_random(&p, &r);
            s_fill(g_ref.data, g_ref.num_params, &r, 0.5f);
            memcpy(g_dnn.data, g_ref.data, g_ref.num_params * sizeof(float));
            nn_state_t sd, sr;
            s_state(&sd, &cfg, B, 1, dnn);
            s_state(&sr, &cfg, B, 1, 0);
            void *obs = s_obs(&cfg, B, &r);
            float q_dnn[64], q_ref[64], dq[64];
            s_fill(dq, (size_t)B * A, &r, 1.0f);
            nn_forward(&sd, &p, obs, B, q_dnn);
            nn_forward(&sr, &p, obs, B, q_ref);
            ck_assert(sd.dnn_pass && !sr.dnn_pass);
            char what[96];
            snprintf(what, sizeof what, "shape %zu, frames %d, %s: q", k, frames,
                     dnnconv_input_path(sd.dnn));
            ck_assert(check_close_f(q_dnn, q_ref, (size_t)B * A, 1e-4, 1e-5, what));
            nn_backward(&sd, &p, &g_dnn, dq, B);
            nn_backward(&sr, &p, &g_ref, dq, B);
            snprintf(what, sizeof what, "shape %zu, frames %d, %s: gradient", k, frames,
                     dnnconv_input_path(sd.dnn));
            ck_assert(check_close_f(g_dnn.data, g_ref.data, p.num_params, 1e-4, 1e-5, what));
            free(obs);
            nn_state_fini(&sd);
            nn_state_fini(&sr);
            nn_params_fini(&g_ref);
            nn_params_fini(&g_dnn);
            nn_params_fini(&p);
        }
    }
}
END_TEST

typedef struct {
    float *got;
    int *seen;
} s_collect_t;

static void s_collect(void *arg, const float *piece, size_t offset, size_t n) {
    s_collect_t *c = arg;
    for (size_t i = 0; i < n; i++) {
        c->got[offset + i] = piece[i];
        c->seen[offset + i]++;
    }
}

// The learner's paired forward (online and target on s'; the target reads the online body's
// input, a train target keeps its own), then backward on either, and ZeRO's pieces: the same
// values as separate forwards and a whole-array backward.
START_TEST(test_pair_and_pieces) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 47, RNG_ROLE_TEST, 0);
    const nn_config_t *cfg = &s_shapes[0];
    const int B = 4, A = cfg->n_actions;
    nn_params_t pa, pb, g_pair, g_one;
    nn_params_init(&pa, cfg);
    nn_params_init(&pb, cfg);
    nn_params_init(&g_pair, cfg);
    nn_params_init(&g_one, cfg);
    nn_params_init_random(&pa, &r);
    nn_params_init_random(&pb, &r);
    const size_t n = pa.num_params;
    void *obs = s_obs(cfg, B, &r), *other = s_obs(cfg, B, &r);
    float qa[64], qb[64], wa[64], wb[64], dq[64];
    s_fill(dq, (size_t)B * A, &r, 1.0f);
    cpu_features_t cpu;
    cpu_detect(&cpu);
    // (a train, b train): a train a and a forward-only b, whose first layers may read two
    // layouts (space to depth, direct: b then takes its own input); both train (b keeps its
    // own copy); both forward-only (the learner's next-state pair: b reads a's input; no
    // backward to check)
    static const int trains[3][2] = {{1, 0}, {1, 1}, {0, 0}};
    for (int t = 0; t < 3; t++) {
        const int a_train = trains[t][0], b_train = trains[t][1];
        nn_state_t sa, sb, one;
        s_state(&sa, cfg, B, a_train, 1);
        s_state(&sb, cfg, B, b_train, 1);
        s_state(&one, cfg, B, 1, 1);
        nn_forward_pair(&sa, &pa, &sb, &pb, obs, B, qa, qb);
        int shared = !b_train && dnnconv_same_input(sa.dnn, sb.dnn);
        ck_assert(sa.dnn_pass && sb.dnn_pass && (sb.dnn_in_of != NULL) == shared);
        if (!a_train) {
            ck_assert(shared);
        } else if (!b_train && cpu.avx512f) { // s2d against direct
            ck_assert(!shared && strcmp(dnnconv_first_layer(sb.dnn), "direct") == 0);
        }
        // a forward-only body has no backward passes (nor their memory)
        ck_assert((dnnconv_impl(sb.dnn, 0, 1) != NULL) == b_train);
        // (a forward-only body's first layer may be direct where one's is space to depth:
        // the same sums in another order)
        nn_forward(&one, &pb, obs, B, wb);
        ck_assert(check_close_f(qb, wb, (size_t)B * A, 1e-5, 1e-6, "pair: b"));
        nn_forward(&one, &pa, obs, B, wa);
        ck_assert(check_close_f(qa, wa, (size_t)B * A, 1e-5, 1e-6, "pair: a"));
        if (!a_train) {
            nn_state_fini(&sa);
            nn_state_fini(&sb);
            nn_state_fini(&one);
            continue;
        }
        nn_params_zero(&g_pair);
        nn_params_zero(&g_one);
        nn_backward(&sa, &pa, &g_pair, dq, B);
        nn_backward(&one, &pa, &g_one, dq, B);
        ck_assert(check_close_f(g_pair.data, g_one.data, n, 1e-6, 1e-7, "pair: backward a"));
        if (b_train) { // sb's own input copy: its backward is its own forward's
            nn_forward(&sa, &pa, other, B, qa); // sa's input changes; sb's must not
            nn_params_zero(&g_pair);
            nn_params_zero(&g_one);
            nn_backward(&sb, &pb, &g_pair, dq, B);
            nn_forward(&one, &pb, obs, B, wb);
            nn_backward(&one, &pb, &g_one, dq, B);
            ck_assert(check_close_f(g_pair.data, g_one.data, n, 1e-6, 1e-7, "pair: backward b"));
        }
        nn_state_fini(&sa);
        nn_state_fini(&sb);
        nn_state_fini(&one);
    }
    // pieces: the minimum capacity and a whole-array one
    nn_state_t s;
    s_state(&s, cfg, B, 1, 1);
    nn_forward(&s, &pa, obs, B, qa);
    nn_params_zero(&g_one);
    nn_backward(&s, &pa, &g_one, dq, B);
    size_t caps[] = {nn_piece_min(cfg), n + 7};
    for (size_t c = 0; c < 2; c++) {
        s_collect_t col = {xcalloc(n, sizeof(float)), xcalloc(n, sizeof(int))};
        float *buf = xmalloc(caps[c] * sizeof(float));
        for (size_t i = 0; i < caps[c]; i++) {
            buf[i] = NAN; // overwritten, not accumulated into
        }
        nn_pieces_t pc = {buf, caps[c], s_collect, &col};
        nn_forward(&s, &pa, obs, B, qa);
        nn_backward_pieces(&s, &pa, &pc, dq, B);
        for (size_t i = 0; i < n; i++) {
            ck_assert_int_eq(col.seen[i], 1);
        }
        ck_assert(check_close_f(col.got, g_one.data, n, 1e-6, 1e-7, "pieces"));
        xfree(buf);
        xfree(col.got);
        xfree(col.seen);
    }
    nn_state_fini(&s);
    free(obs);
    free(other);
    nn_params_fini(&g_one);
    nn_params_fini(&g_pair);
    nn_params_fini(&pb);
    nn_params_fini(&pa);
}
END_TEST

// ZeRO stage 3's fetched parameters (nn_params_fetched): a conv layer in one block, linear
// layers in blocks of 3 rows, two slots, the one released at each fetch poisoned with NaN
// (a body must not read a layer's weights after the next fetch).
typedef struct {
    const nn_params_t *src;
    float *slot[2];
    size_t slot_n;
    int turn, n_conv;
    nn_linear_t view[2];
} s_fetcher_t;

static const nn_linear_t *s_fetch(void *arg, int l, int k, int dir, int *row0) {
    (void)dir;
    s_fetcher_t *f = arg;
    int i = f->turn;
    f->turn ^= 1;
    for (size_t j = 0; j < f->slot_n; j++) {
        f->slot[1 - i][j] = NAN;
    }
    const nn_linear_t *L = &f->src->layer[l];
    int per = l < f->n_conv ? L->out_dim : 3, r0 = k * per, rows = APEX_MIN(per, L->out_dim - r0);
    size_t in = (size_t)L->in_dim;
    memcpy(f->slot[i], L->w + (size_t)r0 * in, (size_t)rows * in * sizeof(float));
    memcpy(f->slot[i] + (size_t)rows * in, L->b + r0, (size_t)rows * sizeof(float));
    f->view[i] = (nn_linear_t){f->slot[i], f->slot[i] + (size_t)rows * in, L->in_dim, rows};
    *row0 = r0;
    return &f->view[i];
}

// Fetched online and target networks through the paired forward, and the fetched network's
// pieces: the values of the plain networks on bodies.
START_TEST(test_fetched_network) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 67, RNG_ROLE_TEST, 0);
    const nn_config_t *cfg = &s_shapes[0];
    const int B = 4, A = cfg->n_actions;
    nn_params_t pa, pb, fa, fb, g;
    nn_params_init(&pa, cfg);
    nn_params_init(&pb, cfg);
    nn_params_init(&g, cfg);
    nn_params_init_random(&pa, &r);
    nn_params_init_random(&pb, &r);
    size_t slot_n = 0, n = pa.num_params;
    for (int l = 0; l < pa.n_layers; l++) {
        slot_n = APEX_MAX(slot_n, nn_layer_floats(&pa, l));
    }
    s_fetcher_t f1 = {.src = &pa, .slot_n = slot_n, .n_conv = cfg->n_conv}, f2 = f1;
    f2.src = &pb;
    for (int i = 0; i < 2; i++) {
        f1.slot[i] = xmalloc(slot_n * sizeof(float));
        f2.slot[i] = xmalloc(slot_n * sizeof(float));
    }
    nn_params_fetched(&fa, cfg, s_fetch, &f1);
    nn_params_fetched(&fb, cfg, s_fetch, &f2);
    nn_state_t s, sa, sb;
    s_state(&s, cfg, B, 1, 1);
    s_state(&sa, cfg, B, 0, 1);
    s_state(&sb, cfg, B, 0, 1);
    void *obs = s_obs(cfg, B, &r);
    float q[64], qa[64], qb[64], dq[64];
    s_fill(dq, (size_t)B * A, &r, 1.0f);
    nn_forward_pair(&sa, &fa, &sb, &fb, obs, B, qa, qb);
    ck_assert(sa.dnn_pass && sb.dnn_pass);
    nn_forward(&s, &pb, obs, B, q);
    ck_assert(check_close_f(qb, q, (size_t)B * A, 1e-6, 1e-7, "fetched pair: target"));
    nn_forward(&s, &pa, obs, B, q);
    ck_assert(check_close_f(qa, q, (size_t)B * A, 1e-6, 1e-7, "fetched pair: online"));
    nn_backward(&s, &pa, &g, dq, B);
    s_collect_t col = {xcalloc(n, sizeof(float)), xcalloc(n, sizeof(int))};
    size_t cap = nn_piece_min(cfg);
    float *buf = xmalloc(cap * sizeof(float));
    nn_pieces_t pc = {buf, cap, s_collect, &col};
    nn_forward(&s, &fa, obs, B, q);
    nn_backward_pieces(&s, &fa, &pc, dq, B);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(col.seen[i], 1);
    }
    ck_assert(check_close_f(col.got, g.data, n, 1e-6, 1e-7, "fetched pieces"));
    xfree(buf);
    xfree(col.got);
    xfree(col.seen);
    free(obs);
    nn_state_fini(&s);
    nn_state_fini(&sa);
    nn_state_fini(&sb);
    for (int i = 0; i < 2; i++) {
        xfree(f1.slot[i]);
        xfree(f2.slot[i]);
    }
    nn_params_fini(&g);
    nn_params_fini(&pb);
    nn_params_fini(&pa);
}
END_TEST

// The Nature body itself (84x84x4 bytes, three conv layers, 3136 features), on channels-last
// rows and on 4 frames stored frame-major (in_frames = 4, what frame_stack = 4 gives the
// learner): space to depth with its input in 4x4 patches (on AVX-512 BW), AVX-512 or AVX2
// kernels where the CPU has them (not asserted: any CPU); the forward against the double
// reference (channels last: check_nn_ref reads no frames) and conv.c's, the gradient
// against conv.c's. B = 16: on AVX-512 oneDNN takes Winograd for the third layer's forward
// and weight gradient there (at B = 8 it does not).
START_TEST(test_nature_body) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 53, RNG_ROLE_TEST, 0);
    cpu_features_t cpu;
    cpu_detect(&cpu);
    for (int frames = 0; frames <= 4; frames += 4) {
        nn_config_t cfg = nn_config_nature(6, 1);
        cfg.in_frames = frames;
        const int B = 16, A = cfg.n_actions;
        nn_params_t p, g_dnn, g_ref;
        nn_params_init(&p, &cfg);
        nn_params_init(&g_dnn, &cfg);
        nn_params_init(&g_ref, &cfg);
        nn_params_init_random(&p, &r);
        nn_state_t sd, sr;
        nn_state_init(&sd, &cfg, B, 1); // as the product makes it: no reference loops
        ck_assert_msg(sd.dnn != NULL, "no oneDNN body for the Nature network, frames %d", frames);
        s_state(&sr, &cfg, B, 1, 0);
        ck_assert_str_eq(dnnconv_first_layer(sd.dnn), "s2d");
        if (cpu.avx512bw) { // the patches, which the body takes only if they equal the table
            ck_assert_str_eq(dnnconv_input_path(sd.dnn), "4x4 patches");
        }
        for (int l = 0; l < 3; l++) {
            ck_assert_ptr_nonnull(dnnconv_impl(sd.dnn, l, 0));
            ck_assert_ptr_nonnull(dnnconv_impl(sd.dnn, l, 1));
            ck_assert((dnnconv_impl(sd.dnn, l, 2) != NULL) == (l > 0));
            if (frames == 0) {
                fprintf(stderr, "check_dnnconv: Nature layer %d: %s, %s, %s\n", l,
                        dnnconv_impl(sd.dnn, l, 0), dnnconv_impl(sd.dnn, l, 1),
                        l ? dnnconv_impl(sd.dnn, l, 2) : "-");
            }
        }
        uint8_t *obs = s_obs(&cfg, B, &r);
        float q[256], q_ref[256], dq[256];
        nn_forward(&sd, &p, obs, B, q);
        ck_assert(sd.dnn_pass);
        if (frames == 0) {
            ck_assert(s_against_ref(&cfg, &p, obs, B, q, "Nature q"));
        }
        nn_forward(&sr, &p, obs, B, q_ref);
        ck_assert(check_close_f(q, q_ref, (size_t)B * A, 1e-4, 1e-5, "Nature q against conv.c"));
        // The forward-only body (the learner's next-state networks, the actors'): its first
        // layer direct on AVX-512, its input converted by vectors on AVX-512 BW
        nn_state_t sf;
        nn_state_init(&sf, &cfg, B, 0);
        ck_assert_msg(sf.dnn != NULL, "no forward-only oneDNN body, frames %d", frames);
        if (cpu.avx512f) {
            ck_assert_str_eq(dnnconv_first_layer(sf.dnn), "direct");
        }
        if (cpu.avx512bw) {
            ck_assert_str_eq(dnnconv_input_path(sf.dnn), "plain, by vectors");
        }
        float qf[256];
        nn_forward(&sf, &p, obs, B, qf);
        ck_assert(sf.dnn_pass);
        ck_assert(check_close_f(qf, q_ref, (size_t)B * A, 1e-4, 1e-5, "Nature forward-only q"));
        nn_state_fini(&sf);
        s_fill(dq, (size_t)B * A, &r, 1.0f);
        nn_backward(&sd, &p, &g_dnn, dq, B);
        nn_backward(&sr, &p, &g_ref, dq, B);
        ck_assert(
            check_close_f(g_dnn.data, g_ref.data, p.num_params, 1e-4, 1e-6, "Nature gradient"));
        free(obs);
        nn_state_fini(&sd);
        nn_state_fini(&sr);
        nn_params_fini(&g_ref);
        nn_params_fini(&g_dnn);
        nn_params_fini(&p);
    }
}
END_TEST

// A forward-only body's byte input by vectors where the rows do not fill them: 9x9 pixels
// (81 per channel: one past the last 16 with 4 channels last) and 4 frame planes at batch 5
// (1620 bytes: 4 past), against the double reference and conv.c's path.
START_TEST(test_plain_input_tails) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 59, RNG_ROLE_TEST, 0);
    cpu_features_t cpu;
    cpu_detect(&cpu);
    for (int frames = 0; frames <= 4; frames += 4) {
        nn_config_t cfg = {.obs_dim = 9 * 9 * 4,
                           .in_h = 9,
                           .in_w = 9,
                           .in_c = 4,
                           .in_frames = frames,
                           .in_dtype = NN_INPUT_U8,
                           .in_scale = 1.0f / 255.0f,
                           .n_conv = 1,
                           .conv = {{8, 3, 3}},
                           .n_actions = 3,
                           .n_hidden = 1,
                           .hidden = {8},
                           .dueling = 1};
        const int B = 5, A = cfg.n_actions;
        nn_params_t p;
        nn_params_init(&p, &cfg);
        nn_params_init_random(&p, &r);
        nn_state_t sf, sr;
        s_state(&sf, &cfg, B, 0, 1);
        s_state(&sr, &cfg, B, 0, 0);
        if (cpu.avx512f) {
            ck_assert_str_eq(dnnconv_first_layer(sf.dnn), "direct");
        }
        if (cpu.avx512bw) {
            ck_assert_str_eq(dnnconv_input_path(sf.dnn), "plain, by vectors");
        }
        uint8_t *obs = s_obs(&cfg, B, &r);
        float q[64], q_ref[64];
        nn_forward(&sf, &p, obs, B, q);
        ck_assert(sf.dnn_pass);
        nn_forward(&sr, &p, obs, B, q_ref);
        ck_assert(check_close_f(q, q_ref, (size_t)B * A, 1e-5, 1e-6, "tails against conv.c"));
        if (frames == 0) {
            ck_assert(s_against_ref(&cfg, &p, obs, B, q, "tails q"));
        }
        free(obs);
        nn_state_fini(&sf);
        nn_state_fini(&sr);
        nn_params_fini(&p);
    }
}
END_TEST

// Small shapes accepted but not oneDNN's reference loops: a body that would run them (which
// ones depends on the CPU's kernels) is not made, and conv.c's path gives the same values.
START_TEST(test_no_reference_loops) {
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 59, RNG_ROLE_TEST, 0);
    for (size_t k = 0; k < APEX_ARRAY_LEN(s_shapes); k++) {
        const nn_config_t *cfg = &s_shapes[k];
        const int B = 5, A = cfg->n_actions;
        nn_params_t p;
        nn_params_init(&p, cfg);
        nn_params_init_random(&p, &r);
        nn_state_t st;
        dnnconv_accept_any(DNNCONV_ACCEPT_SMALL);
        nn_state_init(&st, cfg, B, 0);
        dnnconv_accept_any(0);
        for (int l = 0; st.dnn && l < cfg->n_conv; l++) {
            for (int pass = 0; pass < 3; pass++) {
                const char *impl = dnnconv_impl(st.dnn, l, pass);
                ck_assert_msg(!impl || strncmp(impl, "ref", 3) != 0, "shape %zu layer %d: %s", k, l,
                              impl);
            }
        }
        void *obs = s_obs(cfg, B, &r);
        float *q = xmalloc((size_t)B * A * sizeof(float));
        nn_forward(&st, &p, obs, B, q);
        ck_assert(s_against_ref(cfg, &p, obs, B, q, "product body"));
        fprintf(stderr, "check_dnnconv: shape %zu at batch %d: %s\n", k, B,
                st.dnn ? "oneDNN" : "conv.c");
        xfree(q);
        free(obs);
        nn_state_fini(&st);
        nn_params_fini(&p);
    }
}
END_TEST

// The work rule (DNNCONV_MIN_WORK), as the product decides: no body for the MinAtar network
// (26 multiply-adds per edge element; conv.c is 2x faster there), bodies for the Nature
// network (247) and configs/minatar-breakout-pixels.ini's (111), in fp32 and bfloat16.
START_TEST(test_work_rule) {
    if (!s_onednn(__func__)) {
        return;
    }
    nn_config_t pixels = nn_config_nature(6, 1);
    pixels.obs_dim = 84 * 84, pixels.in_c = 1, pixels.n_conv = 2;
    pixels.conv[0] = (nn_conv_t){16, 8, 4}, pixels.conv[1] = (nn_conv_t){32, 4, 2};
    pixels.hidden[0] = 256;
    const nn_config_t nets[3] = {nn_config_minatar(4, 6, 1), nn_config_nature(6, 1), pixels};
    cpu_features_t f;
    cpu_detect(&f);
    for (int k = 0; k < 3; k++) {
        for (int bf16 = 0; bf16 <= bf16_gemm_supported(&f); bf16++) {
            nn_state_t st;
            nn_state_init(&st, &nets[k], 32, 1);
            if (bf16) {
                nn_state_set_gemm(&st, bf16_gemm_ld);
            }
            ck_assert_msg((st.dnn != NULL) == (k > 0), "net %d, bf16 %d", k, bf16);
            ck_assert(!st.dnn || dnnconv_bf16(st.dnn) == bf16);
            nn_state_fini(&st);
        }
    }
}
END_TEST

// blas.c's auto loads oneDNN only for a run whose network will get a body
// (nn_run_wants_conv_body): for every shipped config, the rule says what nn_state_init then
// does (a body exactly where it says so), and it says so for the two Atari-sized configs only
// (the 2013 DQN body on MinAtar's 84x84 frames and the Nature body on a Python Atari env), not
// for MinAtar's own networks, the MLPs or DPG's policies.
START_TEST(test_run_wants_body) {
    glob_t g;
    char pattern[1100];
    const char *root = getenv("APEX_SRC_DIR");
    snprintf(pattern, sizeof pattern, "%s/configs/*.ini", root && *root ? root : ".");
    if (glob(pattern, 0, NULL, &g) != 0) {
        const char *ci = getenv("CI");
        ck_assert_msg(!ci || strcmp(ci, "true") != 0, "no %s", pattern);
        fprintf(stderr, "%s: no %s: not tested\n", __func__, pattern);
        return;
    }
    int onednn = s_onednn(__func__), wanted = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        apex_config_t cfg;
        char err[CONFIG_ERR_LEN] = "";
        ck_assert_msg(config_load(&cfg, g.gl_pathv[i], NULL, 0, err, sizeof err) == 0, "%s: %s",
                      g.gl_pathv[i], err);
        int w = nn_run_wants_conv_body(&cfg);
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        int atari = !strcmp(base, "minatar-breakout-pixels.ini") ||
                    !strcmp(base, "atari-python.ini");
        ck_assert_msg(w == atari, "%s: wants a body: %d", base, w);
        wanted += w;
        if (onednn) {
            nn_config_t net;
            nn_config_from_run(&net, &cfg);
            nn_state_t st;
            nn_state_init(&st, &net, 32, 0);
            ck_assert_msg((st.dnn != NULL) == w, "%s: body %d, rule %d", base, st.dnn != NULL, w);
            nn_state_fini(&st);
        }
    }
    ck_assert_int_eq(wanted, 2);
    globfree(&g);
}
END_TEST

// ||a - b|| / ||b|| over n values.
static double s_rel_norm(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

// [learner] precision = bf16 on a oneDNN body (where the CPU has AVX512_BF16): bfloat16
// activations and weights, fp32 sums and weight gradient. Against fp32 (conv.c), its error
// is that of conv.c's own bf16 path (bf16_gemm_ld: inputs rounded, activations fp32) within
// a factor: the Nature body's conv gradient is 8 % off fp32 either way (its random dq makes
// sums with cancellation), its Q-values 0.16 %. A broken bf16 body (a wrong mask, a weight
// in the wrong place) is off by far more.
START_TEST(test_bf16_body) {
    cpu_features_t f;
    cpu_detect(&f);
    if (!bf16_gemm_supported(&f)) {
        fprintf(stderr, "%s: no AVX512_BF16 on this CPU: bf16 bodies not tested\n", __func__);
        return;
    }
    if (!s_onednn(__func__)) {
        return;
    }
    rng_t r;
    rng_init_stream(&r, 61, RNG_ROLE_TEST, 0);
    const nn_config_t nets[2] = {s_shapes[0], nn_config_nature(6, 1)};
    for (int k = 0; k < 2; k++) {
        const nn_config_t *cfg = &nets[k];
        const int B = 16, A = cfg->n_actions;
        nn_params_t p, g_b, g_f;
        nn_params_init(&p, cfg);
        nn_params_init(&g_b, cfg);
        nn_params_init(&g_f, cfg);
        nn_params_init_random(&p, &r);
        nn_state_t sb, sf;
        s_state(&sb, cfg, B, 1, 1);
        dnnconv_accept_any(DNNCONV_ACCEPT_SMALL | DNNCONV_ACCEPT_REF);
        nn_state_set_gemm(&sb, bf16_gemm_ld); // a bfloat16 body in place of the fp32 one
        dnnconv_accept_any(0);
        ck_assert(sb.dnn && dnnconv_bf16(sb.dnn));
        if (k == 1 && f.avx512bw) { // bf16 from the 4x4 patches, as the table would write them
            ck_assert_str_eq(dnnconv_input_path(sb.dnn), "4x4 patches");
        }
        s_state(&sf, cfg, B, 1, 0);
        void *obs = s_obs(cfg, B, &r);
        float qb[256], qf[256], dq[256];
        nn_forward(&sb, &p, obs, B, qb);
        ck_assert(sb.dnn_pass);
        nn_forward(&sf, &p, obs, B, qf);
        double eq = s_rel_norm(qb, qf, (size_t)B * A);
        s_fill(dq, (size_t)B * A, &r, 1.0f);
        nn_backward(&sb, &p, &g_b, dq, B);
        nn_backward(&sf, &p, &g_f, dq, B);
        // the conv layers' gradient (the head's is mostly fp32 arithmetic on bf16 inputs)
        size_t nconv = p.off[cfg->n_conv];
        double eg = s_rel_norm(g_b.data, g_f.data, nconv);
        nn_state_t sc; // conv.c in bf16
        nn_params_t g_c;
        nn_params_init(&g_c, cfg);
        s_state(&sc, cfg, B, 1, 0);
        nn_state_set_gemm(&sc, bf16_gemm_ld);
        float qc[256];
        nn_forward(&sc, &p, obs, B, qc);
        nn_backward(&sc, &p, &g_c, dq, B);
        double eq_c = s_rel_norm(qc, qf, (size_t)B * A),
               eg_c = s_rel_norm(g_c.data, g_f.data, nconv);
        fprintf(stderr,
                "check_dnnconv: bf16 net %d against fp32: q %.2e (conv.c's bf16 %.2e), conv "
                "gradient %.2e (%.2e)\n",
                k, eq, eq_c, eg, eg_c);
        ck_assert_msg(eq <= 2 * eq_c + 1e-4 && eg <= 1.5 * eg_c + 1e-3 && eg < 0.2,
                      "bf16 net %d: q %.3g (conv.c %.3g), gradient %.3g (%.3g)", k, eq, eq_c, eg,
                      eg_c);
        ck_assert_msg(eq > 0 && eg > 0, "bf16 equal to fp32: not bfloat16");
        nn_state_fini(&sc);
        nn_params_fini(&g_c);
        free(obs);
        nn_state_fini(&sb);
        nn_state_fini(&sf);
        nn_params_fini(&g_f);
        nn_params_fini(&g_b);
        nn_params_fini(&p);
    }
}
END_TEST

Suite *dnnconv_suite(void) {
    Suite *s = suite_create("dnnconv");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_forward_matches_reference);
    tcase_add_test(tc, test_backward_matches_conv_c);
    tcase_add_test(tc, test_pair_and_pieces);
    tcase_add_test(tc, test_fetched_network);
    tcase_add_test(tc, test_nature_body);
    tcase_add_test(tc, test_plain_input_tails);
    tcase_add_test(tc, test_no_reference_loops);
    tcase_add_test(tc, test_work_rule);
    tcase_add_test(tc, test_run_wants_body);
    tcase_add_test(tc, test_bf16_body);
    suite_add_tcase(s, tc);
    return s;
}
