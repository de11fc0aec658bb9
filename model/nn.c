// nn.c: the layer sequence (conv2d, ReLU, flatten, linear, dueling) over one flat
// parameter array, feature-major activations (see nn.h for the layout reasoning).
// Dimension names: B = batch, O = obs_dim, H = hidden width, A = n_actions, P = head width,
// F = features entering the first linear layer.
#include "nn.h"

#include "apex.h"
#include "blas.h"
#include "bf16.h"
#include "config.h"
#include "dnnconv.h"
#include "log.h"
#include "xalloc.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

// Every view carved out of a state block starts on a 64-byte line (16 floats).
#define NN_ALIGN_FLOATS 16

// ----------------------------------------------------------------------------
// config and layout

void nn_input_shape(const nn_config_t *cfg, int *h, int *w, int *c) {
    if (cfg->in_h > 0 && cfg->in_w > 0) {
        *h = cfg->in_h, *w = cfg->in_w, *c = cfg->in_c > 0 ? cfg->in_c : 1;
    } else {
        *h = 1, *w = 1, *c = cfg->obs_dim;
    }
}

static float s_scale(const nn_config_t *cfg) {
    return cfg->in_scale != 0.0f ? cfg->in_scale : 1.0f;
}

// Fills shapes[0..n_conv) from the config and returns the features after the last one (the
// first linear layer's input), or -1 with the reason in why.
static int s_conv_shapes(const nn_config_t *cfg, conv_shape_t *shapes, char *why, size_t n) {
    int h, w, c;
    nn_input_shape(cfg, &h, &w, &c);
    for (int l = 0; l < cfg->n_conv; l++) {
        const nn_conv_t *k = &cfg->conv[l];
        char reason[128];
        if (conv_shape_init(&shapes[l], c, h, w, k->filters, k->kernel, k->stride, reason,
                            sizeof reason) != APEX_OK ||
            (l == 0 &&
             conv_shape_frames(&shapes[0], cfg->in_frames, reason, sizeof reason) != APEX_OK)) {
            if (why && n) {
                snprintf(why, n, "conv layer %d (%dx%ds%d on %dx%dx%d): %s", l + 1, k->filters,
                         k->kernel, k->stride, h, w, c, reason);
            }
            return -1;
        }
        h = shapes[l].oh, w = shapes[l].ow, c = k->filters;
    }
    return h * w * c;
}

void nn_critic_config(nn_config_t *out, const nn_config_t *policy) {
    *out = *policy;
    out->action_inputs = policy->n_actions;
    out->n_actions = 1;
    out->dueling = 0;
    out->out_bounded = 0;
    memset(out->out_low, 0, sizeof out->out_low);
    memset(out->out_high, 0, sizeof out->out_high);
}

int nn_wants_conv_body(const nn_config_t *net) {
    conv_shape_t shapes[NN_MAX_CONV];
    if (net->n_conv == 0 || s_conv_shapes(net, shapes, NULL, 0) < 0) {
        return 0; // (a shape the network itself refuses: its own error says so later)
    }
    return dnnconv_work(shapes, net->n_conv) >= DNNCONV_MIN_WORK;
}

int nn_run_wants_conv_body(const apex_config_t *run) {
    nn_config_t net;
    nn_config_from_run(&net, run);
    return nn_wants_conv_body(&net);
}

size_t nn_run_weights_params(const apex_config_t *run) {
    nn_config_t net, critic;
    nn_config_from_run(&net, run);
    if (run->env.action_dim == 0) {
        return nn_num_params(&net);
    }
    nn_critic_config(&critic, &net);
    return nn_num_params(&net) + nn_num_params(&critic);
}

void nn_config_from_run(nn_config_t *n, const apex_config_t *c) {
    _Static_assert((int)NN_INPUT_U8 == (int)CONFIG_OBS_UINT8 &&
                       (int)NN_INPUT_F32 == (int)CONFIG_OBS_FLOAT32,
                   "network and config dtypes share their values");
    _Static_assert(NN_MAX_CONV == CONFIG_MAX_CONV && NN_MAX_HIDDEN == CONFIG_MAX_HIDDEN,
                   "the network holds every layer the config can name");
    _Static_assert(NN_MAX_BOUNDED >= CONFIG_MAX_ACTION_DIM,
                   "a policy head bounds every action component the config can name");
    memset(n, 0, sizeof *n);
    n->obs_dim = c->env.obs_dim;
    n->in_h = c->env.obs_h;
    n->in_w = c->env.obs_w;
    n->in_c = c->env.obs_c;
    n->in_frames = (int)c->env.frame_stack;
    n->in_dtype = c->env.obs_dtype;
    n->in_scale = (float)c->env.obs_scale;
    n->n_conv = c->network.n_conv;
    for (int i = 0; i < c->network.n_conv; i++) {
        n->conv[i] = (nn_conv_t){c->network.conv[i].filters, c->network.conv[i].kernel,
                                 c->network.conv[i].stride};
    }
    n->n_actions = c->env.n_actions;
    n->n_hidden = c->network.n_hidden;
    for (int i = 0; i < c->network.n_hidden; i++) {
        n->hidden[i] = c->network.hidden[i];
    }
    n->dueling = c->network.dueling;
    if (c->env.action_dim > 0) {
        // Continuous actions (issue #28): the run's network is DPG's policy, a bounded head of
        // action_dim outputs in the run's bounds (config_check has set dueling off); the
        // learner's critics are nn_critic_config of it.
        n->n_actions = c->env.action_dim;
        n->dueling = 0;
        n->out_bounded = 1;
        for (int j = 0; j < c->env.action_dim; j++) {
            n->out_low[j] = c->env.action_low[j];
            n->out_high[j] = c->env.action_high[j];
        }
    }
}

nn_config_t nn_config_minatar(int in_c, int n_actions, int dueling) {
    return (nn_config_t){.obs_dim = 10 * 10 * in_c,
                         .in_h = 10,
                         .in_w = 10,
                         .in_c = in_c,
                         .in_dtype = NN_INPUT_U8,
                         .in_scale = 1.0f,
                         .n_conv = 1,
                         .conv = {{16, 3, 1}},
                         .n_actions = n_actions,
                         .n_hidden = 1,
                         .hidden = {128},
                         .dueling = dueling};
}

nn_config_t nn_config_nature(int n_actions, int dueling) {
    return (nn_config_t){.obs_dim = 84 * 84 * 4,
                         .in_h = 84,
                         .in_w = 84,
                         .in_c = 4,
                         .in_dtype = NN_INPUT_U8,
                         .in_scale = 1.0f / 255.0f,
                         .n_conv = 3,
                         .conv = {{32, 8, 4}, {64, 4, 2}, {64, 3, 1}},
                         .n_actions = n_actions,
                         .n_hidden = 1,
                         .hidden = {512},
                         .dueling = dueling};
}

