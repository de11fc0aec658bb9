// mjenv.c: see mjenv.h. Models live in a small table of slots, one per task with a model;
// each env's state points at its task's slot for the counters. Every call into MuJoCo that
// can raise an error during an episode goes through s_guarded, which turns the error into
// a void step instead of MuJoCo's exit().
#define LOG_MODULE "mujoco"
#include "mjenv.h"

#include "apex.h"
#include "clock.h"
#include "log.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------
// Slots: the process's models, one per task

struct mjenv_slot {
    const mjenv_task_t *task; // NULL: a free slot
    mjModel *m;               // owned; NULL after mjenv_unload
    int forward_body;         // body id of task->forward_body, -1: qpos[0]
    atomic_int open_envs;     // states bound to m (made by a reset, not yet finished)
    atomic_uint_least64_t void_steps;
    log_limiter_t lim;      // divergence lines (under s_log_lock)
    log_limiter_t warn_lim; // MuJoCo's other warnings during steps (under s_log_lock)
};

// s_lock guards the slot table (loads, unloads, binding a state) and MuJoCo's XML parser,
// which keeps global state. s_log_lock guards the log limiters; it is its own lock because
// MuJoCo may warn while s_lock is held (a load), and nothing under it calls MuJoCo.
static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mjenv_slot s_slots[MJENV_MAX_TASKS];

// The slot of task, or NULL. Under s_lock.
static struct mjenv_slot *s_find(const mjenv_task_t *task) {
    for (int i = 0; i < MJENV_MAX_TASKS; i++) {
        if (s_slots[i].task == task) {
            return &s_slots[i];
        }
    }
    return NULL;
}

// ---------------------------------------------------------------------------------------
// MuJoCo's error and warning handlers

// What this thread's call into MuJoCo (s_guarded) left behind. jump is where an error
// unwinds to; NULL outside s_guarded. what holds MuJoCo's first words during the call.
typedef struct {
    jmp_buf *jump;
    char what[MJENV_WHY_LEN];
} s_call_t;
static _Thread_local s_call_t s_call;
static log_limiter_t s_outside_lim; // warnings outside s_guarded (under s_log_lock)

static void s_on_warning(const char *msg) {
    if (s_call.jump != NULL) { // inside a step or reset: its caller decides what it means
        if (s_call.what[0] == '\0') {
            snprintf(s_call.what, sizeof s_call.what, "%s", msg);
        }
        return;
    }
    pthread_mutex_lock(&s_log_lock);
    log_every(&s_outside_lim, MJENV_LOG_INTERVAL_MS, LOG_WARN, "MuJoCo warning: %s", msg);
    pthread_mutex_unlock(&s_log_lock);
}

static void s_on_error(const char *msg) {
    if (s_call.jump != NULL) {
        snprintf(s_call.what, sizeof s_call.what, "MuJoCo error: %s", msg);
        longjmp(*s_call.jump, 1);
    }
    // Outside apex's stepping (mj_makeData out of memory, a bug of ours): fatal (S6.2).
    APEX_PANIC("MuJoCo error: %s", msg);
}

// The steps (n > 0) or the forward pass (n = 0) of s_guarded, apart so that nothing it
// changes lives in s_guarded's frame across the setjmp.
static void s_simulate(const mjModel *m, mjData *d, int n) {
    if (n == 0) {
        mj_forward(m, d);
    }
    for (int k = 0; k < n; k++) {
        mj_step(m, d);
    }
}

// Runs s_simulate(m, d, n) with MuJoCo's errors caught: returns 0, or -1 when MuJoCo raised
// one (its text in s_call.what; d is then mid-step, and must be reset before use).
static int s_guarded(const mjModel *m, mjData *d, int n) {
    jmp_buf jump;
    s_call.what[0] = '\0';
    s_call.jump = &jump;
    if (setjmp(jump) != 0) {
        s_call.jump = NULL;
        return -1;
    }
    s_simulate(m, d, n);
    s_call.jump = NULL;
    return 0;
}

// ---------------------------------------------------------------------------------------
// Loading

