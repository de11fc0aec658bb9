// bench_mujoco.c: a MuJoCo task's env steps/s against the bare simulation loop over the same
// model (not a test: timing).
//
//   build/bench/bench_mujoco --model PATH [--task ID] [--steps N] [--windows R]
//
// PATH is the task's MJCF file, normally Gymnasium's own asset (half_cheetah.xml for the
// default HalfCheetah-v4); apex ships none. In alternating windows of N steps on one thread:
//   env   the spec's step_cont (envs/env_mujoco.h): ctrl = the action, mj_step frame_skip
//         times, the observation, the reward terms, the termination test, a reset at the end
//         of an episode (the TimeLimit), as an actor steps it;
//   bare  mj_step frame_skip times per step with ctrl = the same actions, on the same model
//         loaded with mj_loadXML, mj_resetData at the same episode length: the physics
//         alone, nothing read back.
// Actions are uniform in the action bounds, drawn in advance (a pool of 4096), so neither loop
// pays for the drawing. Prints, medians over R windows:
//   BENCH env.mujoco_<task>.steps_per_s           env steps/s
//   BENCH mujoco.<task>.bare_mj_step.steps_per_s  the bare loop's steps/s
//   BENCH env.mujoco_<task>.ratio_vs_bare         the median of the windows' ratios (%)
// <task> is the id lowercased without "-v4" (halfcheetah for HalfCheetah-v4).
#include "bench_common.h"
#include "clock.h"
#include "env.h"
#include "env_mujoco.h"
#include "envinfo.h"
#include "parse.h"
#include "rng.h"
#include "xalloc.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL 4096

int main(int argc, char **argv) {
    const char *model = NULL, *task = "HalfCheetah-v4";
    int steps = 20000, windows = 5;
    for (int i = 1; i < argc; i++) {
        int64_t v = 0;
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--task") == 0 && i + 1 < argc) {
            task = argv[++i];
        } else if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc &&
                   parse_int64(argv[i + 1], 1, INT_MAX, &v) == 0) {
            steps = (int)v, i++;
        } else if (strcmp(argv[i], "--windows") == 0 && i + 1 < argc &&
                   parse_int64(argv[i + 1], 1, 64, &v) == 0) {
            windows = (int)v, i++;
        } else {
            model = NULL;
            break;
        }
    }
    const env_spec_t *spec = env_find(task);
    const mjenv_task_t *mt = spec ? env_mujoco_task(spec) : NULL;
    if (!model || !mt) {
        fprintf(stderr,
                "usage: %s --model PATH [--task HalfCheetah-v4|Hopper-v4|...] [--steps N] "
                "[--windows R (<= 64)]\n",
                argv[0]);
        return 2;
    }
    char err[512];
    if (env_mujoco_load(spec, model, err, sizeof err) != 0) {
        fprintf(stderr, "bench_mujoco: %s\n", err);
        return 2;
    }
    char mjerr[1000] = "";
    mjModel *m = mj_loadXML(model, NULL, mjerr, sizeof mjerr);
    if (!m) {
        fprintf(stderr, "bench_mujoco: %s: %s\n", model, mjerr);
        return 2;
    }
    mjData *d = mj_makeData(m);
    const envinfo_t *e = spec->info;
    const int A = e->action_dim;
    rng_t rng;
    rng_init_stream(&rng, 7, RNG_ROLE_TEST, 0);
    float *act = xmalloc((size_t)POOL * (size_t)A * sizeof(float));
    for (size_t i = 0; i < (size_t)POOL * (size_t)A; i++) {
        act[i] = (float)(e->action_low + (e->action_high - e->action_low) * rng_uniform(&rng));
    }
    _Alignas(64) uint8_t state[ENV_MAX_STATE_BYTES] = {0};
    float obs[ENV_MAX_OBS_DIM];
    spec->reset(state, &rng, obs);
    double env_r[64], bare_r[64], ratio[64];
    long ep = 0, bare_ep = 0, k = 0;
    for (int w = -1; w < windows; w++) { // window -1 warms both up
        // The two loops alternate which runs first, so that neither always inherits the
        // other's caches or the CPU's clock ramp.
        double t_env = 0, t_bare = 0;
        for (int half = 0; half < 2; half++) {
            int64_t t0 = clock_now_ns();
            if ((half == 0) == (w % 2 == 0)) {
                for (int s = 0; s < steps; s++, k++) {
                    float r;
                    uint8_t term;
                    spec->step_cont(state, act + (k % POOL) * A, obs, &r, &term);
                    if (term || ++ep >= e->max_episode_steps) {
                        spec->reset(state, &rng, obs);
                        ep = 0;
                    }
                }
                t_env = (double)(clock_now_ns() - t0) * 1e-9;
            } else {
                for (int s = 0; s < steps; s++, k++) {
                    const float *a = act + (k % POOL) * A;
                    for (int j = 0; j < A; j++) {
                        d->ctrl[j] = a[j];
                    }
                    for (int f = 0; f < mt->frame_skip; f++) {
                        mj_step(m, d);
                    }
                    if (++bare_ep >= e->max_episode_steps) {
                        mj_resetData(m, d);
                        bare_ep = 0;
                    }
                }
                t_bare = (double)(clock_now_ns() - t0) * 1e-9;
            }
        }
        if (w >= 0) {
            env_r[w] = steps / t_env;
            bare_r[w] = steps / t_bare;
            ratio[w] = 100.0 * env_r[w] / bare_r[w];
        }
    }
    char name[64];
    size_t n = 0;
    for (const char *p = e->id; *p && *p != '-' && n + 1 < sizeof name; p++) {
        name[n++] = (char)tolower((unsigned char)*p);
    }
    name[n] = '\0';
    printf("BENCH env.mujoco_%s.steps_per_s %.0f steps/s\n", name, bench_median(env_r, windows));
    printf("BENCH mujoco.%s.bare_mj_step.steps_per_s %.0f steps/s\n", name,
           bench_median(bare_r, windows));
    printf("BENCH env.mujoco_%s.ratio_vs_bare %.1f %%\n", name, bench_median(ratio, windows));
    fflush(stderr);
    printf("# %s: frame skip %d, %d windows of %d steps, model %s\n", e->id, mt->frame_skip,
           windows, steps, model);
    if (spec->fini) {
        spec->fini(state);
    }
    mj_deleteData(d);
    mj_deleteModel(m);
    free(act);
    return 0;
}
