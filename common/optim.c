// optim.c: Adam, centered RMSProp and gradient clipping over flat arrays (see optim.h).
#include "optim.h"

#include "apex.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

void optim_config_default(optim_config_t *cfg, optim_kind kind) {
    cfg->kind = kind;
    // Ape-X: Adam is what the torch peer runs (lr 1e-4); RMSProp is the paper's Atari
    // setting, lr = 0.00025 / 4.
    cfg->lr = kind == OPTIM_ADAM ? 1e-4f : 0.00025f / 4.0f;
    cfg->adam_beta1 = 0.9f;
    cfg->adam_beta2 = 0.999f;
    cfg->adam_eps = 1e-8f;
    cfg->rms_decay = 0.95f;
    cfg->rms_eps = 1.5e-7f;
}

int optim_parse_kind(const char *s, optim_kind *out) {
    if (strcmp(s, "adam") == 0) {
        *out = OPTIM_ADAM;
    } else if (strcmp(s, "rmsprop") == 0) {
        *out = OPTIM_RMSPROP;
    } else {
        return -1;
    }
    return 0;
}

const char *optim_kind_name(optim_kind kind) {
    switch (kind) {
    case OPTIM_ADAM:
        return "adam";
    case OPTIM_RMSPROP:
        return "rmsprop";
    }
    return "unknown"; // a value read from a file
}

void optim_init(optim_t *o, const optim_config_t *cfg, size_t n) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->m = xaligned_alloc(n * sizeof(float));
    o->v = xaligned_alloc(n * sizeof(float));
}

void optim_fini(optim_t *o) {
    xfree(o->m);
    xfree(o->v);
    memset(o, 0, sizeof *o);
}

void optim_reset(optim_t *o) {
    memset(o->m, 0, o->n * sizeof(float));
    memset(o->v, 0, o->n * sizeof(float));
    o->step = 0;
}

// PyTorch's single-tensor Adam, folded into one loop over the flat array.
static void s_adam_step(optim_t *o, float *params, const float *grads) {
    const optim_config_t *c = &o->cfg;
    double t = (double)(o->step + 1);
    float b1 = c->adam_beta1, b2 = c->adam_beta2, eps = c->adam_eps;
    // Bias corrections in double: b2^t underflows nothing, but 1 - b2^t loses digits in float.
    float step_size = (float)(c->lr / (1.0 - pow(b1, t)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    float *m = o->m, *v = o->v;
    for (size_t i = 0; i < o->n; i++) {
        float g = grads[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
        params[i] -= step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

// Centered RMSProp, TF semantics: eps inside the sqrt, momentum 0.
static void s_rmsprop_step(optim_t *o, float *params, const float *grads) {
    const optim_config_t *c = &o->cfg;
    float rho = c->rms_decay, eps = c->rms_eps, lr = c->lr;
    float *mg = o->m, *ms = o->v;
    for (size_t i = 0; i < o->n; i++) {
        float g = grads[i];
        ms[i] = rho * ms[i] + (1.0f - rho) * g * g;
        mg[i] = rho * mg[i] + (1.0f - rho) * g;
        // ms - mg^2 >= 0 in exact arithmetic (a variance); eps keeps it positive in float.
        params[i] -= lr * g / sqrtf(ms[i] - mg[i] * mg[i] + eps);
    }
}

void optim_step(optim_t *o, float *params, const float *grads) {
    if (o->cfg.kind == OPTIM_ADAM) {
        s_adam_step(o, params, grads);
    } else {
        s_rmsprop_step(o, params, grads);
    }
    o->step++;
}

float optim_clip_grad_norm(float *grads, size_t n, float max_norm) {
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        ss += (double)grads[i] * grads[i];
    }
    double norm = sqrt(ss);
    if (max_norm > 0.0f && norm > max_norm) {
        // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied only when < 1.
        float coef = (float)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < n; i++) {
            grads[i] *= coef;
        }
    }
    return (float)norm;
}
