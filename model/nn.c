// nn.c: MLP + dueling head, feature-major activations (see nn.h for the layout reasoning).
// Dimension names: B = batch, O = obs_dim, H = hidden width, A = n_actions, P = head width.
#include "nn.h"

#include "apex.h"
#include "blas.h"
#include "config.h"
#include "xalloc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// Every view carved out of a state block starts on a 64-byte line (16 floats).
#define NN_ALIGN_FLOATS 16

// ----------------------------------------------------------------------------
// config and layout

int nn_config_check(const nn_config_t *cfg, char *why, size_t why_len) {
    const char *msg = NULL;
    if (cfg->obs_dim < 1 || cfg->obs_dim > (1 << 20)) {
        msg = "obs_dim must be in [1, 2^20]";
    } else if (cfg->n_actions < 1 || cfg->n_actions > CONFIG_MAX_ACTIONS) {
        msg = "n_actions must be in [1, 4096]";
    } else if (cfg->n_hidden < 1 || cfg->n_hidden > NN_MAX_HIDDEN) {
        msg = "n_hidden must be in [1, 4]";
    } else if (cfg->dueling != 0 && cfg->dueling != 1) {
        msg = "dueling must be 0 or 1";
    } else {
        for (int l = 0; l < cfg->n_hidden; l++) {
            if (cfg->hidden[l] < 1 || cfg->hidden[l] > 16384) {
                msg = "hidden sizes must be in [1, 16384]";
            }
        }
    }
    if (msg && why && why_len) {
        snprintf(why, why_len, "%s", msg);
    }
    return msg ? APEX_EINVAL : APEX_OK;
}

int nn_head_dim(const nn_config_t *cfg) { return cfg->n_actions + (cfg->dueling ? 1 : 0); }

void nn_config_format(const nn_config_t *cfg, char *buf, size_t len) {
    size_t n = (size_t)snprintf(buf, len, "%d", cfg->obs_dim);
    for (int l = 0; l < cfg->n_hidden && l < NN_MAX_HIDDEN && n < len; l++) {
        n += (size_t)snprintf(buf + n, len - n, "-%d", cfg->hidden[l]);
    }
    if (n < len) {
        snprintf(buf + n, len - n, cfg->dueling ? "-dueling(%d)" : "-%d", cfg->n_actions);
    }
}

int nn_config_equal(const nn_config_t *a, const nn_config_t *b) {
    if (a->obs_dim != b->obs_dim || a->n_actions != b->n_actions || a->n_hidden != b->n_hidden ||
        a->dueling != b->dueling) {
        return 0;
    }
    for (int l = 0; l < a->n_hidden && l < NN_MAX_HIDDEN; l++) {
        if (a->hidden[l] != b->hidden[l]) {
            return 0;
        }
    }
    return 1;
}

// in/out widths of layer l (the head is layer n_hidden).
static void s_layer_dims(const nn_config_t *cfg, int l, int *in_dim, int *out_dim) {
    *in_dim = l == 0 ? cfg->obs_dim : cfg->hidden[l - 1];
    *out_dim = l == cfg->n_hidden ? nn_head_dim(cfg) : cfg->hidden[l];
}

int nn_layout(const nn_config_t *cfg, nn_tensor_t *out) {
    static const char *names[NN_MAX_TENSORS] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b",
                                                "fc3.w", "fc3.b", "fc4.w", "fc4.b"};
    APEX_ASSERT(nn_config_check(cfg, NULL, 0) == APEX_OK);
    size_t off = 0;
    int n = 0;
    for (int l = 0; l <= cfg->n_hidden; l++) {
        int in_dim, out_dim;
        s_layer_dims(cfg, l, &in_dim, &out_dim);
        int head = l == cfg->n_hidden;
        out[n] = (nn_tensor_t){head ? "head.w" : names[2 * l], off, out_dim, in_dim};
        off += (size_t)out_dim * in_dim;
        n++;
        out[n] = (nn_tensor_t){head ? "head.b" : names[2 * l + 1], off, out_dim, 1};
        off += (size_t)out_dim;
        n++;
    }
    return n;
}

size_t nn_num_params(const nn_config_t *cfg) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int n = nn_layout(cfg, t);
    return t[n - 1].offset + (size_t)t[n - 1].rows;
}

