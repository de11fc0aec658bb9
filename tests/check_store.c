// check_store.c: the replay store against a brute-force model (STYLE S22): config checks,
// FIFO eviction and wrap-around at capacities 1, 3, 5 and 1000, n > capacity adds, the
// max-priority default, importance weights against the closed form in double, the
// generation guard on stale updates, and sampling frequencies (chi-square). uint8
// observations: byte-exact rows at odd obs_dim through wrap-around, sampling and a
// persistence round trip, and the smaller records (stride rounded up to 4 bytes).
#include "check_apex.h"

#include "apex.h"
#include "rng.h"
#include "store.h"
#include "wire.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

// Rows are generated from their insertion number r, so any gathered row can be checked
// against the row id it claims to be: obs = [r, r + 0.25, ...], next_obs = obs + 1000,
// action = r % 7, reward = r, discount = 1 / (1 + r % 5).
#define D 3

static void s_make_rows(uint64_t first, uint32_t n, float *obs, int32_t *act, float *rew,
                        float *disc, float *next_obs) {
    for (uint32_t j = 0; j < n; j++) {
        uint64_t r = first + j;
        for (uint32_t k = 0; k < D; k++) {
            obs[j * D + k] = (float)r + 0.25f * (float)k;
            next_obs[j * D + k] = obs[j * D + k] + 1000.0f;
        }
        act[j] = (int32_t)(r % 7);
        rew[j] = (float)r;
        disc[j] = 1.0f / (float)(1 + r % 5);
    }
}

// Adds rows first .. first+n-1 with the given raw priorities (or NULL).
static void s_add_rows(store_t *s, uint64_t first, uint32_t n, const float *prio) {
    float *obs = malloc((size_t)n * D * sizeof(float));
    float *next_obs = malloc((size_t)n * D * sizeof(float));
    float *rew = malloc(n * sizeof(float)), *disc = malloc(n * sizeof(float));
    int32_t *act = malloc(n * sizeof(int32_t));
    s_make_rows(first, n, obs, act, rew, disc, next_obs);
    store_add(s, n, obs, act, rew, disc, next_obs, prio);
    free(obs);
    free(next_obs);
    free(rew);
    free(disc);
    free(act);
}

static store_t *s_new(uint32_t capacity, double alpha) {
    store_config_t cfg = {.capacity = capacity, .obs_dim = D, .alpha = alpha};
    store_t *s = store_new(&cfg);
    ck_assert_ptr_nonnull(s);
    return s;
}

// One sampled batch with its buffers.
typedef struct {
    uint32_t n;
    uint64_t *keys;
    float *is_w, *obs, *next_obs, *rew, *disc;
    int32_t *act;
} batch_t;

static batch_t s_batch_new(uint32_t n) {
    batch_t b = {.n = n};
    b.keys = malloc(n * sizeof(uint64_t));
    b.is_w = malloc(n * sizeof(float));
    b.obs = malloc((size_t)n * D * sizeof(float));
    b.next_obs = malloc((size_t)n * D * sizeof(float));
    b.rew = malloc(n * sizeof(float));
    b.disc = malloc(n * sizeof(float));
    b.act = malloc(n * sizeof(int32_t));
    return b;
}

static void s_batch_free(batch_t *b) {
    free(b->keys);
    free(b->is_w);
    free(b->obs);
    free(b->next_obs);
    free(b->rew);
    free(b->disc);
    free(b->act);
}

static int s_sample(store_t *s, rng_t *r, batch_t *b, float beta) {
    return store_sample(s, r, b->n, beta, b->keys, b->is_w, b->obs, b->act, b->rew, b->disc,
                        b->next_obs);
}

// Checks that sampled row j is intact (all columns of one generated row) and returns its id.
static uint64_t s_row_id(const batch_t *b, uint32_t j) {
    float want[D], want_next[D], rew, disc;
    int32_t act;
    uint64_t r = (uint64_t)b->rew[j];
    s_make_rows(r, 1, want, &act, &rew, &disc, want_next);
    for (uint32_t k = 0; k < D; k++) {
        ck_assert_float_eq(b->obs[j * D + k], want[k]);
        ck_assert_float_eq(b->next_obs[j * D + k], want_next[k]);
    }
    ck_assert_int_eq(b->act[j], act);
    ck_assert_float_eq(b->disc[j], disc);
    return r;
}

// ---------------------------------------------------------------------------------------
// Lifetime and configuration
// ---------------------------------------------------------------------------------------

START_TEST(test_config_validation) {
    store_config_t bad[] = {
        {.capacity = 0, .obs_dim = 4, .alpha = 0.6},
        {.capacity = STORE_CAPACITY_MAX + 1u, .obs_dim = 4, .alpha = 0.6},
        {.capacity = 10, .obs_dim = 0, .alpha = 0.6},
        {.capacity = 10, .obs_dim = 4, .alpha = -0.1},
        {.capacity = 10, .obs_dim = 4, .alpha = 1.5},
        {.capacity = 10, .obs_dim = 4, .alpha = NAN},
    };
    for (size_t i = 0; i < APEX_ARRAY_LEN(bad); i++) {
        ck_assert_ptr_null(store_new(&bad[i]));
        ck_assert_uint_eq(store_bytes(&bad[i]), 0);
    }
    store_config_t ok = {.capacity = 1000, .obs_dim = 4, .alpha = 0.6};
    ck_assert_uint_ge(store_bytes(&ok), 1000 * (2 * 4 * 4 + 4 * 4 + 4));
    store_t *s = store_new(&ok);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(store_capacity(s), 1000);
    ck_assert_uint_eq(store_obs_dim(s), 4);
    ck_assert_uint_eq(store_size(s), 0);
    store_destroy(&s);
    ck_assert_ptr_null(s);
    store_destroy(&s); // *self_p == NULL
    store_destroy(NULL);
}
END_TEST

