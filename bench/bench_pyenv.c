// bench_pyenv.c: env steps/s over the Python env bridge (envs/pyenv.c + python/apex_env.py)
// against the same envs stepped in a plain Python loop (the cost floor).
//
// 64 reference CartPoles (../shared/peers/cartpole_env.py behind tests/pyenv_faults.py's
// Gymnasium adapter; python/apex_cartpole.py, the same dynamics, when the peer is absent)
// with random actions drawn in C, in four shapes over the local transport (pipes and shared
// memory, what spawned workers use): 1 or 2 workers (64 or 32 envs each) x lock step (1
// group) or two overlapped groups (each worker always has the next request queued while the
// other group's results are handled); and 1 worker x 2 groups over ZeroMQ (what workers on
// other hosts use), for comparison. No n-step folding: this measures the bridge. --infer-us N adds N us of busy work per group
// step on the C side, standing in for the Q-network's inference that overlap hides.
// The plain loop is bench/pyenv_plain_loop.py, run by this program before and after.
//
// Wall-clock rates depend on how much of a core each process gets, which on a shared
// machine swings by 2-3x from run to run (a starved plain loop ran 15-26 % of the time).
// CPU time per env step does not: the bridge's is the worker processes' (every thread,
// from /proc/<pid>/task/*/schedstat) plus this process's, the plain loop's is its own.
// plain / workers is the throughput ratio to expect where each worker has a core of its
// own and the actor another; plain / (workers + actor) is the ratio where CPU is the limit.
//
// Output:
//   BENCH actor.python_cartpole64.w<W>g<G>[.zmq].env_steps_per_s <median> steps/s   each shape
//   BENCH actor.python_cartpole64.w<W>g<G>[.zmq].cpu_ns_per_step <median> ns   workers + actor
//   BENCH actor.python_cartpole64.env_steps_per_s <median> steps/s       the best shape
//   BENCH python_cartpole64.plain_loop_steps_per_s <median> steps/s
//   BENCH python_cartpole64.plain_loop_cpu_ns_per_step <median> ns
//   BENCH actor.python_cartpole64.ratio_vs_plain_loop <x> x              wall clock, best
//   BENCH actor.python_cartpole64.cpu_ratio_workers_vs_plain_loop <x> x  1 worker, 2 groups
//   BENCH actor.python_cartpole64.cpu_ratio_total_vs_plain_loop <x> x    1 worker, 2 groups
// Usage (from the repo root): bench_pyenv [--steps S] [--windows K] [--infer-us N]
//   [--cartpole PATH]    defaults 2000 vector steps per window, 3 windows, 0 us, and
//   $APEX_PYENV_CARTPOLE or ../shared/peers/cartpole_env.py (else python/apex_cartpole.py)
#include "bench_common.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "pyenv.h"
#include "rng.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define ENVS 64
#define OBS 4
#define RECV_MS 30000
#define MAX_WINDOWS 32

// ---------------------------------------------------------------------------------------
// CPU time

// CPU time (ns) of every thread of process pid so far, or 0 if it cannot be read.
static int64_t s_proc_cpu_ns(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int64_t sum = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char stat[320];
        long long run = 0;
        snprintf(stat, sizeof stat, "/proc/%d/task/%.200s/schedstat", (int)pid, e->d_name);
        FILE *f = fopen(stat, "r");
        if (f && fscanf(f, "%lld", &run) == 1) {
            sum += run;
        }
        if (f) {
            fclose(f);
        }
    }
    if (d) {
        closedir(d);
    }
    return sum;
}

static int64_t s_self_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---------------------------------------------------------------------------------------
// The bridge

typedef struct {
    pyenv_t *p;
    int W, G, GE;
    float next_obs[ENVS * OBS], obs[ENVS * OBS], rewards[ENVS];
    uint8_t term[ENVS], trunc[ENVS], status[ENVS];
    int32_t actions[ENVS];
    rng_t rng;
    int64_t infer_ns;
    double cpu_workers, cpu_actor; // ns per env step in the last window
} s_bench;

typedef struct {
    double rate, cpu_workers, cpu_actor; // medians over the windows
} s_result;

static int64_t s_workers_cpu_ns(const s_bench *b) {
    int64_t sum = 0;
    for (int w = 0; w < b->W; w++) {
        pid_t pid = pyenv_worker_pid(b->p, w);
        sum += pid > 0 ? s_proc_cpu_ns(pid) : 0;
    }
    return sum;
}

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

