// loss.c: importance-weighted Huber loss and new priorities (the targets: nn.c).
// B = batch, A = n_actions. All arrays batch-major (B x A).
#include "loss.h"

#include "apex.h"

#include <math.h>
#include <string.h>

float loss_huber_td(float *dq, float *td, const float *q, const float *y, const int32_t *actions,
                    const float *is_weights, float delta, int B, int A) {
    APEX_ASSERT(delta > 0.0f);
    memset(dq, 0, sizeof(float) * (size_t)B * A);
    double sum = 0.0;
    float inv_b = 1.0f / (float)B;
    for (int i = 0; i < B; i++) {
        APEX_ASSERT(actions[i] >= 0 && actions[i] < A); // validated at decode (wire.c)
        size_t ia = (size_t)i * A + actions[i];
        float d = y[i] - q[ia];
        float ad = fabsf(d);
        td[i] = d;
        sum += (double)is_weights[i] * (ad <= delta ? 0.5f * d * d : delta * (ad - 0.5f * delta));
        // d huber / d q = -clamp(d, -delta, delta) since d = y - q.
        float clamped = d > delta ? delta : (d < -delta ? -delta : d);
        dq[ia] = -is_weights[i] * clamped * inv_b;
    }
    return (float)(sum / B);
}

float loss_mse_td(float *dq, float *td, const float *q, const float *y, const float *is_weights,
                  int B) {
    double sum = 0.0;
    float two_over_b = 2.0f / (float)B;
    for (int i = 0; i < B; i++) {
        float d = y[i] - q[i];
        td[i] = d;
        sum += (double)is_weights[i] * d * d;
        dq[i] = -is_weights[i] * d * two_over_b; // d (w d^2) / dq = -2 w d
    }
    return (float)(sum / B);
}

void loss_priorities(float *prio, const float *td, float priority_eps, int B) {
    for (int i = 0; i < B; i++) {
        prio[i] = fabsf(td[i]) + priority_eps;
    }
}
