// evaluator.h: evaluating a Q-network on apex's own environments or a Python env's (see
// evaluator_py_new), once (a checkpoint) or
// continuously (the learner's weights stream, as the Ape-X paper's evaluation actors do).
//
// An evaluation runs `episodes` episodes, up to `parallel` envs at a time, greedy with
// probability 1 - epsilon. Each env of a round contributes exactly its first episode, so
// short episodes are not over-represented (collecting "the first K to finish" from a fixed
// pool of envs biases the mean down). The envs use fixed streams (seed, RNG_ROLE_ENV,
// EVALUATOR_STREAM_BASE + i), far from any training env's, and the same ones for every
// network evaluated: successive evaluations differ by the network only (common random
// numbers), which makes "version B beats version A" meaningful on 100 episodes.
// An episode longer than max_episode_steps is cut there (counted with its return so far): a
// greedy policy can loop forever in an env without a time limit (MinAtar has none).
//
// Following (evaluator_follow): asks the learner's weights endpoint like an actor does
// (common/weights_client.h: a DEALER, CURVE with the actor's key pair), every new version evaluated, or the newest when evaluation fell
// behind (older ones are skipped: the point is the current policy, quickly). Each evaluation
// appends a row to <run>/eval.csv, writes scalars to <run>/tb/eval/ (a directory of its own:
// TensorBoard reads only the newest file of a directory), and the best network so far goes
// to <run>/best.bin (a format-2 checkpoint holding the online network only; apex-eval
// --checkpoint reads it). Runs until SIGINT/SIGTERM (or, for tests, max_evals).
// Continuous actions ([env] action_dim > 0): the network is DPG's policy mu(s) and the
// evaluation greedy, its outputs being the actions (epsilon does not apply: no noise); a void
// step (a diverging MuJoCo simulation, env.h) restarts its env, whose next episode counts.
// best.bin then holds the policy (apex-eval --checkpoint reads it, as it reads a DPG
// trainer's checkpoint: ckpt_read_policy).
// Not thread-safe; single-threaded (one BLAS thread).
#ifndef APEX_EVALUATOR_H
#define APEX_EVALUATOR_H

#include "config.h"
#include "env.h"
#include "nn.h"

#include <stdint.h>
#include <stdio.h>

#define EVALUATOR_STREAM_BASE 1000000000ULL // env streams far from any training env's index
#define EVALUATOR_PARALLEL_MAX 1024

typedef struct {
    double mean, std, min, max;
    long episodes;
    long truncated; // episodes cut at max_episode_steps
} eval_result_t;

typedef struct {
    long episodes;             // per evaluation
    double epsilon;            // 0: greedy (discrete actions only)
    int parallel;              // envs at a time, 1..EVALUATOR_PARALLEL_MAX
    int64_t max_episode_steps; // cut longer episodes (0: never)
    uint64_t seed;             // [run] seed
    int frame_stack;           // [env] frame_stack: the network reads the last K frames (0: 1)
} eval_opts_t;

// The evaluation options of a run's [eval] section.
void evaluator_opts_from_run(eval_opts_t *o, const apex_config_t *cfg);

// Evaluates the network p (config in st) on spec. st must hold opts->parallel samples.
void evaluator_run(const env_spec_t *spec, const nn_params_t *p, nn_state_t *st,
                   const eval_opts_t *opts, eval_result_t *out);

// Python envs ([env] id = python): an evaluator's own env workers (envs/envsrc.h), opts->
// parallel envs seeded from EVALUATOR_STREAM_BASE, started once and kept for the evaluator's
// life (starting Python workers takes seconds). The bridge cannot reset an env on request,
// so an evaluation round starts where each env is: an env that is at the start of an episode
// counts that episode; one in the middle of an episode (played by the previous network)
// finishes it uncounted, and its next episode counts. Each env of a round gives its first
// counted episode, cut at max_episode_steps as above; an env whose uncounted episode lasts
// max_episode_steps gives none that round. An episode dropped by an env fault or a lost
// worker (the bridge logs why) is not counted: the env restarted, and its next episode is
// the one that counts; an env that faults more than 8 times in a round is given up for it.
// Unlike the built-in envs', the envs continue their streams from one evaluation to the next
// (the workers reset each env with its seed only when they start): successive evaluations
// differ by their episodes' start states too. Returns NULL after logging why (the bridge's
// start-up errors; [python] spawn = 0 with transport = zmq, which the evaluator cannot use).
// Destroy with evaluator_py_destroy. Not thread-safe.
typedef struct evaluator_py evaluator_py_t;
evaluator_py_t *evaluator_py_new(const apex_config_t *cfg, const eval_opts_t *opts);
void evaluator_py_destroy(evaluator_py_t **self_p);
// "python (MODULE:CALLABLE)", for messages.
const char *evaluator_py_name(const evaluator_py_t *self);
// evaluator_run on the Python envs (opts as for evaluator_py_new; st holds opts->parallel
// samples). Returns 0, or -1 when no result is to be recorded: a shutdown signal, or no
// episode counted at all (logged: "evaluation skipped"); out is filled either way.
int evaluator_py_run(evaluator_py_t *self, const nn_params_t *p, nn_state_t *st,
                     const eval_opts_t *opts, eval_result_t *out);

// Prints one line per step of cfg's env for debugging environments, with a seeded random
// policy (the LCG of minatar.h, seeded with seed) or the a= actions of a trace file:
//   MinAtar:  t=<t> a=<action> ea=<applied> r=<reward> term=<0|1> obs=<packed bits, hex>
//             (the line tests/fixtures/gen_minatar.py --trace prints from the reference, for
//             the same seed, so the two can be diffed; a line with a=-1 follows each reset);
//             MinAtar/<Game>-render84-v0 prints the game's frame too, not the 84 x 84
//             drawing of it: its trace is MinAtar/<Game>-v0's, line for line
//   others:   t=<t> a=<action> r=<reward> term=<0|1> trunc=<0|1> obs=<float32 bytes, hex>
//   continuous (action_dim > 0): the same with a=<action_dim floats, %.9g, comma-separated>,
//             drawn uniform in [action_low, action_high] from the same LCG; term=2 marks a
//             void step (env.h), followed by a reset line like any episode's end
// After each reset comes a line with a=-1 (a=none for a continuous env) and the reset obs.
// Returns 0, or 2 after logging why (unknown env, unreadable actions file).
int evaluator_trace(const apex_config_t *cfg, uint64_t seed, long steps, const char *actions_path,
                    FILE *out);

// Follows the weights stream of cfg's learner (see top). Returns 0 after a shutdown signal
// or after max_evals evaluations (0: no limit), 2 on a start-up error (logged).
int evaluator_follow(const apex_config_t *cfg, long max_evals);

#endif
