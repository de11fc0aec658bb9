// bench_env.c: raw environment stepping throughput of vecenv_t on one core.
//
// 64 envs in lock step with auto-reset, uniform random actions drawn from an rng_t inside the
// timed loop (as an actor with a random policy would pick them), no policy network and no
// n-step folding: CartPole-v1, the continuous-action Pendulum-v1 and
// MountainCarContinuous-v0 (vecenv_step_cont, actions uniform in the bounds), then the five
// MinAtar games (MinAtar/<Game>-v0: sticky
// actions 0.1 and difficulty ramping, minatar.Environment's defaults; every step writes the
// 10 x 10 x C observation, as Environment.state() would be called after every act).
// Peers: ../shared/peers/cartpole.py and the MinAtar reference itself
// (bench/minatar_ref.py); bench/run_env.sh runs them and prints the ratios.
//
// Output: "BENCH env.cartpole.steps_per_s <median> steps/s", the same for env.pendulum and
// env.mountaincar_continuous, and
// "BENCH env.minatar_<game>.steps_per_s <median> steps/s" (median of the timed windows after
// one warm-up window), each with "BENCH env.<name>.steps_per_cpu_s" (all timed steps over
// the thread's CPU time: the one-core rate with the machine's sharing taken out) and a
// comment line: min/max, episodes, mean length.
// --only render84 (not part of the default run) steps each game plain and then rendered
// (MinAtar/<Game>-render84-v0: the same game, observed as one 84 x 84 frame), back to back:
// "BENCH env.minatar_<game>.steps_per_s", "BENCH env.minatar_<game>_render84.steps_per_s"
// (with their steps_per_cpu_s) and "BENCH env.minatar_<game>_render84.cost_vs_plain <x> x",
// the plain rate over the rendered one (what drawing the frames multiplies a step's cost by).
//
// Usage: bench_env [vector_steps_per_window] [windows]
//                  [--only cartpole|continuous|pendulum|mountaincar_continuous|minatar|<game>|
//                          render84]
//   defaults: CartPole 200000 vector steps, the continuous envs 100000, MinAtar calibrated to
//   ~0.3 s per window; 7 windows. <game> is a MinAtar module name (breakout, ...).
#include "clock.h"
#include "env.h"
#include "minatar.h"
#include "parse.h"
#include "rng.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NENV 64
#define MAX_WINDOWS 100
#define MINATAR_WINDOW_S 0.3

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Steps v for vsteps vector steps with random actions; returns env steps per second and adds
// the thread's CPU seconds to *cpu.
static double s_run_window(vecenv_t *v, rng_t *r, long vsteps, float *rewards, uint8_t *term,
                           uint8_t *trunc, double *cpu) {
    int32_t actions[BENCH_NENV];
    const envinfo_t *e = v->spec->info;
    const uint32_t A = (uint32_t)e->n_actions;
    // Continuous actions (action_dim floats per env, uniform in the bounds).
    enum { MAX_DIM = 8 };
    float cont[BENCH_NENV * MAX_DIM];
    const int D = e->action_dim;
    const float lo = e->action_low, span = e->action_high - e->action_low;
    if (D > MAX_DIM) {
        fprintf(stderr, "bench_env: %s has %d action dimensions (at most %d)\n", e->id, D, MAX_DIM);
        exit(2);
    }
    double c0 = s_thread_cpu_s();
    int64_t t0 = clock_now_ns();
    for (long s = 0; s < vsteps; s++) {
        if (D > 0) {
            for (int k = 0; k < BENCH_NENV * D; k++) {
                cont[k] = lo + span * rng_uniform_f(r);
            }
            vecenv_step_cont(v, cont, rewards, term, trunc, NULL);
            v->done_count = 0;
            continue;
        }
        if (A == 2) {
            // One 64-bit draw gives all 64 binary actions: uniform and independent per env.
            uint64_t bits = rng_next_u64(r);
            for (int i = 0; i < BENCH_NENV; i++) {
                actions[i] = (int32_t)((bits >> i) & 1u);
            }
        } else {
            // Two actions per 64-bit draw, each the high half of a 32-bit word times A
            // (Lemire's multiply-shift without the rejection step: a bias below 2^-32).
            for (int i = 0; i < BENCH_NENV; i += 2) {
                uint64_t u = rng_next_u64(r);
                actions[i] = (int32_t)(((u & 0xffffffffu) * A) >> 32);
                actions[i + 1] = (int32_t)(((u >> 32) * A) >> 32);
            }
        }
        vecenv_step(v, actions, rewards, term, trunc);
        v->done_count = 0; // nobody drains episode reports in this benchmark
    }
    int64_t dt_ns = clock_now_ns() - t0;
    *cpu += s_thread_cpu_s() - c0;
    return (double)vsteps * BENCH_NENV / ((double)dt_ns * 1e-9);
}