// ----------------------------------------------------------------------------
// params

void nn_params_init(nn_params_t *p, const nn_config_t *cfg) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int n = nn_layout(cfg, t);
    memset(p, 0, sizeof *p);
    p->num_params = t[n - 1].offset + (size_t)t[n - 1].rows;
    p->data = xaligned_alloc(p->num_params * sizeof(float));
    p->n_layers = n / 2;
    // Rows come in (w, b) pairs, one pair per layer.
    for (int l = 0; l < p->n_layers; l++) {
        p->layer[l] = (nn_linear_t){p->data + t[2 * l].offset, p->data + t[2 * l + 1].offset,
                                    t[2 * l].cols, t[2 * l].rows};
    }
}

void nn_params_fini(nn_params_t *p) {
    xfree(p->data);
    memset(p, 0, sizeof *p);
}

void nn_params_init_random(nn_params_t *p, rng_t *rng) {
    for (int l = 0; l < p->n_layers; l++) {
        const nn_linear_t *L = &p->layer[l];
        // PyTorch: kaiming_uniform(a=sqrt(5)) on W gives bound 1/sqrt(fan_in), as for b.
        float bound = 1.0f / sqrtf((float)L->in_dim);
        size_t nw = (size_t)L->out_dim * L->in_dim;
        for (size_t i = 0; i < nw; i++) {
            L->w[i] = bound * (2.0f * rng_uniform_f(rng) - 1.0f);
        }
        for (int i = 0; i < L->out_dim; i++) {
            L->b[i] = bound * (2.0f * rng_uniform_f(rng) - 1.0f);
        }
    }
}

void nn_params_copy(nn_params_t *dst, const nn_params_t *src) {
    APEX_ASSERT(dst->num_params == src->num_params);
    memcpy(dst->data, src->data, src->num_params * sizeof(float));
}

void nn_params_zero(nn_params_t *p) { memset(p->data, 0, p->num_params * sizeof(float)); }

// ----------------------------------------------------------------------------
// state

static size_t s_round_up(size_t n) {
    return (n + NN_ALIGN_FLOATS - 1) / NN_ALIGN_FLOATS * NN_ALIGN_FLOATS;
}

void nn_state_init(nn_state_t *s, const nn_config_t *cfg, int max_batch) {
    APEX_ASSERT(nn_config_check(cfg, NULL, 0) == APEX_OK && max_batch >= 1);
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->max_batch = max_batch;
    size_t B = (size_t)max_batch, P = (size_t)nn_head_dim(cfg), h_max = 0, total = 0;
    for (int l = 0; l < cfg->n_hidden; l++) {
        h_max = APEX_MAX(h_max, (size_t)cfg->hidden[l]);
        total += s_round_up((size_t)cfg->hidden[l] * B);
    }
    total += 2 * s_round_up(P * B) + 2 * s_round_up(h_max * B) +
             s_round_up(B * (size_t)cfg->n_actions);
    s->block = xaligned_alloc(total * sizeof(float));
    float *cur = s->block;
    for (int l = 0; l < cfg->n_hidden; l++) {
        s->act[l] = cur;
        cur += s_round_up((size_t)cfg->hidden[l] * B);
    }
    s->head = cur, cur += s_round_up(P * B);
    s->dhead = cur, cur += s_round_up(P * B);
    s->grad[0] = cur, cur += s_round_up(h_max * B);
    s->grad[1] = cur, cur += s_round_up(h_max * B);
    s->q = cur;
}

void nn_state_fini(nn_state_t *s) {
    xfree(s->block);
    memset(s, 0, sizeof *s);
}

// ----------------------------------------------------------------------------
// elementwise kernels, branch-free over 4-float vectors
//
// GCC/Clang vector extensions (SSE2 on x86-64, NEON on arm64). gcc -O2 vectorizes none of
// these loops by itself, and its scalar ReLU is a data-dependent branch that mispredicts on
// about half of the activations: perf showed it at 24% of a whole update before this.
// Loads and stores go through memcpy, so any alignment is fine.

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

static inline v4f s_load4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void s_store4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