// MuJoCo's check for a usable value (mju_isBad negated): finite and within +-mjMAXVAL.
static inline int s_good(double x) { return x <= mjMAXVAL && x >= -mjMAXVAL; }

// The model against the task. 0, or -1 with a message.
static int s_check_model(const mjenv_task_t *t, const mjModel *m, const char *path,
                         int *forward_body, char *err, size_t errlen) {
    const envinfo_t *e = t->info;
    if (m->nq != t->nq || m->nv != t->nv || m->nu != e->action_dim) {
        return apex_errf(err, errlen, -1,
                         "%s: model_xml '%s' has nq %d, nv %d, nu %d; %s's model (%s) has nq "
                         "%d, nv %d, nu %d",
                         e->id, path, m->nq, m->nv, m->nu, e->id, t->asset, t->nq, t->nv,
                         e->action_dim);
    }
    for (int i = 0; i < m->nu; i++) {
        float lo = (float)m->actuator_ctrlrange[2 * i],
              hi = (float)m->actuator_ctrlrange[2 * i + 1];
        if (!m->actuator_ctrllimited[i] || lo != e->action_low || hi != e->action_high) {
            return apex_errf(err, errlen, -1,
                             "%s: model_xml '%s': actuator %d's ctrlrange is %s[%g, %g]; %s's "
                             "actions are in [%g, %g]",
                             e->id, path, i, m->actuator_ctrllimited[i] ? "" : "unlimited, ",
                             (double)lo, (double)hi, e->id, (double)e->action_low,
                             (double)e->action_high);
        }
    }
    *forward_body = -1;
    if (t->forward_body != NULL) {
        *forward_body = mj_name2id(m, mjOBJ_BODY, t->forward_body);
        if (*forward_body < 0) {
            return apex_errf(err, errlen, -1,
                             "%s: model_xml '%s' has no body '%s' (%s's reward "
                             "measures its progress)",
                             e->id, path, t->forward_body, e->id);
        }
    }
    if (t->needs_site && m->nsite < 1) {
        return apex_errf(err, errlen, -1,
                         "%s: model_xml '%s' has no site (%s's reward reads "
                         "the first site's position)",
                         e->id, path, e->id);
    }
    return 0;
}

// Runs the model once from its initial state (a forward pass and one step), so that a
// model MuJoCo cannot simulate at all is a start-up error, not a stream of void steps.
static int s_probe(const mjenv_task_t *t, const mjModel *m, const char *path, char *err,
                   size_t errlen) {
    mjData *d = mj_makeData(m);
    int bad = s_guarded(m, d, 0) != 0 || s_guarded(m, d, 1) != 0;
    for (int i = 0; !bad && i < m->nq; i++) {
        bad = !s_good(d->qpos[i]);
    }
    int rc = bad ? apex_errf(err, errlen, -1,
                             "%s: model_xml '%s' cannot be stepped from its initial state (%s)",
                             t->info->id, path, s_call.what[0] ? s_call.what : "bad qpos")
                 : 0;
    mj_deleteData(d);
    return rc;
}

