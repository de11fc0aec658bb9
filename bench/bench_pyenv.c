// bench_pyenv.c: env steps/s over the Python env bridge (actor/pyenv.c + python/apex_env.py)
// against the same envs stepped in a plain Python loop (the cost floor).
//
// 64 reference CartPoles (../shared/peers/cartpole_env.py behind tests/pyenv_faults.py's
// Gymnasium adapter) with random actions drawn in C, in four shapes: 1 or 2 workers (64 or
// 32 envs each) x lock step (1 group) or two overlapped groups (each worker always has the
// next request queued while the other group's results are handled). No network and no
// n-step folding: this measures the bridge. --infer-us N adds N us of busy work per group
// step on the C side, standing in for the Q-network's inference that overlap hides.
// The plain loop is bench/pyenv_plain_loop.py, run by this program before and after.
//
// Output:
//   BENCH actor.python_cartpole64.w<W>g<G>.env_steps_per_s <median> steps/s   each shape
//   BENCH actor.python_cartpole64.env_steps_per_s <median> steps/s            the best one
//   BENCH python_cartpole64.plain_loop_steps_per_s <median> steps/s
//   BENCH actor.python_cartpole64.ratio_vs_plain_loop <x> x
// Usage (from the repo root): bench_pyenv [--steps S] [--windows K] [--infer-us N]
//   [--cartpole PATH]    defaults 2000 vector steps per window, 3 windows, 0 us, and
//   $APEX_PYENV_CARTPOLE or ../shared/peers/cartpole_env.py
#include "clock.h"
#include "log.h"
#include "pyenv.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENVS 64
#define OBS 4
#define RECV_MS 30000

static int s_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, s_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    pyenv_t *p;
    int G, GE;
    float next_obs[ENVS * OBS], obs[ENVS * OBS], rewards[ENVS];
    uint8_t term[ENVS], trunc[ENVS], status[ENVS];
    int32_t actions[ENVS];
    rng_t rng;
    int64_t infer_ns;
} s_bench;

static pyenv_results_t s_out(s_bench *b, int g) {
    size_t o = (size_t)g * b->GE;
    return (pyenv_results_t){b->next_obs + o * OBS, b->obs + o * OBS, b->rewards + o,
                             b->term + o,           b->trunc + o,     b->status + o};
}

// What the actor does between a group's recv and send: pick its actions (random here, plus
// the optional stand-in for inference).
static void s_act(s_bench *b, int g) {
    int64_t until = clock_now_ns() + b->infer_ns;
    uint64_t bits = rng_next_u64(&b->rng);
    for (int j = 0; j < b->GE; j++) {
        b->actions[g * b->GE + j] = (int32_t)((bits >> (j & 63)) & 1u);
    }
    while (b->infer_ns && clock_now_ns() < until) {
    }
}

// One group step: recv (counting OK env steps), act, send.
static long s_turn(s_bench *b, int g) {
    pyenv_results_t out = s_out(b, g);
    long ok = pyenv_recv_results(b->p, g, RECV_MS, &out);
    s_act(b, g);
    pyenv_send_actions(b->p, g, b->actions + (size_t)g * b->GE);
    return ok;
}

// Env steps per second over vsteps vector steps (each group stepped vsteps times).
static double s_window(s_bench *b, long vsteps) {
    long env_steps = 0;
    int64_t t0 = clock_now_ns();
    for (long s = 0; s < vsteps; s++) {
        for (int g = 0; g < b->G; g++) {
            env_steps += s_turn(b, g);
        }
    }
    return (double)env_steps / ((double)(clock_now_ns() - t0) * 1e-9);
}

