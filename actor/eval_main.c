// apex-eval: evaluates Q-networks, and DPG policies for continuous actions, on apex's
// environments or a Python env's ([env] id = python: its own env workers; actor/evaluator.h).
//
//   apex-eval -c CONFIG --checkpoint PATH [--episodes N] [--epsilon X]   one checkpoint
//   apex-eval -c CONFIG --follow [--max-evals N]     every new version of the learner's weights
//   apex-eval -c CONFIG --trace SEED STEPS [--actions FILE]   one line per env step, for debugging
// --episodes and --epsilon default to [eval] episodes and epsilon.
#define LOG_MODULE "eval"
#include "apex.h"
#include "blas.h"
#include "ckpt.h"
#include "cli.h"
#include "env_mujoco.h"
#include "evaluator.h"
#include "log.h"
#include "nn.h"

#include <stdio.h>
#include <string.h>

// One checkpoint: prints "<id> checkpoint <path> (update N): episodes .. mean .. std .. ".
static int s_checkpoint(const apex_config_t *cfg, const cli_args_t *args) {
    const env_spec_t *spec = env_find(cfg->env.id);
    const int python = strcmp(cfg->env.id, CONFIG_ENV_PYTHON) == 0;
    if (!spec && !python) { // id = external: nothing here can step it
        fprintf(stderr,
                "apex-eval: [env] id '%s' is not an environment apex can step (%s, "
                "and python envs through [env] make)\n",
                cfg->env.id, envinfo_known_ids());
        return 2;
    }
    nn_config_t nc;
    nn_config_from_run(&nc, cfg);
    nn_params_t p;
    nn_params_init(&p, &nc);
    ckpt_header_t hdr;
    // A continuous run's network is DPG's policy: its prefix of a DPG checkpoint (or a
    // best.bin of one network).
    const int cont = cfg->env.action_dim > 0;
    int rc = cont ? ckpt_read_policy(args->checkpoint, &nc, &hdr, p.data)
                  : ckpt_read_online(args->checkpoint, &nc, &hdr, p.data);
    if (rc != APEX_OK) {
        fprintf(stderr, "apex-eval: cannot load %s: %s\n", args->checkpoint, apex_strerror(rc));
        nn_params_fini(&p);
        return 2;
    }
    eval_opts_t o;
    evaluator_opts_from_run(&o, cfg);
    if (args->episodes > 0) {
        o.episodes = args->episodes;
        o.parallel = (int)APEX_MIN(args->episodes, EVALUATOR_PARALLEL_MAX);
    }
    if (args->epsilon >= 0) {
        o.epsilon = args->epsilon;
    }
    if (cont) {
        o.epsilon = 0; // the policy's own actions, greedy (evaluator.h)
    }
    blas_set_threads(1);
    nn_state_t st;
    nn_state_init(&st, &nc, o.parallel, 0);
    eval_result_t r;
    const char *name = spec ? spec->info->id : "python";
    if (python) {
        // The evaluator's own env workers (evaluator.h: evaluator_py_new).
        evaluator_py_t *py = evaluator_py_new(cfg, &o);
        rc = py ? evaluator_py_run(py, &p, &st, &o, &r) : -1;
        evaluator_py_destroy(&py);
        if (rc != 0) {
            fprintf(stderr, "apex-eval: no evaluation of %s (see above)\n", args->checkpoint);
            nn_state_fini(&st);
            nn_params_fini(&p);
            return 2;
        }
    } else {
        evaluator_run(spec, &p, &st, &o, &r);
    }
    char how[32];
    snprintf(how, sizeof how, cont ? "greedy mu(s)" : "epsilon %g", o.epsilon);
    printf("%s checkpoint %s (update %llu): episodes %ld  %s  mean %.2f  std %.2f  "
           "min %.1f  max %.1f%s\n",
           name, args->checkpoint, (unsigned long long)hdr.learner_step, r.episodes, how, r.mean,
           r.std, r.min, r.max,
           r.truncated ? "  (some episodes cut at [eval] max_episode_steps)" : "");
    nn_state_fini(&st);
    nn_params_fini(&p);
    return 0;
}

// The built-in env's start-up: a MuJoCo task's model (env_mujoco.h) is loaded. 0, or -1
// after one error line.
static int s_env_startup(const apex_config_t *cfg) {
    char err[512];
    const env_spec_t *spec = env_find(cfg->env.id);
    if (spec && env_mujoco_load(spec, cfg->env.model_xml, err, sizeof err) != 0) {
        fprintf(stderr, "apex-eval: [env] model_xml: %s\n", err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    cli_args_t args;
    apex_config_t cfg;
    int rc = cli_startup(
        "apex-eval", CLI_FLAG_CHECKPOINT | CLI_FLAG_EPISODES | CLI_FLAG_EPSILON | CLI_FLAG_EVAL,
        "  --checkpoint PATH     evaluate this checkpoint once\n"
        "  --follow              evaluate every new version of the learner's "
        "weights (eval.csv,\n"
        "                        tb/eval/, best.bin in the run directory)\n"
        "  --max-evals N         with --follow: stop after N evaluations\n"
        "  --trace SEED STEPS    print one line per env step (seeded random "
        "actions)\n"
        "  --actions FILE        with --trace: replay the a= actions of a trace\n"
        "  --episodes N          episodes per evaluation (default [eval] "
        "episodes)\n"
        "  --epsilon X           exploration rate, discrete actions only (default [eval] "
        "epsilon)\n",
        argc, argv, &args, &cfg);
    if (rc >= 0) {
        return rc;
    }
    if (s_env_startup(&cfg) != 0) {
        return 2;
    }
    if (args.trace) { // random actions: no network, no BLAS
        return evaluator_trace(&cfg, (uint64_t)args.trace_seed, args.trace_steps, args.actions,
                               stdout);
    }
    if (cfg.env.action_dim > 0 && args.epsilon > 0) {
        // Continuous runs evaluate the policy greedily: an exploration rate means nothing.
        fprintf(stderr,
                "apex-eval: --epsilon is for discrete actions; [env] id = %s has "
                "continuous ones, evaluated greedily (the policy's mu(s))\n",
                cfg.env.id);
        return 2;
    }
    blas_startup(argv, cfg.run.blas_kernel); // may start the process again with another kernel
    char err[512];
    if (blas_use_library(config_blas_library_name(cfg.run.blas_library), 1,
                         nn_run_wants_conv_body(&cfg), err, sizeof err) != 0) {
        log_error("%s", err);
        return 2;
    }
    if (args.follow) {
        return evaluator_follow(&cfg, args.max_evals);
    }
    if (!args.checkpoint) {
        fprintf(stderr, "apex-eval: one of --checkpoint PATH, --follow or --trace SEED STEPS "
                        "is required\n");
        return 2;
    }
    return s_checkpoint(&cfg, &args);
}