// mjenv_load under s_lock, once the path is known to be non-empty.
static int s_load_locked(const mjenv_task_t *task, const char *path, char *err, size_t errlen) {
    const char *id = task->info->id;
    struct mjenv_slot *slot = s_find(task);
    if (slot && atomic_load(&slot->open_envs) > 0) {
        return apex_errf(err, errlen, -1,
                         "%s: cannot load '%s': %d envs still use the model loaded before", id,
                         path, atomic_load(&slot->open_envs));
    }
    if (!slot && (slot = s_find(NULL)) == NULL) {
        return apex_errf(err, errlen, -1,
                         "%s: cannot load '%s': models of %d tasks are loaded already", id, path,
                         MJENV_MAX_TASKS);
    }
    char mjerr[1000] = "";
    mjModel *m = mj_loadXML(path, NULL, mjerr, sizeof mjerr);
    if (m == NULL) {
        // MuJoCo's text spans lines ("XML parse error 3:\nError=..."): one line here.
        for (char *p = mjerr; *p; p++) {
            *p = *p == '\n' ? ' ' : *p;
        }
        for (size_t n = strlen(mjerr); n > 0 && mjerr[n - 1] == ' '; n--) {
            mjerr[n - 1] = '\0';
        }
        // A file that is not there: say where a relative path was looked for (the configs'
        // models/mujoco/<file>.xml is relative to the working directory) and how to get
        // Gymnasium's models.
        char hint[PATH_MAX + 200] = "";
        if (access(path, F_OK) != 0) {
            int relative = path[0] != '/';
            char cwd[PATH_MAX] = "";
            if (relative && getcwd(cwd, sizeof cwd) == NULL) {
                snprintf(cwd, sizeof cwd, "(unknown)");
            }
            snprintf(hint, sizeof hint,
                     " (no such file%s%s; scripts/fetch-mujoco-models installs Gymnasium's "
                     "models into models/mujoco/)",
                     relative ? " in the working directory " : "", cwd);
        }
        return apex_errf(err, errlen, -1, "%s: cannot load model_xml '%s': %s%s", id, path,
                         mjerr[0] ? mjerr : "MuJoCo gave no reason", hint);
    }
    int forward_body = -1;
    if (s_check_model(task, m, path, &forward_body, err, errlen) != 0 ||
        s_probe(task, m, path, err, errlen) != 0) {
        mj_deleteModel(m);
        return -1;
    }
    if (slot->m != NULL) {
        mj_deleteModel(slot->m);
    }
    memset(&slot->lim, 0, sizeof slot->lim);
    memset(&slot->warn_lim, 0, sizeof slot->warn_lim);
    atomic_store(&slot->void_steps, 0);
    slot->task = task;
    slot->m = m;
    slot->forward_body = forward_body;
    log_info("%s: model %s (nq %d, nv %d, nu %d), timestep %g s x frame skip %d = dt %g s, "
             "integrator %s",
             id, path, m->nq, m->nv, m->nu, m->opt.timestep, task->frame_skip,
             m->opt.timestep * task->frame_skip, m->opt.integrator == mjINT_RK4 ? "RK4" : "Euler");
    return 0;
}

int mjenv_load(const mjenv_task_t *task, const char *path, char *err, size_t errlen) {
    if (path == NULL || path[0] == '\0') {
        return apex_errf(err, errlen, -1,
                         "%s needs [env] model_xml, the path of its MuJoCo model (e.g. "
                         "models/mujoco/%s, where scripts/fetch-mujoco-models installs "
                         "Gymnasium's; apex ships none)",
                         task->info->id, task->asset);
    }
    APEX_ASSERT(task->info->obs_dim <= MJENV_MAX_OBS_DIM && task->frame_skip > 0);
    pthread_mutex_lock(&s_lock);
    // Installed before MuJoCo's first use: its defaults print to stdout, append to
    // MUJOCO_LOG.TXT in the working directory, and exit on an error.
    mju_user_error = s_on_error;
    mju_user_warning = s_on_warning;
    int rc = s_load_locked(task, path, err, errlen);
    pthread_mutex_unlock(&s_lock);
    return rc;
}

void mjenv_unload(const mjenv_task_t *task) {
    pthread_mutex_lock(&s_lock);
    struct mjenv_slot *slot = s_find(task);
    if (slot) {
        APEX_ASSERT(atomic_load(&slot->open_envs) == 0);
        if (slot->m) {
            mj_deleteModel(slot->m);
        }
        slot->m = NULL;
        slot->task = NULL;
    }
    pthread_mutex_unlock(&s_lock);
}

const mjModel *mjenv_model(const mjenv_task_t *task) {
    pthread_mutex_lock(&s_lock);
    struct mjenv_slot *slot = s_find(task);
    const mjModel *m = slot ? slot->m : NULL;
    pthread_mutex_unlock(&s_lock);
    return m;
}

uint64_t mjenv_void_steps(const mjenv_task_t *task) {
    pthread_mutex_lock(&s_lock);
    struct mjenv_slot *slot = s_find(task);
    uint64_t n = slot ? atomic_load(&slot->void_steps) : 0;
    pthread_mutex_unlock(&s_lock);
    return n;
}

// ---------------------------------------------------------------------------------------
// One env