// Benchmarks one env spec and prints its lines; vsteps <= 0 calibrates the window length.
// Returns the median rate.
static double s_bench(const env_spec_t *spec, const char *name, long vsteps, int windows) {
    vecenv_t v;
    vecenv_init(&v, spec, BENCH_NENV, 1, 0, BENCH_NENV);
    rng_t r;
    rng_init_stream(&r, 1, RNG_ROLE_ACTOR, 0);
    static float rewards[BENCH_NENV];
    static uint8_t term[BENCH_NENV], trunc[BENCH_NENV];
    double rates[MAX_WINDOWS], cpu = 0.0;
    long warm = vsteps > 0 ? vsteps / 4 : 2000;
    int64_t t0 = clock_now_ns();
    (void)s_run_window(&v, &r, warm, rewards, term, trunc, &cpu);
    if (vsteps <= 0) {
        double per_s = (double)warm / ((double)(clock_now_ns() - t0) * 1e-9);
        vsteps = (long)(per_s * MINATAR_WINDOW_S) + 1;
    }
    cpu = 0.0;
    for (int w = 0; w < windows; w++) {
        rates[w] = s_run_window(&v, &r, vsteps, rewards, term, trunc, &cpu);
    }
    qsort(rates, (size_t)windows, sizeof(double), s_cmp_double);
    double median = windows % 2 ? rates[windows / 2]
                                : 0.5 * (rates[windows / 2 - 1] + rates[windows / 2]);
    printf("# bench_env %s: %d envs, %ld vector steps x %d windows; min %.0f max %.0f steps/s; "
           "%llu episodes, mean length %.1f\n",
           spec->info->id, BENCH_NENV, vsteps, windows, rates[0], rates[windows - 1],
           (unsigned long long)v.episodes, (double)v.steps / (double)(v.episodes ? v.episodes : 1));
    printf("BENCH env.%s.steps_per_s %.0f steps/s\n", name, median);
    printf("BENCH env.%s.steps_per_cpu_s %.0f steps/s\n", name,
           (double)vsteps * windows * BENCH_NENV / cpu);
    fflush(stdout);
    vecenv_fini(&v);
    return median;
}

int main(int argc, char **argv) {
    long vsteps = 0;
    int windows = 7, n_pos = 0;
    const char *only = NULL;
    int64_t x;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else if (n_pos == 0) { // not a positive number: 0, refused below
            vsteps = parse_int64(argv[i], 1, LONG_MAX, &x) == 0 ? (long)x : 0, n_pos++;
        } else if (n_pos == 1) {
            windows = parse_int64(argv[i], 5, MAX_WINDOWS, &x) == 0 ? (int)x : 0, n_pos++;
        } else {
            windows = 0; // reject below
        }
    }
    // The continuous-action envs, selected by name or by "continuous".
    static const struct {
        const char *name;
        const env_spec_t *spec;
    } conts[] = {{"pendulum", &env_pendulum_spec},
                 {"mountaincar_continuous", &env_mountaincar_continuous_spec}};
    int known = !only || !strcmp(only, "cartpole") || !strcmp(only, "minatar") ||
                !strcmp(only, "continuous") || !strcmp(only, "render84") ||
                minatar_find(only) != NULL;
    for (size_t c = 0; c < sizeof conts / sizeof conts[0]; c++) {
        known |= only && !strcmp(only, conts[c].name);
    }
    if ((n_pos > 0 && vsteps <= 0) || windows < 5 || windows > MAX_WINDOWS || !known) {
        fprintf(stderr,
                "usage: %s [vector_steps_per_window > 0] [windows 5..100] "
                "[--only cartpole|continuous|pendulum|mountaincar_continuous|minatar|"
                "<minatar game>|render84]\n",
                argv[0]);
        return 2;
    }
    if (!only || !strcmp(only, "cartpole")) {
        s_bench(&env_cartpole_spec, "cartpole", vsteps > 0 ? vsteps : 200000, windows);
    }
    for (size_t c = 0; c < sizeof conts / sizeof conts[0]; c++) {
        if (!only || !strcmp(only, "continuous") || !strcmp(only, conts[c].name)) {
            s_bench(conts[c].spec, conts[c].name, vsteps > 0 ? vsteps : 100000, windows);
        }
    }
    // The MinAtar specs in minatar.h's game order; their ids name the game in CamelCase.
    static const struct {
        const char *game;
        const env_spec_t *spec, *render84;
    } games[] = {{"asterix", &env_minatar_asterix_spec, &env_minatar_asterix_render84_spec},
                 {"breakout", &env_minatar_breakout_spec, &env_minatar_breakout_render84_spec},
                 {"freeway", &env_minatar_freeway_spec, &env_minatar_freeway_render84_spec},
                 {"seaquest", &env_minatar_seaquest_spec, &env_minatar_seaquest_render84_spec},
                 {"space_invaders", &env_minatar_space_invaders_spec,
                  &env_minatar_space_invaders_render84_spec}};
    const int render84 = only && !strcmp(only, "render84");
    for (size_t g = 0; g < sizeof games / sizeof games[0]; g++) {
        if (only && !render84 && strcmp(only, "minatar") != 0 && strcmp(only, games[g].game) != 0) {
            continue;
        }
        char name[64];
        snprintf(name, sizeof name, "minatar_%s", games[g].game);
        const double plain = s_bench(games[g].spec, name, vsteps, windows);
        if (render84) {
            snprintf(name, sizeof name, "minatar_%s_render84", games[g].game);
            const double drawn = s_bench(games[g].render84, name, vsteps, windows);
            printf("BENCH env.%s.cost_vs_plain %.2f x\n", name, plain / drawn);
        }
    }
    return 0;
}