// Env steps per second over vsteps vector steps (each group stepped vsteps times), and the
// CPU time per env step of the workers and of this process into b.
static double s_window(s_bench *b, long vsteps) {
    long env_steps = 0;
    int64_t w0 = s_workers_cpu_ns(b), a0 = s_self_cpu_ns(), t0 = clock_now_ns();
    for (long s = 0; s < vsteps; s++) {
        for (int g = 0; g < b->G; g++) {
            env_steps += s_turn(b, g);
        }
    }
    int64_t t1 = clock_now_ns(), w1 = s_workers_cpu_ns(b), a1 = s_self_cpu_ns();
    b->cpu_workers = (double)(w1 - w0) / (double)env_steps;
    b->cpu_actor = (double)(a1 - a0) / (double)env_steps;
    return (double)env_steps / ((double)(t1 - t0) * 1e-9);
}

static s_result s_bridge(const char *cartpole, int W, int G, int transport, long vsteps,
                         int windows, int64_t infer_us) {
    pyenv_opts_t o;
    pyenv_opts_defaults(&o);
    o.transport = transport;
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
        return (s_result){-1.0, 0, 0};
    }
    b.W = W;
    b.G = G;
    b.GE = pyenv_group_size(b.p);
    b.infer_ns = infer_us * 1000;
    rng_init_stream(&b.rng, 1, RNG_ROLE_ACTOR, 0);
    for (int g = 0; g < G; g++) { // the start: every group's request in flight
        s_turn(&b, g);
    }
    double rates[MAX_WINDOWS], cw[MAX_WINDOWS], ca[MAX_WINDOWS];
    (void)s_window(&b, vsteps / 4); // warm-up
    for (int w = 0; w < windows; w++) {
        rates[w] = s_window(&b, vsteps);
        cw[w] = b.cpu_workers;
        ca[w] = b.cpu_actor;
    }
    pyenv_stats_t st;
    pyenv_get_stats(b.p, &st);
    pyenv_destroy(&b.p);
    s_result r = {bench_median(rates, windows), bench_median(cw, windows),
                  bench_median(ca, windows)};
    printf("# bridge %s, %d worker%s x %d envs, %d group%s: median %.0f min %.0f max %.0f env "
           "steps/s; CPU per env step: workers %.0f ns, actor %.0f ns (episodes %llu, faults "
           "%llu, lost %llu)\n",
           transport == PYENV_ZMQ ? "ZeroMQ" : "local", W, W > 1 ? "s" : "", ENVS / W, G,
           G > 1 ? "s (overlapped)" : " (lock step)", r.rate, rates[0], rates[windows - 1],
           r.cpu_workers, r.cpu_actor, (unsigned long long)st.episodes,
           (unsigned long long)(st.env_faults + st.bad_frames),
           (unsigned long long)st.workers_lost);
    return r;
}

// ---------------------------------------------------------------------------------------
// The plain loop