// Every output's bounds finite, low < high, and the half-range finite too (high - low).
static int s_bounds_ok(const nn_config_t *cfg) {
    for (int a = 0; a < cfg->n_actions; a++) {
        float lo = cfg->out_low[a], hi = cfg->out_high[a];
        if (!isfinite(lo) || !isfinite(hi) || !(lo < hi) || !isfinite(hi - lo)) {
            return 0;
        }
    }
    return 1;
}

int nn_config_check(const nn_config_t *cfg, char *why, size_t why_len) {
    const char *msg = NULL;
    int h, w, c;
    nn_input_shape(cfg, &h, &w, &c);
    if (cfg->obs_dim < 1 || cfg->obs_dim > (1 << 20)) {
        msg = "obs_dim must be in [1, 2^20]";
    } else if ((size_t)h * w * c != (size_t)cfg->obs_dim) {
        msg = "the input shape's h x w x c must equal obs_dim";
    } else if (cfg->in_dtype != NN_INPUT_F32 && cfg->in_dtype != NN_INPUT_U8) {
        msg = "input dtype must be float32 or uint8";
    } else if (!isfinite(cfg->in_scale) || cfg->in_scale < 0.0f) {
        msg = "input scale must be finite and >= 0 (0 = 1)";
    } else if (cfg->n_conv < 0 || cfg->n_conv > NN_MAX_CONV) {
        msg = "at most 4 conv layers";
    } else if (cfg->n_actions < 1 || cfg->n_actions > CONFIG_MAX_ACTIONS) {
        msg = "n_actions must be in [1, 4096]";
    } else if (cfg->n_hidden < 1 || cfg->n_hidden > NN_MAX_HIDDEN) {
        msg = "n_hidden must be in [1, 4]";
    } else if (cfg->dueling != 0 && cfg->dueling != 1) {
        msg = "dueling must be 0 or 1";
    } else if (cfg->action_inputs < 0 || cfg->action_inputs > CONFIG_MAX_ACTIONS) {
        msg = "action_inputs must be in [0, 4096]";
    } else if (cfg->out_bounded != 0 && cfg->out_bounded != 1) {
        msg = "out_bounded must be 0 or 1";
    } else if ((cfg->action_inputs > 0 || cfg->out_bounded) && cfg->n_conv > 0) {
        msg = "action inputs and bounded outputs are for MLPs (no conv layers)";
    } else if (cfg->out_bounded && (cfg->dueling || cfg->n_actions > NN_MAX_BOUNDED)) {
        msg = "a bounded head has no dueling and at most 64 outputs";
    } else if (cfg->out_bounded && !s_bounds_ok(cfg)) {
        msg = "output bounds must be finite with low < high";
    } else {
        for (int l = 0; l < cfg->n_hidden; l++) {
            if (cfg->hidden[l] < 1 || cfg->hidden[l] > 65536) {
                msg = "hidden sizes must be in [1, 65536]";
            }
        }
    }
    if (msg) {
        if (why && why_len) {
            snprintf(why, why_len, "%s", msg);
        }
        return APEX_EINVAL;
    }
    conv_shape_t shapes[NN_MAX_CONV];
    int f = s_conv_shapes(cfg, shapes, why, why_len);
    if (f < 1 || f > (1 << 20)) {
        if (f > 0 && why && why_len) {
            snprintf(why, why_len, "%d features after the conv layers, at most 2^20", f);
        }
        return APEX_EINVAL;
    }
    return APEX_OK;
}

int nn_head_dim(const nn_config_t *cfg) { return cfg->n_actions + (cfg->dueling ? 1 : 0); }

void nn_config_format(const nn_config_t *cfg, char *buf, size_t len) {
    size_t n;
    int h, w, c;
    nn_input_shape(cfg, &h, &w, &c);
    if (cfg->n_conv == 0 && h == 1 && w == 1 && cfg->in_dtype == NN_INPUT_F32 &&
        s_scale(cfg) == 1.0f) {
        n = (size_t)snprintf(buf, len, "%d", cfg->obs_dim); // as earlier builds wrote it
    } else {
        n = (size_t)snprintf(buf, len, "%dx%dx%d %s*%g", h, w, c,
                             cfg->in_dtype == NN_INPUT_U8 ? "u8" : "f32", (double)s_scale(cfg));
    }
    if (cfg->action_inputs > 0 && n < len) {
        n += (size_t)snprintf(buf + n, len - n, "+a%d", cfg->action_inputs);
    }
    for (int l = 0; l < cfg->n_conv && l < NN_MAX_CONV && n < len; l++) {
        n += (size_t)snprintf(buf + n, len - n, "-c%dk%ds%d", cfg->conv[l].filters,
                              cfg->conv[l].kernel, cfg->conv[l].stride);
    }
    for (int l = 0; l < cfg->n_hidden && l < NN_MAX_HIDDEN && n < len; l++) {
        n += (size_t)snprintf(buf + n, len - n, "-%d", cfg->hidden[l]);
    }
    if (n < len) {
        snprintf(buf + n, len - n,
                 cfg->dueling ? "-dueling(%d)" : (cfg->out_bounded ? "-tanh(%d)" : "-%d"),
                 cfg->n_actions);
    }
}

int nn_config_equal(const nn_config_t *a, const nn_config_t *b) {
    int ha, wa, ca, hb, wb, cb;
    nn_input_shape(a, &ha, &wa, &ca);
    nn_input_shape(b, &hb, &wb, &cb);
    if (a->obs_dim != b->obs_dim || a->n_actions != b->n_actions || a->n_hidden != b->n_hidden ||
        a->dueling != b->dueling || a->n_conv != b->n_conv ||
        a->action_inputs != b->action_inputs) {
        return 0;
    }
    // An MLP's parameters do not depend on how its input is shaped; a conv net's do.
    if (a->n_conv > 0 && (ha != hb || wa != wb || ca != cb)) {
        return 0;
    }
    for (int l = 0; l < a->n_conv && l < NN_MAX_CONV; l++) {
        if (a->conv[l].filters != b->conv[l].filters || a->conv[l].kernel != b->conv[l].kernel ||
            a->conv[l].stride != b->conv[l].stride) {
            return 0;
        }
    }
    for (int l = 0; l < a->n_hidden && l < NN_MAX_HIDDEN; l++) {
        if (a->hidden[l] != b->hidden[l]) {
            return 0;
        }
    }
    return 1;
}

// The parametric layers in order: conv 0..n_conv-1, then linear 0..n_hidden-1, then the head.
// (in_dim, out_dim) of each as nn_linear_t counts them.
static int s_param_layers(const nn_config_t *cfg, int *in_dim, int *out_dim) {
    conv_shape_t shapes[NN_MAX_CONV];
    int f = s_conv_shapes(cfg, shapes, NULL, 0);
    APEX_ASSERT(f > 0);
    int n = 0;
    for (int l = 0; l < cfg->n_conv; l++, n++) {
        in_dim[n] = shapes[l].c_in * shapes[l].k * shapes[l].k;
        out_dim[n] = shapes[l].c_out;
    }
    // An MLP's first layer reads the observation, then the action inputs (a critic).
    int prev = cfg->n_conv > 0 ? f : cfg->obs_dim + cfg->action_inputs;
    for (int l = 0; l <= cfg->n_hidden; l++, n++) {
        in_dim[n] = prev;
        out_dim[n] = l == cfg->n_hidden ? nn_head_dim(cfg) : cfg->hidden[l];
        prev = out_dim[n];
    }
    return n;
}