// x[i] = value for n floats.
static void s_fill(float *x, float value, size_t n) {
    const v4f v = {value, value, value, value};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s_store4(x + i, v);
    }
    for (; i < n; i++) {
        x[i] = value;
    }
}

// Sum of n floats (four interleaved partial sums).
static float s_sum(const float *x, size_t n) {
    v4f acc = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        acc += s_load4(x + i);
    }
    float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (; i < n; i++) {
        sum += x[i];
    }
    return sum;
}

// x = max(x, 0), as a mask: lanes with x > 0 keep their bits, the rest become +0.
static void s_relu_forward(float *x, size_t n) {
    const v4f zero = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4f v = s_load4(x + i);
        s_store4(x + i, (v4f)((v4i)v & (v4i)(v > zero)));
    }
    for (; i < n; i++) {
        x[i] = x[i] > 0.0f ? x[i] : 0.0f;
    }
}

// dx *= relu'(pre) where act = relu(pre): act > 0 exactly when pre > 0.
static void s_relu_backward(float *dx, const float *act, size_t n) {
    const v4f zero = {0, 0, 0, 0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4i keep = (v4i)(s_load4(act + i) > zero);
        s_store4(dx + i, (v4f)((v4i)s_load4(dx + i) & keep));
    }
    for (; i < n; i++) {
        dx[i] = act[i] > 0.0f ? dx[i] : 0.0f;
    }
}

// ----------------------------------------------------------------------------
// layer kernels (STYLE S10: outputs, inputs, parameters, dimensions)

// out (out_dim x B) = w (out_dim x in_dim) . in + b. in is (in_dim x B) feature-major, or
// (B x in_dim) batch-major when in_batch_major (the raw observations).
static void s_linear_forward(float *out, const float *in, const float *w, const float *b, int B,
                             int in_dim, int out_dim, int in_batch_major) {
    for (int i = 0; i < out_dim; i++) {
        s_fill(out + (size_t)i * B, b[i], (size_t)B);
    }
    blas_sgemm(out, w, in, 1.0f, 1.0f, BLAS_NO_TRANS, in_batch_major ? BLAS_TRANS : BLAS_NO_TRANS,
               out_dim, B, in_dim);
}

// dw += dout . in^T, db += row sums of dout, and (unless din is NULL) din = w^T . dout.
// dout is (out_dim x B); in as for s_linear_forward.
static void s_linear_backward(float *din, float *dw, float *db, const float *dout, const float *in,
                              const float *w, int B, int in_dim, int out_dim, int in_batch_major) {
    // dW (out x in): feature-major input is (in x B), so it enters transposed; the raw
    // batch-major observations (B x in) enter as they are.
    blas_sgemm(dw, dout, in, 1.0f, 1.0f, BLAS_NO_TRANS, in_batch_major ? BLAS_NO_TRANS : BLAS_TRANS,
               out_dim, in_dim, B);
    for (int i = 0; i < out_dim; i++) {
        db[i] += s_sum(dout + (size_t)i * B, (size_t)B);
    }
    if (din) {
        blas_sgemm(din, w, dout, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, in_dim, B, out_dim);
    }
}

// q (B x A) from the head output (P x B). Dueling: Q = V + A - mean_a(A) (Wang et al. 2016
// eq. 9); otherwise q is the transpose of the head output.
static void s_dueling_forward(float *q, const float *head, int B, int A, int dueling) {
    const float *adv = head + (dueling ? (size_t)B : 0);
    for (int j = 0; j < B; j++) {
        float mean = 0.0f;
        if (dueling) {
            for (int a = 0; a < A; a++) {
                mean += adv[(size_t)a * B + j];
            }
            mean = head[j] - mean / (float)A; // V - mean(A)
        }
        for (int a = 0; a < A; a++) {
            q[(size_t)j * A + a] = adv[(size_t)a * B + j] + mean;
        }
    }
}

// dhead (P x B) from dq (B x A): dV = sum_a dq, dA_a = dq_a - mean(dq).
static void s_dueling_backward(float *dhead, const float *dq, int B, int A, int dueling) {
    float *dadv = dhead + (dueling ? (size_t)B : 0);
    for (int j = 0; j < B; j++) {
        const float *row = dq + (size_t)j * A;
        float sum = 0.0f;
        if (dueling) {
            for (int a = 0; a < A; a++) {
                sum += row[a];
            }
            dhead[j] = sum;
            sum /= (float)A;
        }
        for (int a = 0; a < A; a++) {
            dadv[(size_t)a * B + j] = row[a] - sum;
        }
    }
}