// Runs bench/pyenv_plain_loop.py; returns its median steps/s (its CPU ns per env step in
// *cpu), or -1.
static double s_plain(const char *cartpole, long vsteps, int windows, double *cpu) {
    char cmd[1400], line[256];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 bench/pyenv_plain_loop.py '%.900s' --envs %d --steps %ld "
             "--windows %d",
             cartpole, ENVS, vsteps, windows);
    FILE *f = popen(cmd, "r");
    double med = -1.0, lo = 0, hi = 0;
    *cpu = -1.0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "RESULT python_cartpole64.plain_loop_steps_per_s %lf %lf %lf", &med, &lo,
                   &hi) == 3) {
            printf("# plain Python loop: median %.0f min %.0f max %.0f env steps/s\n", med, lo, hi);
        } else if (sscanf(line, "RESULT python_cartpole64.plain_loop_cpu_ns_per_step %lf %lf %lf",
                          cpu, &lo, &hi) == 3) {
            printf("# plain Python loop: CPU per env step median %.0f min %.0f max %.0f ns\n", *cpu,
                   lo, hi);
        }
    }
    if (!f || pclose(f) != 0 || *cpu < 0) {
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
    if (!getenv("APEX_PYENV_CARTPOLE") && access(cartpole, R_OK) != 0) {
        cartpole = "python/apex_cartpole.py"; // the same dynamics, in the repo
    }
    for (int i = 1; i + 1 < argc; i += 2) {
        // A value that is not a number in range becomes one the check below refuses.
        int64_t x;
        if (!strcmp(argv[i], "--steps")) {
            vsteps = parse_int64(argv[i + 1], 4, LONG_MAX, &x) == 0 ? (long)x : 0;
        } else if (!strcmp(argv[i], "--windows")) {
            windows = parse_int64(argv[i + 1], 1, MAX_WINDOWS, &x) == 0 ? (int)x : 0;
        } else if (!strcmp(argv[i], "--infer-us")) {
            infer_us = parse_int64(argv[i + 1], 0, INT64_MAX, &x) == 0 ? x : -1;
        } else if (!strcmp(argv[i], "--cartpole")) {
            cartpole = argv[i + 1];
        }
    }
    if (vsteps < 4 || windows < 1 || windows > MAX_WINDOWS || infer_us < 0 || argc % 2 == 0) {
        fprintf(stderr,
                "usage: %s [--steps S >= 4] [--windows 1..32] [--infer-us N] [--cartpole PATH]\n",
                argv[0]);
        return 2;
    }
    if (access(cartpole, R_OK) != 0 || access("python/apex_env.py", R_OK) != 0) {
        fprintf(stderr,
                "bench_pyenv: needs %s (--cartpole) and python/apex_env.py (run it from the "
                "repo root)\n",
                cartpole);
        return 1;
    }
    log_set_level(LOG_WARN);
    double plain[2], plain_cpu[2];
    plain[0] = s_plain(cartpole, vsteps, windows, &plain_cpu[0]);
    // {workers, groups, transport}; the ZeroMQ one is for comparison, not a candidate.
    const int shapes[5][3] = {{1, 1, PYENV_LOCAL},
                              {1, 2, PYENV_LOCAL},
                              {2, 1, PYENV_LOCAL},
                              {2, 2, PYENV_LOCAL},
                              {1, 2, PYENV_ZMQ}};
    s_result r[5];
    int best = 0;
    const char *tag = infer_us ? ".infer" : "";
    for (int i = 0; i < 5; i++) {
        r[i] = s_bridge(cartpole, shapes[i][0], shapes[i][1], shapes[i][2], vsteps, windows,
                        infer_us);
        if (r[i].rate < 0) {
            fprintf(stderr, "bench_pyenv: the bridge did not start\n");
            return 1;
        }
        const char *zmq = shapes[i][2] == PYENV_ZMQ ? ".zmq" : "";
        printf("BENCH actor.python_cartpole64.w%dg%d%s%s.env_steps_per_s %.0f steps/s\n",
               shapes[i][0], shapes[i][1], zmq, tag, r[i].rate);
        printf("BENCH actor.python_cartpole64.w%dg%d%s%s.cpu_ns_per_step %.0f ns\n", shapes[i][0],
               shapes[i][1], zmq, tag, r[i].cpu_workers + r[i].cpu_actor);
        best = shapes[i][2] == PYENV_LOCAL && r[i].rate > r[best].rate ? i : best;
    }
    plain[1] = s_plain(cartpole, vsteps, windows, &plain_cpu[1]); // shared machine: again
    if (plain[0] < 0 || plain[1] < 0) {
        fprintf(stderr, "bench_pyenv: the plain Python loop failed\n");
        return 1;
    }
    double floor = 0.5 * (plain[0] + plain[1]), floor_cpu = 0.5 * (plain_cpu[0] + plain_cpu[1]);
    const s_result *w1g2 = &r[1];
    printf("# best shape: %d worker(s), %d group(s)%s; %d vector steps x %d windows per shape\n",
           shapes[best][0], shapes[best][1], infer_us ? " (with the inference stand-in)" : "",
           (int)vsteps, windows);
    printf("BENCH actor.python_cartpole64%s.env_steps_per_s %.0f steps/s\n", tag, r[best].rate);
    printf("BENCH python_cartpole64.plain_loop_steps_per_s %.0f steps/s\n", floor);
    printf("BENCH python_cartpole64.plain_loop_cpu_ns_per_step %.0f ns\n", floor_cpu);
    printf("BENCH actor.python_cartpole64%s.ratio_vs_plain_loop %.2f x\n", tag,
           r[best].rate / floor);
    printf("BENCH actor.python_cartpole64%s.cpu_ratio_workers_vs_plain_loop %.2f x\n", tag,
           floor_cpu / w1g2->cpu_workers);
    printf("BENCH actor.python_cartpole64%s.cpu_ratio_total_vs_plain_loop %.2f x\n", tag,
           floor_cpu / (w1g2->cpu_workers + w1g2->cpu_actor));
    return 0;
}
