#!/usr/bin/python3
"""apex_env.py: a Python env worker for apex-actor (the env half of envs/pyenv.{h,c}).

The actor keeps the Q-network, epsilon-greedy, n-step folding, priorities and batching in C;
this process only steps environments (the SEED RL / EnvPool split). It imports a factory,
creates N Gymnasium-style envs, connects to the actor, says HELLO with the spaces, and then
answers every STEP (N actions, or a slice of them) with ONE reply holding all results.

    python3 python/apex_env.py --connect tcp://actor-host:5600 --make MODULE:CALLABLE \
        [--num-envs N] [--kwargs JSON] [--worker-id K] [--obs-layout hwc|chw] \
        [--curve-server-key=KEY_OR_PUBFILE --curve-secret=KEYFILE]

(Give a Z85 key with '=': one may begin with '-', which argparse would take for an option.)

(apex-actor starts its own workers with --local FDS instead of --connect: the same messages
over two inherited pipes and a shared memory file, see "Local transport" below.)

or, from Python: `from apex_env import serve; serve("tcp://...", "mymod:make_env", 8)`.

Needs numpy, and pyzmq for --connect; never imports gymnasium (duck typing):
  env.reset(seed=None) -> (obs, info); env.step(action) -> (obs, reward, terminated,
  truncated, info); env.observation_space.{dtype, shape} with dtype float32 or uint8 and at
  most 4 dims (vector, or image H x W x C); env.action_space either .n (Discrete; .start
  honoured: step gets an int) or a Box (.shape (D,), 1 <= D <= 64, .dtype float32 or float64,
  .low, .high: step gets a (D,) array of that dtype, finite and within low..high).
Observations: the HELLO declares the observation_space's dtype and whole shape as the env has
it, and the actor refuses one that is not the run's frame ([env] obs_shape HxWxC channels
last, or a vector of obs_dim), naming both. --obs-layout chw ([env] obs_layout = chw, which
apex-actor passes to the workers it spawns): the env's observations are channels first,
(C, H, W) (e.g. Gymnasium's FrameStackObservation's (K, H, W)), and this worker sends each
transposed to channels last, (H, W, C) (a numpy transpose and copy of each observation);
the HELLO says so (header field layout = 1), so that a worker that does not transpose is
refused by a chw run rather than misread.
A Box's bounds are sent to the actor as float32 in the HELLO: a run whose [env] action_low /
action_high differ refuses the worker, naming both (the actor clips its actions to the run's
bounds, and this worker ignores a STEP with an action outside the env's).
MODULE is a dotted module on sys.path or a path to a .py file. CALLABLE(**kwargs) is called
once per env with the --kwargs dict; a factory that has a parameter named apex_worker or
apex_env also gets the worker id and the env's index in this worker (for per-env setups).

Episodes and resets. The worker auto-resets: when a step ends an episode (terminated or
truncated) it calls env.reset() at once and replies with both the final observation (in the
obs frame: what the n-step target bootstraps from on truncation) and the first observation
of the next episode (in the reset frame). Seeds come from the actor's RESET (env.reset(seed=s)
once per env at (re)start); later resets are unseeded, so each env continues its own stream
as Gymnasium intends.

Faults inside an env are the env's, never the worker's: a reset/step that raises, a float
observation or reward that is NaN/inf (or a reward beyond float32's range), an observation
of the wrong type, shape or dtype, or a malformed step return, is reported for that env as
an ERROR with its message (at most ERR_TEXT_MAX bytes), and the env is reset (a reset that
fails too is retried at the next STEP instead of stepping). Invalid messages from the actor
are logged (rate-limited) and ignored. The worker exits only when the actor refuses it
(REFUSE: another worker took its id, or its spaces do not fit the run), or on SIGTERM/SIGINT.

Liveness: until the actor's first RESET the HELLO is repeated every HELLO_INTERVAL_S; after
that, whenever nothing has come for IDLE_HELLO_S (an actor that restarted learns of this
worker again). The actor ignores a repeated HELLO of a worker it knows (same nonce).

Wire format (version 1). The same text is in envs/pywire.h; change both together.
------------------------------------------------------------------------------------------
The actor binds a ROUTER, workers connect a DEALER (routing ids are libzmq's own). Every
message is multipart; frame 0 is a fixed 72-byte header, all integers little-endian:

  off size field
    0   4  magic      b"APXE"
    4   2  version    1
    6   2  type       1 HELLO, 2 RESET, 3 STEP, 4 RESULT, 5 RESET_DONE, 6 REFUSE
    8   4  worker     worker id, 0 .. W-1
   12   4  n_envs     HELLO: the worker's env count N; otherwise envs in this message (n)
   16   8  seq        request number chosen by the actor, echoed in the reply; HELLO: pid
   24   8  nonce      random per worker process, in all its messages; the actor echoes it
   32   4  first      worker-local index of the message's first env (envs first..first+n-1)
   36   4  n_actions  action_space.n (HELLO; the actor echoes the agreed value); 0 for a
                      continuous action space
   40   1  dtype      observation dtype: 1 float32, 2 uint8, 0 other (HELLO only: refused)
   41   1  ndim       observation rank, 0..4
   42   2  action_dim continuous actions: floats per action (a Box of shape (action_dim,)),
                      1..64; 0 for a Discrete action space
   44  16  shape      4 x u32 observation shape, unused dims 0
   60   4  n_reset    RESULT: rows in the reset frame
   64   4  n_error    RESULT, RESET_DONE: records in the errors frame
   68   4  layout     0: observation rows are the env's observations as they are; 1: the
                      worker transposes each channels-first (C, H, W) observation to
                      channels last (H, W, C) before sending it (--obs-layout chw,
                      [env] obs_layout = chw); ndim and shape stay the env's own
dtype, ndim, shape, n_actions, action_dim and layout are the HELLO's in every later
message of either side. A run is discrete (n_actions >= 1, action_dim 0) or continuous (n_actions 0,
action_dim >= 1). action_dim was a reserved 0 before continuous actions: a discrete run's
messages are byte for byte what they were, and a worker from before (which sends 0 there,
and n_actions 0 for a Box) is refused by the actor's spaces check, naming both sides.
layout was a reserved 0 before [env] obs_layout, in the same way: rows as they are is 0, so
every message of a run without obs_layout = chw is byte for byte what it was, and a worker
from before (which cannot transpose) is refused by a chw run, naming the reason. The HELLO
declares the env's observation_space (ndim, shape, dtype) as the env has it, so that the
actor can compare it with the run's frame ([env] obs_shape HxWxC or a vector of obs_dim,
obs_layout) and name both when they differ; the rows' layout then follows from layout.

Frames after the header (obs rows are the observation's raw bytes, C order; O = bytes/row):
  HELLO       worker->actor  [hdr][text: "make=... pid=... host=... observation_space=...
                             action_space=..." UTF-8, at most 1024 bytes]
                             continuous (action_dim D > 0): [hdr][text][bounds: D x f32
                             low, then D x f32 high: the Box's bounds as float32]
  RESET       actor->worker  [hdr first=0 n_envs=N][seeds: N x u64]: env.reset(seed=s) all
  STEP        actor->worker  [hdr][actions: n x i32, each in 0 .. n_actions-1]
                             continuous: [hdr][actions: n x D f32, env-major, each finite
                             and within the HELLO's bounds]
  RESULT      worker->actor  [hdr][obs: n x O][rewards: n x f64][flags: n x u8]
                             [reset_obs: n_reset x O][errors]
  RESET_DONE  worker->actor  like RESULT for the RESET: first=0, n=N, obs = the start
                             observations, rewards 0, flags only ERROR, n_reset 0
  REFUSE      actor->worker  [hdr][reason: UTF-8 text]: the worker logs it and exits 3
flags per env: 1 TERMINATED, 2 TRUNCATED, 4 RESET (the env was reset: its first
observation is the next row of reset_obs, rows in env order), 8 ERROR (the env faulted:
this step is void, its obs row is zeros, reward 0, TERMINATED/TRUNCATED clear; RESET is set
if the reset after the fault succeeded). Without ERROR, RESET is set exactly when
TERMINATED or TRUNCATED is. Float32 rows and rewards are finite; rewards fit in float32.
errors: n_error records, one per ERROR env in env order: u32 env (worker-local index),
u32 len (<= 256), len bytes of UTF-8 text.
------------------------------------------------------------------------------------------

Local transport (envs/pylocal.h; workers the actor spawns: --local SHM,IN,OUT,REQ,REP,G).
The same headers and frames, without ZeroMQ: fd IN carries the actor's headers, fd OUT this
worker's, 72 bytes each; the frames after the header are in the shared memory file SHM,
G request regions of REQ bytes then G reply regions of REP bytes. Each region is
[5 x u32 frame lengths][pad to 64][frame 1][pad to 8][frame 2][pad to 8]...; a STEP and
its RESULT use the regions of the group (first // n), everything else region 0. The
sender writes the frames first and the header last; EOF on IN means the actor is gone.
"""
import argparse
import importlib
import importlib.util
import inspect
import json
import math
import mmap
import operator
import os
import random
import socket
import struct
import sys
import time

