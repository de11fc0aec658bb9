// limiter.c: see limiter.h.
#include "limiter.h"

#include <math.h>

static double s_clamp(const limiter_t *l, double c) {
    if (!(c <= l->max_credit)) { // also catches NaN from a corrupt snapshot
        return isnan(c) ? 0.0 : l->max_credit;
    }
    return c < -l->tolerance ? -l->tolerance : c;
}

void limiter_init(limiter_t *l, double samples_per_insert, double tolerance, uint64_t max_request) {
    *l = (limiter_t){.samples_per_insert = samples_per_insert,
                     .tolerance = tolerance,
                     .max_credit = tolerance + (double)max_request};
}

void limiter_inserted(limiter_t *l, uint64_t n) {
    if (l->samples_per_insert > 0) {
        l->credit = s_clamp(l, l->credit + l->samples_per_insert * (double)n);
    }
}

int limiter_can_sample(const limiter_t *l, uint64_t n) {
    return l->samples_per_insert <= 0 || l->credit - (double)n >= -l->tolerance;
}

void limiter_sampled(limiter_t *l, uint64_t n) {
    if (l->samples_per_insert > 0) {
        // A sample is only taken when allowed, so this stays >= -tolerance; the clamp is for
        // a caller that samples past the limiter on purpose (none does today).
        l->credit = s_clamp(l, l->credit - (double)n);
    }
}

void limiter_refund(limiter_t *l, uint64_t n) {
    if (l->samples_per_insert > 0) {
        l->credit = s_clamp(l, l->credit + (double)n);
    }
}

void limiter_restore(limiter_t *l, double credit) {
    l->credit = l->samples_per_insert > 0 ? s_clamp(l, credit) : 0.0;
}
