// loss.c: double-DQN n-step targets, importance-weighted Huber loss, new priorities.
// B = batch, A = n_actions. All arrays batch-major (B x A).
#include "loss.h"

#include "apex.h"
#include "nn.h"

#include <math.h>
#include <string.h>

void loss_double_dqn_targets(float *y, const float *q_next_online, const float *q_next_target,
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

void loss_priorities(float *prio, const float *td, float priority_eps, int B) {
    for (int i = 0; i < B; i++) {
        prio[i] = fabsf(td[i]) + priority_eps;
    }
}