import numpy as np

# pyzmq is imported by serve() only: workers the actor spawns (--local) need numpy alone.

MAGIC = b"APXE"
VERSION = 1
HELLO, RESET, STEP, RESULT, RESET_DONE, REFUSE = 1, 2, 3, 4, 5, 6
TERMINATED, TRUNCATED, RESET_FLAG, ERROR = 1, 2, 4, 8
DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2}
ERR_TEXT_MAX = 256
MAX_ACTION_DIM = 64
BOX_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
TEXT_MAX = 1024
LAYOUT_AS_IS, LAYOUT_CHW = 0, 1  # the header's layout field
LAYOUT_CODES = {"hwc": LAYOUT_AS_IS, "chw": LAYOUT_CHW}
HEADER = struct.Struct("<4sHHIIQQIIBBH4IIII")
assert HEADER.size == 72
ERR_REC = struct.Struct("<II")
LENS = struct.Struct("<5I")
U32 = struct.Struct("<I")
LOCAL_HEAD = 64
HELLO_INTERVAL_S = 1.0
IDLE_HELLO_S = 5.0
LOG_INTERVAL_S = 5.0
FLOAT32_MAX = float(np.finfo(np.float32).max)


class _Limiter:
    """At most one log line per LOG_INTERVAL_S for one kind of message."""

    def __init__(self):
        self.last = -1e9
        self.suppressed = 0

    def log(self, prefix, msg):
        now = time.monotonic()
        if now - self.last < LOG_INTERVAL_S:
            self.suppressed += 1
            return
        tail = " (%d similar suppressed)" % self.suppressed if self.suppressed else ""
        self.last, self.suppressed = now, 0
        print("%s%s%s" % (prefix, msg, tail), file=sys.stderr, flush=True)


def _truncate(text, limit=ERR_TEXT_MAX):
    """text as UTF-8 bytes of at most limit bytes, never cut inside a character."""
    b = text.encode("utf-8", "replace")
    return b if len(b) <= limit else b[:limit].decode("utf-8", "ignore").encode("utf-8")