static double s_bridge(const char *cartpole, int W, int G, long vsteps, int windows,
                       int64_t infer_us) {
    pyenv_opts_t o;
    pyenv_opts_defaults(&o);
    snprintf(o.make, sizeof o.make, "tests/pyenv_faults.py:cartpole");
    snprintf(o.kwargs, sizeof o.kwargs, "{\"path\": \"%.900s\"}", cartpole);
    o.workers = W;
    o.envs_per_worker = ENVS / W;
    o.groups = G;
    o.obs_dim = OBS;
    o.n_actions = 2;
    o.seed = 1;
    static s_bench b;
    memset(&b, 0, sizeof b);
    b.p = pyenv_new(&o);
    if (!b.p) {
        return -1.0;
    }
    b.G = G;
    b.GE = pyenv_group_size(b.p);
    b.infer_ns = infer_us * 1000;
    rng_init_stream(&b.rng, 1, RNG_ROLE_ACTOR, 0);
    for (int g = 0; g < G; g++) { // the start: every group's request in flight
        s_turn(&b, g);
    }
    double rates[32];
    (void)s_window(&b, vsteps / 4); // warm-up
    for (int w = 0; w < windows; w++) {
        rates[w] = s_window(&b, vsteps);
    }
    pyenv_stats_t st;
    pyenv_get_stats(b.p, &st);
    pyenv_destroy(&b.p);
    double med = s_median(rates, windows);
    printf("# bridge %d worker%s x %d envs, %d group%s: median %.0f min %.0f max %.0f env "
           "steps/s (episodes %llu, faults %llu, lost %llu)\n",
           W, W > 1 ? "s" : "", ENVS / W, G, G > 1 ? "s (overlapped)" : " (lock step)", med,
           rates[0], rates[windows - 1], (unsigned long long)st.episodes,
           (unsigned long long)(st.env_faults + st.bad_frames),
           (unsigned long long)st.workers_lost);
    return med;
}

// Runs the plain Python loop; returns its median steps/s, or -1.
static double s_plain(const char *cartpole, long vsteps, int windows) {
    char cmd[1400], line[256];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 bench/pyenv_plain_loop.py '%.900s' --envs %d --steps %ld "
             "--windows %d",
             cartpole, ENVS, vsteps, windows);
    FILE *f = popen(cmd, "r");
    double med = -1.0, lo = 0, hi = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "RESULT python_cartpole64.plain_loop_steps_per_s %lf %lf %lf", &med, &lo,
                   &hi) == 3) {
            printf("# plain Python loop: median %.0f min %.0f max %.0f env steps/s\n", med, lo, hi);
        }
    }
    if (!f || pclose(f) != 0) {
        return -1.0;
    }
    return med;
}

int main(int argc, char **argv) {
    long vsteps = 2000;
    int windows = 3;
    int64_t infer_us = 0;
    const char *cartpole = getenv("APEX_PYENV_CARTPOLE");
    cartpole = cartpole && *cartpole ? cartpole : "../shared/peers/cartpole_env.py";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) {
            vsteps = strtol(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--windows")) {
            windows = (int)strtol(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--infer-us")) {
            infer_us = strtol(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--cartpole")) {
            cartpole = argv[i + 1];
        }
    }
    if (vsteps < 4 || windows < 1 || windows > 32 || infer_us < 0 || argc % 2 == 0) {
        fprintf(stderr,
                "usage: %s [--steps S >= 4] [--windows 1..32] [--infer-us N] [--cartpole PATH]\n",
                argv[0]);
        return 2;
    }
    if (access(cartpole, R_OK) != 0 || access("python/apex_env.py", R_OK) != 0) {
        fprintf(stderr,
                "bench_pyenv: needs %s (--cartpole) and python/apex_env.py (run it from "
                "the repo root)\n",
                cartpole);
        return 1;
    }
    log_set_level(LOG_WARN);
    double plain[2];
    plain[0] = s_plain(cartpole, vsteps, windows);
    const int shapes[4][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 2}};
    double best = -1.0;
    int best_i = 0;
    for (int i = 0; i < 4; i++) {
        double r = s_bridge(cartpole, shapes[i][0], shapes[i][1], vsteps, windows, infer_us);
        if (r < 0) {
            fprintf(stderr, "bench_pyenv: the bridge did not start\n");
            return 1;
        }
        printf("BENCH actor.python_cartpole64.w%dg%d%s.env_steps_per_s %.0f steps/s\n",
               shapes[i][0], shapes[i][1], infer_us ? ".infer" : "", r);
        if (r > best) {
            best = r;
            best_i = i;
        }
    }
    plain[1] = s_plain(cartpole, vsteps, windows); // the machine is shared: before and after
    if (plain[0] < 0 || plain[1] < 0) {
        fprintf(stderr, "bench_pyenv: the plain Python loop failed\n");
        return 1;
    }
    double floor = 0.5 * (plain[0] + plain[1]);
    printf("# best shape: %d worker(s), %d group(s)%s; %d vector steps x %d windows per shape\n",
           shapes[best_i][0], shapes[best_i][1], infer_us ? " (with the inference stand-in)" : "",
           (int)vsteps, windows);
    printf("BENCH actor.python_cartpole64.env_steps_per_s %.0f steps/s\n", best);
    printf("BENCH python_cartpole64.plain_loop_steps_per_s %.0f steps/s\n", floor);
    printf("BENCH actor.python_cartpole64.ratio_vs_plain_loop %.2f x\n", best / floor);
    return 0;
}