int nn_layout(const nn_config_t *cfg, nn_tensor_t *out) {
    static const char *const conv_names[2 * NN_MAX_CONV] = {
        "conv1.w", "conv1.b", "conv2.w", "conv2.b", "conv3.w", "conv3.b", "conv4.w", "conv4.b"};
    static const char *const fc_names[2 * NN_MAX_HIDDEN] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b",
                                                            "fc3.w", "fc3.b", "fc4.w", "fc4.b"};
    APEX_ASSERT(nn_config_check(cfg, NULL, 0) == APEX_OK);
    int in_dim[NN_MAX_LAYERS], out_dim[NN_MAX_LAYERS];
    int n_layers = s_param_layers(cfg, in_dim, out_dim);
    size_t off = 0;
    int n = 0;
    for (int l = 0; l < n_layers; l++) {
        const char *wn, *bn;
        if (l < cfg->n_conv) {
            wn = conv_names[2 * l], bn = conv_names[2 * l + 1];
        } else if (l == n_layers - 1) {
            wn = "head.w", bn = "head.b";
        } else {
            wn = fc_names[2 * (l - cfg->n_conv)], bn = fc_names[2 * (l - cfg->n_conv) + 1];
        }
        out[n++] = (nn_tensor_t){wn, off, out_dim[l], in_dim[l]};
        off += (size_t)out_dim[l] * in_dim[l];
        out[n++] = (nn_tensor_t){bn, off, out_dim[l], 1};
        off += (size_t)out_dim[l];
    }
    return n;
}

size_t nn_num_params(const nn_config_t *cfg) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int n = nn_layout(cfg, t);
    return t[n - 1].offset + (size_t)t[n - 1].rows;
}

double nn_forward_flops(const nn_config_t *cfg) {
    conv_shape_t shapes[NN_MAX_CONV];
    s_conv_shapes(cfg, shapes, NULL, 0);
    int in_dim[NN_MAX_LAYERS], out_dim[NN_MAX_LAYERS];
    int n_layers = s_param_layers(cfg, in_dim, out_dim);
    double f = 0.0;
    for (int l = 0; l < n_layers; l++) {
        double positions = l < cfg->n_conv ? (double)shapes[l].oh * shapes[l].ow : 1.0;
        f += 2.0 * in_dim[l] * out_dim[l] * positions;
    }
    return f;
}

// ----------------------------------------------------------------------------
// params

void nn_params_view(nn_params_t *p, const nn_config_t *cfg, float *data) {
    nn_tensor_t t[NN_MAX_TENSORS];
    int n = nn_layout(cfg, t);
    memset(p, 0, sizeof *p);
    p->num_params = t[n - 1].offset + (size_t)t[n - 1].rows;
    p->data = data;
    p->n_layers = n / 2;
    // Rows come in (w, b) pairs, one pair per layer with parameters.
    for (int l = 0; l < p->n_layers; l++) {
        p->off[l] = t[2 * l].offset;
        p->layer[l] = (nn_linear_t){data ? data + t[2 * l].offset : NULL,
                                    data ? data + t[2 * l + 1].offset : NULL, t[2 * l].cols,
                                    t[2 * l].rows};
    }
}

void nn_params_fetched(nn_params_t *p, const nn_config_t *cfg, nn_fetch_fn fetch, void *arg) {
    APEX_ASSERT(fetch);
    nn_params_view(p, cfg, NULL);
    p->fetch = fetch;
    p->fetch_arg = arg;
}

size_t nn_layer_floats(const nn_params_t *p, int l) {
    APEX_ASSERT(l >= 0 && l < p->n_layers);
    return (size_t)p->layer[l].out_dim * ((size_t)p->layer[l].in_dim + 1);
}

// Layer l whole: its own views, or a fetched network's one block (a conv layer, whose fetcher
// returns every row at once).
static const nn_linear_t *s_layer(const nn_params_t *p, int l, int dir) {
    if (!p->fetch) {
        return &p->layer[l];
    }
    int r0 = -1;
    const nn_linear_t *L = p->fetch(p->fetch_arg, l, 0, dir, &r0);
    APEX_ASSERT(r0 == 0 && L->in_dim == p->layer[l].in_dim && L->out_dim == p->layer[l].out_dim);
    return L;
}

// Block k of layer l of a fetched network, which must start at row r (the rows before it
// are done).
static const nn_linear_t *s_block(const nn_params_t *p, int l, int k, int dir, int r) {
    int r0 = -1;
    const nn_linear_t *L = p->fetch(p->fetch_arg, l, k, dir, &r0);
    APEX_ASSERT(r0 == r && L->in_dim == p->layer[l].in_dim && L->out_dim >= 1 &&
                r0 + L->out_dim <= p->layer[l].out_dim);
    return L;
}

void nn_params_init(nn_params_t *p, const nn_config_t *cfg) {
    size_t n = nn_num_params(cfg);
    float *data = xaligned_alloc(n * sizeof(float));
    memset(data, 0, n * sizeof(float));
    nn_params_view(p, cfg, data);
}

void nn_params_fini(nn_params_t *p) {
    xfree(p->data);
    memset(p, 0, sizeof *p);
}

void nn_layer_init_random_part(const nn_params_t *p, int l, rng_t *rng, float *dst, size_t lo,
                               size_t hi) {
    const nn_linear_t *L = &p->layer[l];
    // PyTorch: kaiming_uniform(a=sqrt(5)) on W gives bound 1/sqrt(fan_in), as for b;
    // fan_in = in for nn.Linear and C k k for nn.Conv2d, which is in_dim either way.
    float bound = 1.0f / sqrtf((float)L->in_dim);
    size_t off = p->off[l], n = nn_layer_floats(p, l); // w then b, contiguous
    for (size_t i = 0; i < n; i++) {
        float v = bound * (2.0f * rng_uniform_f(rng) - 1.0f);
        if (off + i >= lo && off + i < hi) {
            dst[off + i - lo] = v;
        }
    }
}

void nn_params_init_random(nn_params_t *p, rng_t *rng) {
    APEX_ASSERT(p->data);
    for (int l = 0; l < p->n_layers; l++) {
        nn_layer_init_random_part(p, l, rng, p->data, 0, p->num_params);
    }
}

void nn_params_copy(nn_params_t *dst, const nn_params_t *src) {
    APEX_ASSERT(dst->num_params == src->num_params && dst->data && src->data);
    memcpy(dst->data, src->data, src->num_params * sizeof(float));
}