def _describe(e):
    return "%s: %s" % (type(e).__name__, e)


def action_space_of(asp):
    """(n_actions, start, action_dim, dtype, low, high, text) of an action space: a Discrete
    (.n, .start; action_dim 0) or a Box of shape (D,) and dtype float32 or float64 (n_actions
    0; low and high as float32 arrays of shape (D,), dtype the Box's: what step gets). Anything
    else is described, not raised (n_actions = action_dim = 0): the actor refuses the HELLO,
    naming both sides."""
    name = type(asp).__name__
    if hasattr(asp, "n"):
        n = int(asp.n)
        return n, int(getattr(asp, "start", 0) or 0), 0, None, None, None, "Discrete(%d)" % n
    try:
        shape, dtype = tuple(int(d) for d in asp.shape), np.dtype(asp.dtype)
        low, high = np.asarray(asp.low, dtype=np.float64), np.asarray(asp.high, dtype=np.float64)
    except (AttributeError, TypeError, ValueError) as e:
        return 0, 0, 0, None, None, None, ("%s (neither a Discrete (.n) nor a Box (.shape, "
                                           ".dtype, .low, .high): %s)" % (name, _describe(e)))
    text = "%s(shape %s, dtype %s)" % (name, shape, dtype.name)
    if len(shape) != 1 or not 1 <= shape[0] <= MAX_ACTION_DIM or dtype not in BOX_DTYPES:
        return 0, 0, 0, None, None, None, ("%s (apex takes a Box of shape (D,) with 1 <= D <= "
                                           "%d and dtype float32 or float64)"
                                           % (text, MAX_ACTION_DIM))
    try:
        low = np.broadcast_to(low, shape).astype(np.float32)
        high = np.broadcast_to(high, shape).astype(np.float32)
    except ValueError as e:
        return 0, 0, 0, None, None, None, "%s (low/high: %s)" % (text, _describe(e))
    return 0, 0, shape[0], dtype, low, high, "Box(low=%s, high=%s, shape=%s, dtype=%s)" % (
        np.array2string(low, threshold=8), np.array2string(high, threshold=8), shape, dtype.name)


def load_factory(make):
    """The callable named by "MODULE:CALLABLE" (MODULE dotted, or a path to a .py file)."""
    if callable(make):
        return make
    mod_name, sep, attr = make.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ValueError("--make %r: expected MODULE:CALLABLE" % make)
    if mod_name.endswith(".py") or os.sep in mod_name:
        path = os.path.abspath(mod_name)
        # Siblings of the file import as they would when it is run as a script.
        sys.path.insert(0, os.path.dirname(path))
        name = "apex_env_user_" + os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError("cannot import %s" % path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(mod_name)
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part)
    if not callable(fn):
        raise TypeError("%s is not callable" % make)
    return fn


def _read_key_file(path, secret):
    """(public, secret or None) Z85 keys from a ZeroMQ certificate (apex-keygen's format).
    A secret key file must not be readable by others (as the C daemons require)."""
    with open(path, "rb") as f:
        text = f.read(65536).decode("ascii", "replace")
        mode = os.fstat(f.fileno()).st_mode
    if secret and mode & 0o077:
        raise PermissionError("%s: permissions %04o are too open for a secret key (chmod 600)"
                              % (path, mode & 0o7777))

    def field(name):
        i = text.find(name)
        if i < 0:
            return None
        q = text.find('"', i)
        v = text[q + 1:q + 41] if q >= 0 else ""
        return v.encode("ascii") if len(v) == 40 and text[q + 41:q + 42] == '"' else None

    pub, sec = field("public-key"), field("secret-key") if secret else None
    if pub is None or (secret and sec is None):
        raise ValueError("%s: no valid %s line" % (path, "secret-key" if secret else "public-key"))
    return pub, sec


