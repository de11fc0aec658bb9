// pyenv.h: the actor's half of the Python env bridge: W Python worker processes, each
// stepping N Gymnasium-style envs (python/apex_env.py), driven from C.
//
// What it does: talks to its workers over one of two transports, with the same messages
// (pywire.h) and the same checks: LOCAL, for workers it spawns itself, a shared memory file
// per worker for the frames and a pipe each way for the headers (pylocal.h: two system
// calls a round trip, no socket, nothing another process could connect to); or ZMQ, one
// ROUTER socket that workers connect to (spawned here, or started by hand on other hosts,
// with CURVE under [security] mode = curve). It checks each worker's spaces against the run's,
// seeds and resets the envs, and steps them in G groups so that the caller can overlap
// Python's stepping of one group with its own inference for another (SEED RL / EnvPool):
//   recv(0) act(0) send(0)  recv(1) act(1) send(1)            start
//   loop: recv(0) fold(0) act(0) send(0)    (Python steps group 1 meanwhile)
//         recv(1) fold(1) act(1) send(1)    (Python steps group 0 meanwhile)
// Each worker's N envs are split into G slices; a step of group g is one STEP message per
// worker (its slice g) and one batched reply per worker, so with G = 2 every worker always
// has the next request queued. Workers that die, hang or send garbage are dropped (and
// restarted when spawned here); the others keep stepping, and no call waits longer than its
// timeout. The actor binds and workers connect: a worker started by hand on another host
// joins by address like any apex peer, a restarted worker reconnects by itself, and the
// actor needs to know no worker address.
//
// Actions are discrete (Discrete(n_actions): an int32 per env, pyenv_send_actions) or
// continuous (a Box of shape (action_dim,): action_dim float32s per env, pyenv_send_cont),
// as the run says; each worker's HELLO states its env's action space, and a Box's bounds, and
// one that does not fit the run (the other kind, another action_dim, bounds other than
// [env] action_low/high as float32) is refused naming both.
//
// What it does not do: pick actions, fold n-step transitions, or know any env. It does not
// install signal handlers: spawned workers are reaped with waitpid(pid, WNOHANG) on their
// own pids, so SIGCHLD must not be ignored (SIG_IGN) by the process.
//
// Env layout. The pool has E = W * N envs, in G groups of GE = E / G (N % G == 0, n = N / G).
// Pool env e belongs to group e / GE; within its group, element j = e % GE is env
// g * n + j % n of worker j / n. Caller arrays for a group are indexed by j (so a group is
// a contiguous range of an actor's (E, ...) arrays). Reset seeds: pool env e is reset with
// seed + first_env + e when its worker first starts, and with a seed mixed from that and the
// worker's restart count after a restart; later resets within a life are unseeded (each env
// continues its own stream, as Gymnasium intends).
//
// Per-env status, after each pyenv_recv_results (values of pyenv_status):
//   PYENV_OK         the env stepped: next_obs is the step's observation (the final one if
//                    the episode ended: the target bootstraps from it on truncation),
//                    rewards/terminated/truncated are the step's, obs_to_act_on is next_obs
//                    or, where the episode ended, the first observation of the next one.
//   PYENV_ENV_FAULT  the env raised, returned NaN/inf, a wrong shape/dtype, or a reward
//                    beyond +-PYENV_REWARD_MAX (text in pyenv_env_error); PYENV_NO_STEP the
//                    env did not step (its worker died, hung, or has just (re)started, and
//                    the first recv of every group).
// For both non-OK statuses: the step is void (next_obs zeros, reward 0, flags 0) and the
// env's running episode is dropped: the caller must not fold this step and must clear the
// env's pending n-step steps (nstep_clear_env). obs_to_act_on is the first observation of a
// new episode when the env could be reset, and zeros otherwise (a worker still down, an env
// whose reset fails too); after a reward out of range it is the row the worker's env is
// really at (its step's observation, or its reset one). Either way the next result is OK
// only if the env really stepped from that row, so acting on zeros is harmless.
//
// CURVE ([security] mode = curve, transport ZMQ): the bridge socket is a CURVE server with the actor's key
// pair (<key_dir>/actor.key, or actor<i>.key, as security.c picks it) and a ZAP handler that
// admits only public keys listed in curve_authorized_keys (default: [security]
// authorized_keys). A worker is a client like any other peer: it needs the actor's public
// key (spawned workers get it as --curve-server-key Z85 on their command line: a public key
// is not a secret) and its own certificate file (--curve-secret PATH, mode 0600; spawned
// workers get curve_worker_key, default <key_dir>/envworker.key; secrets never travel in
// argv). For a worker on another host: `apex-keygen DIR envworker`, add envworker.pub's key
// to the allow-list, copy envworker.key to that host, and pass the actor's key (printed in
// the actor's "CURVE on" log line, or its .pub file) as --curve-server-key.
//
// Memory: every buffer is sized in pyenv_new from W, N and the observation size; stepping
// allocates nothing (libzmq's own message buffers aside). Not thread-safe: one thread drives
// a pyenv_t (the zmq socket rule).
//
// The wire format between the two halves is written down in envs/pywire.h (and, the same
// text, in python/apex_env.py).
#ifndef APEX_PYENV_H
#define APEX_PYENV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "env.h" // vecenv_episode_t

