// pyenv.c: see pyenv.h; the wire format is in pywire.h.
//
// Worker slots move through DOWN -> (spawned: STARTING, waiting for the HELLO) -> RESETTING
// (HELLO accepted, RESET sent) -> UP (RESET_DONE taken). Any failure (death, a reply missing
// at a deadline, a failed send, a newer process with the same id) goes through s_lost: the
// slot's requests are forgotten (later replies to them are stale and dropped by seq), its
// envs report PYENV_NO_STEP, and a spawned worker is killed, reaped and started again after
// a capped back-off, while a remote one is sent a new RESET (a merely slow worker resumes;
// a gone one is waited for until it says HELLO again).
//
// Per (worker, group) at most one of: a STEP outstanding (seq != 0), its reply received and
// staged (got), start observations staged after a RESET (fresh). Staged rows live in the
// group's buffers at the worker's rows; pyenv_recv_results copies them out.
#define LOG_MODULE "pyenv"
#include "pyenv.h"

#include "apex.h"
#include "child.h"
#include "clock.h"
#include "log.h"
#include "net.h"
#include "pylocal.h"
#include "pywire.h"
#include "security.h"
#include "signals.h"
#include "xalloc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define TEXT_MAX PYWIRE_TEXT_MAX
#define RID_MAX 256       // libzmq routing ids are at most 255 bytes
#define MAX_FRAMES 8      // routing id + header + 5 payload frames, + 1 to see excess
#define RESULT_FRAMES 7   // routing id, header, obs, rewards, flags, reset_obs, errors
#define MAX_DRAIN 256     // messages handled per drain, so a flood cannot hold a call
#define CHILD_CHECK_MS 20 // how often spawned children are looked at (waitpid WNOHANG)
#define RESTART_MIN_MS 100
#define RESTART_MAX_MS 5000
#define LOG_INTERVAL_MS 5000
#define MAX_ARGS 20
#define ERR_TEXT (PYENV_ERR_TEXT_MAX + 1) // bytes per env of the error texts

_Static_assert(PYENV_ERR_TEXT_MAX == PYWIRE_ERR_TEXT_MAX, "one bound for error texts");
_Static_assert(CONFIG_MAX_ACTION_DIM == PYWIRE_MAX_ACTION_DIM, "one bound for action_dim");

typedef pywire_header_t s_hdr;

typedef enum { W_DOWN, W_STARTING, W_RESETTING, W_UP, W_KILLED } s_state;
static const char *const s_state_name[] = {"down", "starting", "resetting", "up", "killed"};

typedef struct {
    s_state state;
    pid_t pid;             // spawned and not yet reaped, else 0
    int64_t since_ms;      // when STARTING / RESETTING / KILLED began
    int64_t respawn_at_ms; // DOWN (spawned): start again from then on
    int fails;             // lives lost since the last good reply (restart back-off)
    uint32_t life;         // RESETs sent so far (the first life has the plain seeds)
    uint8_t rid[RID_MAX];  // routing id of its connection
    size_t rid_len;
    uint64_t nonce;
    uint64_t reset_seq;
    char desc[TEXT_MAX + 1];       // from its HELLO, for messages
    uint64_t *seq;                 // (G) outstanding STEP, 0 = none
    uint8_t *got, *fresh, *synced; // (G) see the file comment; synced: the caller holds
                                   // this slice's current observations
    char *argv[MAX_ARGS];
    char id_arg[16];
    char local_arg[96];
    pylocal_t local; // transport local: its shared memory and pipes
} s_worker;

// One message from a worker: where it came from and its payload frames (after the header).
typedef struct {
    const uint8_t *rid; // ZeroMQ: the sender's routing id (NULL for a local worker)
    size_t rid_len;
    int nf; // payload frames
    pywire_frame_t f[PYLOCAL_FRAMES];
} s_msg;

typedef struct {
    uint8_t *next_obs, *act_obs; // (GE, row) staged
    float *rewards;              // (GE)
    uint8_t *terminated, *truncated, *status;
    char *err, *err_out; // (GE, ERR_TEXT) staged / last delivered
    int recv_due;        // 1: the next call must be a recv, 0: a send
} s_group;

struct pyenv {
    pyenv_opts_t o;
    int W, N, G, n, GE, E;
    size_t row;         // bytes per observation
    pywire_spaces_t sp; // n_actions and dtype from the options; shape from the first HELLO
    int have_shape;
    int local;          // transport local: pipes and shared memory, no socket
    uint8_t *scratch;   // (pylocal_reply_bytes) a local reply's private copy
    struct pollfd *pfd; // (W) the local workers' pipes
    void *ctx, *sock;
    security_t *sec;
    char endpoint[CONFIG_STR_LEN], connect_ep[CONFIG_STR_LEN], n_arg[16];
    // "--curve-server-key=<Z85>" and "--curve-secret=<path>" as single arguments: a Z85 key
    // may begin with '-', which argparse takes for an option when it stands alone (a CI
    // run's random key did, 1 in 85).
    char server_key_arg[SECURITY_KEY_Z85_LEN + 32], secret_arg[CONFIG_STR_LEN + 32];
    s_worker *w;
    s_group *grp;
    uint64_t next_seq;
    double *ep_ret; // (E)
    int32_t *ep_len;
    vecenv_episode_t *done;
    int done_count, done_cap;
    zmq_msg_t frames[MAX_FRAMES];
    uint64_t *seeds; // (N) scratch of a RESET
    pyenv_stats_t st;
    int64_t next_check_ms;
    int starting;
    char startup_error[TEXT_MAX + 1024];
    char why[TEXT_MAX + 1024]; // scratch: the reason of a drop or refusal
    char version_note[512];    // the last message of another bridge version, for start-up
    log_limiter_t bad_log, stale_log, lost_log, fault_log, refuse_log, spawn_log;
};

// ---------------------------------------------------------------------------------------
// Small helpers