class Worker:
    def __init__(self, make, num_envs=1, kwargs=None, worker_id=0, log_prefix=None,
                 obs_layout="hwc"):
        if obs_layout not in LAYOUT_CODES:
            raise ValueError("obs_layout %r: hwc or chw" % (obs_layout,))
        self.layout_code = LAYOUT_CODES[obs_layout]
        self.worker_id = int(worker_id)
        self.prefix = log_prefix or "apex_env[%d] worker %d: " % (os.getpid(), self.worker_id)
        self.make = make if isinstance(make, str) else getattr(make, "__name__", repr(make))
        self.limiter = {}
        factory = load_factory(make)
        kwargs = dict(kwargs or {})
        try:
            params = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            params = {}
        self.envs = []
        for i in range(int(num_envs)):
            kw = dict(kwargs)
            if "apex_worker" in params:
                kw["apex_worker"] = self.worker_id
            if "apex_env" in params:
                kw["apex_env"] = i
            self.envs.append(factory(**kw))
        self.n = len(self.envs)
        if self.n < 1:
            raise ValueError("--num-envs must be at least 1")
        self._read_spaces()
        # chw: rank-3 observations (C, H, W) are sent as (H, W, C); a rank-2 (H, W) frame has
        # no channel axis to move (the actor takes it for H x W x 1), and other ranks are
        # refused by a chw run's actor, naming the shape.
        if self.layout_code == LAYOUT_CHW and len(self.shape) == 3:
            self.row_of = _row_chw
            self.description += " obs_layout=chw (sent as %s)" % (
                (self.shape[1], self.shape[2], self.shape[0]),)
        else:
            self.row_of = _row_as_is
        self.nonce = random.SystemRandom().getrandbits(64)
        self.zero_row = bytes(self.row_bytes)
        self.zeros = {}  # length -> float32 zeros, for _all_finite
        self.broken = [None] * self.n  # message of the fault whose reset failed, else None
        self.hdr = bytearray(HEADER.size)
        self.configured = False  # a RESET was answered
        self.step_fns = [env.step for env in self.envs]
        self.dtypes, self.shapes = {self.dtype}, {self.shape}
        self.vector = len(self.shape) == 1
        self.lens = {self.shape[0]} if self.vector else None
        self.f32_packs = {}  # n -> struct pack of n float32s: the range check of rewards
        self.f64_packs = {}  # n -> struct pack of n float64s: the rewards frame
        shape4 = (list(self.shape) + [0, 0, 0, 0])[:4]
        self.spaces_key = (self.n_actions, self.dtype_code, len(self.shape), self.action_dim,
                           *shape4)
        # STEP payload bytes per env: an int32, or action_dim float32s
        self.action_bytes = 4 * self.action_dim if self.action_dim else 4

    # ---- spaces -----------------------------------------------------------------------
    def _read_spaces(self):
        """Reads the spaces of env 0 (every env must agree) into dtype/shape/n_actions and
        a description for the HELLO. Spaces apex cannot take are described, not raised:
        the actor refuses the HELLO naming both sides."""
        def spaces(env):
            osp, asp = env.observation_space, env.action_space
            try:
                obs = np.dtype(osp.dtype), tuple(int(d) for d in osp.shape)
            except (AttributeError, TypeError, ValueError) as e:
                raise ValueError("observation_space %r: apex takes a Box (dtype float32 or "
                                 "uint8, at most 4 dims): %s" % (osp, _describe(e))) from None
            n, start, dim, adtype, low, high, text = action_space_of(asp)
            bounds = (low.tobytes(), high.tobytes()) if dim else (b"", b"")
            return obs + (n, start, dim, adtype) + bounds, text, low, high

        first, act, low, high = spaces(self.envs[0])
        for k, env in enumerate(self.envs[1:], 1):
            other = spaces(env)
            if other[0] != first:
                raise ValueError("env %d has spaces %r, env 0 %r: all envs of a worker must "
                                 "agree" % (k, other[0], first))
        self.dtype, self.shape, self.n_actions, self.action_start = first[:4]
        self.action_dim, self.action_dtype, self.low, self.high = first[4], first[5], low, high
        self.dtype_code = DTYPE_CODES.get(self.dtype, 0)
        if len(self.shape) > 4:
            raise ValueError("observation_space shape %r: at most 4 dims" % (self.shape,))
        self.float_obs = self.dtype == np.float32
        self.row_bytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        self.description = ("make=%s pid=%d host=%s observation_space=%s%s action_space=%s"
                            % (self.make, os.getpid(), socket.gethostname(), self.dtype.name,
                               self.shape, act))

    def log(self, kind, msg):
        self.limiter.setdefault(kind, _Limiter()).log(self.prefix, msg)

    # ---- messages ---------------------------------------------------------------------
    def header(self, mtype, n_envs, seq=0, first=0, n_reset=0, n_error=0):
        HEADER.pack_into(self.hdr, 0, MAGIC, VERSION, mtype, self.worker_id, n_envs, seq,
                         self.nonce, first, *self.spaces_key, n_reset, n_error,
                         self.layout_code)
        return bytes(self.hdr)

    def hello(self):
        # seq = pid: the actor knows the workers it spawned by their pids.
        frames = [self.header(HELLO, self.n, seq=os.getpid()),
                  _truncate(self.description, TEXT_MAX)]
        if self.action_dim:  # the Box's bounds, for the actor to compare with the run's
            frames.append(self.low.tobytes() + self.high.tobytes())
        return frames

    def parse(self, frames):
        """The header fields of a message from the actor as a tuple, or None (logged) when
        the message is not valid for this worker."""
        if not frames or len(frames[0]) != HEADER.size:
            self.log("bad", "ignored a message with a %s-byte header"
                     % (len(frames[0]) if frames else "missing"))
            return None
        h = HEADER.unpack(frames[0])
        magic, version, mtype, wid, n, seq, nonce, first = h[:8]
        if magic != MAGIC or version != VERSION:
            self.log("bad", "ignored a message with magic %r version %d (expected %r %d)"
                     % (magic, version, MAGIC, VERSION))
            return None
        if wid != self.worker_id or nonce != self.nonce:
            self.log("bad", "ignored a message for worker %d nonce %x (I am %d, %x)"
                     % (wid, nonce, self.worker_id, self.nonce))
            return None
        if mtype == REFUSE:
            return h
        if h[8:16] != self.spaces_key or h[18] != self.layout_code:
            self.log("bad", "ignored a message with n_actions/dtype/ndim/action_dim/shape/"
                     "layout %r (mine: %r)"
                     % (h[8:16] + h[18:19], self.spaces_key + (self.layout_code,)))
            return None
        expect = {RESET: 2, STEP: 2}.get(mtype)
        if expect is None or len(frames) != expect:
            self.log("bad", "ignored a message of type %d with %d frames" % (mtype, len(frames)))
            return None
        if first + n > self.n or n == 0 or (mtype == RESET and (first != 0 or n != self.n)):
            self.log("bad", "ignored a message for envs %d..%d (I have %d)"
                     % (first, first + n - 1, self.n))
            return None
        if len(frames[1]) != n * (8 if mtype == RESET else self.action_bytes):
            self.log("bad", "ignored a message of type %d with a %d-byte payload for %d envs"
                     % (mtype, len(frames[1]), n))
            return None
        return h

    # ---- env calls --------------------------------------------------------------------
    def _obs_error(self, o, what, finite=True):
        if type(o) is not np.ndarray:
            return "%s returned an observation of type %s, not a numpy array" % (
                what, type(o).__name__)
        if o.shape != self.shape or o.dtype != self.dtype:
            return "%s returned an observation %s%s; observation_space is %s%s" % (
                what, o.dtype, o.shape, self.dtype.name, self.shape)
        if finite and self.float_obs and not np.isfinite(o).all():
            return "%s returned a non-finite observation %s" % (what, np.array2string(
                o.ravel()[:8], threshold=8))
        return None

    def _reset(self, k, seed=None, finite=True):
        """Resets env k; returns (obs, None) or (None, error message). finite=False leaves
        the NaN/inf test to the caller (step does it once for the whole message)."""
        try:
            out = self.envs[k].reset(seed=seed) if seed is not None else self.envs[k].reset()
            if type(out) is not tuple or len(out) != 2:
                return None, "reset returned %s, not (obs, info)" % type(out).__name__
            err = self._obs_error(out[0], "reset", finite)
            return (None, err) if err else (out[0], None)
        except (Exception, SystemExit) as e:  # the env's fault, never the worker's
            return None, "reset raised " + _describe(e)

    # One step's results are built as Python lists and bytes and packed once per message:
    # o.tobytes() plus one join costs ~100 ns an env, a numpy row assignment ~400 ns.
    def _fault(self, j, k, msg, st):
        """Env k (row j) faulted: the step is void; reset it, reporting msg."""
        st.obs[j] = self.zero_row
        st.rewards[j] = 0.0
        o, rerr = self._reset(k)
        if o is None:
            self.broken[k] = msg
            st.flags[j] = ERROR
            msg = "%s; then %s (retried at the next step)" % (msg, rerr)
        else:
            st.flags[j] = ERROR | RESET_FLAG
            st.resets[j] = self.row_of(o)
        st.errors.append((j, msg))

    def _retry_broken(self, j, k, st):
        o, rerr = self._reset(k)
        st.obs[j] = self.zero_row
        st.rewards[j] = 0.0
        if o is None:
            st.flags[j] = ERROR
            st.errors.append((j, "reset failed again: %s" % rerr))
        else:
            st.flags[j] = ERROR | RESET_FLAG
            st.resets[j] = self.row_of(o)
            st.errors.append((j, "reset again after: %s" % self.broken[k]))
            self.broken[k] = None

    def step(self, first, n, actions):
        """Steps envs first..first+n-1 with actions (a sequence of ints, or of (D,) arrays for
        a Box) and returns the _Step holding the RESULT's rows.

        The loop over the envs does only the calls; everything is checked afterwards over
        the whole message, with C-speed passes (map, set, join, sum), which costs ~0.1 us an
        env where checking each env's return inline cost ~0.45 (the env itself, CartPole,
        ~1.2). When any check fails, or an env raised, the returns are taken one by one
        (_take), which finds and reports the faulty ones exactly as before."""
        if self.action_start:
            actions = [a + self.action_start for a in actions]
        calls = self.step_fns[first:first + n]
        if self.broken.count(None) != self.n:
            return self._step_careful(first, n, actions, calls)
        outs = [None] * n
        o_list, r_list, te_list, tr_list = [None] * n, [0.0] * n, [False] * n, [False] * n
        ok = True
        for j in range(n):
            try:
                out = calls[j](actions[j])
            except (Exception, SystemExit) as e:  # the env's fault, never the worker's
                out, ok = _Raised(e), False
            outs[j] = out
            try:
                o_list[j], r_list[j], te_list[j], tr_list[j], _ = out
            except (Exception, SystemExit):
                ok = False
        st = self._fast(first, n, o_list, r_list, te_list, tr_list) if ok else None
        return st if st is not None else self._take_all(first, n, outs)

    def _fast(self, first, n, o_list, r_list, te_list, tr_list):
        """The _Step of a message whose step returns (transposed) are all well-formed, else
        None."""
        try:
            # Arrays of the space's dtype and shape (whose buffer the join below then takes
            # whole). For a vector space ndim 1 and len are the shape, without a tuple per env.
            if set(map(_DTYPE, o_list)) != self.dtypes:
                return None
            if self.vector:
                if set(map(_NDIM, o_list)) != _ONE or set(map(len, o_list)) != self.lens:
                    return None
            elif set(map(_SHAPE, o_list)) != self.shapes:
                return None
            # Numbers (a pack takes anything with __float__), no NaN or inf (then their sum is
            # not finite), and within float32's range (its pack raises OverflowError).
            total = sum(r_list)
            if total - total != 0.0:
                return None
            pack = self.f32_packs.get(n)
            if pack is None:
                pack = self.f32_packs[n] = struct.Struct("<%df" % n).pack
            pack(*r_list)
            rewards = r_list
            ends = [j for j in range(n) if te_list[j] or tr_list[j]] if (
                any(te_list) or any(tr_list)) else ()
            # before any reset can touch an env's array
            joined = b"".join(o_list if self.row_of is _row_as_is else map(_row_chw, o_list))
        except (Exception, SystemExit):  # odd types (bool, float, buffers): one by one
            return None
        st = _Step(n, rows=False)
        st.rewards, st.joined = rewards, joined
        flags = st.flags
        for j in ends:
            flags[j] = (TERMINATED if te_list[j] else 0) | (TRUNCATED if tr_list[j] else 0)
            o, rerr = self._reset(first + j, finite=False)
            if o is None:
                self._split_rows(st)
                self._void_ended(first, j, rerr, st)
            else:
                flags[j] |= RESET_FLAG
                st.resets[j] = self.row_of(o)
        if self.float_obs:
            if st.joined is not None and not self._all_finite(
                    st.joined + b"".join(st.resets.values()) if st.resets else st.joined):
                self._split_rows(st)
            if st.joined is None:
                self._check_finite(first, st)
        elif st.joined is None:
            st.joined = b"".join(st.obs)
        return st

    def _split_rows(self, st):
        """Turns st's joined observations back into rows (for the one-by-one checks)."""
        if st.joined is not None:
            rb, buf = self.row_bytes, st.joined
            st.obs = [buf[j * rb:(j + 1) * rb] for j in range(st.n)]
            st.joined = None

    def _take_all(self, first, n, outs):
        """The _Step of outs, each return checked on its own (faults reported per env)."""
        st = _Step(n)
        ended = []
        for j in range(n):
            self._take(j, first + j, outs[j], st, ended)
        self._finish(first, st, ended)
        return st

    def _step_careful(self, first, n, actions, calls):
        """step while some env's reset is being retried: those envs are not stepped."""
        st = _Step(n)
        ended = []
        for j in range(n):
            if self.broken[first + j] is not None:
                self._retry_broken(j, first + j, st)
                continue
            try:
                out = calls[j](actions[j])
            except (Exception, SystemExit) as e:  # the env's fault, never the worker's
                out = _Raised(e)
            self._take(j, first + j, out, st, ended)
        self._finish(first, st, ended)
        return st

    def _take(self, j, k, out, st, ended):
        """Row j (env k) of st from the env's step return out."""
        if type(out) is _Raised:
            self._fault(j, k, "step raised " + _describe(out.e), st)
            return
        try:
            o, r, te, tr, _ = out
            r = float(r)
            end = bool(te or tr)
        except (Exception, SystemExit) as e:
            self._fault(j, k, "step returned %s, not (obs, reward, terminated, truncated, "
                        "info): %s" % (type(out).__name__, _describe(e)), st)
            return
        if type(o) is not np.ndarray or o.dtype != self.dtype or o.shape != self.shape:
            self._fault(j, k, self._obs_error(o, "step"), st)
            return
        if not -FLOAT32_MAX <= r <= FLOAT32_MAX:  # NaN, inf, or beyond float32
            self._fault(j, k, "step returned the reward %r (not a finite float32)" % r, st)
            return
        st.obs[j] = self.row_of(o)
        st.rewards[j] = r
        if end:
            st.flags[j] = (TERMINATED if te else 0) | (TRUNCATED if tr else 0)
            ended.append(j)

    def _finish(self, first, st, ended):
        """Resets the envs whose episode ended, and looks for NaN/inf observations."""
        for j in ended:
            o, rerr = self._reset(first + j, finite=False)
            if o is None:
                self._void_ended(first, j, rerr, st)
            else:
                st.flags[j] |= RESET_FLAG
                st.resets[j] = self.row_of(o)
        if self.float_obs:
            self._check_finite(first, st)

    def _void_ended(self, first, j, rerr, st):
        """The episode of row j ended properly but the next cannot start: the step is
        reported void (the actor drops it) and the reset retried at the next step."""
        self.broken[first + j] = rerr
        st.obs[j], st.rewards[j], st.flags[j] = self.zero_row, 0.0, ERROR
        st.resets.pop(j, None)
        st.errors.append((j, "after the episode ended, " + rerr))

    def _all_finite(self, buf):
        """Whether the float32s in buf are all finite: x . 0 is NaN exactly when some x_i
        is inf or NaN (finite * 0 = 0; no overflow), and one dot product costs ~1 us where
        np.isfinite(a).all() costs ~3.5."""
        a = np.frombuffer(buf, dtype=np.float32)
        zeros = self.zeros.get(len(a))
        if zeros is None:
            zeros = self.zeros[len(a)] = np.zeros(len(a), dtype=np.float32)
        return math.isfinite(a.dot(zeros))

    def _check_finite(self, first, st):
        """NaN/inf in float32 observations and reset observations, looked for once over the
        whole message; the rare bad row is found and faulted afterwards."""
        buf = b"".join(st.obs)
        if self._all_finite(buf + b"".join(st.resets.values()) if st.resets else buf):
            st.joined = buf
            return
        for j in range(st.n):
            row = np.frombuffer(st.obs[j], dtype=np.float32).reshape(self.shape)
            if not np.isfinite(row).all():  # the step's observation
                st.resets.pop(j, None)
                self._fault(j, first + j, self._obs_error(row.copy(), "step"), st)
            elif j in st.resets and not np.isfinite(np.frombuffer(st.resets[j], np.float32)).all():
                self._void_ended(first, j, "reset returned a non-finite observation", st)

    def reset_all(self, seeds):
        """RESET: env.reset(seed=s) for every env; the start observations go in obs rows."""
        st = _Step(self.n)
        for k in range(self.n):
            o, err = self._reset(k, seed=int(seeds[k]))
            self.broken[k] = err
            if o is None:
                st.obs[k], st.flags[k] = self.zero_row, ERROR
                st.errors.append((k, err))
            else:
                st.obs[k] = self.row_of(o)
        return st

    def handle(self, frames):
        """What to do with a message from the actor: (reply frames, region) to send (region:
        the group of a RESULT, else 0), None when nothing is to be sent, or an int: the
        worker exits with it (REFUSE)."""
        h = self.parse(frames)
        if h is None:
            return None
        mtype, n, seq, first = h[2], h[4], h[5], h[7]
        if mtype == REFUSE:
            reason = frames[1].decode("utf-8", "replace") if len(frames) > 1 else "?"
            print("%srefused by the actor: %s" % (self.prefix, reason[:TEXT_MAX]),
                  file=sys.stderr, flush=True)
            return 3
        if mtype == RESET:
            st = self.reset_all(struct.unpack("<%dQ" % n, frames[1]))
            self.configured = True
            return self.reply(RESET_DONE, seq, 0, st), 0
        if self.action_dim:
            acts = self._box_actions(frames[1], n)
            if acts is None:
                return None
            return self.reply(RESULT, seq, first, self.step(first, n, acts)), first // n
        acts = struct.unpack("<%di" % n, frames[1])
        if min(acts) < 0 or max(acts) >= self.n_actions:
            self.log("bad", "ignored a STEP with actions outside 0..%d" % (self.n_actions - 1))
            return None
        return self.reply(RESULT, seq, first, self.step(first, n, acts)), first // n

    def _box_actions(self, payload, n):
        """A continuous STEP's actions as n arrays of shape (D,) in the Box's dtype (rows of
        one fresh array: an env that keeps or changes its action touches only its own), or
        None (logged) when one is not finite or outside the Box's bounds: the actor clips its
        actions to the bounds, so that is a message this worker must not act on."""
        a = np.frombuffer(payload, dtype=np.float32).reshape(n, self.action_dim)
        if not (np.isfinite(a).all() and (a >= self.low).all() and (a <= self.high).all()):
            bad = a[~(np.isfinite(a) & (a >= self.low) & (a <= self.high))]
            self.log("bad", "ignored a STEP with continuous actions that are not finite or "
                     "outside the Box's bounds %s .. %s (e.g. %r)"
                     % (self.low.tolist(), self.high.tolist(), float(bad[0])))
            return None
        return list(a.astype(self.action_dtype))

    def reply(self, mtype, seq, first, st):
        resets = st.resets
        reset = b"".join([resets[j] for j in sorted(resets)]) if resets else b""
        err = b"".join(ERR_REC.pack(first + j, len(t)) + t for j, t in (
            (j, _truncate(m)) for j, m in sorted(st.errors))) if st.errors else b""
        f64 = self.f64_packs.get(st.n)
        if f64 is None:
            f64 = self.f64_packs[st.n] = struct.Struct("<%dd" % st.n).pack
        return [HEADER.pack(MAGIC, VERSION, mtype, self.worker_id, st.n, seq, self.nonce, first,
                            *self.spaces_key, len(resets), len(st.errors), self.layout_code),
                st.joined if st.joined is not None else b"".join(st.obs),
                f64(*st.rewards), bytes(st.flags), reset, err]


