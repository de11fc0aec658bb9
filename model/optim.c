// optim.c: Adam, centered RMSProp and gradient clipping over flat arrays (see optim.h).
#include "optim.h"

#include "apex.h"
#include "xalloc.h"

#include <math.h>
#include <string.h>

// The update loops are memory-bound streams over 4 arrays, but scalar sqrt + divide per
// parameter made Adam ~6% of a large-net update. SSE2 (baseline on x86-64) does 4 at a
// time with the same correctly rounded sqrt/div, in the same order as the scalar tail,
// so results do not depend on where the vector loop stops.
#if defined(__SSE2__)
#include <emmintrin.h>
#define OPTIM_SSE2 1
#else
#define OPTIM_SSE2 0
#endif

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

void optim_view(optim_t *o, const optim_config_t *cfg, size_t n, float *m, float *v) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    o->m = m;
    o->v = v;
}

void optim_fini(optim_t *o) {
    xfree(o->m);
    xfree(o->v);
    memset(o, 0, sizeof *o);
}

// PyTorch's single-tensor Adam, folded into one loop over the flat array.
static void s_adam_step(optim_t *o, float *params, const float *grads) {
    const optim_config_t *c = &o->cfg;
    double t = (double)(o->step + 1);
    float b1 = c->adam_beta1, b2 = c->adam_beta2, eps = c->adam_eps;
    float c1 = 1.0f - b1, c2 = 1.0f - b2;
    // Bias corrections in double: 1 - b2^t is tiny for small t and loses digits in float.
    float step_size = (float)(c->lr / (1.0 - pow(b1, t)));
    float inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    float *m = o->m, *v = o->v;
    size_t i = 0;
#if OPTIM_SSE2
    const __m128 vb1 = _mm_set1_ps(b1), vb2 = _mm_set1_ps(b2), vc1 = _mm_set1_ps(c1);
    const __m128 vc2 = _mm_set1_ps(c2), vss = _mm_set1_ps(step_size);
    const __m128 vbc = _mm_set1_ps(inv_sqrt_bc2), veps = _mm_set1_ps(eps);
    for (; i + 4 <= o->n; i += 4) {
        __m128 g = _mm_loadu_ps(grads + i);
        __m128 mi = _mm_add_ps(_mm_mul_ps(vb1, _mm_loadu_ps(m + i)), _mm_mul_ps(vc1, g));
        __m128 vi = _mm_add_ps(_mm_mul_ps(vb2, _mm_loadu_ps(v + i)),
                               _mm_mul_ps(_mm_mul_ps(vc2, g), g));
        __m128 den = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), vbc), veps);
        __m128 upd = _mm_div_ps(_mm_mul_ps(vss, mi), den);
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        _mm_storeu_ps(params + i, _mm_sub_ps(_mm_loadu_ps(params + i), upd));
    }
#endif
    for (; i < o->n; i++) {
        float g = grads[i];
        m[i] = b1 * m[i] + c1 * g;
        v[i] = b2 * v[i] + c2 * g * g;
        params[i] -= step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

// Centered RMSProp, TF semantics: eps inside the sqrt, momentum 0.
static void s_rmsprop_step(optim_t *o, float *params, const float *grads) {
    const optim_config_t *c = &o->cfg;
    float rho = c->rms_decay, eps = c->rms_eps, lr = c->lr, c1 = 1.0f - rho;
    float *mg = o->m, *ms = o->v;
    size_t i = 0;
#if OPTIM_SSE2
    const __m128 vrho = _mm_set1_ps(rho), vc1 = _mm_set1_ps(c1), veps = _mm_set1_ps(eps);
    const __m128 vlr = _mm_set1_ps(lr);
    for (; i + 4 <= o->n; i += 4) {
        __m128 g = _mm_loadu_ps(grads + i);
        __m128 s2 = _mm_add_ps(_mm_mul_ps(vrho, _mm_loadu_ps(ms + i)),
                               _mm_mul_ps(_mm_mul_ps(vc1, g), g));
        __m128 s1 = _mm_add_ps(_mm_mul_ps(vrho, _mm_loadu_ps(mg + i)), _mm_mul_ps(vc1, g));
        __m128 den = _mm_sqrt_ps(_mm_add_ps(_mm_sub_ps(s2, _mm_mul_ps(s1, s1)), veps));
        _mm_storeu_ps(ms + i, s2);
        _mm_storeu_ps(mg + i, s1);
        _mm_storeu_ps(params + i,
                      _mm_sub_ps(_mm_loadu_ps(params + i), _mm_div_ps(_mm_mul_ps(vlr, g), den)));
    }
#endif
    for (; i < o->n; i++) {
        float g = grads[i];
        ms[i] = rho * ms[i] + c1 * g * g;
        mg[i] = rho * mg[i] + c1 * g;
        // ms - mg^2 >= 0 in exact arithmetic (a variance); eps keeps it positive in float.
        params[i] -= lr * g / sqrtf(ms[i] - mg[i] * mg[i] + eps);
    }
}

// One dispatch per update, not per parameter: each kind is its own tight loop.
void optim_step(optim_t *o, float *params, const float *grads) {
    if (o->cfg.kind == OPTIM_ADAM) {
        s_adam_step(o, params, grads);
    } else {
        s_rmsprop_step(o, params, grads);
    }
    o->step++;
}

double optim_sum_squares(const float *grads, size_t n) {
    // Squares summed in float within blocks of 256 (relative error ~1e-5, plenty for a
    // clip threshold) and the blocks in double, so long arrays do not drift.
    double ss = 0.0;
    for (size_t start = 0; start < n; start += 256) {
        size_t end = APEX_MIN(n, start + 256);
        float acc[4] = {0, 0, 0, 0};
        size_t i = start;
        for (; i + 4 <= end; i += 4) {
            for (int k = 0; k < 4; k++) {
                acc[k] += grads[i + k] * grads[i + k];
            }
        }
        for (; i < end; i++) {
            acc[0] += grads[i] * grads[i];
        }
        ss += (double)((acc[0] + acc[1]) + (acc[2] + acc[3]));
    }
    return ss;
}

void optim_clip_scale(float *grads, size_t n, double norm, float max_norm) {
    if (max_norm > 0.0f && norm > max_norm) {
        // PyTorch: clip_coef = max_norm / (total_norm + 1e-6), applied only when < 1.
        float coef = (float)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < n; i++) {
            grads[i] *= coef;
        }
    }
}

float optim_clip_grad_norm(float *grads, size_t n, float max_norm) {
    double norm = sqrt(optim_sum_squares(grads, n));
    optim_clip_scale(grads, n, norm, max_norm);
    return (float)norm;
}