// Binds a zeroed s to task's model and makes its mjData.
static void s_open(mjenv_state_t *s, const mjenv_task_t *task) {
    pthread_mutex_lock(&s_lock);
    struct mjenv_slot *slot = s_find(task);
    if (slot == NULL || slot->m == NULL) {
        pthread_mutex_unlock(&s_lock);
        APEX_PANIC("%s: reset before its model was loaded (env_mujoco_load at start-up)",
                   task->info->id);
    }
    atomic_fetch_add(&slot->open_envs, 1);
    pthread_mutex_unlock(&s_lock);
    s->task = task;
    s->slot = slot;
    s->m = slot->m;
    s->d = mj_makeData(s->m); // at the first reset only (STYLE S8: sized at start-up)
    s->dt = s->m->opt.timestep * task->frame_skip;
    s->forward_body = slot->forward_body;
    s->void_steps = 0;
    s->why[0] = '\0';
}

void mjenv_fini(mjenv_state_t *s) {
    if (s->d != NULL) {
        mj_deleteData(s->d);
        atomic_fetch_sub(&s->slot->open_envs, 1);
    }
    memset(s, 0, sizeof *s);
}

// One noise value: numpy's uniform(-scale, scale) or scale * standard_normal().
static double s_noise(rng_t *rng, mjenv_noise kind, double scale) {
    if (kind == MJENV_NOISE_NORMAL) {
        return scale * rng_normal(rng);
    }
    double lo = -scale, hi = scale;
    return lo + (hi - lo) * rng_uniform(rng);
}

void mjenv_reset(mjenv_state_t *s, const mjenv_task_t *task, rng_t *rng, float *obs) {
    if (s->d == NULL) {
        s_open(s, task);
    }
    APEX_ASSERT(s->task == task);
    const mjModel *m = s->m;
    mjData *d = s->d;
    mj_resetData(m, d);
    // Gymnasium: qpos = init_qpos + uniform(size=nq) first, then qvel = init_qvel + noise
    // (size=nv); init_qpos is qpos0 and init_qvel zeros (a fresh MjData's).
    for (int i = 0; i < m->nq; i++) {
        d->qpos[i] = m->qpos0[i] + s_noise(rng, task->qpos_noise, task->qpos_noise_scale);
    }
    for (int i = 0; i < m->nv; i++) {
        d->qvel[i] = 0.0 + s_noise(rng, task->qvel_noise, task->qvel_noise_scale);
    }
    if (s_guarded(m, d, 0) != 0) {
        // mjenv_load's probe computed qpos0's forward pass, so without the noise it works.
        pthread_mutex_lock(&s_log_lock);
        log_every(&s->slot->warn_lim, MJENV_LOG_INTERVAL_MS, LOG_WARN,
                  "%s: reset failed (%s); starting from qpos0 without noise", task->info->id,
                  s_call.what);
        pthread_mutex_unlock(&s_log_lock);
        mj_resetData(m, d);
        if (s_guarded(m, d, 0) != 0) {
            APEX_PANIC("%s: the model's initial state fails now: %s", task->info->id, s_call.what);
        }
    }
    mjenv_observe(s, obs);
}

// The forward coordinate: qpos[0], or the x of the task's body's xpos (one substep behind
// qpos after mj_step, as Gymnasium reads it).
static inline double s_forward_x(const mjenv_state_t *s) {
    return s->forward_body < 0 ? s->d->qpos[0] : s->d->xpos[3 * s->forward_body];
}

// Ends a step as void: zeros, reward 0, terminated 2; the simulation back at qpos0; counted
// and logged.
static void s_void(mjenv_state_t *s, float *obs, float *reward, uint8_t *terminated) {
    const mjenv_task_t *t = s->task;
    memset(obs, 0, (size_t)t->info->obs_dim * sizeof(float));
    *reward = 0.0f;
    *terminated = 2;
    double time = s->d->time;
    mj_resetData(s->m, s->d);
    s->void_steps++;
    uint64_t n = atomic_fetch_add(&s->slot->void_steps, 1) + 1;
    pthread_mutex_lock(&s_log_lock);
    log_every(&s->slot->lim, MJENV_LOG_INTERVAL_MS, LOG_WARN,
              "%s: the simulation diverged at t = %.4f s (%s): the step is void and the env "
              "resets (%llu void steps so far)",
              t->info->id, time, s->why, (unsigned long long)n);
    pthread_mutex_unlock(&s_log_lock);
}