#define PYENV_MAX_WORKERS 256
#define PYENV_MAX_ENVS_PER_WORKER 4096
#define PYENV_ERR_TEXT_MAX 256 // bytes of an env's error text (the wire's bound)
#define PYENV_KWARGS_LEN 1024
// Rewards beyond +-PYENV_REWARD_MAX are env faults: an n-step return of up to 1000 of them
// ([actor] n_step's bound) stays finite in float32 (FLT_MAX is 3.4e38), as the replay server
// requires.
#define PYENV_REWARD_MAX 1e30

typedef enum { PYENV_OK = 0, PYENV_ENV_FAULT = 1, PYENV_NO_STEP = 2 } pyenv_status;

// How the actor and its workers talk. LOCAL (spawned workers only): shared memory for the
// frames and a pipe each way for the headers (envs/pylocal.h), no socket; ZMQ: the
// ROUTER below, for workers started by hand (other hosts, CURVE) or spawned ones.
typedef enum { PYENV_LOCAL = 0, PYENV_ZMQ = 1 } pyenv_transport;

// Parameters, config-like (plain values; strings are copied by pyenv_new).
typedef struct {
    char bind[CONFIG_STR_LEN];    // endpoint to bind, e.g. "tcp://127.0.0.1:*", "tcp://*:5600"
    char connect[CONFIG_STR_LEN]; // endpoint spawned workers connect to; "" = the bound one
                                  // (with 0.0.0.0 replaced by 127.0.0.1)
    int workers;                  // W, 1 .. PYENV_MAX_WORKERS
    int envs_per_worker;          // N
    int groups;                   // G >= 1, N % G == 0 (1 = lock step, 2 = two overlapped)
    // Spawning (spawn = 0: workers are started elsewhere with --worker-id 0 .. W-1)
    int spawn;
    int transport; // pyenv_transport; LOCAL needs spawn (bind, connect and CURVE then unused)
    char python[CONFIG_STR_LEN];   // e.g. "/usr/bin/python3"
    char script[CONFIG_STR_LEN];   // e.g. "python/apex_env.py"
    char make[CONFIG_STR_LEN];     // MODULE:CALLABLE
    char kwargs[PYENV_KWARGS_LEN]; // JSON object, "" = none
    // What the run expects of every worker (a mismatch is refused, naming both sides)
    int obs_dim;   // observation elements (product of the shape): one frame's
    int obs_dtype; // config_obs_dtype: CONFIG_OBS_FLOAT32 or CONFIG_OBS_UINT8
    // The frame's shape ([env] obs_shape of one frame): obs_h x obs_w x obs_c channels last,
    // or 0, 0, 0 for a vector of obs_dim. Every worker's observation_space must be exactly
    // that: (obs_dim,); (obs_h, obs_w, obs_c), or (obs_h, obs_w) when obs_c is 1; with
    // obs_layout CONFIG_OBS_CHW (c, h, w), which the workers transpose (--obs-layout chw).
    int obs_h, obs_w, obs_c;
    int obs_layout; // config_obs_layout: CONFIG_OBS_HWC (as they are) or CONFIG_OBS_CHW
    int n_actions;  // discrete actions (Discrete(n_actions)); 0 with action_dim
    // Continuous actions (0: discrete): every worker's env has a Box action space of shape
    // (action_dim,) whose bounds, as float32, are exactly these ([env] action_low/high)
    int action_dim;
    float action_low[CONFIG_MAX_ACTION_DIM], action_high[CONFIG_MAX_ACTION_DIM];
    uint64_t seed;            // [run] seed
    uint64_t first_env;       // global index of pool env 0 (actor_index * envs_per_actor)
    int64_t hello_timeout_ms; // pyenv_new waits this long for all workers; also the bound on
                              // a (re)started worker's HELLO and on any RESET's answer
    // CURVE: used when cfg is not NULL and cfg->security.mode is curve
    const apex_config_t *cfg; // borrowed during pyenv_new only
    int actor_index;          // selects actor<i>.key like the actor's other sockets (-1: no)
    char curve_worker_key[CONFIG_STR_LEN];      // spawned workers' key file; "" = default
    char curve_authorized_keys[CONFIG_STR_LEN]; // allow-list; "" = [security] authorized_keys
} pyenv_opts_t;