class _Raised:
    """An exception an env's step raised (kept until its row is reported)."""

    __slots__ = ("e",)

    def __init__(self, e):
        self.e = e


def _row_as_is(o):
    return o.tobytes()


def _row_chw(o):
    """A channels-first (C, H, W) observation's bytes channels last, (H, W, C), C order."""
    return o.transpose(1, 2, 0).tobytes()


_DTYPE = operator.attrgetter("dtype")
_NDIM = operator.attrgetter("ndim")
_ONE = {1}
_SHAPE = operator.attrgetter("shape")


class _Step:
    """The results of one message, row by row: obs bytes, rewards, flags, reset obs bytes by
    row, and (row, message) errors."""

    __slots__ = ("n", "obs", "rewards", "flags", "resets", "errors", "joined")

    def __init__(self, n, rows=True):
        self.n = n
        self.obs = [None] * n if rows else None  # rows=False: joined and rewards are set
        self.rewards = [0.0] * n if rows else None
        self.flags = bytearray(n)
        self.resets = {}
        self.errors = []
        self.joined = None  # b"".join(obs) once the rows are final


def _send_hello(sock, w):
    """HELLOs wait in the socket's queue while no actor listens; a full queue (an actor
    away for hours) drops the new one instead of blocking."""
    import zmq

    try:
        sock.send_multipart(w.hello(), zmq.NOBLOCK)
    except zmq.Again:
        pass