void nn_params_zero(nn_params_t *p) {
    APEX_ASSERT(p->data);
    memset(p->data, 0, p->num_params * sizeof(float));
}

// ----------------------------------------------------------------------------
// state

static size_t s_round_up(size_t n) {
    return (n + NN_ALIGN_FLOATS - 1) / NN_ALIGN_FLOATS * NN_ALIGN_FLOATS;
}

// Carves n floats off *cur (a NULL base only counts them).
static float *s_take(float **cur, size_t n, size_t *total) {
    float *p = *cur;
    *total += s_round_up(n);
    if (p) {
        *cur = p + s_round_up(n);
    }
    return p;
}

// Lays out every buffer of s over base (NULL: only sizes); returns the floats needed.
static size_t s_state_layout(nn_state_t *s, float *base) {
    const nn_config_t *cfg = &s->cfg;
    size_t B = (size_t)s->max_batch, total = 0, g_max = (size_t)cfg->obs_dim;
    int in_dim[NN_MAX_LAYERS], out_dim[NN_MAX_LAYERS];
    int n_layers = s_param_layers(cfg, in_dim, out_dim);
    float *cur = base;
    for (int l = 0; l < n_layers; l++) {
        size_t feats = l < cfg->n_conv ? conv_out_features(&s->conv[l]) : (size_t)out_dim[l];
        s->act[l] = s_take(&cur, feats * B, &total);
        g_max = APEX_MAX(g_max, feats);
    }
    size_t scratch = 0;
    for (int l = 0; l < cfg->n_conv; l++) {
        scratch = APEX_MAX(scratch, conv_scratch_bytes(&s->conv[l], s->max_batch));
    }
    if (cfg->n_conv > 0) {
        // The first layer's input, transposed: room for floats (bytes use a quarter of it).
        s->in_t = s_take(&cur, conv_in_features(&s->conv[0]) * B, &total);
        s->scratch = s_take(&cur, scratch / sizeof(float) + 1, &total);
    }
    if (cfg->n_conv == 0) {
        s->in_f32 = s_take(&cur, B * (size_t)(cfg->obs_dim + cfg->action_inputs), &total);
    }
    s->dhead = s_take(&cur, (size_t)nn_head_dim(cfg) * B, &total);
    s->grad[0] = s_take(&cur, g_max * B, &total);
    s->grad[1] = s_take(&cur, g_max * B, &total);
    s->q = s_take(&cur, B * (size_t)cfg->n_actions, &total);
    return total;
}

size_t nn_state_bytes(const nn_config_t *cfg, int max_batch) {
    nn_state_t s;
    memset(&s, 0, sizeof s);
    s.cfg = *cfg;
    s.max_batch = max_batch;
    s_conv_shapes(cfg, s.conv, NULL, 0);
    return s_state_layout(&s, NULL) * sizeof(float);
}

void nn_state_init(nn_state_t *s, const nn_config_t *cfg, int max_batch, int train) {
    APEX_ASSERT(nn_config_check(cfg, NULL, 0) == APEX_OK && max_batch >= 1);
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->max_batch = max_batch;
    s->train = train != 0;
    s->n_features = s_conv_shapes(cfg, s->conv, NULL, 0);
    size_t total = s_state_layout(s, NULL);
    s->block_bytes = total * sizeof(float);
    s->block = xaligned_alloc(s->block_bytes);
    s_state_layout(s, s->block);
    if (cfg->n_conv > 0 && dnnconv_enabled()) {
        char why[160];
        s->dnn = dnnconv_create(s->conv, cfg->n_conv, max_batch, 0, s->train, why, sizeof why);
        static atomic_int said, said_not; // once per process, for the log's reader
        if (!s->dnn) {
            if (!atomic_exchange(&said_not, 1)) {
                log_info("%s: the conv layers run on im2col + sgemm", why);
            }
        } else if (!atomic_exchange(&said, 1)) {
            log_info("conv layers on oneDNN's convolution primitives at batch %d (first layer %s, "
                     "its input by %s; kernels %s)",
                     max_batch, dnnconv_first_layer(s->dnn), dnnconv_input_path(s->dnn),
                     dnnconv_impl(s->dnn, 0, 0));
        }
    }
}

void nn_state_set_gemm(nn_state_t *s, blas_gemm_fn gemm) {
    s->gemm = gemm;
    // A oneDNN body in the precision of the products: bfloat16 bodies for bf16_gemm_ld (made
    // here, at set-up; a network oneDNN cannot run in bfloat16 keeps conv.c's bf16 GEMMs)
    int bf16 = gemm == bf16_gemm_ld;
    // A forward on the old GEMM is not one to backpropagate on the new (its body may be gone):
    // nn_backward asserts a forward since (its batch).
    s->batch = 0;
    s->dnn_pass = 0;
    s->dnn_in_of = NULL;
    if (s->dnn && dnnconv_bf16(s->dnn) != bf16) {
        dnnconv_free(s->dnn);
        char why[160];
        s->dnn = dnnconv_create(s->conv, s->cfg.n_conv, s->max_batch, bf16, s->train, why,
                                sizeof why);
        static atomic_int said_bf16;
        if (!s->dnn) {
            log_info("%s in %s: the conv layers run on im2col + GEMM", why,
                     bf16 ? "bfloat16" : "fp32");
        } else if (bf16 && !atomic_exchange(&said_bf16, 1)) {
            log_info("conv layers in bfloat16 on oneDNN's convolution primitives (kernels %s)",
                     dnnconv_impl(s->dnn, 0, 0));
        }
    }
    // The conv layers take theirs from their shapes (conv.h has no state of its own).
    for (int l = 0; l < s->cfg.n_conv; l++) {
        s->conv[l].gemm = gemm;
    }
}