START_TEST(test_empty_store_eagain) {
    store_t *s = s_new(10, 0.6);
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(4);
    b.keys[0] = 12345;
    ck_assert_double_eq(store_total_priority(s), 0.0);
    ck_assert_double_eq(store_min_priority(s), 0.0);
    ck_assert_int_eq(s_sample(s, &r, &b, 0.4f), APEX_EAGAIN);
    ck_assert_uint_eq(b.keys[0], 12345); // outputs untouched
    // A bad request (peer input) is refused, not asserted, empty or not.
    ck_assert_int_eq(
        store_sample(s, &r, 0, 0.4f, b.keys, b.is_w, b.obs, b.act, b.rew, b.disc, b.next_obs),
        APEX_EINVAL);
    s_add_rows(s, 0, 1, NULL);
    ck_assert_int_eq(s_sample(s, &r, &b, -1.0f), APEX_EINVAL);
    ck_assert_int_eq(s_sample(s, &r, &b, NAN), APEX_EINVAL);
    ck_assert_uint_eq(b.keys[0], 12345);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

// ---------------------------------------------------------------------------------------
// FIFO, wrap-around, capacity edge cases
// ---------------------------------------------------------------------------------------

START_TEST(test_fifo_eviction_order) {
    // Capacity 3, rows 0..4 added one at a time: rows 3, 4, 2 remain in slots 0, 1, 2.
    store_t *s = s_new(3, 0.6);
    for (uint64_t r = 0; r < 5; r++) {
        s_add_rows(s, r, 1, NULL);
        ck_assert_uint_eq(store_size(s), r + 1 < 3 ? r + 1 : 3);
    }
    ck_assert_uint_eq(store_inserted(s), 5);
    ck_assert_uint_eq(store_next_slot(s), 2); // slot 2 (row 2) is the oldest
    rng_t rng;
    rng_init_stream(&rng, 2, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(300);
    ck_assert_int_eq(s_sample(s, &rng, &b, 0.4f), APEX_OK);
    int seen[5] = {0};
    const uint64_t row_in_slot[3] = {3, 4, 2};
    const uint32_t gen_of_slot[3] = {2, 2, 1}; // writes per slot
    for (uint32_t j = 0; j < b.n; j++) {
        uint32_t slot = (uint32_t)b.keys[j];
        ck_assert_uint_lt(slot, 3);
        ck_assert_uint_eq(s_row_id(&b, j), row_in_slot[slot]);
        ck_assert_uint_eq(b.keys[j] >> 32, gen_of_slot[slot]);
        seen[row_in_slot[slot]]++;
    }
    ck_assert(seen[2] > 0 && seen[3] > 0 && seen[4] > 0);
    ck_assert(seen[0] == 0 && seen[1] == 0);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

START_TEST(test_capacity_one) {
    store_t *s = s_new(1, 0.6);
    rng_t rng;
    rng_init_stream(&rng, 3, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(8);
    for (uint64_t r = 0; r < 10; r++) {
        float p = 0.5f + (float)r;
        s_add_rows(s, r, 1, &p);
        ck_assert_uint_eq(store_size(s), 1);
        ck_assert_int_eq(s_sample(s, &rng, &b, 0.4f), APEX_OK);
        for (uint32_t j = 0; j < b.n; j++) {
            ck_assert_uint_eq(b.keys[j], (uint64_t)(r + 1) << 32); // slot 0, gen r+1
            ck_assert_uint_eq(s_row_id(&b, j), r);
            ck_assert_float_eq(b.is_w[j], 1.0f);
        }
        ck_assert_double_eq_tol(store_total_priority(s), pow(p, 0.6), 1e-6);
    }
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

START_TEST(test_add_more_than_capacity) {
    // 13 rows into capacity 5 in one call: rows 8..12 remain, row r in slot r % 5.
    store_t *s = s_new(5, 1.0);
    float prio[13];
    for (int r = 0; r < 13; r++) {
        prio[r] = (float)(r + 1);
    }
    s_add_rows(s, 0, 13, prio);
    ck_assert_uint_eq(store_size(s), 5);
    ck_assert_uint_eq(store_inserted(s), 13);
    ck_assert_uint_eq(store_next_slot(s), 3);
    double total = 0;
    for (int r = 8; r < 13; r++) {
        ck_assert_double_eq(store_slot_priority(s, (uint32_t)(r % 5)), prio[r]);
        total += prio[r];
    }
    ck_assert_double_eq_tol(store_total_priority(s), total, 1e-5);
    rng_t rng;
    rng_init_stream(&rng, 4, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(200);
    ck_assert_int_eq(s_sample(s, &rng, &b, 0.4f), APEX_OK);
    for (uint32_t j = 0; j < b.n; j++) {
        uint64_t r = s_row_id(&b, j);
        ck_assert(r >= 8 && r < 13);
        ck_assert_uint_eq((uint32_t)b.keys[j], r % 5);
    }
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

// Brute-force model of a store: row id, raw priority and writes per slot.
typedef struct {
    uint32_t cap;
    uint64_t next_row;
    uint64_t *row;
    double *prio;
    uint32_t *gen;
} model_t;

START_TEST(test_wraparound_matches_model) {
    // Capacity 1000 (not a power of two) wrapped ~40 times by batches of awkward sizes,
    // each crossing the end of the ring at a different place.
    // The model is updated the obvious way (slot = row id mod capacity, only the last
    // `capacity` rows of a call land), so any off-by-one in the ring's run splitting shows
    // up as a wrong row id, generation, total or min at the end of some batch.
    const uint32_t cap = 1000, sizes[] = {1, 7, 50, 333, 999, 1000, 1001, 2500, 64};
    const double alpha = 0.6;
    store_t *s = s_new(cap, alpha);
    model_t m = {.cap = cap};
    m.row = calloc(cap, sizeof(uint64_t));
    m.prio = calloc(cap, sizeof(double));
    m.gen = calloc(cap, sizeof(uint32_t));
    rng_t rng;
    rng_init_stream(&rng, 5, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(2048);
    float prio[2500];
    for (int round = 0; round < 36; round++) {
        uint32_t n = sizes[round % APEX_ARRAY_LEN(sizes)];
        for (uint32_t j = 0; j < n; j++) {
            prio[j] = (float)(0.01 + 3.0 * rng_uniform(&rng));
        }
        s_add_rows(s, m.next_row, n, prio);
        for (uint32_t j = (n > cap ? n - cap : 0); j < n; j++) {
            uint32_t slot = (uint32_t)((m.next_row + j) % cap);
            m.row[slot] = m.next_row + j;
            m.prio[slot] = prio[j];
            m.gen[slot]++;
        }
        m.next_row += n;
        ck_assert_uint_eq(store_size(s), m.next_row < cap ? m.next_row : cap);
        ck_assert_uint_eq(store_next_slot(s), m.next_row % cap);
        double total = 0, pmin = INFINITY;
        for (uint32_t i = 0; i < store_size(s); i++) {
            double v = pow(m.prio[i], alpha);
            total += v;
            pmin = fmin(pmin, v);
            ck_assert_uint_eq(store_slot_generation(s, i), m.gen[i]);
        }
        ck_assert_double_eq_tol(store_total_priority(s), total, 1e-5 * total);
        ck_assert_double_eq_tol(store_min_priority(s), pmin, 1e-6 * pmin);
        ck_assert_int_eq(s_sample(s, &rng, &b, 0.5f), APEX_OK);
        for (uint32_t j = 0; j < b.n; j++) {
            uint32_t slot = (uint32_t)b.keys[j];
            ck_assert_uint_lt(slot, store_size(s));
            ck_assert_uint_eq(s_row_id(&b, j), m.row[slot]);
            ck_assert_uint_eq(b.keys[j] >> 32, m.gen[slot]);
        }
    }
    s_batch_free(&b);
    free(m.row);
    free(m.prio);
    free(m.gen);
    store_destroy(&s);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Priorities and importance weights
// ---------------------------------------------------------------------------------------

START_TEST(test_max_priority_default) {
    store_t *s = s_new(10, 0.5);
    rng_t rng;
    rng_init_stream(&rng, 6, RNG_ROLE_TEST, 0);
    s_add_rows(s, 0, 1, NULL); // nothing set yet: max is 1.0
    ck_assert_double_eq_tol(store_slot_priority(s, 0), 1.0, 1e-7);
    float p[2] = {4.0f, 2.0f};
    s_add_rows(s, 1, 2, p);
    ck_assert_double_eq_tol(store_slot_priority(s, 1), 2.0, 1e-6);
    ck_assert_double_eq_tol(store_slot_priority(s, 2), sqrt(2.0), 1e-6);
    s_add_rows(s, 3, 2, NULL); // max raw priority is now 4: 4^0.5
    ck_assert_double_eq_tol(store_slot_priority(s, 3), 2.0, 1e-6);
    ck_assert_double_eq_tol(store_slot_priority(s, 4), 2.0, 1e-6);
    // An update raises the max too.
    uint64_t key = 0 | (uint64_t)store_slot_generation(s, 0) << 32;
    float nine = 9.0f;
    ck_assert_uint_eq(store_update(s, 1, &key, &nine), 1);
    s_add_rows(s, 5, 1, NULL);
    ck_assert_double_eq_tol(store_slot_priority(s, 5), 3.0, 1e-6);
    // A priority of 0 is clamped to STORE_PRIORITY_MIN so the slot stays sampleable.
    float zero = 0.0f;
    s_add_rows(s, 6, 1, &zero);
    ck_assert_double_eq_tol(store_slot_priority(s, 6), sqrt(STORE_PRIORITY_MIN), 1e-9);
    ck_assert_double_eq_tol(store_min_priority(s), sqrt(STORE_PRIORITY_MIN), 1e-9);
    store_destroy(&s);
}
END_TEST

// Checks every weight of a batch against the closed form in double:
// w_i = (N P(i))^-beta / (N P_min)^-beta with P from the raw priorities of the model.
static void s_check_weights(const store_t *s, const batch_t *b, const double *raw, double alpha,
                            double beta) {
    uint64_t n = store_size(s);
    double total = 0, pmin = INFINITY;
    for (uint64_t i = 0; i < n; i++) {
        total += pow(raw[i], alpha);
        pmin = fmin(pmin, pow(raw[i], alpha));
    }
    double max_w = pow((double)n * pmin / total, -beta);
    for (uint32_t j = 0; j < b->n; j++) {
        uint32_t slot = (uint32_t)b->keys[j];
        double want = pow((double)n * pow(raw[slot], alpha) / total, -beta) / max_w;
        ck_assert_msg(fabs(b->is_w[j] - want) <= 1e-5 * want, "slot %u: is_w %.9g want %.9g", slot,
                      b->is_w[j], want);
        ck_assert(b->is_w[j] > 0.0f && b->is_w[j] <= 1.0f);
    }
}

START_TEST(test_is_weights_closed_form) {
    const double alpha = 0.7;
    const float beta = 0.4f;
    store_t *s = s_new(1000, alpha);
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 0);
    double raw[1000];
    float p[1000];
    for (int i = 0; i < 1000; i++) {
        p[i] = (float)(1e-3 + 10.0 * rng_uniform(&rng));
        raw[i] = p[i];
    }
    batch_t b = s_batch_new(512);
    // Partly filled (N = 300), then full (N = 1000).
    s_add_rows(s, 0, 300, p);
    ck_assert_int_eq(s_sample(s, &rng, &b, beta), APEX_OK);
    s_check_weights(s, &b, raw, alpha, beta);
    s_add_rows(s, 300, 700, p + 300);
    ck_assert_int_eq(s_sample(s, &rng, &b, beta), APEX_OK);
    s_check_weights(s, &b, raw, alpha, beta);
    ck_assert_int_eq(s_sample(s, &rng, &b, 0.0f), APEX_OK); // beta 0: no correction
    for (uint32_t j = 0; j < b.n; j++) {
        ck_assert_float_eq(b.is_w[j], 1.0f);
    }
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

START_TEST(test_is_weights_wide_range) {
    // Priorities across the whole accepted range [1e-8, 1e20] in small stores: the weight
    // of a high-priority row is then as small as (1e-28)^beta. This exercises the batched
    // x^beta kernel over the domain a request can reach (beta <= WIRE_BETA_MAX; the kernel's
    // powf fallback near the float range's bottom is check_powbatch's).
    rng_t rng;
    rng_init_stream(&rng, 8, RNG_ROLE_TEST, 0);
    const float betas[] = {1.0f, 0.4f, 0.95f, 0.05f, 0.7f};
    batch_t b = s_batch_new(64);
    for (int trial = 0; trial < 200; trial++) {
        double alpha = trial % 2 ? 1.0 : 0.6;
        uint32_t cap = 2 + (uint32_t)trial % 7;
        store_t *s = s_new(cap, alpha);
        double raw[8];
        float p[8];
        for (uint32_t i = 0; i < cap; i++) {
            p[i] = (float)(1e-8 * pow(1e28, rng_uniform(&rng)));
            raw[i] = p[i];
        }
        p[0] = 1e-8f; // both ends of the range, so the extremes are always present
        p[1] = 1e20f;
        raw[0] = p[0];
        raw[1] = p[1];
        s_add_rows(s, 0, cap, p);
        float beta = betas[trial % APEX_ARRAY_LEN(betas)];
        ck_assert_int_eq(s_sample(s, &rng, &b, beta), APEX_OK);
        s_check_weights(s, &b, raw, alpha, beta);
        store_destroy(&s);
    }
    s_batch_free(&b);
}
END_TEST

START_TEST(test_min_after_eviction_and_update) {
    // The min-tree (and so the weight normaliser) follows the current contents only.
    const double alpha = 0.6;
    store_t *s = s_new(4, alpha);
    rng_t rng;
    rng_init_stream(&rng, 8, RNG_ROLE_TEST, 0);
    double raw[4] = {0.01, 1.0, 2.0, 3.0};
    float p[4] = {0.01f, 1.0f, 2.0f, 3.0f};
    s_add_rows(s, 0, 4, p);
    ck_assert_double_eq_tol(store_min_priority(s), pow(0.01, alpha), 1e-7);
    float five = 5.0f;
    s_add_rows(s, 4, 1, &five); // evicts slot 0, the minimum
    raw[0] = 5.0;
    ck_assert_double_eq_tol(store_min_priority(s), 1.0, 1e-7);
    uint64_t key1 = 1 | (uint64_t)store_slot_generation(s, 1) << 32;
    float four = 4.0f;
    ck_assert_uint_eq(store_update(s, 1, &key1, &four), 1);
    raw[1] = 4.0;
    ck_assert_double_eq_tol(store_min_priority(s), pow(2.0, alpha), 1e-6);
    batch_t b = s_batch_new(64);
    ck_assert_int_eq(s_sample(s, &rng, &b, 1.0f), APEX_OK);
    s_check_weights(s, &b, raw, alpha, 1.0);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

// ---------------------------------------------------------------------------------------
// Updates and the generation guard
// ---------------------------------------------------------------------------------------

START_TEST(test_generation_guard_drops_stale_update) {
    store_t *s = s_new(4, 1.0);
    rng_t rng;
    rng_init_stream(&rng, 9, RNG_ROLE_TEST, 0);
    float p[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    s_add_rows(s, 0, 4, p);
    batch_t b = s_batch_new(1);
    ck_assert_int_eq(s_sample(s, &rng, &b, 0.4f), APEX_OK);
    uint64_t old_key = b.keys[0];
    uint32_t slot = (uint32_t)old_key;
    // Four more adds overwrite every slot, including the sampled one.
    float q[4] = {0.5f, 0.6f, 0.7f, 0.8f};
    s_add_rows(s, 4, 4, q);
    double before = store_slot_priority(s, slot);
    ck_assert_double_eq_tol(before, q[slot], 1e-7);
    float big = 100.0f;
    ck_assert_uint_eq(store_update(s, 1, &old_key, &big), 0);
    ck_assert_uint_eq(store_stale_updates(s), 1);
    ck_assert_double_eq(store_slot_priority(s, slot), before); // new transition untouched
    // The dropped priority did not raise the running max either.
    s_add_rows(s, 8, 1, NULL);
    ck_assert_double_eq_tol(store_slot_priority(s, 0), 1.0, 1e-7);
    // The current key of the same slot is applied.
    uint64_t new_key = slot | (uint64_t)store_slot_generation(s, slot) << 32;
    ck_assert_uint_eq(store_update(s, 1, &new_key, &big), 1);
    ck_assert_double_eq_tol(store_slot_priority(s, slot), 100.0, 1e-4);
    ck_assert_uint_eq(store_stale_updates(s), 1);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

START_TEST(test_update_rejects_bad_slots) {
    store_t *s = s_new(10, 1.0);
    s_add_rows(s, 0, 4, NULL); // slots 0..3 filled, generation 1
    uint64_t keys[6] = {
        2 | 1ull << 32,             // good
        7 | 1ull << 32,             // in range, but not filled yet
        10 | 1ull << 32,            // out of range
        0xffffffffull | 1ull << 32, // far out of range
        3 | 5ull << 32,             // wrong generation
        3 | 1ull << 32,             // good
    };
    float prio[6] = {2, 2, 2, 2, 2, 3};
    ck_assert_uint_eq(store_update(s, 6, keys, prio), 2);
    ck_assert_uint_eq(store_stale_updates(s), 4);
    ck_assert_double_eq(store_slot_priority(s, 2), 2.0);
    ck_assert_double_eq(store_slot_priority(s, 3), 3.0);
    ck_assert_double_eq(store_slot_priority(s, 7), 0.0);
    ck_assert_double_eq_tol(store_total_priority(s), 1 + 1 + 2 + 3, 1e-6);
    store_destroy(&s);
}
END_TEST

START_TEST(test_sampling_frequencies_chi_square) {
    // 100 slots, alpha 0.6, 200 stratified batches of 512: frequencies follow p^a / sum.
    const double alpha = 0.6;
    const uint32_t cap = 100;
    store_t *s = s_new(cap, alpha);
    rng_t rng;
    rng_init_stream(&rng, 10, RNG_ROLE_TEST, 0);
    float p[100];
    double want[100], total = 0;
    for (uint32_t i = 0; i < cap; i++) {
        p[i] = (float)(0.1 + 5.0 * rng_uniform(&rng));
        want[i] = pow(p[i], alpha);
        total += want[i];
    }
    s_add_rows(s, 0, cap, p);
    uint64_t count[100] = {0};
    batch_t b = s_batch_new(512);
    for (int k = 0; k < 200; k++) {
        ck_assert_int_eq(s_sample(s, &rng, &b, 0.4f), APEX_OK);
        for (uint32_t j = 0; j < b.n; j++) {
            count[(uint32_t)b.keys[j]]++;
        }
    }
    double draws = 200.0 * 512, chi2 = 0;
    for (uint32_t i = 0; i < cap; i++) {
        double e = draws * want[i] / total;
        chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    // 99.99th percentile of chi-square with 99 degrees of freedom is about 160.
    ck_assert_msg(chi2 < 160.0, "chi2 %.1f", chi2);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

// A shard normalises its weights by the minimum over every shard (store_sample_min): split
// 100 rows over two stores, and every row's weight from its shard equals, bit for bit, the
// weight one store holding all 100 gives it. A minimum of 0 is store_sample; one above the
// store's own changes nothing; a bad one is refused.
START_TEST(test_sample_min_matches_one_store) {
    const double alpha = 0.6;
    const float beta = 0.7f;
    store_t *all = s_new(100, alpha), *lo = s_new(50, alpha), *hi = s_new(50, alpha);
    rng_t rng;
    rng_init_stream(&rng, 11, RNG_ROLE_TEST, 0);
    float p[100];
    for (int i = 0; i < 100; i++) {
        p[i] = (float)(0.5 + 4.0 * rng_uniform(&rng));
    }
    p[17] = 0.01f; // the global minimum lives in the first shard
    s_add_rows(all, 0, 100, p);
    s_add_rows(lo, 0, 50, p);
    s_add_rows(hi, 50, 50, p + 50);
    ck_assert_double_lt(store_min_priority(lo), store_min_priority(hi));
    double gmin = APEX_MIN(store_min_priority(lo), store_min_priority(hi));
    float w_all[100];
    batch_t b = s_batch_new(512);
    for (int k = 0; k < 4; k++) { // every row, many times over
        ck_assert_int_eq(s_sample(all, &rng, &b, beta), APEX_OK);
        for (uint32_t j = 0; j < b.n; j++) {
            w_all[s_row_id(&b, j)] = b.is_w[j];
        }
    }
    store_t *shards[2] = {lo, hi};
    for (int sh = 0; sh < 2; sh++) {
        ck_assert_int_eq(store_sample_min(shards[sh], &rng, b.n, beta, gmin, b.keys, b.is_w, b.obs,
                                          b.act, b.rew, b.disc, b.next_obs),
                         APEX_OK);
        for (uint32_t j = 0; j < b.n; j++) {
            uint64_t r = s_row_id(&b, j);
            ck_assert_msg(b.is_w[j] == w_all[r],
                          "row %llu: %.9g from its shard, %.9g from one store",
                          (unsigned long long)r, (double)b.is_w[j], (double)w_all[r]);
        }
    }
    // The second shard alone would normalise by its own, larger minimum: other weights.
    ck_assert_int_eq(s_sample(hi, &rng, &b, beta), APEX_OK);
    ck_assert_float_eq(b.is_w[0] > w_all[s_row_id(&b, 0)], 1);
    // 0, and a minimum above the store's own: exactly store_sample's weights.
    rng_t r1 = rng, r2 = rng;
    batch_t c = s_batch_new(512);
    ck_assert_int_eq(
        store_sample(hi, &r1, b.n, beta, b.keys, b.is_w, b.obs, b.act, b.rew, b.disc, b.next_obs),
        APEX_OK);
    ck_assert_int_eq(store_sample_min(hi, &r2, c.n, beta, 1e6, c.keys, c.is_w, c.obs, c.act, c.rew,
                                      c.disc, c.next_obs),
                     APEX_OK);
    ck_assert_mem_eq(b.is_w, c.is_w, b.n * sizeof(float));
    ck_assert_mem_eq(b.keys, c.keys, b.n * sizeof(uint64_t));
    const double bad[] = {-1.0, NAN, INFINITY};
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(store_sample_min(hi, &rng, c.n, beta, bad[k], c.keys, c.is_w, c.obs, c.act,
                                          c.rew, c.disc, c.next_obs),
                         APEX_EINVAL);
    }
    s_batch_free(&b);
    s_batch_free(&c);
    store_destroy(&all);
    store_destroy(&lo);
    store_destroy(&hi);
}
END_TEST

// ---------------------------------------------------------------------------------------
// uint8 observations
// ---------------------------------------------------------------------------------------

// Row r of a uint8 store of obs_dim d: every byte depends on r and its position, so no two
// rows within 256 of each other share an observation; action r % 7, reward r, discount
// 1 / (1 + r % 5).
static uint8_t s_byte8(uint64_t r, uint32_t k, int next) {
    return (uint8_t)(next ? 255u - (uint32_t)(r * 3u + k * 101u) : (uint32_t)(r + 37u * k));
}

static void s_make_rows8(uint32_t d, uint64_t first, uint32_t n, uint8_t *obs, int32_t *act,
                         float *rew, float *disc, uint8_t *next_obs) {
    for (uint32_t j = 0; j < n; j++) {
        uint64_t r = first + j;
        for (uint32_t k = 0; k < d; k++) {
            obs[(size_t)j * d + k] = s_byte8(r, k, 0);
            next_obs[(size_t)j * d + k] = s_byte8(r, k, 1);
        }
        act[j] = (int32_t)(r % 7);
        rew[j] = (float)r;
        disc[j] = 1.0f / (float)(1 + r % 5);
    }
}

static void s_add_rows8(store_t *s, uint64_t first, uint32_t n, const float *prio) {
    uint32_t d = store_obs_dim(s);
    uint8_t *obs = malloc((size_t)n * d), *next_obs = malloc((size_t)n * d);
    float *rew = malloc(n * sizeof(float)), *disc = malloc(n * sizeof(float));
    int32_t *act = malloc(n * sizeof(int32_t));
    s_make_rows8(d, first, n, obs, act, rew, disc, next_obs);
    store_add(s, n, obs, act, rew, disc, next_obs, prio);
    free(obs);
    free(next_obs);
    free(rew);
    free(disc);
    free(act);
}

static store_t *s_new8(uint32_t capacity, uint32_t obs_dim, double alpha) {
    store_config_t cfg = {
        .capacity = capacity, .obs_dim = obs_dim, .obs_elem_bytes = 1, .alpha = alpha};
    store_t *s = store_new(&cfg);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(store_obs_elem_bytes(s), 1);
    return s;
}

// Record stride for obs_dim d of e-byte elements: 16 header bytes + both observations,
// rounded up to a multiple of 4.
static size_t s_want_stride(uint32_t d, uint32_t e) { return (16 + 2 * (size_t)d * e + 3) / 4 * 4; }

#define GUARD 16 // canary bytes after each output buffer
#define CANARY 0xa5

static void s_check_guard(const uint8_t *p, const char *what) {
    for (int i = 0; i < GUARD; i++) {
        ck_assert_msg(p[i] == CANARY, "%s: byte %d past the end was written", what, i);
    }
}

// Checks slot's row of a uint8 store of obs_dim d against generated row r, through
// store_read_slot, with canaries after the observation buffers.
static void s_check_slot8(const store_t *s, uint32_t d, uint32_t slot, uint64_t r) {
    uint8_t obs[8 + GUARD], next[8 + GUARD], want[8], want_next[8];
    int32_t act, want_act;
    float rew, disc, want_rew, want_disc;
    ck_assert_uint_le(d, 8);
    memset(obs, CANARY, sizeof obs);
    memset(next, CANARY, sizeof next);
    ck_assert_int_eq(store_read_slot(s, slot, obs, &act, &rew, &disc, next), 0);
    s_make_rows8(d, r, 1, want, &want_act, &want_rew, &want_disc, want_next);
    ck_assert_msg(memcmp(obs, want, d) == 0, "slot %u: obs is not row %llu's", slot,
                  (unsigned long long)r);
    ck_assert_msg(memcmp(next, want_next, d) == 0, "slot %u: next_obs is not row %llu's", slot,
                  (unsigned long long)r);
    ck_assert_int_eq(act, want_act);
    ck_assert_float_eq(rew, want_rew);
    ck_assert_float_eq(disc, want_disc);
    s_check_guard(obs + d, "read_slot obs");
    s_check_guard(next + d, "read_slot next_obs");
}

START_TEST(test_uint8_odd_dims_wraparound_and_sample) {
    // Capacity 37 (not a power of two) wrapped five times by batches of awkward sizes;
    // obs_dim 5 and 1 make records whose observations end off a 4-byte boundary.
    const uint32_t cap = 37, dims[] = {5, 1, 2}, sizes[] = {1, 5, 36, 37, 38, 80, 3};
    for (size_t di = 0; di < APEX_ARRAY_LEN(dims); di++) {
        const uint32_t d = dims[di];
        store_t *s = s_new8(cap, d, 0.6);
        size_t rows_bytes;
        store_rows(s, &rows_bytes);
        ck_assert_uint_eq(rows_bytes, cap * s_want_stride(d, 1));
        uint64_t row_of[37], next_row = 0;
        uint32_t gen_of[37] = {0};
        rng_t rng;
        rng_init_stream(&rng, 11 + di, RNG_ROLE_TEST, 0);
        const uint32_t n = 300;
        uint64_t keys[300];
        float is_w[300], rew[300], disc[300], prio[80];
        int32_t act[300];
        uint8_t *obs = malloc((size_t)n * d + GUARD), *next = malloc((size_t)n * d + GUARD);
        for (size_t round = 0; round < APEX_ARRAY_LEN(sizes); round++) {
            uint32_t m = sizes[round];
            for (uint32_t j = 0; j < m; j++) {
                prio[j] = (float)(0.05 + 2.0 * rng_uniform(&rng));
            }
            s_add_rows8(s, next_row, m, round % 2 ? prio : NULL);
            for (uint32_t j = (m > cap ? m - cap : 0); j < m; j++) {
                uint32_t slot = (uint32_t)((next_row + j) % cap);
                row_of[slot] = next_row + j;
                gen_of[slot]++;
            }
            next_row += m;
            ck_assert_uint_eq(store_size(s), next_row < cap ? next_row : cap);
            ck_assert_uint_eq(store_next_slot(s), next_row % cap);
            // Each slot holds exactly the bytes of the latest row written to it.
            for (uint32_t i = 0; i < store_size(s); i++) {
                s_check_slot8(s, d, i, row_of[i]);
                ck_assert_uint_eq(store_slot_generation(s, i), gen_of[i]);
            }
            // A sample gathers the exact bytes of the rows its keys name.
            memset(obs, CANARY, (size_t)n * d + GUARD);
            memset(next, CANARY, (size_t)n * d + GUARD);
            ck_assert_int_eq(store_sample(s, &rng, n, 0.4f, keys, is_w, obs, act, rew, disc, next),
                             APEX_OK);
            s_check_guard(obs + (size_t)n * d, "sample obs");
            s_check_guard(next + (size_t)n * d, "sample next_obs");
            for (uint32_t j = 0; j < n; j++) {
                uint32_t slot = (uint32_t)(keys[j] & 0xffffffffu);
                ck_assert_uint_lt(slot, store_size(s));
                ck_assert_uint_eq(keys[j] >> 32, gen_of[slot]);
                uint64_t r = row_of[slot];
                for (uint32_t k = 0; k < d; k++) {
                    ck_assert_uint_eq(obs[(size_t)j * d + k], s_byte8(r, k, 0));
                    ck_assert_uint_eq(next[(size_t)j * d + k], s_byte8(r, k, 1));
                }
                ck_assert_int_eq(act[j], (int32_t)(r % 7));
                ck_assert_float_eq(rew[j], (float)r);
                ck_assert_float_eq(disc[j], 1.0f / (float)(1 + r % 5));
                ck_assert(is_w[j] > 0.0f && is_w[j] <= 1.0f);
            }
        }
        ck_assert_uint_ge(next_row, 5 * cap);
        free(obs);
        free(next);
        store_destroy(&s);
    }
}
END_TEST

START_TEST(test_uint8_store_bytes) {
    const uint32_t cap = 1000;
    store_config_t f32 = {.capacity = cap, .obs_dim = 84, .obs_elem_bytes = 4, .alpha = 0.6};
    store_config_t u8 = f32, dflt = f32;
    u8.obs_elem_bytes = 1;
    dflt.obs_elem_bytes = 0; // 0 means 4
    size_t b32 = store_bytes(&f32), b8 = store_bytes(&u8);
    ck_assert_uint_gt(b8, 0);
    ck_assert_uint_eq(store_bytes(&dflt), b32);
    // obs_dim 84: records of 16 + 2 * 84 = 184 bytes against 16 + 2 * 336 = 688.
    ck_assert_uint_eq(s_want_stride(84, 1), 184);
    ck_assert_uint_eq(s_want_stride(84, 4), 688);
    ck_assert_uint_eq(b32 - b8, (size_t)cap * (688 - 184));
    // Odd obs_dim: 16 + 10 = 26 rounds up to 28, against 16 + 40 = 56; 28 fewer bytes per
    // slot, not the 2 * 5 * 3 = 30 of unrounded records.
    f32.obs_dim = u8.obs_dim = 5;
    ck_assert_uint_eq(store_bytes(&f32) - store_bytes(&u8), (size_t)cap * (56 - 28));
    f32.obs_dim = u8.obs_dim = 1; // 18 rounds up to 20, against 24
    ck_assert_uint_eq(store_bytes(&f32) - store_bytes(&u8), (size_t)cap * (24 - 20));
    // store_rows agrees with the strides, and the element size is reported.
    u8.obs_dim = 5;
    store_t *s8 = store_new(&u8), *s0 = store_new(&dflt);
    ck_assert_ptr_nonnull(s8);
    ck_assert_ptr_nonnull(s0);
    size_t rb;
    store_rows(s8, &rb);
    ck_assert_uint_eq(rb, (size_t)cap * 28);
    store_rows(s0, &rb);
    ck_assert_uint_eq(rb, (size_t)cap * 688);
    ck_assert_uint_eq(store_obs_elem_bytes(s8), 1);
    ck_assert_uint_eq(store_obs_elem_bytes(s0), 4);
    store_destroy(&s8);
    store_destroy(&s0);
}
END_TEST

START_TEST(test_uint8_bad_elem_bytes) {
    const uint32_t bad[] = {2, 3, 8, 0xffffffffu};
    for (size_t i = 0; i < APEX_ARRAY_LEN(bad); i++) {
        store_config_t cfg = {.capacity = 10, .obs_dim = 4, .obs_elem_bytes = bad[i], .alpha = 0.6};
        ck_assert_ptr_null(store_new(&cfg));
        ck_assert_uint_eq(store_bytes(&cfg), 0);
    }
}
END_TEST

START_TEST(test_uint8_persistence_round_trip) {
    const uint32_t cap = 37, d = 5;
    store_t *a = s_new8(cap, d, 0.6);
    float prio[100];
    for (int i = 0; i < 100; i++) {
        prio[i] = 0.1f + (float)(i % 13);
    }
    s_add_rows8(a, 0, 100, prio); // wrapped: rows 63..99 remain
    s_add_rows8(a, 100, 10, NULL);
    uint64_t key = 4 | (uint64_t)store_slot_generation(a, 4) << 32;
    float seven = 7.0f;
    ck_assert_uint_eq(store_update(a, 1, &key, &seven), 1);
    store_state_t st;
    store_get_state(a, &st);
    size_t rows_bytes;
    const void *rows = store_rows(a, &rows_bytes);
    ck_assert_uint_eq(rows_bytes, cap * s_want_stride(d, 1));
    float leaves[37];
    store_copy_leaves(a, leaves);

    store_t *b = s_new8(cap, d, 0.6);
    // Leaves the tree could not hold are refused before anything changes: negative, NaN,
    // infinite, above the tree's bound, or 0 on an occupied slot.
    const float bad_leaf[] = {-1.0f, NAN, INFINITY, 1e29f, 0.0f};
    for (size_t k = 0; k < APEX_ARRAY_LEN(bad_leaf); k++) {
        float saved = leaves[5];
        leaves[5] = bad_leaf[k];
        ck_assert_int_eq(store_restore(b, &st, rows, rows_bytes, leaves), APEX_EINVAL);
        ck_assert_uint_eq(store_size(b), 0);
        leaves[5] = saved;
    }
    ck_assert_int_eq(store_restore(b, &st, rows, rows_bytes, leaves), APEX_OK);
    ck_assert_uint_eq(store_size(b), store_size(a));
    ck_assert_uint_eq(store_next_slot(b), store_next_slot(a));
    ck_assert_uint_eq(store_inserted(b), 110);
    ck_assert_double_eq_tol(store_total_priority(b), store_total_priority(a),
                            1e-6 * store_total_priority(a));
    for (uint32_t i = 0; i < cap; i++) {
        uint8_t oa[8], na[8], ob[8], nb[8];
        int32_t aa, ab;
        float ra, rb, da, db;
        ck_assert_int_eq(store_read_slot(a, i, oa, &aa, &ra, &da, na), 0);
        ck_assert_int_eq(store_read_slot(b, i, ob, &ab, &rb, &db, nb), 0);
        ck_assert_mem_eq(ob, oa, d);
        ck_assert_mem_eq(nb, na, d);
        ck_assert_int_eq(ab, aa);
        ck_assert_float_eq(rb, ra);
        ck_assert_float_eq(db, da);
        // And they are the rows the FIFO says: the latest row r < 110 with r % cap == i.
        s_check_slot8(b, d, i, 109 - (109 - i) % cap);
        ck_assert_uint_eq(store_slot_generation(b, i), store_slot_generation(a, i));
        ck_assert_double_eq(store_slot_priority(b, i), store_slot_priority(a, i));
    }
    // The restored store keeps going: its next row lands where a's would.
    s_add_rows8(b, 110, 1, NULL);
    s_check_slot8(b, d, 110 % cap, 110);

    // Rows of a float32 store of the same capacity and obs_dim have other sizes: refused,
    // and the uint8 store is unchanged; likewise the other way round.
    store_config_t cfg32 = {.capacity = cap, .obs_dim = d, .alpha = 0.6};
    store_t *f = store_new(&cfg32);
    ck_assert_ptr_nonnull(f);
    float obs32[5] = {1, 2, 3, 4, 5}, next32[5] = {0}, r32 = 1, d32 = 1;
    int32_t a32 = 0;
    store_add(f, 1, obs32, &a32, &r32, &d32, next32, NULL);
    store_state_t st32;
    store_get_state(f, &st32);
    size_t rows32_bytes;
    const void *rows32 = store_rows(f, &rows32_bytes);
    ck_assert_uint_eq(rows32_bytes, cap * s_want_stride(d, 4));
    float leaves32[37];
    store_copy_leaves(f, leaves32);
    ck_assert_int_eq(store_restore(b, &st32, rows32, rows32_bytes, leaves32), APEX_EINVAL);
    ck_assert_uint_eq(store_size(b), cap);
    ck_assert_uint_eq(store_inserted(b), 111);
    s_check_slot8(b, d, 110 % cap, 110);
    s_check_slot8(b, d, 0, 74);
    ck_assert_int_eq(store_restore(f, &st, rows, rows_bytes, leaves), APEX_EINVAL);
    ck_assert_uint_eq(store_size(f), 1);
    store_destroy(&f);
    store_destroy(&a);
    store_destroy(&b);
}
END_TEST

// Continuous actions (issue #28): each row carries action_dim floats, written, sampled and
// read back exactly through a wrap of the ring (odd action_dim, uint8 and float32 rows); the
// record grows by the floats; a snapshot's rows restore only into a store of the same
// action layout (the state names it), and a discrete store's state says 0.
START_TEST(test_continuous_actions_rows) {
    const uint32_t cap = 11, d = 3, AD = 5; // (D is the file's obs_dim)
    for (uint32_t eb = 1; eb <= 4; eb += 3) {
        store_config_t cd = {.capacity = cap, .obs_dim = d, .obs_elem_bytes = eb, .alpha = 0.6},
                       cc = cd;
        cc.action_dim = AD;
        // The floats follow the observations; the header's int32 action stays (unused), so
        // that a discrete record is what it always was.
        ck_assert_uint_eq(store_bytes(&cc) - store_bytes(&cd), (size_t)cap * AD * sizeof(float));
        store_t *s = store_new(&cc);
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(store_action_dim(s), AD);
        enum { N = 30 };
        uint8_t obs[N * 3 * 4], next[N * 3 * 4];
        float act[N * 5], rew[N], disc[N];
        for (uint32_t r = 0; r < N; r++) {
            for (uint32_t k = 0; k < d * eb; k++) {
                obs[r * d * eb + k] = (uint8_t)(r * 7 + k), next[r * d * eb + k] = (uint8_t)(r + k);
            }
            for (uint32_t j = 0; j < AD; j++) {
                act[r * AD + j] = (float)r - 0.125f * (float)j; // distinct per row and component
            }
            rew[r] = (float)r, disc[r] = 0.5f;
        }
        // Rows 0..29 in batches of 7, 7, 7, 9: slot i holds the last row r with r % cap == i.
        for (uint32_t at = 0, m; at < N; at += m) {
            m = at < 21 ? 7 : 9;
            store_add(s, m, obs + at * d * eb, act + at * AD, rew + at, disc + at,
                      next + at * d * eb, NULL);
        }
        for (uint32_t i = 0; i < cap; i++) {
            uint32_t r = 29 - (29 - i) % cap;
            uint8_t o[12], nx[12];
            float a[5], rw, ds;
            ck_assert_int_eq(store_read_slot(s, i, o, a, &rw, &ds, nx), 0);
            ck_assert_mem_eq(a, act + r * AD, AD * sizeof(float));
            ck_assert_mem_eq(o, obs + r * d * eb, d * eb);
            ck_assert_mem_eq(nx, next + r * d * eb, d * eb);
            ck_assert_float_eq(rw, (float)r);
        }
        rng_t rng;
        rng_init_stream(&rng, 5, RNG_ROLE_TEST, 0);
        uint64_t keys[64];
        float w[64], sa[64 * 5 + 1], sr[64], sd[64];
        uint8_t so[64 * 12], sn[64 * 12];
        sa[64 * AD] = -7.0f; // guard: nothing written past n * AD floats
        ck_assert_int_eq(store_sample(s, &rng, 64, 0.4f, keys, w, so, sa, sr, sd, sn), APEX_OK);
        ck_assert_float_eq(sa[64 * AD], -7.0f);
        for (int j = 0; j < 64; j++) {
            uint32_t r = (uint32_t)sr[j];
            ck_assert_uint_eq(r % cap, keys[j] & 0xffffffffu);
            ck_assert_mem_eq(sa + j * AD, act + r * AD, AD * sizeof(float));
            ck_assert_mem_eq(so + j * d * eb, obs + r * d * eb, d * eb);
        }
        // Snapshots: the state carries the layout; a discrete store refuses these rows and
        // a continuous store of another action_dim too; one of the same restores them.
        store_state_t st;
        store_get_state(s, &st);
        ck_assert_uint_eq(st.action_dim, AD);
        size_t rows_bytes;
        const void *rows = store_rows(s, &rows_bytes);
        float leaves[11];
        store_copy_leaves(s, leaves);
        store_config_t c4 = cc;
        c4.action_dim = AD - 1;
        store_t *disc_s = store_new(&cd), *other = store_new(&c4), *same = store_new(&cc);
        store_state_t dst;
        store_get_state(disc_s, &dst);
        ck_assert_uint_eq(dst.action_dim, 0);
        ck_assert_int_eq(store_restore(disc_s, &st, rows, rows_bytes, leaves), APEX_EINVAL);
        ck_assert_int_eq(store_restore(other, &st, rows, rows_bytes, leaves), APEX_EINVAL);
        ck_assert_uint_eq(store_size(disc_s) + store_size(other), 0);
        ck_assert_int_eq(store_restore(same, &st, rows, rows_bytes, leaves), APEX_OK);
        for (uint32_t i = 0; i < cap; i++) {
            float a[5], b[5], rw, ds;
            uint8_t o[12], nx[12];
            ck_assert_int_eq(store_read_slot(same, i, o, b, &rw, &ds, nx), 0);
            ck_assert_int_eq(store_read_slot(s, i, o, a, &rw, &ds, nx), 0);
            ck_assert_mem_eq(a, b, sizeof a);
        }
        store_destroy(&disc_s);
        store_destroy(&other);
        store_destroy(&same);
        store_destroy(&s);
    }
}
END_TEST

// The store serves every request the wire decoder lets through, and refuses what it refuses
// (issue #26: min_priority = 1e300 passed the decoder and failed the store, and the server
// asserted). Each sample-request number a peer sends, at its edges: 0, -0, denormals, 1, the
// wire's bound and the next representable value on each side, the type's max, +-inf, NaN.
START_TEST(test_store_takes_what_the_wire_takes) {
    store_t *s = s_new(8, 0.6);
    s_add_rows(s, 0, 8, NULL);
    rng_t r;
    rng_init_stream(&r, 2, RNG_ROLE_TEST, 0);
    batch_t b = s_batch_new(4);
    wire_limits_t lim = {.obs_dim = D, .n_actions = 7, .max_count = 4};
    wire_decoder_t *dec = wire_decoder_new(&lim);
    wire_buf_t buf;
    wire_buf_init(&buf, 0);
    const float betas[] = {0.0f,          -0.0f,
                           FLT_TRUE_MIN,  FLT_MIN,
                           0.5f,          nextafterf(WIRE_BETA_MAX, 0.0f),
                           WIRE_BETA_MAX, nextafterf(WIRE_BETA_MAX, INFINITY),
                           FLT_MAX,       INFINITY,
                           -INFINITY,     NAN,
                           -FLT_TRUE_MIN, -1.0f};
    const double mins[] = {0.0,
                           -0.0,
                           DBL_TRUE_MIN,
                           DBL_MIN,
                           1.0,
                           1e300,
                           nextafter(WIRE_MASS_MAX, 0.0),
                           WIRE_MASS_MAX,
                           nextafter(WIRE_MASS_MAX, INFINITY),
                           DBL_MAX,
                           INFINITY,
                           -INFINITY,
                           NAN,
                           -DBL_TRUE_MIN,
                           -1.0};
    int accepted = 0, refused = 0;
    for (size_t i = 0; i < APEX_ARRAY_LEN(betas); i++) {
        for (size_t j = 0; j < APEX_ARRAY_LEN(mins); j++) {
            wire_msg_t m = {.type = WIRE_MSG_SAMPLE_REQUEST}, o;
            m.u.sample_request = (wire_sample_request_t){
                .id = 1, .batch_size = 4, .beta = betas[i], .min_priority = mins[j]};
            wire_encode(&m, &buf);
            int wire_ok = wire_decode(dec, buf.data, buf.len, &o) == APEX_OK;
            int store_rc = store_sample_min(s, &r, 4, betas[i], mins[j], b.keys, b.is_w, b.obs,
                                            b.act, b.rew, b.disc, b.next_obs);
            ck_assert_msg(store_rc == APEX_OK || store_rc == APEX_EINVAL, "rc %d", store_rc);
            ck_assert_msg(wire_ok == (store_rc == APEX_OK),
                          "beta %a, min_priority %a: the wire %s it, the store %s it", betas[i],
                          mins[j], wire_ok ? "takes" : "refuses",
                          store_rc == APEX_OK ? "takes" : "refuses");
            accepted += wire_ok;
            refused += !wire_ok;
        }
    }
    ck_assert_int_gt(accepted, 20); // both outcomes are exercised
    ck_assert_int_gt(refused, 20);
    wire_buf_fini(&buf);
    wire_decoder_destroy(&dec);
    s_batch_free(&b);
    store_destroy(&s);
}
END_TEST

Suite *store_suite(void) {
    Suite *s = suite_create("store");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_config_validation);
    tcase_add_test(tc, test_empty_store_eagain);
    tcase_add_test(tc, test_store_takes_what_the_wire_takes);
    tcase_add_test(tc, test_fifo_eviction_order);
    tcase_add_test(tc, test_capacity_one);
    tcase_add_test(tc, test_add_more_than_capacity);
    tcase_add_test(tc, test_wraparound_matches_model);
    tcase_add_test(tc, test_max_priority_default);
    tcase_add_test(tc, test_is_weights_closed_form);
    tcase_add_test(tc, test_is_weights_wide_range);
    tcase_add_test(tc, test_min_after_eviction_and_update);
    tcase_add_test(tc, test_generation_guard_drops_stale_update);
    tcase_add_test(tc, test_update_rejects_bad_slots);
    tcase_add_test(tc, test_sampling_frequencies_chi_square);
    tcase_add_test(tc, test_sample_min_matches_one_store);
    tcase_add_test(tc, test_uint8_odd_dims_wraparound_and_sample);
    tcase_add_test(tc, test_uint8_store_bytes);
    tcase_add_test(tc, test_uint8_bad_elem_bytes);
    tcase_add_test(tc, test_uint8_persistence_round_trip);
    tcase_add_test(tc, test_continuous_actions_rows);
    suite_add_tcase(s, tc);
    return s;
}