def serve(connect, make, num_envs=1, kwargs=None, worker_id=0, curve_server_key=None,
          curve_secret=None, context=None, obs_layout="hwc"):
    """Runs a worker until the actor refuses it (returns 3) or KeyboardInterrupt.
    curve_server_key: the actor's public key (40 Z85 characters, or a .pub/.key file);
    curve_secret: this worker's certificate file (apex-keygen's NAME.key, mode 0600)."""
    import zmq

    w = Worker(make, num_envs, kwargs, worker_id, obs_layout=obs_layout)
    ctx = context or zmq.Context.instance()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    if curve_server_key or curve_secret:
        if not (curve_server_key and curve_secret):
            raise ValueError("CURVE needs both --curve-server-key and --curve-secret")
        sk = curve_server_key
        if len(sk) == 40 and not os.path.exists(sk):
            server_pub = sk.encode("ascii")
        else:
            server_pub = _read_key_file(sk, secret=False)[0]
        pub, sec = _read_key_file(curve_secret, secret=True)
        sock.curve_serverkey, sock.curve_publickey, sock.curve_secretkey = server_pub, pub, sec
    sock.connect(connect)
    print("%sconnecting to %s: %d x %s" % (w.prefix, connect, w.n, w.description),
          file=sys.stderr, flush=True)
    _send_hello(sock, w)
    # One blocking receive per message, its timeout the HELLO timer: a receive that finds
    # nothing and a poll would each cost libzmq a getpid and a poll system call.
    sock.setsockopt(zmq.RCVTIMEO, int(HELLO_INTERVAL_S * 1000))
    configured, last_in = False, time.monotonic()
    try:
        while True:
            try:
                frames = sock.recv_multipart()
            except zmq.Again:
                wait = HELLO_INTERVAL_S if not configured else IDLE_HELLO_S
                if time.monotonic() - last_in >= wait:
                    _send_hello(sock, w)
                    last_in = time.monotonic()
                continue
            last_in = time.monotonic()
            out = w.handle(frames)
            if out is None:
                continue
            if isinstance(out, int):
                return out
            sock.send_multipart(out[0])
            if w.configured and not configured:
                sock.setsockopt(zmq.RCVTIMEO, int(IDLE_HELLO_S * 1000))
                configured = True
    except KeyboardInterrupt:
        return 130
    finally:
        sock.close(0)