void nn_state_fini(nn_state_t *s) {
    dnnconv_free(s->dnn);
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

// ----------------------------------------------------------------------------
// layer kernels (STYLE S10: outputs, inputs, parameters, dimensions)

// Every product below runs on a state's gemm (nn_state_set_gemm): NULL is blas_sgemm.

// out (out_dim x B) = w (out_dim x in_dim) . in + b. in is (in_dim x B) feature-major, or
// (B x in_dim) batch-major when in_batch_major (the raw observations).
static void s_linear_forward(blas_gemm_fn gemm, float *out, const float *in, const float *w,
                             const float *b, int B, int in_dim, int out_dim, int in_batch_major) {
    for (int i = 0; i < out_dim; i++) {
        s_fill(out + (size_t)i * B, b[i], (size_t)B);
    }
    blas_gemm_with(gemm, out, w, in, 1.0f, 1.0f, BLAS_NO_TRANS,
                   in_batch_major ? BLAS_TRANS : BLAS_NO_TRANS, out_dim, B, in_dim);
}

// dw += dout . in^T, db += row sums of dout, and (unless din is NULL) din = w^T . dout.
// dout is (out_dim x B); in as for s_linear_forward.
static void s_linear_backward(blas_gemm_fn gemm, float *din, float *dw, float *db,
                              const float *dout, const float *in, const float *w, int B, int in_dim,
                              int out_dim, int in_batch_major) {
    // dW (out x in): feature-major input is (in x B), so it enters transposed; the raw
    // batch-major observations (B x in) enter as they are.
    blas_gemm_with(gemm, dw, dout, in, 1.0f, 1.0f, BLAS_NO_TRANS,
                   in_batch_major ? BLAS_NO_TRANS : BLAS_TRANS, out_dim, in_dim, B);
    for (int i = 0; i < out_dim; i++) {
        db[i] += s_sum(dout + (size_t)i * B, (size_t)B);
    }
    if (din) {
        blas_gemm_with(gemm, din, w, dout, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, in_dim, B,
                       out_dim);
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

// A policy's bounded outputs: out (B x A) = mid + half tanh(z) from the head output z (A x
// B), which is replaced by t = tanh(z) (kept for backward, as a ReLU layer keeps its output).
static void s_bounded_forward(float *out, float *head, const nn_config_t *cfg, int B) {
    const int A = cfg->n_actions;
    for (int a = 0; a < A; a++) {
        float *t = head + (size_t)a * B;
        float mid = (cfg->out_high[a] + cfg->out_low[a]) * 0.5f;
        float half = (cfg->out_high[a] - cfg->out_low[a]) * 0.5f;
        for (int j = 0; j < B; j++) {
            t[j] = tanhf(t[j]);
            out[(size_t)j * A + a] = mid + half * t[j];
        }
    }
}

// dhead (A x B) = dout (B x A) * half (1 - t^2), with t = tanh(z) (A x B) kept by forward.
static void s_bounded_backward(float *dhead, const float *dout, const float *t,
                               const nn_config_t *cfg, int B) {
    const int A = cfg->n_actions;
    for (int a = 0; a < A; a++) {
        float half = (cfg->out_high[a] - cfg->out_low[a]) * 0.5f;
        const float *ta = t + (size_t)a * B;
        float *d = dhead + (size_t)a * B;
        for (int j = 0; j < B; j++) {
            d[j] = dout[(size_t)j * A + a] * half * (1.0f - ta[j] * ta[j]);
        }
    }
}

// ----------------------------------------------------------------------------
// gradient pieces (nn_backward_pieces, ZeRO stage 2)

size_t nn_piece_min(const nn_config_t *cfg) {
    int in_dim[NN_MAX_LAYERS], out_dim[NN_MAX_LAYERS];
    int n_layers = s_param_layers(cfg, in_dim, out_dim);
    size_t need = 0;
    for (int l = 0; l < n_layers; l++) {
        // A conv layer is one piece (conv_backward writes w and b at once); a linear layer
        // needs room for one row of w, and for its bias.
        size_t layer = l < cfg->n_conv ? (size_t)out_dim[l] * (in_dim[l] + 1)
                                       : (size_t)APEX_MAX(in_dim[l], out_dim[l]);
        need = APEX_MAX(need, layer);
    }
    return need;
}

// A conv layer's gradient views into the (zeroed) piece buffer: w then b, as in the layout.
static nn_linear_t s_conv_piece(const nn_pieces_t *pc, const nn_linear_t *L) {
    size_t n = (size_t)L->out_dim * (L->in_dim + 1);
    memset(pc->buf, 0, n * sizeof(float)); // conv_backward accumulates
    return (nn_linear_t){pc->buf, pc->buf + (size_t)L->out_dim * L->in_dim, L->in_dim, L->out_dim};
}

// s_linear_backward, with dW and db handed over in pieces: blocks of whole rows of dW (rows
// r0..r1 of the (out x in) matrix are contiguous in the flat array), each an sgemm with
// beta = 0 into the piece buffer; the bias rides with the last block when it fits (b
// follows w in the layout), else it is a piece of its own. Then din as there.
static void s_linear_backward_pieces(blas_gemm_fn gemm, float *din, const float *dout,
                                     const float *in, const nn_linear_t *L, size_t off_w,
                                     const nn_pieces_t *pc, int B, int in_batch_major) {
    const int in_dim = L->in_dim, out_dim = L->out_dim;
    const size_t nw = (size_t)out_dim * in_dim;
    const int rows = (int)APEX_MIN(pc->capacity / (size_t)in_dim, (size_t)out_dim);
    int bias_done = 0;
    for (int r0 = 0; r0 < out_dim; r0 += rows) {
        int m = APEX_MIN(rows, out_dim - r0);
        size_t n = (size_t)m * in_dim;
        blas_gemm_with(gemm, pc->buf, dout + (size_t)r0 * B, in, 1.0f, 0.0f, BLAS_NO_TRANS,
                       in_batch_major ? BLAS_NO_TRANS : BLAS_TRANS, m, in_dim, B);
        if (r0 + m == out_dim && n + (size_t)out_dim <= pc->capacity) {
            for (int i = 0; i < out_dim; i++) {
                pc->buf[n + i] = s_sum(dout + (size_t)i * B, (size_t)B);
            }
            n += (size_t)out_dim;
            bias_done = 1;
        }
        pc->done(pc->arg, pc->buf, off_w + (size_t)r0 * in_dim, n);
    }
    if (!bias_done) {
        for (int i = 0; i < out_dim; i++) {
            pc->buf[i] = s_sum(dout + (size_t)i * B, (size_t)B);
        }
        pc->done(pc->arg, pc->buf, off_w + nw, (size_t)out_dim);
    }
    if (din) {
        blas_gemm_with(gemm, din, L->w, dout, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, in_dim, B,
                       out_dim);
    }
}

// ----------------------------------------------------------------------------
// forward / backward: the layer sequence of nn.h, layer by layer

// A critic's first-layer rows: row j = [obs_j x in_scale, actions_j] in s->in_f32, (B x (O +
// A_in)), so that the first layer is one GEMM over PyTorch's torch.cat([s, a], 1).
static const float *s_mlp_input_sa(nn_state_t *s, const void *obs, const float *actions, int B) {
    const nn_config_t *cfg = &s->cfg;
    const int O = cfg->obs_dim, A_in = cfg->action_inputs, W = O + A_in;
    float scale = s_scale(cfg);
    for (int j = 0; j < B; j++) {
        float *row = s->in_f32 + (size_t)j * W;
        if (cfg->in_dtype == NN_INPUT_U8) {
            const uint8_t *u = (const uint8_t *)obs + (size_t)j * O;
            for (int k = 0; k < O; k++) {
                row[k] = (float)u[k] * scale;
            }
        } else if (scale == 1.0f) {
            memcpy(row, (const float *)obs + (size_t)j * O, (size_t)O * sizeof(float));
        } else {
            const float *f = (const float *)obs + (size_t)j * O;
            for (int k = 0; k < O; k++) {
                row[k] = f[k] * scale;
            }
        }
        memcpy(row + O, actions + (size_t)j * A_in, (size_t)A_in * sizeof(float));
    }
    return s->in_f32;
}

// An MLP's observations as float32 rows scaled by in_scale: the rows themselves when they
// are float32 and unscaled (consumed in place), else a converted copy in s->in_f32.
static const float *s_mlp_input(nn_state_t *s, const void *obs, int B) {
    const nn_config_t *cfg = &s->cfg;
    float scale = s_scale(cfg);
    size_t n = (size_t)B * cfg->obs_dim;
    if (cfg->in_dtype == NN_INPUT_F32 && scale == 1.0f) {
        return obs;
    }
    if (cfg->in_dtype == NN_INPUT_U8) {
        const uint8_t *u = obs;
        for (size_t i = 0; i < n; i++) {
            s->in_f32[i] = (float)u[i] * scale;
        }
    } else {
        const float *f = obs;
        for (size_t i = 0; i < n; i++) {
            s->in_f32[i] = f[i] * scale;
        }
    }
    return s->in_f32;
}

// The float rows the last forward of an MLP read: the observations, or their converted copy.
static const float *s_mlp_rows(const nn_state_t *s) {
    int in_place = s->cfg.in_dtype == NN_INPUT_F32 && s_scale(&s->cfg) == 1.0f &&
                   s->cfg.action_inputs == 0;
    return in_place ? s->obs : s->in_f32;
}

// The input of conv layer l as conv.h reads it: the transposed observations for the first
// (bytes that im2col scales, or scaled floats), the previous layer's output (after its ReLU)
// for the others.
static conv_input_t s_conv_input(const nn_state_t *s, int l) {
    if (l > 0) {
        return (conv_input_t){s->act[l - 1], 0, 1.0f};
    }
    return (conv_input_t){s->in_t, s->in_t_u8, s->in_t_u8 ? s_scale(&s->cfg) : 1.0f};
}

// Transposes the observation rows into s->in_t (conv nets), the first conv layer's input.
// uint8 observations stay bytes when their float copy (C H W B floats) would exceed
// NN_F32_INPUT_MAX_BYTES, else become scaled floats. Floats convert each element once instead
// of once per window reading it in im2col ((k / s)^2 times: 9 for MinAtar's 3x3 s1 body, 4
// for the Nature body's 8x8 s4 layer), but cost 4 bytes per element: a copy that fits the
// cache is the cheaper input (MinAtar, B = 512: 819 KB; bench_learner 77.3-78.2 % of sgemm
// with bytes, 78.8-79.8 % with floats), one that does not is written to and read back from
// memory twice per update (Nature, B = 128: 14.4 MB; 72.4-75.0 % with floats, 75.1-76.1 %
// with bytes; the float transpose alone took 1.3-3.9 ms from run to run on the shared Zen 4,
// the byte one 0.63-0.68 ms).
#define NN_F32_INPUT_MAX_BYTES ((size_t)1 << 20)

static void s_conv_transpose(nn_state_t *s, const void *obs, int B);

// Whether a forward of B samples on s runs its conv layers on oneDNN: the batch the body was
// made for, and the state's GEMM in the body's precision (fp32, or bf16_gemm_ld for a
// bfloat16 body; any other GEMM is conv.c's).
static int s_dnn_usable(const nn_state_t *s, int B) {
    int bf16 = s->gemm == bf16_gemm_ld, fp32 = !s->gemm || s->gemm == blas_sgemm_ld;
    return s->dnn && B == dnnconv_batch(s->dnn) && (bf16 || fp32) && dnnconv_bf16(s->dnn) == bf16;
}

// The first conv layer's input for a forward of B samples: oneDNN's body takes the rows
// itself; conv.c reads them transposed (s_conv_transpose). Sets what nn_backward follows.
static void s_conv_input_rows(nn_state_t *s, const void *obs, int B) {
    s->dnn_pass = s_dnn_usable(s, B);
    s->dnn_in_of = NULL;
    if (s->dnn_pass) {
        dnnconv_input(s->dnn, obs, s->cfg.in_dtype == NN_INPUT_U8, s_scale(&s->cfg));
    } else {
        s_conv_transpose(s, obs, B);
    }
}

static void s_conv_transpose(nn_state_t *s, const void *obs, int B) {
    const conv_shape_t *c0 = &s->conv[0];
    s->in_t_u8 = s->cfg.in_dtype == NN_INPUT_U8 &&
                 conv_in_features(c0) * (size_t)B * sizeof(float) > NN_F32_INPUT_MAX_BYTES;
    if (s->in_t_u8) {
        conv_transpose_u8(s->in_t, obs, c0, B);
    } else {
        conv_transpose_f32(s->in_t, obs, s->cfg.in_dtype == NN_INPUT_U8, s_scale(&s->cfg), c0, B);
    }
}

// Layers from..n_layers-1 of the sequence (every layer below from has run), then the head.
// An MLP's first layer reads obs (from = 0), or with action inputs the rows already in
// s->in_f32 (obs NULL).
static void s_forward_from(nn_state_t *s, const nn_params_t *p, const void *obs, int from, int B,
                           float *q_out) {
    const nn_config_t *cfg = &s->cfg;
    // [conv2d -> ReLU] x n_conv, the ReLU applied by conv.c while each chunk is in the cache.
    for (int l = from; l < cfg->n_conv; l++) {
        const nn_linear_t *L = s_layer(p, l, 1);
        if (s->dnn_pass) { // the activations below the top stay inside the body
            dnnconv_forward(s->dnn, l, L->w, L->b, l == 0 ? s->dnn_in_of : NULL,
                            l == cfg->n_conv - 1 ? s->act[l] : NULL);
            continue;
        }
        conv_input_t in = s_conv_input(s, l);
        conv_forward(s->act[l], &in, L->w, L->b, 1, &s->conv[l], B, s->scratch);
    }
    // flatten: the last conv output is already the (F x B) feature-major matrix.
    int first_linear = APEX_MAX(from, cfg->n_conv);
    const float *in = first_linear > 0 ? s->act[first_linear - 1]
                      : obs            ? s_mlp_input(s, obs, B)
                                       : s->in_f32;
    int batch_major = first_linear == 0;
    // [linear -> ReLU] x n_hidden, then the head.
    for (int l = first_linear; l < p->n_layers; l++) {
        const nn_linear_t *L = &p->layer[l];
        if (!p->fetch) {
            s_linear_forward(s->gemm, s->act[l], in, L->w, L->b, B, L->in_dim, L->out_dim,
                             batch_major);
        }
        // A fetched layer by blocks of output rows: rows r0.. of the (out x B) activation.
        for (int k = 0, r = 0; p->fetch && r < L->out_dim; k++) {
            const nn_linear_t *Lk = s_block(p, l, k, 1, r);
            s_linear_forward(s->gemm, s->act[l] + (size_t)r * B, in, Lk->w, Lk->b, B, L->in_dim,
                             Lk->out_dim, batch_major);
            r += Lk->out_dim;
        }
        if (l < p->n_layers - 1) {
            s_relu_forward(s->act[l], (size_t)L->out_dim * B);
        }
        in = s->act[l];
        batch_major = 0;
    }
    // dueling (or plain) Q, or a policy's bounded outputs.
    if (cfg->out_bounded) {
        s_bounded_forward(q_out, s->act[p->n_layers - 1], cfg, B);
    } else {
        s_dueling_forward(q_out, s->act[p->n_layers - 1], B, cfg->n_actions, cfg->dueling);
    }
}

void nn_forward(nn_state_t *s, const nn_params_t *p, const void *obs, int B, float *q_out) {
    const nn_config_t *cfg = &s->cfg;
    APEX_ASSERT(B >= 1 && B <= s->max_batch && p->n_layers == cfg->n_conv + cfg->n_hidden + 1);
    APEX_ASSERT(cfg->action_inputs == 0); // a critic: nn_forward_sa
    s->batch = B;
    s->obs = obs;
    if (cfg->n_conv > 0) {
        s_conv_input_rows(s, obs, B);
    }
    s_forward_from(s, p, obs, 0, B, q_out);
}

void nn_forward_sa(nn_state_t *s, const nn_params_t *p, const void *obs, const float *actions,
                   int B, float *q_out) {
    const nn_config_t *cfg = &s->cfg;
    APEX_ASSERT(B >= 1 && B <= s->max_batch && p->n_layers == cfg->n_hidden + 1 &&
                cfg->n_conv == 0 && cfg->action_inputs > 0);
    s->batch = B;
    s->obs = obs;
    s_mlp_input_sa(s, obs, actions, B);
    s_forward_from(s, p, NULL, 0, B, q_out);
}

void nn_forward_pair(nn_state_t *sa, const nn_params_t *pa, nn_state_t *sb, const nn_params_t *pb,
                     const void *obs, int B, float *qa, float *qb) {
    const nn_config_t *cfg = &sa->cfg;
    APEX_ASSERT(nn_config_equal(cfg, &sb->cfg) && cfg->in_dtype == sb->cfg.in_dtype &&
                s_scale(cfg) == s_scale(&sb->cfg) && sa->gemm == sb->gemm);
    if (cfg->n_conv == 0) {
        nn_forward(sa, pa, obs, B, qa);
        nn_forward(sb, pb, obs, B, qb);
        return;
    }
    APEX_ASSERT(B >= 1 && B <= sa->max_batch && B <= sb->max_batch &&
                pa->n_layers == cfg->n_conv + cfg->n_hidden + 1 && pb->n_layers == pa->n_layers);
    sa->batch = sb->batch = B;
    sa->obs = sb->obs = obs;
    if (s_dnn_usable(sa, B) && s_dnn_usable(sb, B)) {
        // oneDNN: sb's first layer reads sa's input (a train sb keeps a copy of its own, and
        // a body whose first layer reads another layout its own)
        s_conv_input_rows(sa, obs, B);
        if (sb->train || !dnnconv_same_input(sa->dnn, sb->dnn)) {
            s_conv_input_rows(sb, obs, B);
        } else {
            sb->dnn_pass = 1;
            sb->dnn_in_of = sa->dnn;
        }
        s_forward_from(sa, pa, obs, 0, B, qa);
        s_forward_from(sb, pb, obs, 0, B, qb);
        return;
    }
    sa->dnn_pass = sb->dnn_pass = 0;
    s_conv_transpose(sa, obs, B);
    sb->in_t_u8 = sa->in_t_u8;
    if (sb->train) { // nn_backward on sb reads its own copy
        memcpy(sb->in_t, sa->in_t,
               conv_in_features(&sa->conv[0]) * (size_t)B * (sa->in_t_u8 ? 1 : sizeof(float)));
    }
    conv_input_t in = s_conv_input(sa, 0);
    const nn_linear_t *La = s_layer(pa, 0, 1), *Lb = s_layer(pb, 0, 1);
    conv_forward2(sa->act[0], sb->act[0], &in, La->w, La->b, Lb->w, Lb->b, 1, &sa->conv[0], B,
                  sa->scratch);
    s_forward_from(sa, pa, obs, 1, B, qa);
    s_forward_from(sb, pb, obs, 1, B, qb);
}

// nn_backward into grads, or with pc into pieces (nn_backward_pieces; grads is NULL then).
static void s_backward(nn_state_t *s, const nn_params_t *p, nn_params_t *grads,
                       const nn_pieces_t *pc, const float *dq, int B) {
    const nn_config_t *cfg = &s->cfg;
    APEX_ASSERT(s->train && B == s->batch && (pc || grads->num_params == p->num_params) &&
                (pc || !p->fetch));
    if (cfg->out_bounded) {
        s_bounded_backward(s->dhead, dq, s->act[p->n_layers - 1], cfg, B);
    } else {
        s_dueling_backward(s->dhead, dq, B, cfg->n_actions, cfg->dueling);
    }
    // Walk down: dout is dL/d(pre-activation output) of layer l; din goes to the layer below
    // through the ping-pong buffers, masked by that layer's ReLU. The observations get no
    // gradient: the first layer's din is skipped (conv: no dcol GEMM, no col2im).
    const float *dout = s->dhead;
    int top = p->n_layers - 1;
    for (int l = top; l >= cfg->n_conv; l--) {
        const nn_linear_t *L = &p->layer[l];
        int first = l == 0;
        const float *in = first ? s_mlp_rows(s) : s->act[l - 1];
        float *din = first ? NULL : s->grad[l & 1];
        if (p->fetch) {
            // dW needs no parameters; dh_prev = W^T dout summed over the blocks of W's rows.
            s_linear_backward_pieces(s->gemm, NULL, dout, in, L, p->off[l], pc, B, first);
            for (int k = 0, r = 0; din && r < L->out_dim; k++) {
                const nn_linear_t *Lk = s_block(p, l, k, -1, r);
                blas_gemm_with(s->gemm, din, Lk->w, dout + (size_t)r * B, 1.0f, k ? 1.0f : 0.0f,
                               BLAS_TRANS, BLAS_NO_TRANS, L->in_dim, B, Lk->out_dim);
                r += Lk->out_dim;
            }
        } else if (pc) {
            s_linear_backward_pieces(s->gemm, din, dout, in, L, p->off[l], pc, B, first);
        } else {
            nn_linear_t *G = &grads->layer[l];
            s_linear_backward(s->gemm, din, G->w, G->b, dout, in, L->w, B, L->in_dim, L->out_dim,
                              first);
        }
        if (din) {
            conv_relu_mask(din, s->act[l - 1], (size_t)L->in_dim * B);
        }
        dout = din;
    }
    for (int l = cfg->n_conv - 1; s->dnn_pass && l >= 0; l--) {
        // oneDNN: the gradients below the top and their ReLU masks stay inside the body
        const nn_linear_t *L = l > 0 ? s_layer(p, l, -1) : &p->layer[l];
        nn_linear_t G = pc ? s_conv_piece(pc, L) : grads->layer[l];
        dnnconv_backward(s->dnn, l, l == cfg->n_conv - 1 ? dout : NULL, l > 0 ? L->w : NULL, G.w,
                         G.b);
        if (pc) {
            pc->done(pc->arg, pc->buf, p->off[l], (size_t)G.out_dim * (G.in_dim + 1));
        }
    }
    for (int l = cfg->n_conv - 1; !s->dnn_pass && l >= 0; l--) {
        const conv_shape_t *cs = &s->conv[l];
        float *din = l == 0 ? NULL : s->grad[l & 1];
        // W only for dh_prev: the first layer's (no din) is not fetched, only its shape used.
        const nn_linear_t *L = din ? s_layer(p, l, -1) : &p->layer[l];
        nn_linear_t G = pc ? s_conv_piece(pc, L) : grads->layer[l];
        // conv.c recomputes each chunk's im2col from the layer's input, kept since forward.
        conv_input_t in = s_conv_input(s, l);
        conv_backward(din, G.w, G.b, dout, &in, L->w, cs, B, s->scratch);
        if (pc) {
            pc->done(pc->arg, pc->buf, p->off[l], (size_t)G.out_dim * (G.in_dim + 1));
        }
        if (din) {
            conv_relu_mask(din, s->act[l - 1], conv_in_features(cs) * B);
        }
        dout = din;
    }
}

void nn_backward(nn_state_t *s, const nn_params_t *p, nn_params_t *grads, const float *dq, int B) {
    s_backward(s, p, grads, NULL, dq, B);
}

void nn_backward_pieces(nn_state_t *s, const nn_params_t *p, const nn_pieces_t *pieces,
                        const float *dq, int B) {
    APEX_ASSERT(pieces->capacity >= nn_piece_min(&s->cfg));
    s_backward(s, p, NULL, pieces, dq, B);
}

void nn_backward_input(nn_state_t *s, const nn_params_t *p, const float *dq, int B, int col0, int n,
                       float *din) {
    const nn_config_t *cfg = &s->cfg;
    const nn_linear_t *L0 = &p->layer[0];
    APEX_ASSERT(s->train && B == s->batch && cfg->n_conv == 0 && p->n_layers == cfg->n_hidden + 1 &&
                !p->fetch);
    APEX_ASSERT(col0 >= 0 && n >= 1 && col0 + n <= L0->in_dim);
    if (cfg->out_bounded) {
        s_bounded_backward(s->dhead, dq, s->act[p->n_layers - 1], cfg, B);
    } else {
        s_dueling_backward(s->dhead, dq, B, cfg->n_actions, cfg->dueling);
    }
    // Down to the first layer's output: dh_prev = W^T dh, masked by the ReLU below (only
    // the dX GEMMs of nn_backward, no dW).
    const float *dout = s->dhead;
    for (int l = p->n_layers - 1; l >= 1; l--) {
        const nn_linear_t *L = &p->layer[l];
        float *dprev = s->grad[l & 1];
        blas_gemm_with(s->gemm, dprev, L->w, dout, 1.0f, 0.0f, BLAS_TRANS, BLAS_NO_TRANS, L->in_dim,
                       B, L->out_dim);
        conv_relu_mask(dprev, s->act[l - 1], (size_t)L->in_dim * B);
        dout = dprev;
    }
    // din (B x n) += dout^T W0[:, col0 : col0 + n]: dout is (H1 x B), the columns of W0 (H1 x
    // in) a view with leading dimension in; the product comes out batch-major.
    blas_gemm_fn gemm = s->gemm ? s->gemm : blas_sgemm_ld;
    gemm(din, n, dout, B, L0->w + col0, L0->in_dim, 1.0f, 1.0f, BLAS_TRANS, BLAS_NO_TRANS, B, n,
         L0->out_dim);
}

// ----------------------------------------------------------------------------
// helpers for actors, and the TD target they share with the learner

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

void nn_double_dqn_targets(float *y, const float *q_next_online, const float *q_next_target,
                           const float *rewards, const float *discounts, int B, int A) {
    for (int i = 0; i < B; i++) {
        // Action selection by the online net, evaluation by the target net (double DQN).
        int a_star = nn_argmax(q_next_online + (size_t)i * A, A);
        float boot = q_next_target[(size_t)i * A + a_star];
        // disc 0 marks a terminal: skip the product so that even a non-finite bootstrap
        // value from an untrained target net cannot leak into y.
        y[i] = discounts[i] != 0.0f ? rewards[i] + discounts[i] * boot : rewards[i];
    }
}

void nn_td_priorities(float *prio_out, nn_state_t *s, const nn_params_t *p, const void *obs,
                      const int32_t *actions, const float *rewards, const float *discounts,
                      const void *next_obs, float priority_eps, int B) {
    int A = s->cfg.n_actions;
    // Pass 1: the targets y (the learner's formula with online == target: max_a Q(s', a)),
    // parked in prio_out.
    nn_forward(s, p, next_obs, B, s->q);
    nn_double_dqn_targets(prio_out, s->q, s->q, rewards, discounts, B, A);
    // Pass 2: |y - Q(s, a)| + eps.
    nn_forward(s, p, obs, B, s->q);
    for (int i = 0; i < B; i++) {
        APEX_ASSERT(actions[i] >= 0 && actions[i] < A);
        prio_out[i] = fabsf(prio_out[i] - s->q[(size_t)i * A + actions[i]]) + priority_eps;
    }
}

void nn_dpg_td_priorities(float *prio_out, nn_state_t *s_mu, const nn_params_t *mu, nn_state_t *s_q,
                          const nn_params_t *q, const void *obs, const float *actions,
                          const float *rewards, const float *discounts, const void *next_obs,
                          float priority_eps, int B) {
    APEX_ASSERT(s_q->cfg.action_inputs == s_mu->cfg.n_actions && s_q->cfg.n_actions == 1);
    // Passes 1-2: a' = mu(s'), then the targets y, parked in prio_out. mu's output lives in
    // its own state's q, which the critic's forward copies into its input rows.
    nn_forward(s_mu, mu, next_obs, B, s_mu->q);
    nn_forward_sa(s_q, q, next_obs, s_mu->q, B, s_q->q);
    for (int i = 0; i < B; i++) {
        float d = discounts[i];
        prio_out[i] = d != 0.0f ? rewards[i] + d * s_q->q[i] : rewards[i];
    }
    // Pass 3: |y - Q(s, a)| + eps.
    nn_forward_sa(s_q, q, obs, actions, B, s_q->q);
    for (int i = 0; i < B; i++) {
        prio_out[i] = fabsf(prio_out[i] - s_q->q[i]) + priority_eps;
    }
}