// Fills o with defaults: bind tcp://127.0.0.1:*, 1 worker x 1 env, 1 group, spawn 1,
// transport LOCAL, /usr/bin/python3 python/apex_env.py, float32, seed 0, hello_timeout_ms
// 30000.
void pyenv_opts_defaults(pyenv_opts_t *o);

// Caller-provided outputs of one group, all (GE) or (GE, obs_dim) elements of the pool's
// dtype (float for float32, uint8_t for uint8). See "Per-env status" above.
typedef struct {
    void *next_obs;
    void *obs_to_act_on;
    float *rewards;
    uint8_t *terminated;
    uint8_t *truncated;
    uint8_t *status; // pyenv_status
} pyenv_results_t;

typedef struct {
    uint64_t steps;             // env steps with status OK
    uint64_t episodes;          // finished episodes (terminated or truncated)
    uint64_t episodes_dropped;  // running episodes dropped (env faults, lost workers)
    uint64_t episodes_unstored; // finished while the episode buffer was full
    uint64_t env_faults;        // PYENV_ENV_FAULT results
    uint64_t bad_frames;        // invalid messages from peers, dropped
    uint64_t stale_frames;      // valid but late replies (an older request or incarnation)
    uint64_t hellos;            // HELLOs accepted
    uint64_t refused;           // HELLOs refused (spaces, worker id)
    uint64_t workers_lost;      // replies missing at a deadline, failed sends, replacements
    uint64_t worker_deaths;     // spawned workers that exited or were killed
    uint64_t worker_spawns;     // spawned processes, first starts included
    uint64_t curve_denied;      // clients refused by the ZAP handler
} pyenv_stats_t;

typedef struct pyenv pyenv_t;

// Binds, spawns the workers (spawn = 1) and waits up to hello_timeout_ms until every worker
// has said HELLO, passed the spaces check and answered its first RESET. NULL after logging
// why (bad options, bind failure, a worker that exits or stays silent, spaces that do not
// fit: that message names the worker's and the run's): start-up errors (STYLE S6.3). The
// caller destroys with pyenv_destroy.
pyenv_t *pyenv_new(const pyenv_opts_t *opts);
// Kills (SIGKILL) and reaps spawned workers, closes the socket, frees. NULL-safe.
void pyenv_destroy(pyenv_t **self_p);

// GE: envs per group (the length of every array of pyenv_send_actions / pyenv_results_t).
int pyenv_group_size(const pyenv_t *self);
int pyenv_groups(const pyenv_t *self);

// Each group alternates pyenv_recv_results and pyenv_send_actions (pyenv_send_cont for
// continuous actions), starting with a recv (whose results are PYENV_NO_STEP with the first
// observations); another order is a programming error (asserted), as are actions outside
// [0, n_actions), continuous actions that are not finite or outside the bounds, and the
// send that does not fit the pool's action space.
//
// Sends group's actions (GE) to every worker that is up and whose envs' observations the
// caller has; for the others nothing is sent (their envs report PYENV_NO_STEP). Never
// blocks. Returns the number of envs whose actions were sent.
int pyenv_send_actions(pyenv_t *self, int group, const int32_t *actions);
// pyenv_send_actions for continuous actions (action_dim > 0): (GE, action_dim) floats, each
// finite and within [action_low, action_high] (the caller clips; asserted). Never blocks.
int pyenv_send_cont(pyenv_t *self, int group, const float *actions);
// Waits up to timeout_ms for the replies of the group's last send, while serving every
// other message (other groups' replies, HELLOs, restarts, CURVE handshakes), and writes the
// group's results into out. A worker whose reply has not come by then is lost: killed and
// restarted if spawned here, reset when it answers again otherwise; its envs report
// PYENV_NO_STEP. With no reply owed (every worker of the group down), it waits until one is
// back or timeout_ms passes, so a caller never spins. A shutdown signal (signals.h) ends
// the wait early: the envs whose reply had not come report PYENV_NO_STEP, and their
// workers are not counted lost (the caller is stopping). Returns the number of envs with
// status PYENV_OK.
int pyenv_recv_results(pyenv_t *self, int group, int64_t timeout_ms, const pyenv_results_t *out);

// The error text of element j of group (valid after a recv that reported PYENV_ENV_FAULT
// for it, until the next recv of that group); "" when there is none.
const char *pyenv_env_error(const pyenv_t *self, int group, int j);
// Copies up to cap finished episodes (oldest first; env = pool index; ret sums the float
// rewards) and removes them. At most max(1024, 4 E) wait between two drains; further ones
// are counted in stats.episodes and stats.episodes_unstored, not stored.
int pyenv_drain_episodes(pyenv_t *self, vecenv_episode_t *out, int cap);

void pyenv_get_stats(const pyenv_t *self, pyenv_stats_t *out);
// Spawned worker w's pid, or 0 while it is not running (or spawn = 0).
pid_t pyenv_worker_pid(const pyenv_t *self, int w);

#endif