class _Local:
    """The local transport's channel (see "Local transport" above): headers over two pipes,
    frames in the shared memory's regions."""

    def __init__(self, spec):
        try:
            shm, fd_in, fd_out, req, rep, groups = (int(x) for x in spec.split(","))
        except ValueError:
            raise ValueError("--local %r: expected SHM,IN,OUT,REQ,REP,G" % spec) from None
        self.fd_in, self.fd_out, self.req, self.rep, self.groups = fd_in, fd_out, req, rep, groups
        self.mm = mmap.mmap(shm, groups * (req + rep))
        self.rep0 = groups * req

    def recv(self):
        """[header, payload] of the next message, or None when the actor is gone."""
        hdr = os.read(self.fd_in, HEADER.size)
        while 0 < len(hdr) < HEADER.size:
            more = os.read(self.fd_in, HEADER.size - len(hdr))
            if not more:
                return None
            hdr += more
        if not hdr:
            return None
        mtype, n, first = hdr[6] | hdr[7] << 8, U32.unpack_from(hdr, 12)[0], \
            U32.unpack_from(hdr, 32)[0]
        region = first // n if mtype == STEP and n and first // n < self.groups else 0
        base = region * self.req
        size = min(LENS.unpack_from(self.mm, base)[0], self.req - LOCAL_HEAD)
        return [hdr, self.mm[base + LOCAL_HEAD:base + LOCAL_HEAD + size]]

    def send(self, frames, region):
        """Writes frames[1:] into reply region `region`, then the header frames[0]."""
        base = self.rep0 + region * self.rep
        mm, rel, lens = self.mm, LOCAL_HEAD, [0, 0, 0, 0, 0]
        for i, f in enumerate(frames[1:]):
            size = len(f)
            if rel + size > self.rep:
                raise ValueError("a reply frame of %d bytes overflows the region" % size)
            if size:
                mm[base + rel:base + rel + size] = f
            lens[i] = size
            rel = (rel + size + 7) & ~7
        LENS.pack_into(mm, base, *lens)
        os.write(self.fd_out, frames[0])