static uint64_t s_mix(uint64_t x) { // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Pool env e's reset seed in its worker's life `life` (see pyenv.h).
static uint64_t s_seed(const pyenv_t *p, int e, uint32_t life) {
    uint64_t base = p->o.seed + p->o.first_env + (uint64_t)e;
    return life == 0 ? base : s_mix(base ^ s_mix(life));
}

static int s_pool_env(const pyenv_t *p, int g, int j) { return g * p->GE + j; }

static void s_close_frames(pyenv_t *p, int nf) {
    for (int i = 0; i < nf; i++) {
        zmq_msg_close(&p->frames[i]);
    }
}

static const uint8_t *s_fdata(pyenv_t *p, int i) { return zmq_msg_data(&p->frames[i]); }
static size_t s_fsize(pyenv_t *p, int i) { return zmq_msg_size(&p->frames[i]); }

// ---------------------------------------------------------------------------------------
// Sending (never blocks: a worker that does not read is lost, not waited for)

static void s_header(const pyenv_t *p, s_hdr *h, pywire_type type, int w, uint32_t n, uint64_t seq,
                     uint32_t first) {
    pywire_header_init(h, type, &p->sp, (uint32_t)w, p->w[w].nonce, n, seq, first);
}

// Sends [rid][hdr][payload]. Returns 0, or -1 with the reason in p->why.
static int s_send(pyenv_t *p, const uint8_t *rid, size_t rid_len, const s_hdr *h,
                  const void *payload, size_t len) {
    if (zmq_send(p->sock, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        // ZMQ_ROUTER_MANDATORY: EHOSTUNREACH = the connection is gone, EAGAIN = its queue is
        // full (the worker does not read).
        snprintf(p->why, sizeof p->why, "cannot send to it: %s", zmq_strerror(errno));
        return -1;
    }
    // With the first frame accepted, the others of the message are queued too.
    zmq_send(p->sock, h, sizeof *h, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send(p->sock, payload, len, ZMQ_DONTWAIT);
    return 0;
}

// Sends worker w a message over its transport. 0, or -1 with the reason in p->why.
static int s_send_w(pyenv_t *p, int w, const s_hdr *h, const void *payload, size_t len) {
    s_worker *k = &p->w[w];
    if (p->local) { // a STEP goes to its group's region, the rest to region 0
        int region = h->type == PYWIRE_STEP ? (int)(h->first / (uint32_t)p->n) : 0;
        return pylocal_send(&k->local, region, h, payload, len, p->why, sizeof p->why);
    }
    return s_send(p, k->rid, k->rid_len, h, payload, len);
}

// Refuses the sender of m (worker id w as it claimed, nonce its).
static void s_refuse(pyenv_t *p, const s_msg *m, uint32_t w, uint64_t nonce, const char *reason) {
    s_hdr h;
    s_header(p, &h, PYWIRE_REFUSE, 0, 0, 0, 0);
    h.worker = w;
    h.nonce = nonce;
    char why[sizeof p->why];
    memcpy(why, p->why, sizeof why); // reason may be p->why, which a failed send overwrites
    if (p->local) {
        size_t len = strlen(reason) < TEXT_MAX ? strlen(reason) : TEXT_MAX;
        pylocal_send(&p->w[w].local, 0, &h, reason, len, p->why, sizeof p->why);
    } else {
        s_send(p, m->rid, m->rid_len, &h, reason, strlen(reason));
    }
    memcpy(p->why, why, sizeof why);
    p->st.refused++;
}

static void s_lost(pyenv_t *p, int w, const char *why);

// Sends worker w a RESET of all its envs with the seeds of its next life.
static void s_send_reset(pyenv_t *p, int w) {
    s_worker *k = &p->w[w];
    for (int i = 0; i < p->N; i++) {
        int g = i / p->n, jj = w * p->n + i % p->n;
        p->seeds[i] = s_seed(p, s_pool_env(p, g, jj), k->life);
    }
    k->life++;
    s_hdr h;
    k->reset_seq = p->next_seq++;
    s_header(p, &h, PYWIRE_RESET, w, (uint32_t)p->N, k->reset_seq, 0);
    k->state = W_RESETTING;
    k->since_ms = clock_now_ms();
    if (s_send_w(p, w, &h, p->seeds, (size_t)p->N * 8) != 0) {
        if (p->local) {
            s_lost(p, w, p->why); // a spawned worker that cannot be written to is restarted
            return;
        }
        k->rid_len = 0; // gone: only a new HELLO brings it back
        k->state = W_DOWN;
    }
}

// ---------------------------------------------------------------------------------------
// Worker processes (spawn = 1)

static int64_t s_backoff_ms(int fails) {
    if (fails <= 0) {
        return 0;
    }
    int64_t d = RESTART_MIN_MS << (fails > 10 ? 10 : fails - 1);
    return d > RESTART_MAX_MS ? RESTART_MAX_MS : d;
}

static void s_spawn(pyenv_t *p, int w) {
    s_worker *k = &p->w[w];
    int fds[3];
    if (p->local && pylocal_open_pipes(&k->local, fds) != 0) {
        k->respawn_at_ms = clock_now_ms() + RESTART_MAX_MS;
        return;
    }
    pid_t pid = p->local ? child_start_fds(k->argv, fds, 3) : child_start(k->argv);
    if (p->local) {
        pylocal_spawned(&k->local);
    }
    if (pid < 0) {
        if (p->local) {
            pylocal_close_pipes(&k->local);
        }
        log_every(&p->spawn_log, LOG_INTERVAL_MS, LOG_ERROR, "worker %d: fork: %s", w,
                  strerror(errno));
        k->respawn_at_ms = clock_now_ms() + RESTART_MAX_MS;
        return;
    }
    k->pid = pid;
    k->state = W_STARTING;
    k->since_ms = clock_now_ms();
    k->nonce = 0;
    k->rid_len = 0;
    p->st.worker_spawns++;
    // Not rate-limited: the restart back-off bounds how often this is said.
    log_info("worker %d: started pid %d (%s %s --make %s)", w, (int)pid, p->o.python, p->o.script,
             p->o.make);
}

// A spawned worker's process ended (how): expected after a kill, a failure otherwise.
static void s_reaped(pyenv_t *p, int w, const char *how) {
    s_worker *k = &p->w[w];
    int pid = (int)k->pid;
    p->st.worker_deaths++;
    k->pid = 0;
    if (k->state == W_KILLED) {
        k->state = W_DOWN;
        k->respawn_at_ms = clock_now_ms() + s_backoff_ms(k->fails);
        return;
    }
    if (p->starting && !p->startup_error[0]) {
        snprintf(p->startup_error, sizeof p->startup_error,
                 "python env worker %d (pid %d) %s before it was ready (its error is above, "
                 "on stderr): %s %s --make %s",
                 w, pid, how, p->o.python, p->o.script, p->o.make);
    }
    snprintf(p->why, sizeof p->why, "process %d %s", pid, how);
    s_lost(p, w, p->why);
}

// Reaps spawned children, restarts the ones due, and times out silent starts and resets.
static void s_service(pyenv_t *p) {
    int64_t now = clock_now_ms();
    if (now < p->next_check_ms) {
        return;
    }
    p->next_check_ms = now + CHILD_CHECK_MS;
    for (int w = 0; w < p->W; w++) {
        s_worker *k = &p->w[w];
        char how[160];
        if (k->pid > 0 && child_reap(k->pid, how, sizeof how)) {
            s_reaped(p, w, how);
        }
        if ((k->state == W_STARTING || k->state == W_RESETTING) &&
            now - k->since_ms > p->o.hello_timeout_ms && !p->starting) {
            snprintf(p->why, sizeof p->why, "no %s within %lld ms",
                     k->state == W_STARTING ? "HELLO" : "reply to its RESET",
                     (long long)p->o.hello_timeout_ms);
            s_lost(p, w, p->why);
        }
        if (p->o.spawn && k->state == W_DOWN && k->pid == 0 && now >= k->respawn_at_ms &&
            !p->starting) {
            s_spawn(p, w);
        }
    }
}

// Worker w failed (why): see the file comment.
static void s_lost(pyenv_t *p, int w, const char *why) {
    s_worker *k = &p->w[w];
    p->st.workers_lost++;
    if (p->starting && !p->startup_error[0]) { // no restarts while pyenv_new waits
        snprintf(p->startup_error, sizeof p->startup_error, "python env worker %d: %s", w, why);
    }
    log_every(&p->lost_log, LOG_INTERVAL_MS, LOG_WARN,
              "worker %d (%s): %s; the episodes of its %d envs are dropped%s", w,
              k->desc[0] ? k->desc : "no HELLO yet", why, p->N,
              p->o.spawn ? ", restarting it" : "");
    for (int g = 0; g < p->G; g++) {
        k->seq[g] = 0;
        k->got[g] = k->fresh[g] = k->synced[g] = 0;
    }
    k->fails++;
    if (p->local) {
        pylocal_close_pipes(&k->local); // nothing more is read from this process
    }
    if (p->o.spawn) {
        if (k->pid > 0) {
            if (k->state != W_KILLED) {
                kill(k->pid, SIGKILL);
            }
            k->state = W_KILLED;
            k->since_ms = clock_now_ms();
        } else {
            k->state = W_DOWN;
            k->respawn_at_ms = clock_now_ms() + s_backoff_ms(k->fails);
        }
        return;
    }
    k->state = W_DOWN;
    if (k->rid_len) {
        s_send_reset(p, w); // a slow worker resumes with new episodes; a gone one fails here
    }
}

// ---------------------------------------------------------------------------------------
// Messages from workers. Every frame is validated (pywire_check_reply) before anything is
// touched; a bad message is counted, logged at most once per interval, and dropped.

// Counts and logs (at most once per interval) a bad message whose reason is in p->why.
static int s_bad_why(pyenv_t *p) {
    p->st.bad_frames++;
    log_every(&p->bad_log, LOG_INTERVAL_MS, LOG_WARN,
              "dropped a bad message from a bridge peer: %s (%llu bad in all)", p->why,
              (unsigned long long)p->st.bad_frames);
    return -1;
}

static int s_bad(pyenv_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int s_bad(pyenv_t *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    apex_verrf(p->why, sizeof p->why, 0, fmt, ap);
    va_end(ap);
    return s_bad_why(p);
}

static void s_stale(pyenv_t *p, const s_hdr *h, const char *what) {
    p->st.stale_frames++;
    log_every(&p->stale_log, LOG_INTERVAL_MS, LOG_INFO,
              "dropped a late %s of worker %u (seq %llu: %s; %llu late in all)",
              h->type == PYWIRE_RESULT ? "RESULT" : "RESET_DONE", h->worker,
              (unsigned long long)h->seq, what, (unsigned long long)p->st.stale_frames);
}

// A RESULT's or RESET_DONE's 5 payload frames checked.
static int s_check_reply(pyenv_t *p, const s_hdr *h, const s_msg *m, int is_reset) {
    if (m->nf != 5) {
        return s_bad(p, "worker %u: a reply of %d frames (expected %d)", h->worker, m->nf + 1,
                     RESULT_FRAMES - 1);
    }
    if (pywire_check_reply(h, m->f, &p->sp, is_reset, p->why, sizeof p->why) != APEX_OK) {
        return s_bad_why(p);
    }
    return 0;
}

static char *s_err_text(s_group *gr, int j) { return gr->err + (size_t)j * ERR_TEXT; }

// Stages one env's step result (flags f, its obs row, its reset row or NULL, reward r) as
// element j of group gr; *rec is the next error record.
static void s_stage_env(pyenv_t *p, s_group *gr, int j, uint8_t f, const uint8_t *obs,
                        const uint8_t *reset_row, double r, const uint8_t **rec) {
    size_t row = p->row;
    uint8_t *nx = gr->next_obs + (size_t)j * row, *ao = gr->act_obs + (size_t)j * row;
    if (f & PYWIRE_ERROR) { // the step is void
        pywire_take_error(rec, s_err_text(gr, j), ERR_TEXT);
        memset(nx, 0, row);
        if (reset_row) {
            memcpy(ao, reset_row, row);
        } else {
            memset(ao, 0, row); // the reset failed too: the worker retries it
        }
        gr->rewards[j] = 0.0f;
        gr->terminated[j] = gr->truncated[j] = 0;
        gr->status[j] = PYENV_ENV_FAULT;
        return;
    }
    memcpy(ao, reset_row ? reset_row : obs, row);
    if (!(r >= -PYENV_REWARD_MAX && r <= PYENV_REWARD_MAX)) {
        // A finite float32 that n-step folding would overflow to inf, which the replay server
        // refuses, with the whole batch around it: refused here, for this env only. The
        // worker's env goes on from obs (its reset row if the episode ended), so that is the
        // row to act on; the step itself is void like any fault.
        snprintf(s_err_text(gr, j), ERR_TEXT,
                 "step returned the reward %g, beyond +-%g (n-step returns of it would "
                 "overflow float32)",
                 r, PYENV_REWARD_MAX);
        memset(nx, 0, row);
        gr->rewards[j] = 0.0f;
        gr->terminated[j] = gr->truncated[j] = 0;
        gr->status[j] = PYENV_ENV_FAULT;
        return;
    }
    s_err_text(gr, j)[0] = '\0';
    memcpy(nx, obs, row);
    gr->rewards[j] = (float)r; // finite in float32 (pywire_check_reply), and in range
    gr->terminated[j] = (f & PYWIRE_TERMINATED) != 0;
    gr->truncated[j] = (f & PYWIRE_TRUNCATED) != 0;
    gr->status[j] = PYENV_OK;
}

// Drops a RESULT that is not one group's slice; returns its group, or -1.
static int s_result_group(pyenv_t *p, const s_hdr *h) {
    int g = pywire_result_group(h, (uint32_t)p->n, (uint32_t)p->G);
    if (g < 0) {
        s_bad(p, "worker %u: a RESULT for envs %u..+%u, not one group's slice", h->worker, h->first,
              h->n_envs);
    }
    return g;
}

static void s_on_result(pyenv_t *p, const s_hdr *h, const s_msg *m) {
    s_worker *k = &p->w[h->worker];
    int g = s_result_group(p, h);
    if (g < 0) {
        return;
    }
    if (k->state != W_UP || h->nonce != k->nonce || h->seq == 0 || h->seq != k->seq[g]) {
        s_stale(p, h, h->nonce != k->nonce ? "another process" : "not the request in flight");
        return;
    }
    if (s_check_reply(p, h, m, 0) != 0) {
        return;
    }
    s_group *gr = &p->grp[g];
    const uint8_t *obs = m->f[0].data, *rw = m->f[1].data, *fl = m->f[2].data;
    const uint8_t *reset = m->f[3].data, *rec = m->f[4].data;
    for (int i = 0; i < p->n; i++) {
        double r;
        memcpy(&r, rw + 8 * (size_t)i, 8);
        const uint8_t *rr = fl[i] & PYWIRE_RESET_FLAG ? reset : NULL;
        s_stage_env(p, gr, (int)h->worker * p->n + i, fl[i], obs + (size_t)i * p->row, rr, r, &rec);
        reset += rr ? p->row : 0;
    }
    k->seq[g] = 0;
    k->got[g] = 1;
    k->fails = 0;
}

static void s_on_reset_done(pyenv_t *p, const s_hdr *h, const s_msg *m) {
    s_worker *k = &p->w[h->worker];
    if (k->state != W_RESETTING || h->nonce != k->nonce || h->seq != k->reset_seq) {
        s_stale(p, h, h->nonce != k->nonce ? "another process" : "not the RESET in flight");
        return;
    }
    if (h->n_envs != (uint32_t)p->N || h->first != 0) {
        s_bad(p, "worker %u: a RESET_DONE for %u envs from %u", h->worker, h->n_envs, h->first);
        return;
    }
    if (s_check_reply(p, h, m, 1) != 0) {
        return;
    }
    // The start observations become the rows to act on; no step happened.
    const uint8_t *obs = m->f[0].data, *fl = m->f[2].data, *rec = m->f[4].data;
    size_t row = p->row;
    for (int i = 0; i < p->N; i++) {
        s_group *gr = &p->grp[i / p->n];
        int j = (int)h->worker * p->n + i % p->n;
        uint8_t *ao = gr->act_obs + (size_t)j * row;
        memset(gr->next_obs + (size_t)j * row, 0, row);
        gr->rewards[j] = 0.0f;
        gr->terminated[j] = gr->truncated[j] = 0;
        if (fl[i] & PYWIRE_ERROR) {
            pywire_take_error(&rec, s_err_text(gr, j), ERR_TEXT);
            memset(ao, 0, row);
            gr->status[j] = PYENV_ENV_FAULT;
        } else {
            s_err_text(gr, j)[0] = '\0';
            memcpy(ao, obs + (size_t)i * row, row);
            gr->status[j] = PYENV_NO_STEP;
        }
    }
    for (int g = 0; g < p->G; g++) {
        k->fresh[g] = 1;
    }
    k->state = W_UP;
}

// An action space as the refusals name it: "3 discrete actions" or "continuous actions of 2
// floats".
static void s_actions_str(char *out, size_t cap, uint32_t n_actions, uint32_t action_dim) {
    if (action_dim > 0) {
        snprintf(out, cap, "continuous actions of %u float%s", action_dim,
                 action_dim > 1 ? "s" : "");
    } else {
        snprintf(out, cap, "%u discrete actions", n_actions);
    }
}

// Bounds as the refusals print them: "[-2, 0.5]" (float32 values, shortest %g that reads back).
static void s_bounds_str(char *out, size_t cap, const float *v, int n) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < n && k < cap; i++) {
        k += (size_t)snprintf(out + k, cap - k, i ? ", %.9g" : "%.9g", (double)v[i]);
    }
    if (k < cap) {
        snprintf(out + k, cap - k, "]");
    }
}

// A continuous HELLO's bounds against the run's ([env] action_low/high): they must be equal
// as float32, because the actor clips its actions to the run's bounds and the worker refuses
// a STEP outside the env's. 0, or -1 with the refusal in p->why.
static int s_check_bounds(pyenv_t *p, const s_hdr *h, const char *desc, const float *low,
                          const float *high) {
    int D = p->o.action_dim, same = 1;
    for (int i = 0; i < D; i++) {
        same &= low[i] == p->o.action_low[i] && high[i] == p->o.action_high[i]; // NaN: not
    }
    if (same) {
        return 0;
    }
    char tl[400], th[400], rl[400], rh[400];
    s_bounds_str(tl, sizeof tl, low, D);
    s_bounds_str(th, sizeof th, high, D);
    s_bounds_str(rl, sizeof rl, p->o.action_low, D);
    s_bounds_str(rh, sizeof rh, p->o.action_high, D);
    snprintf(
        p->why, sizeof p->why,
        "python env worker %u (%.700s) does not fit this run: its action_space is a Box "
        "with low %.200s and high %.200s (as float32); the run has [env] action_low = "
        "%.200s and action_high = %.200s\n---> HINT: set [env] action_low and action_high to the "
        "env's bounds",
        h->worker, desc, tl, th, rl, rh);
    return -1;
}

// The run's frame as the refusals name it: "[env] obs_shape is 84x84x4 (channels last)".
static void s_run_obs_str(const pyenv_t *p, char *out, size_t cap) {
    const pyenv_opts_t *o = &p->o;
    if (o->obs_h == 0) {
        snprintf(out, cap, "[env] obs_dim is %d (a vector, no obs_shape: the shape (%d,))",
                 o->obs_dim, o->obs_dim);
    } else if (o->obs_layout == CONFIG_OBS_CHW) {
        snprintf(out, cap,
                 "[env] obs_shape is %dx%dx%d with obs_layout = chw (channels first: the shape "
                 "(%d, %d, %d), transposed by the worker)",
                 o->obs_h, o->obs_w, o->obs_c, o->obs_c, o->obs_h, o->obs_w);
    } else {
        snprintf(out, cap, "[env] obs_shape is %dx%dx%d (channels last: the shape (%d, %d, %d))",
                 o->obs_h, o->obs_w, o->obs_c, o->obs_h, o->obs_w, o->obs_c);
    }
}

// What to do about an observation shape that is not the run's frame (the refusal's HINT).
static const char *s_shape_hint(const pyenv_t *p, const s_hdr *h) {
    const pyenv_opts_t *o = &p->o;
    if (o->obs_h == 0) {
        return h->ndim > 1 ? "give the run the env's shape, [env] obs_shape = HxWxC (channels "
                             "last; obs_layout = chw for channels first), or flatten the "
                             "observations in the env (Gymnasium's FlattenObservation)"
                           : "set [env] obs_dim to the env's observation length";
    }
    uint32_t H = (uint32_t)o->obs_h, W = (uint32_t)o->obs_w, C = (uint32_t)o->obs_c;
    int chw = o->obs_layout == CONFIG_OBS_CHW;
    if (pywire_obs_fits(h, 0, H, W, C, chw ? PYWIRE_LAYOUT_AS_IS : PYWIRE_LAYOUT_CHW)) {
        return chw ? "the env's observations are channels last already: [env] obs_layout = hwc"
                   : "the env's observations are channels first: set [env] obs_layout = chw "
                     "and the workers transpose each one to channels last; for frames the env "
                     "stacks itself (Gymnasium's FrameStackObservation), emitting single frames "
                     "and setting [env] frame_stack = K is the better way (the bridge then "
                     "carries one frame a step)";
    }
    return "set [env] obs_shape (HxWxC, channels last; obs_layout = chw for channels first) to "
           "the env's observation_space, or reshape the env's observations";
}

// The HELLO's spaces against the run's; 0, or -1 with the refusal in p->why.
static int s_check_spaces(pyenv_t *p, const s_hdr *h, const char *desc) {
    uint64_t elems = pywire_hello_elements(h);
    char theirs[64] = "(invalid)", ours[64], their_act[64], our_act[64], run[256];
    if (elems) {
        pywire_shape_str(theirs, sizeof theirs, h->ndim, h->shape);
    }
    if (elems != (uint64_t)p->o.obs_dim || h->dtype != p->sp.dtype ||
        h->n_actions != p->sp.n_actions || h->action_dim != p->sp.action_dim) {
        s_actions_str(their_act, sizeof their_act, h->n_actions, h->action_dim);
        if (p->o.action_dim > 0) {
            snprintf(our_act, sizeof our_act, "continuous actions of %d float%s ([env] action_dim)",
                     p->o.action_dim, p->o.action_dim > 1 ? "s" : "");
        } else {
            snprintf(our_act, sizeof our_act, "%d actions ([env] n_actions)", p->o.n_actions);
        }
        if (p->o.obs_h == 0) { // a vector run: the words of before images were checked
            snprintf(run, sizeof run, "%d %s elements per observation ([env] obs_dim, obs_dtype)",
                     p->o.obs_dim, pywire_dtype_name(p->sp.dtype));
        } else {
            snprintf(run, sizeof run,
                     "%s observations of shape %dx%dx%d, %s ([env] obs_shape, %s"
                     "obs_dtype)",
                     pywire_dtype_name(p->sp.dtype), p->o.obs_h, p->o.obs_w, p->o.obs_c,
                     p->o.obs_layout == CONFIG_OBS_CHW ? "sent channels first" : "channels last",
                     p->o.obs_layout == CONFIG_OBS_CHW ? "obs_layout, " : "");
        }
        int obs_ok = elems == (uint64_t)p->o.obs_dim;
        snprintf(p->why, sizeof p->why,
                 "python env worker %u (%s) does not fit this run: it has %s observations of "
                 "shape %s (%llu elements) and %s; the run expects %s and %s%s%s",
                 h->worker, desc, pywire_dtype_name(h->dtype), theirs, (unsigned long long)elems,
                 their_act, run, our_act,
                 obs_ok && h->dtype != p->sp.dtype && h->dtype != PYWIRE_DT_OTHER
                     ? "\n---> HINT: set [env] obs_dtype = "
                     : "",
                 obs_ok && h->dtype != p->sp.dtype && h->dtype != PYWIRE_DT_OTHER
                     ? pywire_dtype_name(h->dtype)
                     : "");
        return -1;
    }
    if (!pywire_obs_fits(h, (uint32_t)p->o.obs_dim, (uint32_t)p->o.obs_h, (uint32_t)p->o.obs_w,
                         (uint32_t)p->o.obs_c, p->sp.layout)) {
        // The same number of elements in another shape: read as the run's frame, a channels-
        // first image would be garbage that trains, so it is refused.
        s_run_obs_str(p, run, sizeof run);
        snprintf(p->why, sizeof p->why,
                 "python env worker %u (%s) does not fit this run: the env's observation_space "
                 "is %s %s; the run's %s\n---> HINT: %s",
                 h->worker, desc, theirs, pywire_dtype_name(h->dtype), run, s_shape_hint(p, h));
        return -1;
    }
    if (h->layout != p->sp.layout) {
        snprintf(p->why, sizeof p->why,
                 "python env worker %u (%s) does not fit this run: it %s; the run's [env] "
                 "obs_layout is %s\n---> HINT: %s",
                 h->worker, desc,
                 h->layout == PYWIRE_LAYOUT_AS_IS ? "sends its env's observations as they are"
                 : h->layout == PYWIRE_LAYOUT_CHW
                     ? "transposes its env's observations from channels first (it was "
                       "started with --obs-layout chw)"
                     : "declares an unknown observation layout",
                 p->sp.layout == PYWIRE_LAYOUT_CHW ? "chw" : "hwc",
                 p->sp.layout == PYWIRE_LAYOUT_CHW
                     ? "a worker started by hand needs --obs-layout chw, and python/apex_env.py "
                       "of this apex (one of before obs_layout cannot transpose)"
                     : "start the worker without --obs-layout chw, or set [env] obs_layout = chw");
        return -1;
    }
    if (h->n_envs != (uint32_t)p->N) {
        snprintf(p->why, sizeof p->why,
                 "python env worker %u (%s) has %u envs; this actor's workers have %d "
                 "(--num-envs)",
                 h->worker, desc, h->n_envs, p->N);
        return -1;
    }
    if (p->have_shape &&
        (h->ndim != p->sp.ndim || memcmp(h->shape, p->sp.shape, sizeof p->sp.shape) != 0)) {
        pywire_shape_str(ours, sizeof ours, p->sp.ndim, p->sp.shape);
        snprintf(p->why, sizeof p->why,
                 "python env worker %u (%s) has observations of shape %s, the other workers %s",
                 h->worker, desc, theirs, ours);
        return -1;
    }
    return 0;
}

// Refuses a HELLO whose spaces do not fit: at start-up that fails pyenv_new.
static void s_refuse_hello(pyenv_t *p, const s_hdr *h, const s_msg *m, int level) {
    if (p->starting && !p->startup_error[0]) {
        snprintf(p->startup_error, sizeof p->startup_error, "%s", p->why);
    } else if (!p->starting) {
        log_every(&p->refuse_log, LOG_INTERVAL_MS, level, "%s", p->why);
    }
    s_refuse(p, m, h->worker, h->nonce, p->why);
}

static void s_on_hello(pyenv_t *p, const s_hdr *h, const s_msg *m) {
    // [text], and a continuous action space's [bounds] after it.
    if (m->nf != 1 + (h->action_dim > 0) || m->f[0].len > TEXT_MAX) {
        s_bad(p, "a HELLO of %d frames (action_dim %u)", m->nf + 1, h->action_dim);
        return;
    }
    float low[PYWIRE_MAX_ACTION_DIM], high[PYWIRE_MAX_ACTION_DIM];
    if (h->action_dim > 0 &&
        pywire_hello_bounds(h, &m->f[1], low, high, p->why, sizeof p->why) != APEX_OK) {
        s_bad_why(p);
        return;
    }
    char desc[TEXT_MAX + 1];
    pywire_copy_text(desc, sizeof desc, m->f[0].data, m->f[0].len);
    const uint8_t *rid = m->rid;
    size_t rid_len = m->rid_len;
    s_worker *k = &p->w[h->worker];
    if (h->nonce == k->nonce && k->nonce != 0 && (k->state == W_RESETTING || k->state == W_UP)) {
        // A repeated HELLO of a worker we know (it was idle, or reconnected): keep going. A
        // local worker's message has no routing id (rid NULL, which memcpy must not get).
        if (rid_len) {
            memcpy(k->rid, rid, rid_len);
        }
        k->rid_len = rid_len;
        return;
    }
    if (s_check_spaces(p, h, desc) != 0 ||
        (h->action_dim > 0 && s_check_bounds(p, h, desc, low, high) != 0)) {
        s_refuse_hello(p, h, m, LOG_ERROR);
        return;
    }
    if (p->o.spawn && (k->state != W_STARTING || h->seq != (uint64_t)k->pid)) {
        snprintf(p->why, sizeof p->why,
                 "worker id %u is one this actor spawns itself (pid %d, %s); a HELLO from "
                 "pid %llu (%s) is refused",
                 h->worker, (int)k->pid, s_state_name[k->state], (unsigned long long)h->seq, desc);
        s_refuse_hello(p, h, m, LOG_WARN);
        return;
    }
    if (!p->o.spawn && (k->state == W_RESETTING || k->state == W_UP)) {
        // Another process took this id: the newer one wins (a worker restarted by hand);
        // the old one is told, so that two workers with one id do not take turns.
        s_msg old = {.rid = k->rid, .rid_len = k->rid_len};
        s_refuse(p, &old, h->worker, k->nonce,
                 "a newer worker process connected with the same --worker-id");
        k->rid_len = 0; // s_lost must not reset the old one
        s_lost(p, (int)h->worker, "replaced by a newer process with the same id");
    }
    if (!p->have_shape) {
        p->sp.ndim = h->ndim;
        memcpy(p->sp.shape, h->shape, sizeof p->sp.shape);
        p->have_shape = 1;
    }
    if (rid_len) {
        memcpy(k->rid, rid, rid_len);
    }
    k->rid_len = rid_len;
    k->nonce = h->nonce;
    snprintf(k->desc, sizeof k->desc, "%s", desc);
    p->st.hellos++;
    log_info("worker %u: HELLO: %s", h->worker, desc);
    s_send_reset(p, (int)h->worker);
}

// A header that did not parse (rc, the reason in p->why; w: the local worker whose pipe it
// came through, or -1 for the ZeroMQ socket): dropped like any bad message. One of another
// bridge version is an apex_env.py of another apex ([python] script, or a worker started by
// hand). Through a spawned worker's own pipe it can only be that worker's, so while pyenv_new
// waits it fails the start-up at once, with that reason; on the socket, which anyone may
// send garbage to, it is kept for the message of a start-up that times out.
static void s_bad_header(pyenv_t *p, int rc, int w) {
    if (rc == APEX_EVERSION && p->starting && w >= 0 && !p->startup_error[0]) {
        snprintf(p->startup_error, sizeof p->startup_error,
                 "python env worker %d (%.200s %.200s) sent %.1500s", w, p->o.python, p->o.script,
                 p->why);
    } else if (rc == APEX_EVERSION) {
        snprintf(p->version_note, sizeof p->version_note, "%.500s", p->why);
    }
    s_bad_why(p);
}

// Dispatches a message whose header h was parsed and whose worker id is in range.
static void s_handle(pyenv_t *p, const s_hdr *h, const s_msg *m) {
    if (h->type == PYWIRE_HELLO) {
        s_on_hello(p, h, m);
    } else if (h->type == PYWIRE_RESULT) {
        s_on_result(p, h, m);
    } else if (h->type == PYWIRE_RESET_DONE) {
        s_on_reset_done(p, h, m);
    } else {
        s_bad(p, "a message of type %u from worker %u", h->type, h->worker);
    }
}

// ZeroMQ: checks and dispatches the message in p->frames[0 .. nf) (more: frames were left
// over): [routing id][header][payload frames].
static void s_dispatch(pyenv_t *p, int nf, int more) {
    s_hdr h;
    int rc;
    if (more) {
        net_drain_more(p->sock);
        s_bad(p, "a message of more than %d frames", MAX_FRAMES - 1);
    } else if (nf < 2 || nf - 2 > PYLOCAL_FRAMES || s_fsize(p, 0) > RID_MAX) {
        s_bad(p, "a message of %d frames", nf - 1);
    } else if ((rc = pywire_parse_header(s_fdata(p, 1), s_fsize(p, 1), &h, p->why,
                                         sizeof p->why)) != APEX_OK) {
        s_bad_header(p, rc, -1);
    } else if (h.worker >= (uint32_t)p->W) {
        s_bad(p, "a message of worker %u (this actor has workers 0..%d)", h.worker, p->W - 1);
    } else {
        s_msg m = {.rid = s_fdata(p, 0), .rid_len = s_fsize(p, 0), .nf = nf - 2};
        for (int i = 0; i < m.nf; i++) {
            m.f[i] = (pywire_frame_t){s_fdata(p, 2 + i), s_fsize(p, 2 + i)};
        }
        s_handle(p, &h, &m);
    }
}

// Local: the message whose header came through worker w's pipe; its frames are in w's
// reply region of the message's group (a RESULT) or region 0 (HELLO, RESET_DONE), and are
// copied out before anything looks at them.
static void s_dispatch_local(pyenv_t *p, int w, const uint8_t *raw) {
    s_hdr h;
    int rc = pywire_parse_header(raw, PYWIRE_HEADER_BYTES, &h, p->why, sizeof p->why);
    if (rc != APEX_OK) {
        s_bad_header(p, rc, w);
        return;
    }
    if (h.worker != (uint32_t)w) {
        s_bad(p, "worker %d's pipe carried a message of worker %u", w, h.worker);
        return;
    }
    int region = 0;
    if (h.type == PYWIRE_RESULT) {
        region = s_result_group(p, &h);
        if (region < 0) {
            return;
        }
    } else if (h.type != PYWIRE_HELLO && h.type != PYWIRE_RESET_DONE) {
        s_bad(p, "a message of type %u from worker %u", h.type, h.worker);
        return;
    }
    s_msg m = {.nf = PYLOCAL_FRAMES};
    if (pylocal_take_frames(&p->w[w].local, region, p->scratch, m.f, p->why, sizeof p->why) != 0) {
        s_bad(p, "worker %d: %.900s", w, p->why);
        return;
    }
    if (h.type == PYWIRE_HELLO) {
        m.nf = 1; // the text; the other lengths must be 0
        for (int i = 1; i < PYLOCAL_FRAMES; i++) {
            m.nf = m.f[i].len ? i + 1 : m.nf;
        }
    }
    s_handle(p, &h, &m);
}

static void s_drain_local(pyenv_t *p) {
    uint8_t raw[PYWIRE_HEADER_BYTES];
    for (int w = 0; w < p->W; w++) {
        s_worker *k = &p->w[w];
        for (int m = 0; m < MAX_DRAIN && pylocal_is_open(&k->local); m++) {
            int rc = pylocal_recv_header(&k->local, raw, p->why, sizeof p->why);
            if (rc < 0) {
                char how[sizeof p->why];
                snprintf(how, sizeof how, "%s", p->why);
                s_lost(p, w, how);
            }
            if (rc <= 0) {
                break;
            }
            s_dispatch_local(p, w, raw);
        }
    }
}

// Receives and handles up to MAX_DRAIN messages, and the CURVE handshakes waiting.
static void s_drain(pyenv_t *p) {
    if (p->local) {
        s_drain_local(p);
        return;
    }
    while (p->sec && security_zap_handle(p->sec)) {
    }
    for (int m = 0; m < MAX_DRAIN; m++) {
        int nf = 0, more = 1;
        while (more && nf < MAX_FRAMES) {
            zmq_msg_init(&p->frames[nf]);
            if (zmq_msg_recv(&p->frames[nf], p->sock, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close(&p->frames[nf]);
                break; // EAGAIN (a multipart message arrives whole, so only before frame 0)
            }
            more = zmq_msg_more(&p->frames[nf]);
            nf++;
        }
        if (nf == 0) {
            return;
        }
        s_dispatch(p, nf, more);
        s_close_frames(p, nf);
    }
}

// Waits up to wait_ms for a message. group >= 0 (a recv of that group, local transport):
// only for the reply of ONE worker that still owes it, the last in index order, not for
// any worker's. A reply written while the actor sleeps on that worker's pipe alone wakes
// nobody, and the drain after the wake-up takes it for free. Waking the actor once per group
// instead of once per reply is what the bridge's overlap needs on a busy machine: each
// wake-up of a sleeping actor costs the writing worker a cross-CPU interrupt and the worker
// it preempts a context switch, ~10-20 us of CPU on a VM (bench_pyenv W=2, G=2: 0.59-0.64x
// -> 0.71-0.74x the plain loop; docs/performance.md). Nothing waits longer for it: the group
// is not complete before that worker replies, the others' messages (other groups, HELLOs,
// EOFs) are drained at every wake-up, and the wait is at most CHILD_CHECK_MS.
static void s_poll(pyenv_t *p, int64_t wait_ms, int group) {
    if (p->o.spawn && wait_ms > CHILD_CHECK_MS) {
        wait_ms = CHILD_CHECK_MS; // deaths are seen by waitpid, not by the socket
    }
    if (p->local) {
        int n = 0, only = -1;
        for (int w = 0; group >= 0 && w < p->W; w++) {
            if (p->w[w].seq[group] && pylocal_is_open(&p->w[w].local)) {
                only = w;
            }
        }
        for (int w = 0; w < p->W; w++) {
            if (pylocal_is_open(&p->w[w].local) && (only < 0 || w == only)) {
                p->pfd[n++] = (struct pollfd){.fd = pylocal_read_fd(&p->w[w].local),
                                              .events = POLLIN};
            }
        }
        if (poll(p->pfd, (nfds_t)n, (int)wait_ms) < 0 && errno != EINTR) {
            log_every(&p->bad_log, LOG_INTERVAL_MS, LOG_ERROR, "poll: %s", strerror(errno));
        }
        return;
    }
    zmq_pollitem_t items[2] = {
        {.socket = p->sock, .events = ZMQ_POLLIN},
        {.socket = p->sec ? security_zap_socket(p->sec) : NULL, .events = ZMQ_POLLIN}};
    int n = items[1].socket ? 2 : 1;
    if (zmq_poll(items, n, (long)wait_ms) < 0 && errno != EINTR) {
        log_every(&p->bad_log, LOG_INTERVAL_MS, LOG_ERROR, "zmq_poll: %s", zmq_strerror(errno));
    }
}

// ---------------------------------------------------------------------------------------
// Start-up

void pyenv_opts_defaults(pyenv_opts_t *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->bind, sizeof o->bind, "tcp://127.0.0.1:*");
    o->workers = o->envs_per_worker = o->groups = 1;
    o->spawn = 1;
    snprintf(o->python, sizeof o->python, "/usr/bin/python3");
    snprintf(o->script, sizeof o->script, "python/apex_env.py");
    o->obs_dtype = CONFIG_OBS_FLOAT32;
    o->hello_timeout_ms = 30000;
    o->actor_index = -1;
    o->transport = PYENV_LOCAL;
}

static int s_check_opts(const pyenv_opts_t *o) {
    const char *bad = NULL;
    if (o->workers < 1 || o->workers > PYENV_MAX_WORKERS) {
        bad = "workers must be in 1 .. 256";
    } else if (o->envs_per_worker < 1 || o->envs_per_worker > PYENV_MAX_ENVS_PER_WORKER) {
        bad = "envs_per_worker must be in 1 .. 4096";
    } else if (o->groups < 1 || o->envs_per_worker % o->groups != 0) {
        bad = "groups must be >= 1 and divide envs_per_worker";
    } else if (o->obs_dim < 1 || (o->n_actions >= 1) == (o->action_dim >= 1) || o->n_actions < 0 ||
               o->action_dim < 0 || o->action_dim > PYWIRE_MAX_ACTION_DIM) {
        bad = "obs_dim must be >= 1, and one of n_actions (discrete) and action_dim "
              "(continuous, at most 64) >= 1, the other 0";
    } else if (o->obs_dtype != CONFIG_OBS_FLOAT32 && o->obs_dtype != CONFIG_OBS_UINT8) {
        bad = "obs_dtype must be float32 or uint8";
    } else if (o->obs_h < 0 || o->obs_w < 0 || o->obs_c < 0 ||
               (o->obs_h > 0 && (int64_t)o->obs_h * o->obs_w * o->obs_c != o->obs_dim) ||
               (o->obs_h == 0 && (o->obs_w != 0 || o->obs_c != 0))) {
        bad = "obs_h x obs_w x obs_c must be obs_dim (or all three 0: a vector of obs_dim)";
    } else if (o->obs_layout != CONFIG_OBS_HWC &&
               (o->obs_layout != CONFIG_OBS_CHW || o->obs_h == 0)) {
        bad = "obs_layout must be hwc, or chw with an image shape (obs_h, obs_w, obs_c)";
    } else if (o->hello_timeout_ms < 1) {
        bad = "hello_timeout_ms must be >= 1";
    } else if (o->spawn && (!o->make[0] || !strchr(o->make, ':'))) {
        bad = "make must be MODULE:CALLABLE";
    } else if (o->transport == PYENV_LOCAL && !o->spawn) {
        bad = "the local transport (pipes and shared memory) is for workers the actor spawns; "
              "workers started by hand connect over ZeroMQ (transport zmq)";
    }
    if (bad) {
        log_error("python env bridge: %s", bad);
        return -1;
    }
    if (o->spawn && access(o->python, X_OK) != 0) {
        log_error("python env bridge: the interpreter %s: %s (a path: no PATH search)", o->python,
                  strerror(errno));
        return -1;
    }
    if (o->spawn && access(o->script, R_OK) != 0) {
        log_error("python env bridge: the worker script %s: %s\n---> HINT: it is "
                  "python/apex_env.py of the apex source tree",
                  o->script, strerror(errno));
        return -1;
    }
    return 0;
}

static void s_alloc(pyenv_t *p) {
    p->w = xcalloc((size_t)p->W, sizeof *p->w);
    for (int w = 0; w < p->W; w++) {
        s_worker *k = &p->w[w];
        k->seq = xcalloc((size_t)p->G, sizeof *k->seq);
        k->got = xcalloc((size_t)p->G, 1);
        k->fresh = xcalloc((size_t)p->G, 1);
        k->synced = xcalloc((size_t)p->G, 1);
    }
    p->grp = xcalloc((size_t)p->G, sizeof *p->grp);
    size_t GE = (size_t)p->GE, et = ERR_TEXT;
    for (int g = 0; g < p->G; g++) {
        s_group *gr = &p->grp[g];
        gr->next_obs = xcalloc(GE, p->row);
        gr->act_obs = xcalloc(GE, p->row);
        gr->rewards = xcalloc(GE, sizeof(float));
        gr->terminated = xcalloc(GE, 1);
        gr->truncated = xcalloc(GE, 1);
        gr->status = xcalloc(GE, 1);
        gr->err = xcalloc(GE, et);
        gr->err_out = xcalloc(GE, et);
        gr->recv_due = 1;
    }
    p->ep_ret = xcalloc((size_t)p->E, sizeof(double));
    p->ep_len = xcalloc((size_t)p->E, sizeof(int32_t));
    p->done_cap = p->E * 4 > 1024 ? p->E * 4 : 1024;
    p->done = xcalloc((size_t)p->done_cap, sizeof *p->done);
    p->seeds = xcalloc((size_t)p->N, sizeof(uint64_t));
    p->next_seq = 1;
    if (p->local) {
        p->scratch = xmalloc(pylocal_reply_bytes(p->N, p->row));
        p->pfd = xcalloc((size_t)p->W, sizeof *p->pfd);
    }
}

// The endpoint spawned workers connect to: the bound one, with a wildcard address made
// the loopback address.
static void s_connect_endpoint(pyenv_t *p) {
    if (p->o.connect[0]) {
        snprintf(p->connect_ep, sizeof p->connect_ep, "%s", p->o.connect);
        return;
    }
    const char *any = strstr(p->endpoint, "://0.0.0.0:");
    if (any) {
        snprintf(p->connect_ep, sizeof p->connect_ep, "%.*s://127.0.0.1:%s",
                 (int)(any - p->endpoint), p->endpoint, any + strlen("://0.0.0.0:"));
    } else {
        snprintf(p->connect_ep, sizeof p->connect_ep, "%s", p->endpoint);
    }
}

// CURVE: the actor's key pair serves; the allow-list may be the bridge's own.
static int s_security(pyenv_t *p, const apex_config_t *cfg) {
    if (!cfg || cfg->security.mode != SECURITY_CURVE) {
        return 0;
    }
    apex_config_t *c = xmalloc(sizeof *c);
    *c = *cfg;
    if (p->o.curve_authorized_keys[0]) {
        snprintf(c->security.authorized_keys, sizeof c->security.authorized_keys, "%s",
                 p->o.curve_authorized_keys);
    }
    p->sec = security_new(p->ctx, c, "actor", p->o.actor_index, 1);
    if (p->sec && !p->o.curve_worker_key[0]) {
        snprintf(p->o.curve_worker_key, sizeof p->o.curve_worker_key, "%.200s/envworker.key",
                 c->security.key_dir);
    }
    free(c);
    if (!p->sec) {
        return -1;
    }
    snprintf(p->server_key_arg, sizeof p->server_key_arg, "--curve-server-key=%s",
             security_public_key(p->sec));
    snprintf(p->secret_arg, sizeof p->secret_arg, "--curve-secret=%s", p->o.curve_worker_key);
    if (p->o.spawn && access(p->o.curve_worker_key, R_OK) != 0) {
        log_error("python env bridge: the workers' key %s: %s\n---> HINT: bin/apex-keygen "
                  "<key_dir> envworker, and add envworker.pub's key to the allow-list",
                  p->o.curve_worker_key, strerror(errno));
        return -1;
    }
    return 0;
}

static int s_open(pyenv_t *p, const apex_config_t *cfg) {
    if (p->local) { // one memfd per worker, kept across its restarts; pipes per process
        size_t req = pylocal_request_bytes(p->N, p->o.action_dim),
               rep = pylocal_reply_bytes(p->N, p->row);
        for (int w = 0; w < p->W; w++) {
            if (pylocal_init(&p->w[w].local, p->G, req, rep) != 0) {
                return -1;
            }
            snprintf(p->w[w].local_arg, sizeof p->w[w].local_arg, "3,4,5,%zu,%zu,%d",
                     p->w[w].local.req_bytes, p->w[w].local.rep_bytes, p->G);
        }
        snprintf(p->endpoint, sizeof p->endpoint, "local (pipes and shared memory)");
        return 0;
    }
    p->ctx = zmq_ctx_new();
    if (!p->ctx || s_security(p, cfg) != 0) {
        return -1;
    }
    // The largest legal frame: a RESET_DONE's N observations, or N full error records.
    size_t max_frame = (size_t)p->N *
                       (p->row > 8 + PYENV_ERR_TEXT_MAX ? p->row : 8 + PYENV_ERR_TEXT_MAX);
    net_opts_t no = {.max_msg_bytes = (int64_t)(max_frame + TEXT_MAX)};
    p->sock = net_socket(p->ctx, ZMQ_ROUTER, &no);
    int one = 1;
    if (!p->sock || zmq_setsockopt(p->sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one) != 0 ||
        (p->sec && security_server(p->sec, p->sock) != 0) ||
        net_bind(p->sock, p->o.bind, p->endpoint, sizeof p->endpoint) != 0) {
        return -1;
    }
    s_connect_endpoint(p);
    return 0;
}

static void s_build_argv(pyenv_t *p, int w) {
    s_worker *k = &p->w[w];
    snprintf(k->id_arg, sizeof k->id_arg, "%d", w);
    int a = 0;
    char **v = k->argv;
    v[a++] = p->o.python;
    v[a++] = p->o.script;
    if (p->local) {
        v[a++] = "--local";
        v[a++] = k->local_arg;
    } else {
        v[a++] = "--connect";
        v[a++] = p->connect_ep;
    }
    v[a++] = "--make";
    v[a++] = p->o.make;
    v[a++] = "--num-envs";
    v[a++] = p->n_arg;
    v[a++] = "--worker-id";
    v[a++] = k->id_arg;
    if (p->o.kwargs[0]) {
        v[a++] = "--kwargs";
        v[a++] = p->o.kwargs;
    }
    if (p->o.obs_layout == CONFIG_OBS_CHW) { // without it the worker sends layout 0: refused
        v[a++] = "--obs-layout";
        v[a++] = "chw";
    }
    if (p->sec) {
        v[a++] = p->server_key_arg;
        v[a++] = p->secret_arg;
    }
    v[a] = NULL;
    APEX_ASSERT(a < MAX_ARGS);
}

static int s_all_up(const pyenv_t *p) {
    for (int w = 0; w < p->W; w++) {
        if (p->w[w].state != W_UP) {
            return 0;
        }
    }
    return 1;
}

// Waits for every worker's HELLO and first RESET_DONE; 0, or -1 after logging why.
static int s_wait_ready(pyenv_t *p) {
    p->starting = 1;
    int64_t deadline = clock_now_ms() + p->o.hello_timeout_ms;
    for (;;) {
        s_drain(p);
        p->next_check_ms = 0; // children are looked at every turn while starting
        s_service(p);
        int64_t now = clock_now_ms();
        if (s_all_up(p) || p->startup_error[0] || now >= deadline) {
            break;
        }
        s_poll(p, deadline - now, -1);
    }
    p->starting = 0;
    if (p->startup_error[0]) {
        log_error("%s", p->startup_error);
        return -1;
    }
    if (!s_all_up(p)) {
        char list[512] = "";
        size_t k = 0;
        for (int w = 0; w < p->W && k < sizeof list; w++) {
            if (p->w[w].state != W_UP) {
                k += (size_t)snprintf(list + k, sizeof list - k, "%s%d (%s)", k ? ", " : "", w,
                                      s_state_name[p->w[w].state]);
            }
        }
        log_error("python env bridge at %s: workers %s not ready after %lld ms%s%s%s", p->endpoint,
                  list, (long long)p->o.hello_timeout_ms,
                  p->version_note[0] ? "; a peer sent " : "", p->version_note,
                  p->o.spawn ? ""
                             : "\n---> HINT: start them with python3 python/apex_env.py "
                               "--connect <this endpoint> --worker-id K ...");
        return -1;
    }
    return 0;
}

pyenv_t *pyenv_new(const pyenv_opts_t *opts) {
    if (s_check_opts(opts) != 0) {
        return NULL;
    }
    pyenv_t *p = xcalloc(1, sizeof *p);
    p->o = *opts;
    p->o.cfg = NULL; // borrowed for the start-up only
    p->W = opts->workers;
    p->N = opts->envs_per_worker;
    p->G = opts->groups;
    p->n = p->N / p->G;
    p->E = p->W * p->N;
    p->GE = p->E / p->G;
    p->sp.dtype = opts->obs_dtype == CONFIG_OBS_UINT8 ? PYWIRE_DT_UINT8 : PYWIRE_DT_FLOAT32;
    p->sp.n_actions = (uint32_t)opts->n_actions;
    p->sp.action_dim = (uint16_t)opts->action_dim;
    p->sp.layout = opts->obs_layout == CONFIG_OBS_CHW ? PYWIRE_LAYOUT_CHW : PYWIRE_LAYOUT_AS_IS;
    p->row = (size_t)opts->obs_dim * (p->sp.dtype == PYWIRE_DT_UINT8 ? 1 : 4);
    p->sp.row_bytes = p->row;
    p->local = opts->transport == PYENV_LOCAL;
    snprintf(p->n_arg, sizeof p->n_arg, "%d", p->N);
    s_alloc(p);
    if (s_open(p, opts->cfg) != 0) {
        pyenv_destroy(&p);
        return NULL;
    }
    for (int w = 0; w < p->W && p->o.spawn; w++) {
        s_build_argv(p, w);
        s_spawn(p, w);
    }
    if (s_wait_ready(p) != 0) {
        pyenv_destroy(&p);
        return NULL;
    }
    char shape[64];
    pywire_shape_str(shape, sizeof shape, p->sp.ndim, p->sp.shape);
    char acts[64]; // "2 actions" as before continuous actions, for discrete runs
    if (p->sp.action_dim > 0) {
        s_actions_str(acts, sizeof acts, 0, p->sp.action_dim);
    } else {
        snprintf(acts, sizeof acts, "%d actions", p->o.n_actions);
    }
    log_info("python env bridge at %s: %d worker%s x %d envs (%s %s%s, %s), %d group%s of %d%s",
             p->endpoint, p->W, p->W > 1 ? "s" : "", p->N, pywire_dtype_name(p->sp.dtype), shape,
             p->sp.layout == PYWIRE_LAYOUT_CHW ? " sent channels last" : "", acts, p->G,
             p->G > 1 ? "s" : "", p->GE, p->sec ? ", CURVE" : "");
    return p;
}

void pyenv_destroy(pyenv_t **self_p) {
    if (!self_p || !*self_p) {
        return;
    }
    pyenv_t *p = *self_p;
    for (int w = 0; p->w && w < p->W; w++) {
        s_worker *k = &p->w[w];
        if (k->pid > 0) {
            child_kill_wait(k->pid);
        }
        free(k->seq);
        free(k->got);
        free(k->fresh);
        free(k->synced);
        pylocal_fini(&k->local);
    }
    free(p->scratch);
    free(p->pfd);
    net_close(&p->sock);
    security_destroy(&p->sec);
    if (p->ctx) {
        zmq_ctx_term(p->ctx);
    }
    for (int g = 0; p->grp && g < p->G; g++) {
        s_group *gr = &p->grp[g];
        free(gr->next_obs);
        free(gr->act_obs);
        free(gr->rewards);
        free(gr->terminated);
        free(gr->truncated);
        free(gr->status);
        free(gr->err);
        free(gr->err_out);
    }
    free(p->grp);
    free(p->w);
    free(p->ep_ret);
    free(p->ep_len);
    free(p->done);
    free(p->seeds);
    free(p);
    *self_p = NULL;
}

// ---------------------------------------------------------------------------------------
// Stepping

int pyenv_group_size(const pyenv_t *self) { return self->GE; }
int pyenv_groups(const pyenv_t *self) { return self->G; }

// Sends group's actions (GE rows of bytes_per_env, element-major) to every worker that is
// up and synced: its n rows, one STEP.
static int s_send_group(pyenv_t *p, int group, const void *actions, size_t bytes_per_env) {
    s_group *gr = &p->grp[group];
    APEX_ASSERT(!gr->recv_due); // each group alternates recv and send, starting with a recv
    gr->recv_due = 1;
    int sent = 0;
    for (int w = 0; w < p->W; w++) {
        s_worker *k = &p->w[w];
        if (k->state != W_UP || !k->synced[group]) {
            continue;
        }
        s_hdr h;
        uint64_t seq = p->next_seq++;
        s_header(p, &h, PYWIRE_STEP, w, (uint32_t)p->n, seq, (uint32_t)(group * p->n));
        const uint8_t *rows = (const uint8_t *)actions + (size_t)w * p->n * bytes_per_env;
        if (s_send_w(p, w, &h, rows, (size_t)p->n * bytes_per_env) != 0) {
            s_lost(p, w, p->why);
            continue;
        }
        k->seq[group] = seq;
        sent += p->n;
    }
    return sent;
}

int pyenv_send_actions(pyenv_t *p, int group, const int32_t *actions) {
    APEX_ASSERT(group >= 0 && group < p->G && p->o.action_dim == 0);
    for (int j = 0; j < p->GE; j++) {
        APEX_ASSERT(actions[j] >= 0 && actions[j] < p->o.n_actions);
    }
    return s_send_group(p, group, actions, sizeof(int32_t));
}

int pyenv_send_cont(pyenv_t *p, int group, const float *actions) {
    const int D = p->o.action_dim;
    APEX_ASSERT(group >= 0 && group < p->G && D > 0);
    // The worker ignores a STEP with an action outside its Box (and the actor would lose it
    // at the deadline): the caller's clipping is what keeps every action inside.
    for (int j = 0; j < p->GE; j++) {
        for (int i = 0; i < D; i++) {
            float a = actions[(size_t)j * D + i];
            APEX_ASSERT(a >= p->o.action_low[i] && a <= p->o.action_high[i]); // NaN fails
        }
    }
    return s_send_group(p, group, actions, (size_t)D * sizeof(float));
}

// The group's recv may return: no reply owed, and something to hand out (or nobody up).
static int s_group_done(const pyenv_t *p, int g) {
    int delivering = 0;
    for (int w = 0; w < p->W; w++) {
        const s_worker *k = &p->w[w];
        if (k->seq[g]) {
            return 0;
        }
        delivering |= k->got[g] | k->fresh[g];
    }
    return delivering;
}

// Copies worker w's staged rows of group g into out (or zeros, NO_STEP) and keeps the
// episode counters. Returns the number of OK envs.
static int s_deliver(pyenv_t *p, int g, int w, const pyenv_results_t *out) {
    s_worker *k = &p->w[w];
    s_group *gr = &p->grp[g];
    int j0 = w * p->n, n = p->n, ok = 0;
    size_t row = p->row, et = ERR_TEXT, off = (size_t)j0 * row;
    uint8_t *nx = (uint8_t *)out->next_obs + off, *ao = (uint8_t *)out->obs_to_act_on + off;
    int have = k->got[g] || k->fresh[g];
    k->synced[g] = (uint8_t)have;
    k->got[g] = k->fresh[g] = 0;
    if (!have) {
        memset(nx, 0, (size_t)n * row);
        memset(ao, 0, (size_t)n * row);
        memset(out->rewards + j0, 0, (size_t)n * sizeof(float));
        memset(out->terminated + j0, 0, (size_t)n);
        memset(out->truncated + j0, 0, (size_t)n);
        memset(out->status + j0, PYENV_NO_STEP, (size_t)n);
    } else {
        memcpy(nx, gr->next_obs + off, (size_t)n * row);
        memcpy(ao, gr->act_obs + off, (size_t)n * row);
        memcpy(out->rewards + j0, gr->rewards + j0, (size_t)n * sizeof(float));
        memcpy(out->terminated + j0, gr->terminated + j0, (size_t)n);
        memcpy(out->truncated + j0, gr->truncated + j0, (size_t)n);
        memcpy(out->status + j0, gr->status + j0, (size_t)n);
    }
    for (int j = j0; j < j0 + n; j++) {
        int e = s_pool_env(p, g, j);
        char *eo = gr->err_out + (size_t)j * et;
        eo[0] = '\0';
        if (out->status[j] == PYENV_OK) {
            ok++;
            p->ep_ret[e] += out->rewards[j];
            p->ep_len[e]++;
            if (out->terminated[j] || out->truncated[j]) {
                p->st.episodes++;
                if (p->done_count < p->done_cap) {
                    p->done[p->done_count++] =
                        (vecenv_episode_t){.ret = p->ep_ret[e], .len = p->ep_len[e], .env = e};
                } else {
                    p->st.episodes_unstored++;
                }
                p->ep_ret[e] = 0.0;
                p->ep_len[e] = 0;
            }
            continue;
        }
        if (p->ep_len[e] > 0) {
            p->st.episodes_dropped++;
        }
        p->ep_ret[e] = 0.0;
        p->ep_len[e] = 0;
        if (out->status[j] == PYENV_ENV_FAULT) {
            memcpy(eo, gr->err + (size_t)j * et, et);
            p->st.env_faults++;
            log_every(&p->fault_log, LOG_INTERVAL_MS, LOG_WARN,
                      "env %d (worker %d, env %d): %s; its episode is dropped (%llu faults in "
                      "all)",
                      e, w, g * p->n + (j - j0), eo, (unsigned long long)p->st.env_faults);
        }
    }
    return ok;
}

int pyenv_recv_results(pyenv_t *p, int group, int64_t timeout_ms, const pyenv_results_t *out) {
    APEX_ASSERT(group >= 0 && group < p->G);
    s_group *gr = &p->grp[group];
    APEX_ASSERT(gr->recv_due);
    APEX_ASSERT(timeout_ms > 0); // it is the bound after which a worker is lost, not a poll
    gr->recv_due = 0;
    int64_t deadline = clock_now_ms() + timeout_ms;
    for (;;) {
        s_drain(p);
        s_service(p);
        int64_t now = clock_now_ms();
        if (s_group_done(p, group) || now >= deadline || signals_should_stop()) {
            break;
        }
        s_poll(p, deadline - now, group);
    }
    for (int w = 0; w < p->W; w++) {
        if (p->w[w].seq[group] && signals_should_stop()) {
            // Cut short by a shutdown: not the worker's failure. Its reply, if it comes, is
            // stale; the caller is stopping and sends this group nothing more.
            p->w[w].seq[group] = 0;
        } else if (p->w[w].seq[group]) {
            snprintf(p->why, sizeof p->why, "no reply within %lld ms",
                     (long long)(clock_now_ms() - deadline + timeout_ms));
            s_lost(p, w, p->why);
        }
    }
    int ok = 0;
    for (int w = 0; w < p->W; w++) {
        ok += s_deliver(p, group, w, out);
    }
    p->st.steps += (uint64_t)ok;
    return ok;
}

// ---------------------------------------------------------------------------------------
// Accessors

const char *pyenv_env_error(const pyenv_t *self, int group, int j) {
    APEX_ASSERT(group >= 0 && group < self->G && j >= 0 && j < self->GE);
    return self->grp[group].err_out + (size_t)j * ERR_TEXT;
}

int pyenv_drain_episodes(pyenv_t *self, vecenv_episode_t *out, int cap) {
    int n = self->done_count < cap ? self->done_count : cap;
    memcpy(out, self->done, (size_t)n * sizeof *out);
    memmove(self->done, self->done + n, (size_t)(self->done_count - n) * sizeof *out);
    self->done_count -= n;
    return n;
}

void pyenv_get_stats(const pyenv_t *self, pyenv_stats_t *out) {
    *out = self->st;
    out->curve_denied = self->sec ? security_denied(self->sec) : 0;
}

pid_t pyenv_worker_pid(const pyenv_t *self, int w) {
    APEX_ASSERT(w >= 0 && w < self->W);
    return self->w[w].pid;
}