// ----------------------------------------------------------------------------
// forward / backward

void nn_forward(nn_state_t *s, const nn_params_t *p, const float *obs, int B, float *q_out) {
    APEX_ASSERT(B >= 1 && B <= s->max_batch && p->n_layers == s->cfg.n_hidden + 1);
    const nn_config_t *cfg = &s->cfg;
    s->batch = B;
    s->obs = obs;
    const float *in = obs;
    for (int l = 0; l < cfg->n_hidden; l++) {
        const nn_linear_t *L = &p->layer[l];
        s_linear_forward(s->act[l], in, L->w, L->b, B, L->in_dim, L->out_dim, l == 0);
        s_relu_forward(s->act[l], (size_t)L->out_dim * B);
        in = s->act[l];
    }
    const nn_linear_t *head = &p->layer[cfg->n_hidden];
    s_linear_forward(s->head, in, head->w, head->b, B, head->in_dim, head->out_dim, 0);
    s_dueling_forward(q_out, s->head, B, cfg->n_actions, cfg->dueling);
}

void nn_backward(nn_state_t *s, const nn_params_t *p, nn_params_t *grads, const float *dq, int B) {
    APEX_ASSERT(B == s->batch && grads->num_params == p->num_params);
    const nn_config_t *cfg = &s->cfg;
    int top = cfg->n_hidden; // the head's layer index
    s_dueling_backward(s->dhead, dq, B, cfg->n_actions, cfg->dueling);
    // Walk down: dout is dL/d(pre-activation output) of layer l; din goes to the layer below
    // through the ping-pong buffers, masked by that layer's ReLU.
    const float *dout = s->dhead;
    for (int l = top; l >= 0; l--) {
        const nn_linear_t *L = &p->layer[l];
        nn_linear_t *G = &grads->layer[l];
        const float *in = l == 0 ? s->obs : s->act[l - 1];
        float *din = l == 0 ? NULL : s->grad[l & 1];
        s_linear_backward(din, G->w, G->b, dout, in, L->w, B, L->in_dim, L->out_dim, l == 0);
        if (din) {
            s_relu_backward(din, s->act[l - 1], (size_t)L->in_dim * B);
        }
        dout = din;
    }
}

// ----------------------------------------------------------------------------
// helpers for actors

int nn_argmax(const float *q, int A) {
    APEX_ASSERT(A > 0);
    int best = 0;
    float best_q = q[0];
    for (int a = 1; a < A; a++) {
        // Strictly greater: the first of equal maxima wins. A NaN best_q (q[0] NaN) is
        // replaced by the first number, since (x > NaN) is false but isnan catches it.
        if (q[a] > best_q || (isnan(best_q) && !isnan(q[a]))) {
            best = a;
            best_q = q[a];
        }
    }
    return best;
}

void nn_td_priorities(float *prio_out, nn_state_t *s, const nn_params_t *p, const float *obs,
                      const int32_t *actions, const float *rewards, const float *discounts,
                      const float *next_obs, float priority_eps, int B) {
    int A = s->cfg.n_actions;
    // Pass 1: bootstrap targets y = R + disc * max_a Q(s', a), parked in prio_out.
    nn_forward(s, p, next_obs, B, s->q);
    for (int i = 0; i < B; i++) {
        const float *qi = s->q + (size_t)i * A;
        float boot = discounts[i] != 0.0f ? discounts[i] * qi[nn_argmax(qi, A)] : 0.0f;
        prio_out[i] = rewards[i] + boot;
    }
    // Pass 2: |y - Q(s, a)| + eps.
    nn_forward(s, p, obs, B, s->q);
    for (int i = 0; i < B; i++) {
        APEX_ASSERT(actions[i] >= 0 && actions[i] < A);
        prio_out[i] = fabsf(prio_out[i] - s->q[(size_t)i * A + actions[i]]) + priority_eps;
    }
}