def serve_local(spec, make, num_envs=1, kwargs=None, worker_id=0, obs_layout="hwc"):
    """Runs a worker spawned by apex-actor over the local transport (--local) until the
    actor goes away (returns 0) or refuses it (3)."""
    w = Worker(make, num_envs, kwargs, worker_id, obs_layout=obs_layout)
    ch = _Local(spec)
    print("%slocal transport: %d x %s" % (w.prefix, w.n, w.description), file=sys.stderr,
          flush=True)
    ch.send(w.hello(), 0)
    try:
        while True:
            frames = ch.recv()
            if frames is None:
                return 0
            out = w.handle(frames)
            if isinstance(out, int):
                return out
            if out is not None:
                ch.send(*out)
    except BrokenPipeError:  # the actor is gone
        return 0
    except KeyboardInterrupt:
        return 130


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connect", help="the actor's bridge endpoint")
    p.add_argument("--local", help="SHM,IN,OUT,REQ,REP,G: inherited fds (apex-actor's spawn)")
    p.add_argument("--make", required=True, help="MODULE:CALLABLE (MODULE dotted or a .py path)")
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--kwargs", default="{}", help="JSON object passed to CALLABLE")
    p.add_argument("--worker-id", type=int, default=0)
    p.add_argument("--obs-layout", choices=("hwc", "chw"), default="hwc",
                   help="chw: the env's observations are channels first (C, H, W); each is sent "
                   "transposed to channels last ([env] obs_layout)")
    p.add_argument("--curve-server-key", help="the actor's public key: Z85 text or a .pub file")
    p.add_argument("--curve-secret", help="this worker's key file (NAME.key, mode 0600)")
    a = p.parse_args(argv)
    try:
        kwargs = json.loads(a.kwargs)
        if not isinstance(kwargs, dict):
            raise ValueError("not a JSON object")
    except ValueError as e:
        p.error("--kwargs %r: %s" % (a.kwargs, e))
    if a.num_envs < 1 or a.worker_id < 0:
        p.error("--num-envs must be >= 1 and --worker-id >= 0")
    if bool(a.connect) == bool(a.local):
        p.error("give one of --connect ENDPOINT and --local FDS")
    try:
        if a.local:
            return serve_local(a.local, a.make, a.num_envs, kwargs, a.worker_id, a.obs_layout)
        return serve(a.connect, a.make, a.num_envs, kwargs, a.worker_id, a.curve_server_key,
                     a.curve_secret, obs_layout=a.obs_layout)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # start-up errors: the factory, the spaces, the keys
        print("apex_env[%d] worker %d: cannot start: %s" % (os.getpid(), a.worker_id,
                                                             _describe(e)),
              file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