// Sets s->why to the first value of x[0..n) that MuJoCo's check would reject; 0 if none.
static int s_find_bad(mjenv_state_t *s, const char *name, const double *x, int n) {
    for (int i = 0; i < n; i++) {
        if (!s_good(x[i])) {
            snprintf(s->why, sizeof s->why, "%s[%d] = %g after the step", name, i, x[i]);
            return 1;
        }
    }
    return 0;
}

void mjenv_step(mjenv_state_t *s, const float *action, float *obs, float *reward,
                uint8_t *terminated) {
    APEX_ASSERT(s->d != NULL); // reset first
    const mjenv_task_t *t = s->task;
    const mjModel *m = s->m;
    mjData *d = s->d;
    const int nu = m->nu, O = t->info->obs_dim;
    for (int i = 0; i < nu; i++) {
        if (!isfinite(action[i])) {
            snprintf(s->why, sizeof s->why, "action[%d] = %g, not stepped", i, (double)action[i]);
            s_void(s, obs, reward, terminated);
            return;
        }
    }
    const double x_before = s_forward_x(s);
    for (int i = 0; i < nu; i++) {
        d->ctrl[i] = (double)action[i]; // MuJoCo clamps it to ctrlrange, Gymnasium does not
    }
    // MuJoCo counts each warning and prints (calls s_on_warning) only at the first: zeroed,
    // each step's divergence is seen and named.
    static const int bad_warnings[] = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC};
    for (size_t k = 0; k < APEX_ARRAY_LEN(bad_warnings); k++) {
        d->warning[bad_warnings[k]].number = 0;
    }
    int failed = s_guarded(m, d, t->frame_skip) != 0;
    for (size_t k = 0; !failed && k < APEX_ARRAY_LEN(bad_warnings); k++) {
        failed = d->warning[bad_warnings[k]].number > 0;
    }
    if (failed) {
        snprintf(s->why, sizeof s->why, "%s", s_call.what[0] ? s_call.what : "MuJoCo warning");
        s_void(s, obs, reward, terminated);
        return;
    }
    if (s_find_bad(s, "qpos", d->qpos, m->nq) || s_find_bad(s, "qvel", d->qvel, m->nv)) {
        s_void(s, obs, reward, terminated);
        return;
    }
    double o[MJENV_MAX_OBS_DIM];
    t->observe(m, d, o);
    const mjenv_step_t st = {.m = m,
                             .d = d,
                             .action = action,
                             .x_before = x_before,
                             .x_after = s_forward_x(s),
                             .dt = s->dt};
    uint8_t term = 0;
    const double r = t->reward(&st, &term);
    for (int i = 0; i < O; i++) {
        obs[i] = (float)o[i]; // Gymnasium's observations are float64; apex's float32
        if (!isfinite(obs[i])) {
            snprintf(s->why, sizeof s->why, "observation[%d] = %g", i, o[i]);
            s_void(s, obs, reward, terminated);
            return;
        }
    }
    if (!isfinite((float)r)) {
        snprintf(s->why, sizeof s->why, "reward = %g", r);
        s_void(s, obs, reward, terminated);
        return;
    }
    if (s_call.what[0] != '\0') { // a warning that is no divergence (e.g. contacts full)
        pthread_mutex_lock(&s_log_lock);
        log_every(&s->slot->warn_lim, MJENV_LOG_INTERVAL_MS, LOG_WARN, "%s: MuJoCo warning: %s",
                  t->info->id, s_call.what);
        pthread_mutex_unlock(&s_log_lock);
    }
    *reward = (float)r;
    *terminated = term;
}

void mjenv_observe(const mjenv_state_t *s, float *obs) {
    APEX_ASSERT(s->d != NULL);
    double o[MJENV_MAX_OBS_DIM];
    s->task->observe(s->m, s->d, o);
    for (int i = 0; i < s->task->info->obs_dim; i++) {
        obs[i] = (float)o[i];
    }
}
