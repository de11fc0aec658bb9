#!/usr/bin/env python3
"""edge_peer.py: edge-valued messages against every daemon endpoint (driven by
tests/smoke/edge_values.sh; issue #26 item 3).

  edge_peer.py replay   --insert EP --sample EP [limits]   apex-replay's insert and sample ROUTERs
  edge_peer.py capacity --sample EP --capacity N --max-batch M   a request above [replay] capacity
  edge_peer.py learner  --stats EP --weights EP --metrics CSV [--insert EP] [limits]
        apex-learner, standalone (--insert: its replay's, to feed it edge-valued transitions)
  edge_peer.py learner-replay --sample EP --weights EP --metrics CSV [limits]
        plays the replay's sample ROUTER for a real apex-learner
  edge_peer.py upstream --client actor|eval --weights EP [--insert EP --stats EP | --eval-csv CSV]
        plays the learner's weights ROUTER (and for an actor the replay's insert ROUTER and the
        learner's stats PULL) for a real apex-actor or apex-eval --follow

For every numeric field of every message kind an endpoint takes, one message per edge value
(the field at its edge, every other field sane): 0, -0, the type's min and max, each
documented bound (common/wire.h) with the next representable value past it and just inside
it, NaN (quiet, negative, signalling, with a payload), +-inf and denormals. The table below
says, from the documented bounds, whether the daemon must take each message or refuse it;
after each one the peer sends normal traffic and checks the daemon's answer and its own
counters moved by exactly what the edge message should have done.

The encoder is written from proto/apex.proto with apexwire.py's primitives (float and double
fields are written from bit patterns, so that -0, denormals and NaN payloads travel as
meant), independent of common/wire.c.

Output: "PASS <what>" / "FAIL <what>" lines, one per field (naming every edge that did not
behave), then "DONE". Exit status 0 even on FAILs (the script counts them); 1 on a crash.
"""
import argparse
import csv
import math
import os
import random
import struct
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from apexwire import VERSION, _fields, _read_varint, _varint  # noqa: E402

# ---------------------------------------------------------------------------------------
# Numbers. float32 and float64 edges are bit patterns.

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1


def fbits(x):
    """Bits of the float32 nearest to x (C's (float)x)."""
    return struct.unpack("<I", struct.pack("<f", x))[0]


def bits_f(b):
    return struct.unpack("<f", struct.pack("<I", b))[0]


def dbits(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def bits_d(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


F_ZERO, F_NEG_ZERO = 0x00000000, 0x80000000
F_TRUE_MIN, F_NEG_TRUE_MIN = 0x00000001, 0x80000001  # FLT_TRUE_MIN, the smallest denormal
F_MAX_SUBNORMAL = 0x007FFFFF
F_MIN = 0x00800000  # FLT_MIN, the smallest normal
F_MAX, F_NEG_MAX = 0x7F7FFFFF, 0xFF7FFFFF  # +-FLT_MAX
F_INF, F_NEG_INF = 0x7F800000, 0xFF800000
F_QNAN, F_NEG_QNAN, F_SNAN, F_NAN_PAYLOAD = 0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF
F_ONE = fbits(1.0)

F_FINITE = [("0", F_ZERO), ("-0", F_NEG_ZERO), ("FLT_TRUE_MIN", F_TRUE_MIN),
            ("-FLT_TRUE_MIN", F_NEG_TRUE_MIN), ("max denormal", F_MAX_SUBNORMAL),
            ("FLT_MIN", F_MIN), ("FLT_MAX", F_MAX), ("-FLT_MAX", F_NEG_MAX)]
F_NONFINITE = [("+inf", F_INF), ("-inf", F_NEG_INF), ("NaN", F_QNAN), ("-NaN", F_NEG_QNAN),
               ("signalling NaN", F_SNAN), ("NaN payload", F_NAN_PAYLOAD)]

# ---------------------------------------------------------------------------------------
# The documented bounds (common/wire.h; quoted names are its macros). A field bounded to
# [0, hi] takes 0, -0 (>= 0 holds), denormals, hi and the float below it, and refuses the float
# above hi, the negatives, FLT_MAX when above hi, and every non-finite value.

WIRE_PRIORITY_MAX = fbits(3.0e38)  # "WIRE_PRIORITY_MAX 3.0e38f": raw priorities [0, this]
WIRE_MASS_MAX = dbits(3.4028234663852886e38)  # "WIRE_MASS_MAX" (= FLT_MAX): p^alpha doubles
WIRE_BETA_MAX = F_ONE  # "WIRE_BETA_MAX 1.0f": SampleRequest.beta [0, this]
WIRE_DISCOUNT_MAX = F_ONE  # "WIRE_DISCOUNT_MAX 1.0f"
WIRE_IS_WEIGHT_MAX = 1.0  # "WIRE_IS_WEIGHT_MAX 1.0f": importance weights [0, this]
WIRE_EPSILON_MAX = F_ONE  # "WIRE_EPSILON_MAX 1.0f": ActorStats epsilons [0, this]
WIRE_SEQ_MAX = U64_MAX - 1  # "WIRE_SEQ_MAX (UINT64_MAX - 1)": TransitionBatch.seq
WIRE_FRAMES_MAX = 1 << 53  # "WIRE_FRAMES_MAX (1ull << 53)": ActorStats.frames (>= frames_delta)
WIRE_MAX_BATCHES_PER_REQUEST = 64  # "WIRE_MAX_BATCHES_PER_REQUEST"
WIRE_ACK_MAX_SEQS = 512  # "WIRE_ACK_MAX_SEQS": seq + seqs of one InsertAck
STATS_MAX_EPISODES = 65536  # learner/learner.c: the learner's ActorStats bound (max_episodes)
SAMPLE_OK, SAMPLE_NOT_READY, SAMPLE_REFUSED = 0, 1, 2


def bounded_f32(hi):
    """(name, bits, taken) for a float32 field documented as [0, hi] (hi positive, finite)."""
    rows = [("0", F_ZERO, True), ("-0", F_NEG_ZERO, True), ("FLT_TRUE_MIN", F_TRUE_MIN, True),
            ("FLT_MIN", F_MIN, True), ("bound - 1 ulp", hi - 1, True), ("bound", hi, True),
            ("bound + 1 ulp", hi + 1, False), ("-FLT_TRUE_MIN", F_NEG_TRUE_MIN, False),
            ("-FLT_MAX", F_NEG_MAX, False)]
    if hi != F_MAX:
        rows.append(("FLT_MAX", F_MAX, False))
    return rows + [(n, b, False) for n, b in F_NONFINITE]


def finite_f32():
    """(name, bits, taken) for a float32 field documented as finite."""
    return [(n, b, True) for n, b in F_FINITE] + [(n, b, False) for n, b in F_NONFINITE]


def mass_f64():
    """(name, bits, taken) for a p^alpha double, [0, WIRE_MASS_MAX]."""
    return [("0", 0, True), ("-0", 1 << 63, True), ("DBL_TRUE_MIN", 1, True),
            ("FLT_TRUE_MIN", dbits(bits_f(F_TRUE_MIN)), True),
            ("DBL_MIN", 0x0010000000000000, True),
            ("FLT_MIN", dbits(bits_f(F_MIN)), True), ("1", dbits(1.0), True),
            ("bound - 1 ulp", WIRE_MASS_MAX - 1, True), ("bound (FLT_MAX)", WIRE_MASS_MAX, True),
            ("bound + 1 ulp", WIRE_MASS_MAX + 1, False), ("1e300 (issue #26)", dbits(1e300), False),
            ("DBL_MAX", 0x7FEFFFFFFFFFFFFF, False), ("-DBL_TRUE_MIN", (1 << 63) | 1, False),
            ("-1", dbits(-1.0), False), ("+inf", dbits(math.inf), False),
            ("-inf", dbits(-math.inf), False), ("NaN", 0x7FF8000000000000, False),
            ("-NaN", 0xFFF8000000000000, False), ("signalling NaN", 0x7FF0000000000001, False)]


ENVELOPE_VERSIONS = [("version 0", 0), ("version %d" % (VERSION + 1), VERSION + 1),
                     ("version u32 max", U32_MAX)]

# ---------------------------------------------------------------------------------------
# Encoding (proto/apex.proto). Every scalar is written even when it is 0 unless told not to;
# a proto3 reader takes an explicit default like an absent field.


def _key(field, wt):
    return _varint((field << 3) | wt)


def vint(field, v):
    """A varint field: uint32/uint64/bool/enum; a negative int32 or enum is sign-extended to
    10 bytes, as protobuf does."""
    return _key(field, 0) + _varint(v & U64_MAX)


def fx32(field, bits):
    return _key(field, 5) + struct.pack("<I", bits)


def fx64(field, bits):
    return _key(field, 1) + struct.pack("<Q", bits)


def blob(field, b):
    return _key(field, 2) + _varint(len(b)) + b


def packed_u64(field, vals):
    return blob(field, b"".join(_varint(v) for v in vals)) if vals else b""


def envelope(body_field, body, version=VERSION):
    return vint(1, version) + blob(body_field, body)


def f32a(bits):
    return struct.pack("<%dI" % len(bits), *bits)


def i32a(vals):
    return struct.pack("<%di" % len(vals), *vals)


def u32a(vals):
    return struct.pack("<%dI" % len(vals), *vals)


def u64a(vals):
    return struct.pack("<%dQ" % len(vals), *vals)


B_BATCH, B_SREQ, B_SREPLY, B_PUPD, B_WEIGHTS, B_STATS, B_ACK, B_WREQ = 2, 3, 4, 5, 6, 7, 8, 9


def transition_batch(actor_id=0, seq=0, weights_version=0, count=0, obs_dim=0, obs=b"",
                     actions=b"", rewards=b"", discounts=b"", next_obs=b"", priorities=b"",
                     epoch=0, obs_dtype=0, version=VERSION):
    body = (vint(1, actor_id) + vint(2, seq) + vint(3, weights_version) + vint(4, count) +
            vint(5, obs_dim) + blob(6, obs) + blob(7, actions) + blob(8, rewards) +
            blob(9, discounts) + blob(10, next_obs) +
            (blob(11, priorities) if priorities else b"") +
            vint(12, epoch) + vint(13, obs_dtype))
    return envelope(B_BATCH, body, version)


def sample_request(req_id, batch_size, beta_bits, batches=0, min_priority_bits=0,
                   stats_only=0, stats_after=0, version=VERSION):
    body = (vint(1, req_id) + vint(2, batch_size) + fx32(3, beta_bits) + vint(4, batches) +
            fx64(5, min_priority_bits) + vint(6, stats_only) + vint(7, stats_after))
    return envelope(B_SREQ, body, version)


def priority_update(count, keys, prio_bits, version=VERSION):
    return envelope(B_PUPD, vint(1, count) + blob(2, u64a(keys)) + blob(3, f32a(prio_bits)),
                    version)


def weights(version_no, learner_step, num_params, params, env_frames=0, version=VERSION):
    """params: bytes (float32 little-endian)."""
    body = (vint(1, version_no) + vint(2, learner_step) + vint(3, num_params) + blob(4, params) +
            vint(5, env_frames))
    return envelope(B_WEIGHTS, body, version)


def weights_request(have_version, version=VERSION):
    return envelope(B_WREQ, vint(1, have_version), version)


def actor_stats(actor_id=0, frames=1, frames_delta=1, weights_version=1, dropped_batches=0,
                n_episodes=0, returns=b"", lengths=b"", epsilons=b"", env_faults=0,
                episodes_dropped=0, version=VERSION):
    body = (vint(1, actor_id) + vint(2, frames) + vint(3, weights_version) +
            vint(4, dropped_batches) + vint(5, n_episodes) + blob(6, returns) + blob(7, lengths) +
            blob(8, epsilons) + vint(9, frames_delta) + vint(10, env_faults) +
            vint(11, episodes_dropped))
    return envelope(B_STATS, body, version)


STATS_U64 = ("size", "capacity", "inserted", "sampled", "updated", "stale", "bad",
             "limiter_waits")  # ReplayStats fields 1..8; duplicates is field 10


def replay_stats(st):
    """A ReplayStats body from a dict (the keys of STATS_U64, duplicates, total_bits,
    min_bits, shard, shards)."""
    body = b"".join(vint(i + 1, st.get(k, 0)) for i, k in enumerate(STATS_U64))
    return (body + fx64(9, st.get("total_bits", 0)) + vint(10, st.get("duplicates", 0)) +
            fx64(11, st.get("min_bits", 0)) + vint(12, st.get("shard", 0)) +
            vint(13, st.get("shards", 0)))


def sample_reply(req_id, status=SAMPLE_OK, count=0, obs_dim=0, keys=b"", is_weights=b"",
                 obs=b"", actions=b"", rewards=b"", discounts=b"", next_obs=b"", stats=None,
                 obs_dtype=0, version=VERSION):
    body = (vint(1, req_id) + vint(2, status) + vint(3, count) + vint(4, obs_dim) +
            blob(5, keys) + blob(6, is_weights) + blob(7, obs) + blob(8, actions) +
            blob(9, rewards) + blob(10, discounts) + blob(11, next_obs) +
            (blob(12, replay_stats(stats)) if stats is not None else b"") + vint(13, obs_dtype))
    return envelope(B_SREPLY, body, version)


def insert_ack(actor_id, seq, more=(), version=VERSION):
    return envelope(B_ACK, vint(1, actor_id) + vint(2, seq) + packed_u64(3, list(more)), version)


def simple_batch(actor_id, epoch, seq, rows, priorities=None, **over):
    """A TransitionBatch of rows (action, reward bits, discount bits, obs bits, next_obs bits);
    priorities: bits, or None for 1.0 each. over: raw field overrides."""
    f = dict(actor_id=actor_id, seq=seq, weights_version=7, count=len(rows),
             obs_dim=len(rows[0][3]) if rows else 0, obs=f32a([x for r in rows for x in r[3]]),
             actions=i32a([r[0] for r in rows]), rewards=f32a([r[1] for r in rows]),
             discounts=f32a([r[2] for r in rows]), next_obs=f32a([x for r in rows for x in r[4]]),
             priorities=f32a(priorities if priorities is not None else [F_ONE] * len(rows)),
             epoch=epoch)
    f.update(over)
    return transition_batch(**f)


# ---------------------------------------------------------------------------------------
# Decoding what the daemons send, and checking it against the documented bounds.

def decode(buf):
    """(body field, {field: value}) of an Envelope of this protocol version, else (None, {})."""
    try:
        version, body_field, body = 0, None, b""
        for f, wt, v in _fields(buf):
            if f == 1 and wt == 0:
                version = v
            elif wt == 2:
                body_field, body = f, v
        if version != VERSION:
            return None, {}
        return body_field, {f: v for f, _, v in _fields(body)}
    except Exception:
        return None, {}


def ack_seqs(f):
    """The seqs an InsertAck body acknowledges: seq, then the packed seqs."""
    seqs, packed, i = [f.get(2, 0)], f.get(3, b""), 0
    while i < len(packed):
        v, i = _read_varint(packed, i)
        seqs.append(v)
    return seqs


def arr(f, field, fmt, n):
    b = f.get(field, b"")
    if len(b) != n * struct.calcsize(fmt):
        raise ValueError("field %d: %d bytes for %d x %s" % (field, len(b), n, fmt))
    return list(struct.unpack("<%d%s" % (n, fmt), b)) if n else []


def as_f64(raw):
    return struct.unpack("<d", raw)[0] if isinstance(raw, bytes) else 0.0


def finite(xs):
    return all(math.isfinite(x) for x in xs)


MASS_MAX = bits_d(WIRE_MASS_MAX)


def check_stats(f):
    """The ReplayStats of a SampleReply body: (dict, why-not or '')."""
    s = {k: 0 for k in ("size", "capacity", "inserted", "sampled", "updated", "stale", "bad",
                        "limiter_waits", "duplicates", "shard", "shards")}
    raw = f.get(12)
    if raw is None:
        return s, "no stats"
    g = {k: v for k, _, v in _fields(raw)}
    for k, n in (("size", 1), ("capacity", 2), ("inserted", 3), ("sampled", 4), ("updated", 5),
                 ("stale", 6), ("bad", 7), ("limiter_waits", 8), ("duplicates", 10),
                 ("shard", 12), ("shards", 13)):
        s[k] = g.get(n, 0)
    s["total"], s["min"] = as_f64(g.get(9)), as_f64(g.get(11))
    for k in ("total", "min"):
        if not 0.0 <= s[k] <= MASS_MAX:  # false for NaN
            return s, "stats %s priority %r outside [0, WIRE_MASS_MAX]" % (k, s[k])
    if s["shard"] >= max(1, s["shards"]):
        return s, "stats shard %d of %d" % (s["shard"], s["shards"])
    if s["size"] > s["capacity"] or s["size"] > s["inserted"]:
        return s, "stats size %d, capacity %d, inserted %d" % (s["size"], s["capacity"],
                                                             s["inserted"])
    return s, ""


def check_reply(f, obs_dim, n_actions, want_rows):
    """A SampleReply body: (reply dict, why-not or ''). want_rows: rows of an OK reply."""
    r = {"id": f.get(1, 0), "status": f.get(2, 0), "count": f.get(3, 0)}
    r["stats"], why = check_stats(f)
    if why:
        return r, why
    if r["status"] in (SAMPLE_NOT_READY, SAMPLE_REFUSED):
        return r, "" if r["count"] == 0 else "rows in a %d reply" % r["status"]
    if r["status"] != SAMPLE_OK:
        return r, "status %d" % r["status"]
    n, d = r["count"], f.get(4, 0)
    if n != want_rows or d != obs_dim or f.get(13, 0) != 0:
        return r, "count %d (want %d), obs_dim %d, dtype %d" % (n, want_rows, d, f.get(13, 0))
    try:
        keys, w = arr(f, 5, "Q", n), arr(f, 6, "f", n)
        obs, nobs = arr(f, 7, "f", n * d), arr(f, 11, "f", n * d)
        acts, rew, disc = arr(f, 8, "i", n), arr(f, 9, "f", n), arr(f, 10, "f", n)
    except ValueError as e:
        return r, str(e)
    r.update(keys=keys, weights=w)
    if not all(0.0 <= x <= WIRE_IS_WEIGHT_MAX for x in w):
        return r, "importance weights outside [0, 1]: %s" % sorted(set(w))[:4]
    if not (finite(obs) and finite(nobs) and finite(rew)):
        return r, "non-finite observation or reward"
    if not all(0.0 <= x <= 1.0 for x in disc) or not all(0 <= a < n_actions for a in acts):
        return r, "discount or action out of range"
    cap = r["stats"]["capacity"]
    if not all((k & U32_MAX) < cap and (k >> 32) >= 1 for k in keys):
        return r, "a key names an empty slot or generation 0"
    return r, ""


def check_batch(f, obs_dim, n_actions, max_batch):
    """A TransitionBatch body an actor sent: why not well-formed, or ''."""
    n, d = f.get(4, 0), f.get(5, 0)
    if not 1 <= n <= max_batch or d != obs_dim or f.get(13, 0) != 0:
        return "count %d, obs_dim %d, dtype %d" % (n, d, f.get(13, 0))
    if f.get(2, 0) > WIRE_SEQ_MAX:
        return "seq %d" % f.get(2, 0)
    try:
        obs, nobs = arr(f, 6, "f", n * d), arr(f, 10, "f", n * d)
        acts, rew, disc = arr(f, 7, "i", n), arr(f, 8, "f", n), arr(f, 9, "f", n)
        pr = arr(f, 11, "f", n) if f.get(11) else None
    except ValueError as e:
        return str(e)
    if not (finite(obs) and finite(nobs) and finite(rew)):
        return "non-finite observation or reward"
    if not all(0.0 <= x <= 1.0 for x in disc):
        return "discount outside [0, 1]"
    if not all(0 <= a < n_actions for a in acts):
        return "action outside [0, %d)" % n_actions
    if pr is not None and not all(0.0 <= x <= bits_f(WIRE_PRIORITY_MAX) for x in pr):
        return "priority outside [0, WIRE_PRIORITY_MAX]"
    return ""


# ---------------------------------------------------------------------------------------
# Results: one line per field, naming the edges that misbehaved.

class Results:
    def __init__(self):
        self.groups = {}
        self.order = []

    def edge(self, group, name, ok, detail=""):
        if group not in self.groups:
            self.groups[group] = []
            self.order.append(group)
        self.groups[group].append((name, ok, detail))

    def line(self, ok, msg):
        print(("PASS " if ok else "FAIL ") + msg, flush=True)

    def flush(self):
        for g in self.order:
            rows = self.groups[g]
            bad = [(n, d) for n, ok, d in rows if not ok]
            if bad:
                self.line(False, "%s: %d of %d edges misbehaved: %s" % (
                    g, len(bad), len(rows), "; ".join("%s: %s" % b for b in bad[:6])))
            else:
                self.line(True, "%s: %d edges as documented (%s)" % (
                    g, len(rows), ", ".join(n for n, _, _ in rows)))
        self.groups, self.order = {}, []


R = Results()


# Every wait is for something the daemon must do, so a timeout is a failure. After a few in a
# row (a daemon that died) the deadlines shrink, so that a broken run ends in seconds.
_TIMEOUTS = [0]


def wait_until(cond, timeout, pump, step=0.02):
    if _TIMEOUTS[0] >= 3:
        timeout = min(timeout, 1.0)
    deadline = time.monotonic() + timeout
    while True:
        pump(step)
        if cond():
            _TIMEOUTS[0] = 0
            return True
        if time.monotonic() >= deadline:
            _TIMEOUTS[0] += 1
            return False


def sock(ctx, kind, connect=None, bind=None, ident=None, **opts):
    s = ctx.socket(kind)
    s.setsockopt(zmq.LINGER, 0)
    if ident is not None:
        s.setsockopt(zmq.ROUTING_ID, ident)
    for k, v in opts.items():
        s.setsockopt(getattr(zmq, k), v)
    if bind:
        s.bind(bind)
    if connect:
        s.connect(connect)
    return s


# ---------------------------------------------------------------------------------------
# apex-replay: the insert ROUTER (TransitionBatch -> InsertAck) and the sample ROUTER
# (SampleRequest -> SampleReply, PriorityUpdate). Counters are read from the stats of the
# replies; the rows taken are written to --rows-out for the dump check of the script.

class Replay:
    def __init__(self, a):
        self.a = a
        self.ctx = zmq.Context()
        self.ins = sock(self.ctx, zmq.DEALER, connect=a.insert, ident=b"edge-insert")
        self.smp = sock(self.ctx, zmq.DEALER, connect=a.sample, ident=b"edge-sample")
        self.acks = {}  # (actor, seq) -> times acked
        self.replies = {}  # id -> [(reply, why)]
        self.want_rows = {}  # request id -> rows of an OK answer
        self.m = dict(inserted=0, bad=0, duplicates=0, updated=0, stale=0, sampled=0)
        self.stored = []  # rows taken, for the dump: (action, reward, discount, obs, next_obs) bits
        self.keys = set()  # valid keys seen in replies
        self.next_id = 1000
        self.probe_seq = 0
        self.probe_epoch = 0x5EED
        self.tag = 0
        self.held = []  # ids answered later (held requests), checked at the end
        self.refused_ids = []  # ids that must never be answered

    # -- plumbing --
    def pump(self, timeout):
        poller = zmq.Poller()
        poller.register(self.ins, zmq.POLLIN)
        poller.register(self.smp, zmq.POLLIN)
        for s, _ in poller.poll(int(timeout * 1000)):
            while s.poll(0):
                msg = s.recv()
                body, f = decode(msg)
                if s is self.ins and body == B_ACK:
                    for q in ack_seqs(f):
                        k = (f.get(1, 0), q)
                        self.acks[k] = self.acks.get(k, 0) + 1
                elif s is self.smp and body == B_SREPLY:
                    rid = f.get(1, 0)
                    r, why = check_reply(f, self.a.obs_dim, self.a.n_actions,
                                         self.want_rows.get(rid, -1))
                    for k in r.get("keys", []):
                        self.keys.add(k)
                    self.replies.setdefault(rid, []).append((r, why))
                else:
                    self.replies.setdefault("other", []).append(msg[:32])

    def new_id(self):
        self.next_id += 1
        return self.next_id

    def request(self, msg, rid, rows):
        self.want_rows[rid] = rows
        self.smp.send(msg)

    def reply(self, rid, timeout=10.0):
        wait_until(lambda: rid in self.replies, timeout, self.pump)
        got = self.replies.get(rid)
        return got[0] if got else (None, "no reply")

    def probe_sample(self):
        """A normal SampleRequest: (reply, why-not)."""
        rid = self.new_id()
        self.request(sample_request(rid, 8, fbits(0.5)), rid, 8)
        r, why = self.reply(rid)
        if r is not None and not why:
            if r["status"] != SAMPLE_OK:
                why = "status %d" % r["status"]
            else:
                self.m["sampled"] += 8
        return r, why

    def stats(self):
        rid = self.new_id()
        self.request(sample_request(rid, 0, 0, stats_only=1), rid, 0)
        r, why = self.reply(rid)
        if r is not None and not why and r["status"] != SAMPLE_NOT_READY:
            why = "a stats request answered with status %d" % r["status"]
        return r, why

    def counters_ok(self, st, keys=("inserted", "bad", "duplicates", "updated", "stale",
                                    "sampled")):
        """'' when the server's counters equal the model, else the differences."""
        diff = ["%s %d (want %d)" % (k, st[k], self.m[k]) for k in keys if st[k] != self.m[k]]
        size = min(self.m["inserted"], st["capacity"])
        if st["size"] != size:
            diff.append("size %d (want %d)" % (st["size"], size))
        return ", ".join(diff)

    # -- rows --
    def row(self, obs=None, next_obs=None, action=0, reward=None, discount=None):
        """One sane row, tagged (a unique observation value) so the dump can find it."""
        self.tag += 1
        t = fbits(float(self.tag))
        d = self.a.obs_dim
        return (action, reward if reward is not None else fbits(1.0),
                discount if discount is not None else fbits(0.99),
                obs if obs is not None else [t] + [fbits(0.1 * j) for j in range(1, d)],
                next_obs if next_obs is not None else [t] + [fbits(-0.1 * j) for j in range(1, d)])

    def batch(self, rows, actor_id=0, seq=0, epoch=None, **over):
        epoch = random.getrandbits(64) if epoch is None else epoch
        over.setdefault("obs_dim", self.a.obs_dim)
        return simple_batch(actor_id, epoch, seq, rows, **over)

    # -- inserts --
    def insert_edge(self, group, name, msg, taken, key, rows, dup=False):
        """Sends one edge batch (key = (actor_id, seq)), then a normal batch; checks the acks
        and the counters."""
        before = self.acks.get(key, 0)
        self.ins.send(msg)
        self.probe_seq += 1
        pk = (1, self.probe_seq)
        prow = self.row()
        self.ins.send(self.batch([prow], 1, self.probe_seq, self.probe_epoch))
        why = []
        if not wait_until(lambda: self.acks.get(pk, 0) > 0, 10.0, self.pump):
            why.append("the normal batch after it was not acknowledged")
        else:
            self.m["inserted"] += 1
            self.stored.append(prow)
        if taken:
            if not wait_until(lambda: self.acks.get(key, 0) > before, 5.0, self.pump):
                why.append("taken but not acknowledged")
            if dup:
                self.m["duplicates"] += 1
            else:
                self.m["inserted"] += len(rows)
                self.stored.extend(rows)
        else:
            self.m["bad"] += 1
            if self.acks.get(key, 0) > before:
                why.append("refused but acknowledged")
        st, swhy = self.stats()
        if st is None or swhy:
            why.append("stats request: %s" % swhy)
        else:
            c = self.counters_ok(st["stats"])
            if c:
                why.append("counters: " + c)
                self.sync(st["stats"])
        R.edge(group, name + (" (taken)" if taken else " (refused)"), not why, "; ".join(why))

    def sync(self, st):
        """After a mismatch, follow the server so that one fault is reported once."""
        for k in ("inserted", "bad", "duplicates", "updated", "stale", "sampled"):
            self.m[k] = st[k]

    def inserts(self):
        a = self.a
        d, A, N, M = a.obs_dim, a.n_actions, a.num_actors, a.max_batch
        seq = [5000]

        def nseq():
            seq[0] += 1
            return seq[0]

        def one(group, name, taken, actor=0, s=None, rows=None, prio=None, **over):
            s = nseq() if s is None else s
            rows = rows if rows is not None else [self.row()]
            if prio is not None:
                over["priorities"] = prio
            msg = self.batch(rows, actor, s, **over)
            self.insert_edge(group, name, msg, taken, (actor, s), rows)
            return msg, (actor, s), rows

        g = "replay insert: Envelope.version"
        for name, v in ENVELOPE_VERSIONS:
            one(g, name, False, version=v)
        g = "replay insert: TransitionBatch.actor_id (num_actors %d)" % N
        for name, v, t in (("0", 0, True), ("num_actors - 1", N - 1, True),
                           ("num_actors", N, False), ("u32 max", U32_MAX, False)):
            one(g, name, t, actor=v)
        g = "replay insert: TransitionBatch.seq"
        for name, v, t in (("0", 0, True), ("WIRE_SEQ_MAX - 1", WIRE_SEQ_MAX - 1, True),
                           ("WIRE_SEQ_MAX", WIRE_SEQ_MAX, True),
                           ("WIRE_SEQ_MAX + 1 (u64 max)", U64_MAX, False)):
            one(g, name, t, s=v)
        g = "replay insert: TransitionBatch.epoch"
        for name, v in (("0", 0), ("u64 max", U64_MAX)):
            one(g, name, True, epoch=v)
        g = "replay insert: TransitionBatch.weights_version"
        for name, v in (("0", 0), ("u64 max", U64_MAX)):
            one(g, name, True, weights_version=v)
        g = "replay insert: TransitionBatch.count (max_batch %d)" % M
        one(g, "0", False, rows=[], count=0)
        one(g, "1", True)
        one(g, "max_batch", True, rows=[self.row() for _ in range(M)])
        big = [self.row() for _ in range(M + 1)]
        one(g, "max_batch + 1", False, rows=big)
        one(g, "u32 max (arrays of 1 row)", False, count=U32_MAX)
        g = "replay insert: TransitionBatch.obs_dim (obs_dim %d)" % d
        for name, v in (("0", 0), ("obs_dim - 1", d - 1), ("obs_dim + 1", d + 1),
                        ("u32 max", U32_MAX)):
            # Arrays of v elements per row (of d for u32 max): only the dimension is wrong.
            r = self.row(obs=[fbits(0.5)] * v, next_obs=[fbits(0.5)] * v) if v < d + 2 else None
            one(g, name, False, rows=[r] if r else None, obs_dim=v)
        g = "replay insert: TransitionBatch.obs_dtype (the run's float32 = 0)"
        for name, v in (("0 (float32)", 0), ("1 (uint8)", 1), ("2", 2), ("-1", -1),
                        ("i32 max", I32_MAX)):
            if v == 1:  # uint8 arrays of the right length
                one(g, name, False, obs=bytes(d), next_obs=bytes(d), obs_dtype=1)
            else:
                one(g, name, v == 0, obs_dtype=v)
        for field in ("obs", "next_obs"):
            g = "replay insert: TransitionBatch.%s (finite float32, every element)" % field
            for name, b, t in finite_f32():
                r = self.row(**{field: [b] * d})
                if field == "obs":  # the tag moves to the other observation
                    r = (r[0], r[1], r[2], r[3], [fbits(float(self.tag))] + r[4][1:])
                one(g, name, t, rows=[r])
        g = "replay insert: TransitionBatch.actions (n_actions %d)" % A
        for name, v, t in (("0", 0, True), ("n_actions - 1", A - 1, True),
                           ("n_actions", A, False), ("-1", -1, False), ("i32 min", I32_MIN, False),
                           ("i32 max", I32_MAX, False)):
            one(g, name, t, rows=[self.row(action=v)])
        g = "replay insert: TransitionBatch.rewards (finite float32)"
        for name, b, t in finite_f32():
            one(g, name, t, rows=[self.row(reward=b)])
        g = "replay insert: TransitionBatch.discounts ([0, WIRE_DISCOUNT_MAX])"
        for name, b, t in bounded_f32(WIRE_DISCOUNT_MAX):
            one(g, name, t, rows=[self.row(discount=b)])
        g = "replay insert: TransitionBatch.priorities ([0, WIRE_PRIORITY_MAX])"
        one(g, "absent (the max priority)", True, priorities=b"")
        for name, b, t in bounded_f32(WIRE_PRIORITY_MAX):
            one(g, name, t, prio=[b])
        g = "replay insert: a re-sent batch"
        msg, key, rows = one(g, "first", True)
        self.insert_edge(g, "again: a duplicate, acknowledged, not stored", msg, True, key, rows,
                         dup=True)

    # -- sample requests --
    def sample_edge(self, group, name, msg, rid, expect, rows=0, check=None):
        """expect: SAMPLE_OK / SAMPLE_NOT_READY / SAMPLE_REFUSED (answered), or None (refused
        as bad: never answered)."""
        self.request(msg, rid, rows)
        why = []
        if expect is None:
            self.m["bad"] += 1
            self.refused_ids.append(rid)
        elif expect == SAMPLE_OK:
            self.m["sampled"] += rows
        r, pwhy = self.probe_sample()
        if r is None or pwhy:
            why.append("the normal request after it: %s" % pwhy)
        if expect is not None:
            e, ewhy = self.reply(rid, 5.0)
            if e is None or ewhy:
                why.append("answer: %s" % ewhy)
            elif e["status"] != expect:
                why.append("answered %d, documented %d" % (e["status"], expect))
            elif check:
                c = check(e)
                if c:
                    why.append(c)
        elif rid in self.replies:
            why.append("refused but answered (status %d)" % self.replies[rid][0][0]["status"])
        if r is not None and not pwhy:
            c = self.counters_ok(r["stats"])
            if c:
                why.append("counters: " + c)
                self.sync(r["stats"])
        label = {None: "refused", SAMPLE_OK: "OK", SAMPLE_NOT_READY: "NOT_READY",
                 SAMPLE_REFUSED: "REFUSED"}[expect]
        R.edge(group, "%s (%s)" % (name, label), not why, "; ".join(why))

    def samples(self):
        a = self.a
        M, half = a.max_batch, fbits(0.5)

        def req(group, name, expect, rows=8, rid=None, check=None, batch_size=8, beta=half,
                **kw):
            rid = self.new_id() if rid is None else rid
            self.sample_edge(group, name, sample_request(rid, batch_size, beta, **kw), rid,
                             expect, rows if expect == SAMPLE_OK else 0, check)

        def all_one(e):
            return "" if all(w == 1.0 for w in e["weights"]) else "beta 0 and weights %s" % (
                sorted(set(e["weights"]))[:4])

        g = "replay sample: Envelope.version"
        for name, v in ENVELOPE_VERSIONS:
            req(g, name, None, version=v)
        g = "replay sample: SampleRequest.id"
        for name, v in (("0", 0), ("u64 max", U64_MAX)):
            req(g, name, SAMPLE_OK, rid=v)
        g = "replay sample: SampleRequest.batch_size (max_batch %d)" % M
        req(g, "0 (not stats_only)", None, batch_size=0)
        req(g, "1", SAMPLE_OK, rows=1, batch_size=1)
        req(g, "max_batch", SAMPLE_OK, rows=M, batch_size=M)
        req(g, "max_batch + 1", None, batch_size=M + 1)
        req(g, "u32 max", None, batch_size=U32_MAX)
        g = "replay sample: SampleRequest.beta ([0, WIRE_BETA_MAX])"
        for name, b, t in bounded_f32(WIRE_BETA_MAX):
            req(g, name, SAMPLE_OK if t else None, beta=b,
                check=all_one if b in (F_ZERO, F_NEG_ZERO) else None)
        g = "replay sample: SampleRequest.batches (WIRE_MAX_BATCHES_PER_REQUEST %d)" % (
            WIRE_MAX_BATCHES_PER_REQUEST)
        K = WIRE_MAX_BATCHES_PER_REQUEST
        req(g, "0 (= 1)", SAMPLE_OK, rows=8, batches=0)
        req(g, "1", SAMPLE_OK, rows=8, batches=1)
        if K <= M:
            req(g, "the most, of 1 row", SAMPLE_OK, rows=K, batch_size=1, batches=K)
        req(g, "the most + 1, of 1 row", None, batch_size=1, batches=K + 1)
        req(g, "rows = max_batch", SAMPLE_OK, rows=M // 8 * 8, batches=M // 8)
        req(g, "rows = max_batch + 8", None, batches=M // 8 + 1)
        req(g, "2 of max_batch rows", None, batch_size=M, batches=2)
        req(g, "u32 max", None, batches=U32_MAX)
        g = "replay sample: SampleRequest.min_priority ([0, WIRE_MASS_MAX])"
        for name, b, t in mass_f64():
            req(g, name, SAMPLE_OK if t else None, min_priority_bits=b)
        g = "replay sample: SampleRequest.stats_only"
        req(g, "true, batch_size 0, batches 0", SAMPLE_NOT_READY, batch_size=0, beta=0,
            stats_only=1)
        req(g, "true with batch_size 1", None, batch_size=1, stats_only=1)
        req(g, "true with batches 1", None, batch_size=0, batches=1, stats_only=1)
        g = "replay sample: SampleRequest.stats_after"
        ins = self.m["inserted"]
        for name, v, held in (("0", 0, False), ("= inserted", ins, False),
                              ("inserted + 1 (held to the deadline)", ins + 1, True),
                              ("u64 max (held to the deadline)", U64_MAX, True)):
            req(g, name + " with stats_only", SAMPLE_NOT_READY, batch_size=0, beta=0,
                stats_only=1, stats_after=v)
        req(g, "1 without stats_only", None, stats_after=1)
        req(g, "u64 max without stats_only", None, stats_after=U64_MAX)

    # -- priority updates --
    def update_edge(self, group, name, msg, taken, valid, stale):
        self.smp.send(msg)
        if taken:
            self.m["updated"] += valid
            self.m["stale"] += stale
        else:
            self.m["bad"] += 1
        why = []
        r, pwhy = self.probe_sample()
        if r is None or pwhy:
            why.append("the normal request after it: %s" % pwhy)
        else:
            c = self.counters_ok(r["stats"])
            if c:
                why.append("counters: " + c)
                self.sync(r["stats"])
        R.edge(group, name + (" (taken)" if taken else " (refused)"), not why, "; ".join(why))

    def updates(self):
        M = self.a.max_batch
        keys = sorted(self.keys)
        k0 = keys[0]

        def upd(group, name, taken, ks=None, prios=None, count=None, version=VERSION, stale=0):
            ks = [k0] if ks is None else ks
            prios = [F_ONE] * len(ks) if prios is None else prios
            msg = priority_update(len(ks) if count is None else count, ks, prios, version)
            self.update_edge(group, name, msg, taken, len(ks) - stale, stale)

        g = "replay sample: PriorityUpdate Envelope.version"
        for name, v in ENVELOPE_VERSIONS:
            upd(g, name, False, version=v)
        g = "replay sample: PriorityUpdate.count (max_batch %d)" % M
        upd(g, "0", False, ks=[], count=0)
        upd(g, "1", True)
        upd(g, "max_batch", True, ks=(keys * M)[:M])
        upd(g, "max_batch + 1", False, ks=(keys * (M + 1))[:M + 1])
        upd(g, "u32 max (arrays of 1)", False, count=U32_MAX)
        g = "replay sample: PriorityUpdate.keys"
        size = self.m["inserted"]
        for name, k in (("0 (generation 0)", 0), ("u64 max", U64_MAX),
                        ("slot = size", size | (1 << 32)),
                        ("a sampled key, next generation", k0 + (1 << 32)),
                        ("slot u32 max, generation 1", U32_MAX | (1 << 32))):
            upd(g, name + ": stale", True, ks=[k], stale=1)
        upd(g, "a sampled key", True, ks=[keys[-1]])
        g = "replay sample: PriorityUpdate.priorities ([0, WIRE_PRIORITY_MAX])"
        for name, b, t in bounded_f32(WIRE_PRIORITY_MAX):
            upd(g, name, t, prios=[b])

    def run(self):
        a = self.a
        # Empty: a valid request is held to [replay] sample_timeout_ms, then NOT_READY.
        rid = self.new_id()
        self.request(sample_request(rid, 8, fbits(0.5)), rid, 8)
        e, why = self.reply(rid, 10.0)
        R.line(e is not None and not why and e["status"] == SAMPLE_NOT_READY,
               "replay sample: a request to the empty replay is answered NOT_READY (%s)" % (
                   why or "status %d" % e["status"]))
        st, why = self.stats()
        R.line(st is not None and not why and st["stats"]["inserted"] == 0 and
               st["stats"]["bad"] == 0,
               "replay sample: a stats request is answered at once (%s)" % (
                   why or "inserted %d, bad %d" % (st["stats"]["inserted"], st["stats"]["bad"])))
        self.m["sampled"] = st["stats"]["sampled"] if st else 0
        self.inserts()
        R.flush()
        self.samples()
        R.flush()
        self.updates()
        R.flush()
        # Held requests have deadlines; one held stats request sent last is answered after
        # all of them: then no refused id may have been answered, and none other than once.
        rid = self.new_id()
        self.request(sample_request(rid, 0, 0, stats_only=1, stats_after=U64_MAX), rid, 0)
        e, why = self.reply(rid, 10.0)
        answered = [i for i in self.refused_ids if i in self.replies]
        twice = [i for i, v in self.replies.items() if i != "other" and len(v) > 1]
        R.line(e is not None and not answered and not twice and "other" not in self.replies,
               "replay sample: after the last deadline, none of the %d refused requests was "
               "answered, none twice, nothing else came (%s)" % (
                   len(self.refused_ids), answered or twice or self.replies.get("other") or
                   "clean"))
        st, why = self.stats()
        ok = st is not None and not why and not self.counters_ok(st["stats"])
        R.line(ok, "replay: final counters: inserted %d, bad %d, duplicates %d, updated %d, "
               "stale %d, sampled %d (server: %s)" % (
                   self.m["inserted"], self.m["bad"], self.m["duplicates"], self.m["updated"],
                   self.m["stale"], self.m["sampled"], st["stats"] if st else why))
        with open(a.rows_out, "w") as f:
            for r in self.stored:
                f.write(" ".join(str(x) for x in [r[0], r[1], r[2]] + list(r[3]) + list(r[4])))
                f.write("\n")


# ---------------------------------------------------------------------------------------
# apex-replay with [replay] capacity below max_batch: a request for more rows than the
# replay holds is valid on the wire and answered REFUSED; one of capacity rows is held.

def run_capacity(a):
    ctx = zmq.Context()
    s = sock(ctx, zmq.DEALER, connect=a.sample, ident=b"edge-capacity")
    got = {}

    def pump(t):
        if s.poll(int(t * 1000)):
            body, f = decode(s.recv())
            if body == B_SREPLY:
                got[f.get(1, 0)] = check_reply(f, a.obs_dim, a.n_actions, -1)

    for rid, bs, want, name in ((1, a.capacity + 1, SAMPLE_REFUSED, "capacity + 1"),
                                (2, a.max_batch, SAMPLE_REFUSED, "max_batch (> capacity)"),
                                (3, a.capacity, SAMPLE_NOT_READY, "capacity (empty: held)")):
        s.send(sample_request(rid, bs, fbits(0.5)))
        wait_until(lambda: rid in got, 10.0, pump)
        r, why = got.get(rid, (None, "no answer"))
        R.edge("replay sample: SampleRequest.batch_size against [replay] capacity %d" % (
            a.capacity), "%s (%s)" % (name, {1: "NOT_READY", 2: "REFUSED"}[want]),
            r is not None and not why and r["status"] == want and r["stats"]["bad"] == 0,
            why or "status %d, bad %d" % (r["status"], r["stats"]["bad"]))
    R.flush()


# ---------------------------------------------------------------------------------------
# apex-learner, standalone (a replay without data, no actors): the stats PULL (ActorStats ->
# metrics.csv) and the weights ROUTER (WeightsRequest -> Weights).

class Metrics:
    """metrics.csv read by its header names."""

    def __init__(self, path):
        self.path = path

    def count(self):
        try:
            with open(self.path) as f:
                return sum(1 for _ in f)
        except OSError:
            return 0

    def last(self):
        try:
            with open(self.path) as f:
                rows = [r for r in csv.DictReader(f) if None not in r.values()]
            return rows[-1] if rows else None
        except (OSError, csv.Error):
            return None


class Learner:
    def __init__(self, a):
        self.a = a
        self.ctx = zmq.Context()
        self.push = sock(self.ctx, zmq.PUSH, connect=a.stats)
        self.csv = Metrics(a.metrics)
        self.m = dict(env_frames=0, episodes=0, bad_messages=0, weights_answers=0,
                      weights_refused=0)
        self.versions = {}  # actor -> weights_version of its last accepted ActorStats
        self.dealers = []
        self.got = {}  # dealer index -> [(arrival time, (body, fields))]
        self.rng = random.Random(11)

    def pump(self, t):
        """Waits t seconds, taking every answer to the weights DEALERs as it arrives (its
        arrival time is what tells a held request from one answered at once)."""
        end = time.monotonic() + t
        while True:
            for i, d in enumerate(self.dealers):
                while d.poll(0):
                    self.got.setdefault(i, []).append((time.monotonic(), decode(d.recv())))
            if time.monotonic() >= end:
                return
            time.sleep(0.005)

    def row_where(self, cond, timeout=15.0):
        got = [None]

        def ok():
            r = self.csv.last()
            if r is not None and cond(r):
                got[0] = r
                return True
            return False
        wait_until(ok, timeout, self.pump, 0.05)
        return got[0]

    def diff(self, r, keys=("env_frames", "episodes", "bad_messages")):
        out = ["%s %s (want %d)" % (k, r[k], self.m[k]) for k in keys if int(r[k]) != self.m[k]]
        vmin = min(self.versions.values()) if self.versions else 0
        if int(r["actor_version_min"]) != vmin:
            out.append("actor_version_min %s (want %d)" % (r["actor_version_min"], vmin))
        return ", ".join(out)

    def sync(self, r):
        for k in self.m:
            self.m[k] = int(r[k])

    def stats_edge(self, group, name, taken, actor=0, frames=1, frames_delta=1, n=0, wv=1,
                   **kw):
        self.push.send(actor_stats(actor_id=actor, frames=frames, frames_delta=frames_delta,
                                   n_episodes=n, weights_version=wv, **kw))
        if taken:
            self.m["env_frames"] += frames_delta
            self.m["episodes"] += n
            self.versions[actor] = wv
        else:
            self.m["bad_messages"] += 1
        # A normal ActorStats after it (one more frame): once a row counts it, the edge
        # message before it on the same connection has been taken or refused.
        self.push.send(actor_stats(actor_id=1, frames=1, frames_delta=1, weights_version=5))
        self.m["env_frames"] += 1
        self.versions[1] = 5
        target = self.m["env_frames"]
        r = self.row_where(lambda r: int(r["env_frames"]) >= target)
        why = "no metrics.csv row reached env_frames %d (last: %s)" % (
            target, (self.csv.last() or {}).get("env_frames")) if r is None else self.diff(r)
        if r is not None and why:
            self.sync(r)
        R.edge(group, name + (" (taken)" if taken else " (refused)"), not why, why)

    def stats(self):
        a = self.a
        N = a.num_actors

        def ep(n, returns=None, lengths=None, eps=None):
            return dict(n=n, returns=f32a(returns if returns is not None else [fbits(1.0)] * n),
                        lengths=u32a(lengths if lengths is not None else [10] * n),
                        epsilons=f32a(eps if eps is not None else [fbits(0.1)] * n))

        g = "learner stats: Envelope.version"
        for name, v in ENVELOPE_VERSIONS:
            self.stats_edge(g, name, False, version=v)
        g = "learner stats: ActorStats.actor_id (num_actors %d)" % N
        for name, v, t in (("0", 0, True), ("num_actors - 1", N - 1, True),
                           ("num_actors", N, False), ("u32 max", U32_MAX, False)):
            self.stats_edge(g, name, t, actor=v)
        g = "learner stats: ActorStats.frames ([0, WIRE_FRAMES_MAX])"
        self.stats_edge(g, "0 (frames_delta 0)", True, frames=0, frames_delta=0)
        self.stats_edge(g, "WIRE_FRAMES_MAX - 1", True, frames=WIRE_FRAMES_MAX - 1)
        self.stats_edge(g, "WIRE_FRAMES_MAX", True, frames=WIRE_FRAMES_MAX)
        self.stats_edge(g, "WIRE_FRAMES_MAX + 1", False, frames=WIRE_FRAMES_MAX + 1)
        self.stats_edge(g, "u64 max", False, frames=U64_MAX)
        g = "learner stats: ActorStats.frames_delta ([0, frames])"
        self.stats_edge(g, "0", True, frames=5, frames_delta=0)
        self.stats_edge(g, "= frames = WIRE_FRAMES_MAX", True, frames=WIRE_FRAMES_MAX,
                        frames_delta=WIRE_FRAMES_MAX)
        self.stats_edge(g, "frames + 1", False, frames=5, frames_delta=6)
        self.stats_edge(g, "WIRE_FRAMES_MAX + 1 = frames + 1", False, frames=WIRE_FRAMES_MAX,
                        frames_delta=WIRE_FRAMES_MAX + 1)
        self.stats_edge(g, "u64 max", False, frames=5, frames_delta=U64_MAX)
        for field, key in (("weights_version", "wv"), ("dropped_batches", "dropped_batches"),
                           ("env_faults", "env_faults"),
                           ("episodes_dropped", "episodes_dropped")):
            g = "learner stats: ActorStats.%s" % field
            for name, v in (("0", 0), ("u64 max", U64_MAX), ("1", 1)):
                self.stats_edge(g, name, True, actor=2, **{key: v})
        g = "learner stats: ActorStats.n_episodes (at most %d)" % STATS_MAX_EPISODES
        self.stats_edge(g, "0", True, **ep(0))
        self.stats_edge(g, "1", True, **ep(1))
        self.stats_edge(g, "the most", True, **ep(STATS_MAX_EPISODES))
        self.stats_edge(g, "the most + 1", False, **ep(STATS_MAX_EPISODES + 1))
        e = ep(1)
        e["n"] = U32_MAX
        self.stats_edge(g, "u32 max (arrays of 1)", False, **e)
        g = "learner stats: ActorStats.returns (finite float32)"
        for name, b, t in finite_f32():
            self.stats_edge(g, name, t, **ep(1, returns=[b]))
        g = "learner stats: ActorStats.lengths"
        for name, v in (("0", 0), ("u32 max", U32_MAX)):
            self.stats_edge(g, name, True, **ep(1, lengths=[v]))
        g = "learner stats: ActorStats.epsilons ([0, WIRE_EPSILON_MAX])"
        for name, b, t in bounded_f32(WIRE_EPSILON_MAX):
            self.stats_edge(g, name, t, **ep(1, eps=[b]))
        r = self.csv.last()
        mr = float(r["mean_return_100"]) if r else math.nan
        R.line(math.isfinite(mr), "learner stats: mean_return_100 is finite after returns at "
               "+-FLT_MAX and denormals (%s)" % mr)

    # -- weights --
    def weights(self):
        a = self.a
        base = self.row_where(lambda r: True)
        self.sync(base)
        got, pump = self.got, self.pump
        sent = {}

        def dealer():
            d = sock(self.ctx, zmq.DEALER, connect=a.weights,
                     ident=b"edge-w%d" % len(self.dealers))
            self.dealers.append(d)
            return len(self.dealers) - 1

        # The learner's current version: the answer to a request holding nothing.
        i0 = dealer()
        self.dealers[i0].send(weights_request(0))
        wait_until(lambda: i0 in got, 10.0, pump)
        body, f = got[i0][0][1] if i0 in got else (None, {})
        cur = f.get(1, 0)
        R.line(body == B_WEIGHTS and cur >= 1,
               "learner weights: a request with have_version 0 is answered (version %d)" % cur)
        self.m["weights_answers"] += 1
        # Every edge from its own DEALER (one request in flight per peer).
        edges = [("0", 0, False), ("current - 1", cur - 1, False),
                 ("current (held)", cur, True), ("current + 1 (held)", cur + 1, True),
                 ("u32 max (held)", U32_MAX, True), ("2^32 (held)", 1 << 32, True),
                 ("u64 max - 1 (held)", U64_MAX - 1, True), ("u64 max (held)", U64_MAX, True)]
        ids = []
        for name, v, held in edges:
            i = dealer()
            ids.append((i, name, v, held))
        for i, name, v, held in ids:
            sent[i] = time.monotonic()
            self.dealers[i].send(weights_request(v))
        n_now = sum(1 for _, _, _, h in ids if not h)
        n_held = len(ids) - n_now
        g = "learner weights: WeightsRequest.have_version (current version %d)" % cur
        # While the held ones wait, a row shows exactly them held and the others answered.
        want_ans = self.m["weights_answers"] + n_now
        r = self.row_where(lambda r: int(r["weights_held"]) == n_held and
                           int(r["weights_answers"]) == want_ans, 10.0)
        R.line(r is not None, "learner weights: %d requests held (have_version >= current) while "
               "%d are answered at once (metrics weights_held / weights_answers: %s)" % (
                   n_held, n_now, (r or self.csv.last() or {}).get("weights_held")))
        wait_until(lambda: all(i in got for i, _, _, _ in ids), 10.0, pump)
        self.m["weights_answers"] += len(ids)
        for i, name, v, held in ids:
            why = []
            ans = got.get(i, [])
            if not ans:
                why.append("not answered")
            else:
                t, (body, f) = ans[0]
                if body != B_WEIGHTS:
                    why.append("answered with body %s" % body)
                else:
                    why.extend(self.check_weights(f, cur))
                if held and t - sent[i] < 0.9:
                    why.append("answered after %.2f s, not held" % (t - sent[i]))
            R.edge(g, name, not why, "; ".join(why))
        # What is not a WeightsRequest is refused, counted, and not answered.
        bad = [("Envelope.version 0", weights_request(0, version=0)),
               ("Envelope.version %d" % (VERSION + 1), weights_request(0, version=VERSION + 1)),
               ("Envelope.version u32 max", weights_request(0, version=U32_MAX)),
               # (small: the endpoint's ZMQ_MAXMSGSIZE is for requests, and libzmq drops the
               # connection of a larger message before the learner sees it)
               ("a Weights", weights(cur + 1, 0, 1, f32a([F_ZERO]))),
               ("an ActorStats", actor_stats()),
               ("a SampleRequest", sample_request(1, 8, fbits(0.5))),
               ("an InsertAck", insert_ack(0, 0)),
               ("a TransitionBatch", transition_batch(count=0))]
        ib = dealer()
        for _, msg in bad:
            self.dealers[ib].send(msg)
        self.m["weights_refused"] += len(bad)
        self.m["bad_messages"] += len(bad)
        want = dict(self.m)
        r = self.row_where(lambda r: int(r["weights_refused"]) >= want["weights_refused"], 10.0)
        pump(0.3)
        ok = (r is not None and int(r["weights_refused"]) == want["weights_refused"] and
              int(r["bad_messages"]) == want["bad_messages"] and ib not in got)
        R.line(ok, "learner weights: %d messages that are not WeightsRequests (%s) refused: "
               "weights_refused %s (want %d), bad_messages %s (want %d), %d answers" % (
                   len(bad), ", ".join(n for n, _ in bad), (r or {}).get("weights_refused"),
                   want["weights_refused"], (r or {}).get("bad_messages"), want["bad_messages"],
                   len(got.get(ib, []))))
        r = self.row_where(lambda r: int(r["weights_held"]) == 0 and
                           int(r["weights_answers"]) >= self.m["weights_answers"], 10.0)
        R.line(r is not None and int(r["weights_answers"]) == self.m["weights_answers"] and
               all(len(v) == 1 for k, v in got.items()),
               "learner weights: every request answered exactly once (weights_answers %s, want "
               "%d; answers per DEALER %s)" % ((r or {}).get("weights_answers"),
                                               self.m["weights_answers"],
                                               sorted(len(v) for v in got.values())))

    def check_weights(self, f, cur):
        why = []
        P = self.a.num_params
        if f.get(1, 0) != cur or f.get(3, 0) != P:
            why.append("version %d (want %d), num_params %d (want %d)" % (
                f.get(1, 0), cur, f.get(3, 0), P))
        try:
            if not finite(arr(f, 4, "f", P)):
                why.append("non-finite parameters")
        except ValueError as e:
            why.append(str(e))
        return why

    # -- training on edge-valued transitions (through the replay) --
    def ask_weights(self):
        """The learner's current Weights, asked for by a new DEALER: (fields, why-not)."""
        i = len(self.dealers)
        d = sock(self.ctx, zmq.DEALER, connect=self.a.weights, ident=b"edge-t%d" % i)
        self.dealers.append(d)
        d.send(weights_request(0))
        if not wait_until(lambda: i in self.got, 10.0, self.pump):
            return {}, "no answer"
        body, f = self.got[i][0][1]
        if body != B_WEIGHTS:
            return f, "answered with body %s" % body
        return f, "; ".join(self.check_weights(f, f.get(1, 0)))

    def insert(self, rows, acks):
        """Inserts rows (8 a batch) into the learner's replay; waits for every ack."""
        for k in range(0, len(rows), 8):
            self.seq += 1
            self.ins.send(simple_batch(0, 0xED6E, self.seq, rows[k:k + 8]))
        want = self.seq

        def pump(t):
            if self.ins.poll(int(t * 1000)):
                body, f = decode(self.ins.recv())
                if body == B_ACK:
                    acks.update(ack_seqs(f))
        return wait_until(lambda: want in acks, 20.0, pump)

    def training(self):
        a = self.a
        self.ins = sock(self.ctx, zmq.DEALER, connect=a.insert, ident=b"edge-train")
        self.seq, acks = 0, set()
        d = a.obs_dim

        def normal():
            return (self.rng.randrange(a.n_actions), fbits(1.0), fbits(0.99),
                    [fbits(self.rng.uniform(-0.1, 0.1)) for _ in range(d)],
                    [fbits(self.rng.uniform(-0.1, 0.1)) for _ in range(d)])

        def edge(obs=None, next_obs=None, reward=None):
            a_, r_, g_, o_, n_ = normal()
            return (a_, reward if reward is not None else r_, g_, obs or o_, next_obs or n_)

        edges = [edge(obs=[F_MAX] * d), edge(obs=[F_NEG_MAX] * d), edge(next_obs=[F_MAX] * d),
                 edge(next_obs=[F_NEG_MAX] * d), edge(reward=F_MAX), edge(reward=F_NEG_MAX),
                 edge(obs=[F_TRUE_MIN] * d), edge(obs=[F_MAX_SUBNORMAL] * d)]
        names = "obs +-FLT_MAX, next_obs +-FLT_MAX, reward +-FLT_MAX, obs denormal"
        u0 = int(self.csv.last()["updates"])
        ok = self.insert([normal() for _ in range(a.capacity)] + edges, acks)
        r = self.row_where(lambda r: int(r["updates"]) >= u0 + 100, 60.0) if ok else None
        f, why = self.ask_weights()
        v1, p1 = f.get(1, 0), f.get(4, b"")
        R.line(ok and r is not None and not why and v1 > 1,
               "learner: it trains on transitions with %s (%s updates): its Weights stay "
               "finite (version %d%s)" % (names, r["updates"] if r else "not 100",
                                          v1, ": " + why if why else ""))
        # The edge rows overwritten (FIFO), training goes on and moves the weights.
        u1 = int((r or self.csv.last())["updates"])
        ok = self.insert([normal() for _ in range(a.capacity)], acks)
        r = self.row_where(lambda r: int(r["updates"]) >= u1 + 100, 60.0) if ok else None
        f, why = self.ask_weights()
        v2, p2 = f.get(1, 0), f.get(4, b"")
        R.line(ok and r is not None and not why and v2 > v1 and p2 != p1,
               "learner: once they are overwritten it trains on: newer Weights (version %d), "
               "finite, moved%s" % (v2, ": " + why if why else ""))

    def run(self):
        r = self.row_where(lambda r: True, 30.0)
        R.line(r is not None, "learner: metrics.csv has rows")
        if r is None:
            return
        self.sync(r)
        self.stats()
        R.flush()
        self.weights()
        R.flush()
        if self.a.insert:
            self.training()


# ---------------------------------------------------------------------------------------
# apex-learner's other input: the replay's SampleReplies. The peer is the replay's sample
# ROUTER for a learner with one request in flight ([learner] prefetch 1, one batch per
# request): every request is answered with one edge-valued reply. A reply the learner takes
# is trained on (metrics updates + 1) and its keys come back in a PriorityUpdate before the
# next request; one it refuses is counted (bad_messages + 1); a NOT_READY, REFUSED or late
# reply is neither. After each group metrics.csv must show exactly those counts.

TAKEN, REFUSED, NEUTRAL = "taken", "refused", "not trained, not counted"


class LearnerReplay:
    def __init__(self, a):
        self.a = a
        self.ctx = zmq.Context()
        self.r = sock(self.ctx, zmq.ROUTER, bind=a.sample, ROUTER_MANDATORY=1)
        self.csv = Metrics(a.metrics)
        self.reqs = []  # (time, routing id, fields)
        self.bad_reqs = []
        self.updates = []  # (time, keys, priorities)
        self.m = dict(updates=0, bad=0)
        self.replay_bad = 0  # stats.bad_messages of the last reply taken (the CSV adds it)
        self.next_key = 1000
        self.rng = random.Random(5)
        self.B = a.batch_size

    def pump(self, t):
        if not self.r.poll(int(t * 1000)):
            return
        while self.r.poll(0):
            frames = self.r.recv_multipart()
            body, f = decode(frames[-1]) if len(frames) == 2 else (None, {})
            if body == B_SREQ:
                raw = f.get(3)
                beta = struct.unpack("<f", raw)[0] if isinstance(raw, bytes) else 0.0
                ok = (f.get(2, 0) == self.B and f.get(4, 0) in (0, 1) and 0.0 <= beta <= 1.0 and
                      as_f64(f.get(5)) == 0.0 and not f.get(6) and not f.get(7))
                (self.reqs if ok else self.bad_reqs).append((time.monotonic(), frames[0], f))
            elif body == B_PUPD:
                n = f.get(1, 0)
                try:
                    self.updates.append((time.monotonic(), arr(f, 2, "Q", n), arr(f, 3, "f", n)))
                except ValueError:
                    self.bad_reqs.append((time.monotonic(), frames[0], f))
            else:
                self.bad_reqs.append((time.monotonic(), frames[0], f))

    def rows(self):
        d, A, B = self.a.obs_dim, self.a.n_actions, self.B
        r = self.rng
        keys = list(range(self.next_key, self.next_key + B))
        self.next_key += B
        return dict(count=B, obs_dim=d, keys=keys, is_weights=[F_ONE] * B,
                    obs=[fbits(r.uniform(-0.1, 0.1)) for _ in range(B * d)],
                    actions=[r.randrange(A) for _ in range(B)], rewards=[fbits(1.0)] * B,
                    discounts=[fbits(0.9)] * B,
                    next_obs=[fbits(r.uniform(-0.1, 0.1)) for _ in range(B * d)],
                    stats=dict(size=1000, capacity=1000, inserted=1000, sampled=10, updated=5,
                               total_bits=dbits(100.0), min_bits=dbits(0.01)))

    def reply(self, ident, rid, over):
        """Sends the base reply to rid with fields replaced by over (lists are packed as the
        field's type; 'stats' entries are merged). Returns (keys, stats) of what was sent."""
        rw = self.rows()
        stats = rw.pop("stats")
        stats.update(over.pop("stats", {}))
        rw.update(over)
        fmt = dict(keys=u64a, is_weights=f32a, obs=f32a, actions=i32a, rewards=f32a,
                   discounts=f32a, next_obs=f32a)
        packed = {k: (fmt[k](v) if isinstance(v, list) else v) for k, v in rw.items()
                  if k in fmt}
        self.r.send_multipart([ident, sample_reply(
            rid, status=rw.get("status", SAMPLE_OK), count=rw["count"], obs_dim=rw["obs_dim"],
            stats=stats, obs_dtype=rw.get("obs_dtype", 0), version=rw.get("version", VERSION),
            **packed)])
        return (set(rw["keys"]) if isinstance(rw["keys"], list) else set()), stats

    def edge(self, group, name, expect, full=True, **over):
        """Answers the pending request with an edge reply. One the learner must not train on
        (refused, late) is followed by a NOT_READY for the request, which frees its slot at
        once: the next request comes without waiting for [learner] request_timeout_ms, and a
        reply wrongly taken is still trained on (the NOT_READY is then late). Taken: its keys
        come back in a PriorityUpdate (all of them when full) before the next request."""
        why = []
        if not wait_until(lambda: self.reqs, 10.0, self.pump):
            R.edge(group, name, False, "no request")
            return None
        _, ident, f = self.reqs[-1]
        n_req, t_sent = len(self.reqs), time.monotonic()
        rid = over.pop("id", f.get(1, 0))
        keys, stats = self.reply(ident, rid, over)
        status = over.get("status", SAMPLE_OK)
        if expect != TAKEN and status not in (SAMPLE_NOT_READY, SAMPLE_REFUSED):
            self.reply(ident, f.get(1, 0), dict(status=SAMPLE_NOT_READY, count=0, obs_dim=0,
                                                keys=b"", is_weights=b"", obs=b"",
                                                actions=b"", rewards=b"", discounts=b"",
                                                next_obs=b""))
        if expect == TAKEN:
            self.m["updates"] += 1
            self.replay_bad = stats.get("bad", 0)
        elif expect == REFUSED:
            self.m["bad"] += 1
        if not wait_until(lambda: len(self.reqs) > n_req, 10.0, self.pump):
            why.append("no request after it")
        mine = [(k, p) for t, ks, ps in self.updates if t >= t_sent
                for k, p in zip(ks, ps) if k in keys]
        if expect == TAKEN:
            if not mine or (full and sorted(k for k, _ in mine) != sorted(keys)):
                why.append("%d of its %d keys came back (not trained on?)" % (len(mine),
                                                                               len(keys)))
            if any(not 0.0 <= p <= bits_f(WIRE_PRIORITY_MAX) for _, p in mine):
                why.append("a priority outside [0, WIRE_PRIORITY_MAX] went back")
        elif mine:
            why.append("%d of its keys came back: trained on" % len(mine))
        R.edge(group, "%s (%s)" % (name, expect), not why, "; ".join(why))
        return stats

    def new_row(self):
        """The first metrics.csv row written after now."""
        n = self.csv.count()
        wait_until(lambda: self.csv.count() > n, 5.0, self.pump, 0.05)
        return self.csv.last() if self.csv.count() > n else None

    def counters(self, group):
        """After a group: metrics.csv's updates and bad_messages are exactly the model's."""
        r = self.new_row()
        want_bad = (self.m["bad"] + self.replay_bad) % (1 << 64)
        why = "no new metrics.csv row"
        if r is not None:
            why = ", ".join("%s %s (want %d)" % (k, r[k], w) for k, w in (
                ("updates", self.m["updates"]), ("bad_messages", want_bad)) if int(r[k]) != w)
            self.m["updates"] = int(r["updates"])
            self.m["bad"] = (int(r["bad_messages"]) - self.replay_bad) % (1 << 64)
        R.edge(group, "then metrics.csv: updates and bad_messages as counted", not why, why)

    def run(self):
        a = self.a
        d, A, B, M = a.obs_dim, a.n_actions, self.B, a.max_batch
        r = None

        def first_row():
            nonlocal r
            r = self.csv.last()
            return r is not None
        if not wait_until(first_row, 30.0, self.pump, 0.05):
            R.line(False, "learner (fake replay): no metrics.csv rows")
            return
        self.m = dict(updates=int(r["updates"]), bad=int(r["bad_messages"]))
        g = "learner sample: Envelope.version"
        for name, v in ENVELOPE_VERSIONS:
            self.edge(g, name, REFUSED, version=v)
        self.counters(g)
        g = "learner sample: SampleReply.id"
        self.edge(g, "the request's", TAKEN)
        for name, v in (("0", 0), ("u64 max", U64_MAX), ("the request's | 2^63", None)):
            if v is None:
                v = (self.reqs[-1][2].get(1, 0) if self.reqs else 0) | (1 << 63)
            self.edge(g, name + " (no such request: late)", NEUTRAL, id=v)
        self.counters(g)
        g = "learner sample: SampleReply.status"
        empty = dict(count=0, obs_dim=0, keys=b"", is_weights=b"", obs=b"", actions=b"",
                     rewards=b"", discounts=b"", next_obs=b"")
        for name, v, e in (("NOT_READY", SAMPLE_NOT_READY, NEUTRAL),
                           ("REFUSED", SAMPLE_REFUSED, NEUTRAL), ("3", 3, REFUSED),
                           ("-1", -1, REFUSED)):
            self.edge(g, name, e, status=v, **empty)
        self.counters(g)
        g = "learner sample: SampleReply.count (the request's %d; max_batch %d)" % (B, M)

        def n_rows(n):
            return dict(count=n, keys=list(range(1, n + 1)), is_weights=[F_ONE] * n,
                        obs=[F_ZERO] * (n * d), actions=[0] * n, rewards=[F_ONE] * n,
                        discounts=[F_ZERO] * n, next_obs=[F_ZERO] * (n * d))
        for name, n in (("0", 0), ("the request's - 1", B - 1), ("the request's + 1", B + 1),
                        ("max_batch", M), ("max_batch + 1", M + 1)):
            self.edge(g, name, REFUSED, **n_rows(n))
        self.edge(g, "u32 max (arrays of the request's)", REFUSED, count=U32_MAX)
        self.counters(g)
        g = "learner sample: SampleReply.obs_dim (%d)" % d
        for name, v in (("0", 0), ("obs_dim - 1", d - 1), ("obs_dim + 1", d + 1),
                        ("u32 max", U32_MAX)):
            self.edge(g, name, REFUSED, obs_dim=v,
                      **({} if v == U32_MAX else dict(obs=[F_ZERO] * (B * v),
                                                      next_obs=[F_ZERO] * (B * v))))
        self.counters(g)
        g = "learner sample: SampleReply.obs_dtype (float32)"
        self.edge(g, "1 (uint8)", REFUSED, obs_dtype=1, obs=bytes(B * d), next_obs=bytes(B * d))
        self.edge(g, "-1", REFUSED, obs_dtype=-1)
        self.counters(g)
        g = "learner sample: SampleReply.keys"
        for name, k in (("0", 0), ("u64 max", U64_MAX),
                        ("slot and generation u32 max - 1", U64_MAX - 1 - (1 << 32))):
            self.edge(g, name, TAKEN, keys=[k] + [self.next_key + 100 + j for j in range(B - 1)])
        self.counters(g)
        g = "learner sample: SampleReply.is_weights ([0, WIRE_IS_WEIGHT_MAX])"
        for name, b, t in bounded_f32(F_ONE):
            self.edge(g, name, TAKEN if t else REFUSED, is_weights=[b] * B)
        self.counters(g)
        for field in ("obs", "next_obs"):
            g = "learner sample: SampleReply.%s (finite float32, row 0)" % field
            for name, b, t in finite_f32():
                rw = self.rows()[field]
                rw[:d] = [b] * d
                self.edge(g, name, TAKEN if t else REFUSED, full=abs(bits_f(b)) < 1.0,
                          **{field: rw})
            self.counters(g)
        g = "learner sample: SampleReply.actions (n_actions %d)" % A
        for name, v, t in (("0", 0, True), ("n_actions - 1", A - 1, True),
                           ("n_actions", A, False), ("-1", -1, False), ("i32 min", I32_MIN, False),
                           ("i32 max", I32_MAX, False)):
            self.edge(g, name, TAKEN if t else REFUSED, actions=[v] + [0] * (B - 1))
        self.counters(g)
        g = "learner sample: SampleReply.rewards (finite float32, row 0)"
        for name, b, t in finite_f32():
            self.edge(g, name, TAKEN if t else REFUSED, full=abs(bits_f(b)) < 1.0,
                      rewards=[b] + [F_ONE] * (B - 1))
        self.counters(g)
        g = "learner sample: SampleReply.discounts ([0, WIRE_DISCOUNT_MAX], row 0)"
        for name, b, t in bounded_f32(WIRE_DISCOUNT_MAX):
            self.edge(g, name, TAKEN if t else REFUSED, discounts=[b] + [fbits(0.9)] * (B - 1))
        self.counters(g)
        g = "learner sample: ReplayStats counters (u64; metrics.csv shows them as sent)"
        cols = dict(size="replay_size", inserted="replay_inserted", sampled="replay_sampled",
                    updated="priority_updates", stale="stale_updates",
                    duplicates="duplicate_batches")
        for k in ("size", "inserted", "sampled", "updated", "stale", "duplicates", "bad"):
            st = self.edge(g, "%s u64 max" % k, TAKEN, stats={k: U64_MAX})
            r = self.new_row()
            want = {c: (st or {}).get(k2, 0) for k2, c in cols.items()}
            want["bad_messages"] = (self.m["bad"] + self.replay_bad) % (1 << 64)
            why = "no new row" if r is None else ", ".join(
                "%s %s (want %d)" % (c, r[c], w) for c, w in want.items() if int(r[c]) != w)
            R.edge(g, "%s u64 max: metrics.csv" % k, not why, why)
        self.edge(g, "all 0", TAKEN, stats={k: 0 for k in STATS_U64 + ("duplicates",)})
        self.counters(g)
        for field in ("total", "min"):
            g = "learner sample: ReplayStats.%s_priority ([0, WIRE_MASS_MAX]%s)" % (
                field, "; a NaN total reads as 0" if field == "total" else "")
            for name, b, t in mass_f64():
                if field == "total" and "NaN" in name:
                    t = True  # wire.c: "a NaN total reads as 0, as it always did"
                self.edge(g, name, TAKEN if t else REFUSED, stats={field + "_bits": b})
            self.counters(g)
        g = "learner sample: ReplayStats.shard / shards (one replay)"
        for name, sh, n, t in (("shard 0 of 0 (= 1)", 0, 0, True), ("shard 0 of 1", 0, 1, True),
                               ("shard 1 of 1", 1, 1, False), ("shard 0 of 2", 0, 2, False),
                               ("shard u32 max of 0", U32_MAX, 0, False),
                               ("shard 0 of u32 max", 0, U32_MAX, False)):
            self.edge(g, name, TAKEN if t else REFUSED, stats=dict(shard=sh, shards=n))
        self.counters(g)
        R.flush()
        R.line(self.reqs and not self.bad_reqs,
               "learner sample: all %d of its SampleRequests were well-formed (batch_size %d, "
               "beta in [0, 1], min_priority 0) and its PriorityUpdates decoded%s" % (
                   len(self.reqs), B, ": %d not" % len(self.bad_reqs) if self.bad_reqs else ""))
        # Its weights stay finite after all of it.
        d_ = sock(self.ctx, zmq.DEALER, connect=a.weights, ident=b"edge-final")
        d_.send(weights_request(0))
        ok = d_.poll(10000)
        body, f = decode(d_.recv()) if ok else (None, {})
        try:
            fin = body == B_WEIGHTS and f.get(3, 0) == a.num_params and finite(
                arr(f, 4, "f", a.num_params))
        except ValueError:
            fin = False
        R.line(fin, "learner sample: its Weights are finite after all of it (version %d, "
               "%s updates)" % (f.get(1, 0), (self.csv.last() or {}).get("updates")))


# ---------------------------------------------------------------------------------------
# Upstream of an apex-actor (or apex-eval --follow): the peer is the learner's weights
# ROUTER (and, for an actor, the replay's insert ROUTER and the learner's stats PULL).

class Upstream:
    def __init__(self, a):
        self.a = a
        self.ctx = zmq.Context()
        self.w = sock(self.ctx, zmq.ROUTER, bind=a.weights, ROUTER_MANDATORY=1)
        self.actor = a.client == "actor"
        if self.actor:
            self.ins = sock(self.ctx, zmq.ROUTER, bind=a.insert, ROUTER_MANDATORY=1)
            self.pull = sock(self.ctx, zmq.PULL, bind=a.stats)
        self.wid = None
        self.requests = []  # (time, have_version)
        self.bad_requests = 0
        self.batches = []  # (time, seq, fields, why)
        self.seen = {}  # seq -> arrivals
        self.withheld = set()  # seqs whose acks are held back
        self.hold, self.holding = [], False
        self.ins_id = None
        self.stats = []  # (fields, why)
        self.rng = random.Random(7)

    # -- plumbing --
    def pump(self, timeout):
        poller = zmq.Poller()
        poller.register(self.w, zmq.POLLIN)
        if self.actor:
            poller.register(self.ins, zmq.POLLIN)
            poller.register(self.pull, zmq.POLLIN)
        for s, _ in poller.poll(int(timeout * 1000)):
            while s.poll(0):
                if s is self.w:
                    frames = self.w.recv_multipart()
                    body, f = decode(frames[1]) if len(frames) == 2 else (None, {})
                    if body != B_WREQ or len(f) > 1:
                        self.bad_requests += 1
                        continue
                    self.wid = frames[0]
                    self.requests.append((time.monotonic(), f.get(1, 0)))
                elif self.actor and s is self.ins:
                    frames = self.ins.recv_multipart()
                    if len(frames) != 2:
                        self.batches.append((time.monotonic(), -1, {}, "%d frames" % len(frames)))
                        continue
                    self.ins_id = frames[0]
                    body, f = decode(frames[1])
                    why = "body %s" % body if body != B_BATCH else check_batch(
                        f, self.a.obs_dim, self.a.n_actions, self.a.max_batch)
                    if not why and f.get(1, 0) != self.a.index:
                        why = "actor_id %d" % f.get(1, 0)
                    seq = f.get(2, 0)
                    self.batches.append((time.monotonic(), seq, f, why))
                    self.seen[seq] = self.seen.get(seq, 0) + 1
                    if self.holding and not why and self.seen[seq] == 1 and len(self.hold) < 2:
                        self.hold.append(seq)
                        self.withheld.add(seq)
                    if seq not in self.withheld:
                        self.send_ack(insert_ack(self.a.index, seq))
                elif self.actor and s is self.pull:
                    body, f = decode(self.pull.recv())
                    why = "body %s" % body
                    if body == B_STATS:
                        try:
                            n = f.get(5, 0)
                            ret, eps = arr(f, 6, "f", n), arr(f, 8, "f", n)
                            arr(f, 7, "I", n)
                            why = ""
                            if f.get(1, 0) != self.a.index:
                                why = "actor_id %d" % f.get(1, 0)
                            elif not f.get(9, 0) <= f.get(2, 0) <= WIRE_FRAMES_MAX:
                                why = "frames_delta %d, frames %d" % (f.get(9, 0), f.get(2, 0))
                            elif not finite(ret) or not all(0.0 <= x <= 1.0 for x in eps):
                                why = "returns or epsilons out of range"
                        except ValueError as e:
                            why = str(e)
                    self.stats.append((f, why))

    def send_ack(self, msg):
        if self.ins_id is not None:
            try:
                self.ins.send_multipart([self.ins_id, msg], zmq.NOBLOCK)
            except zmq.ZMQError:
                pass

    def send_w(self, msg):
        """Sends msg to the client's weights DEALER. A client that heard nothing it took for
        SILENT_RECONNECT_MS (5 s) reconnects with a new routing id; its next request names
        it. Returns False when the client is not there."""
        for _ in range(2):
            try:
                self.w.send_multipart([self.wid, msg], zmq.NOBLOCK)
                return True
            except zmq.ZMQError:  # EHOSTUNREACH (ROUTER_MANDATORY): that connection is gone
                old = self.wid
                wait_until(lambda: self.wid != old, 10.0, self.pump)
        return False

    def params(self, bits=None, scale=0.05):
        P = self.a.num_params
        if bits is None:
            bits = [fbits(self.rng.uniform(-scale, scale)) for _ in range(P)]
        return f32a(bits)

    def asked(self, have, since):
        return any(t >= since and h == have for t, h in self.requests)

    def eval_rows(self):
        rows = []
        try:
            with open(self.a.eval_csv) as f:
                for r in csv.DictReader(f):
                    if None not in r.values():
                        rows.append(r)
        except OSError:
            pass
        return rows

    def acted(self, v, since, timeout=15.0):
        """The client acted with version v: an actor's batch carries it, an evaluator wrote an
        eval.csv row of it. Returns the batch fields / the row, or None."""
        got = [None]

        def cond():
            if self.actor:
                for t, seq, f, why in self.batches:
                    if t >= since and f.get(3, 0) == v:
                        got[0] = f
                        return True
                return False
            for r in self.eval_rows():
                if (int(r["incarnation"]) << 32 | int(r["version"])) == v:
                    got[0] = r
                    return True
            return False
        wait_until(cond, timeout, self.pump)
        return got[0]

    # -- weights --
    def take(self, group, name, v, params=None, learner_step=1, env_frames=0, check=None):
        """A Weights message the client must take: it asks next with have_version v, then acts
        with it."""
        t0 = time.monotonic()
        why = []
        if not self.send_w(weights(v, learner_step, self.a.num_params, params or self.params(),
                                   env_frames)):
            why.append("the client is gone")
        elif not wait_until(lambda: self.asked(v, t0), 10.0, self.pump):
            why.append("no request with have_version %d after it" % v)
        else:
            got = self.acted(v, t0)
            if got is None:
                why.append("never acted with it (no %s of version %d)" % (
                    "batch" if self.actor else "eval.csv row", v))
            elif check:
                c = check(got)
                if c:
                    why.append(c)
        R.edge(group, name + " (taken)", not why, "; ".join(why))
        return not why

    def refuse(self, group, name, msg, v_bad, v_probe):
        """A Weights message (of version v_bad > v_probe, when it has one) the client must
        refuse: a valid one of v_probe after it is taken."""
        t0 = time.monotonic()
        why = []
        if not (self.send_w(msg) and self.send_w(weights(v_probe, 1, self.a.num_params,
                                                          self.params()))):
            why.append("the client is gone")
        elif not wait_until(lambda: self.asked(v_probe, t0), 10.0, self.pump):
            why.append("the valid weights of version %d after it were not taken" % v_probe)
        if self.asked(v_bad, t0):
            why.append("asked with have_version %d: took it" % v_bad)
        R.edge(group, name + " (refused)", not why, "; ".join(why))

    def weights_edges(self):
        a = self.a
        P = a.num_params
        v = [100]

        def nv(k=1):
            v[0] += k
            return v[0]

        if not wait_until(lambda: self.wid is not None, 30.0, self.pump):
            R.line(False, "%s: no WeightsRequest arrived" % a.client)
            return False
        R.line(self.requests[0][1] == 0, "%s: its first WeightsRequest has have_version 0 (%d)" % (
            a.client, self.requests[0][1]))
        # Version 0 reads as "none" (WeightsRequest.have_version 0): taken or not, the client
        # must go on asking with have_version 0 and take the next version.
        t0 = time.monotonic()
        self.send_w(weights(0, 1, P, self.params()))
        g = "%s weights: Weights.version" % a.client
        R.edge(g, "0 (none): it asks again with have_version 0",
               wait_until(lambda: self.asked(0, t0), 10.0, self.pump))
        self.take(g, "101", nv())
        c = a.client
        g = "%s weights: Envelope.version" % c
        for name, ev in ENVELOPE_VERSIONS:
            self.refuse(g, name, weights(v[0] + 2, 1, P, self.params(), version=ev), v[0] + 2,
                        nv())
        g = "%s weights: Weights.num_params (the network's %d)" % (c, P)
        for name, n, k in (("0", 0, 0), ("num_params - 1", P - 1, P - 1),
                           ("num_params + 1", P + 1, P + 1), ("u32 max (num_params floats)",
                                                              U32_MAX, P)):
            self.refuse(g, name, weights(v[0] + 2, 1, n, self.params([F_ZERO] * k)), v[0] + 2,
                        nv())
        self.refuse(g, "num_params, one float short", weights(v[0] + 2, 1, P, self.params(
            [F_ZERO] * (P - 1))), v[0] + 2, nv())
        g = "%s weights: Weights.params (finite float32; every one, or the first or last)" % c
        for name, b in F_NONFINITE:
            for where, bits in (("first", [b] + [F_ZERO] * (P - 1)),
                                ("last", [F_ZERO] * (P - 1) + [b])):
                self.refuse(g, "%s %s" % (where, name), weights(v[0] + 2, 1, P, f32a(bits)),
                            v[0] + 2, nv())
        self.refuse(g, "every one NaN", weights(v[0] + 2, 1, P, f32a([F_QNAN] * P)), v[0] + 2,
                    nv())
        eps = bits_f(fbits(a.priority_eps))

        def zero_q(f):
            """With every parameter +-0 the network's Q is 0, and the initial priority of a row
            is |R + gamma^n * 0 - 0| + eps = |R| + eps exactly (float32)."""
            if not self.actor:
                return ""
            n = f.get(4, 0)
            if not f.get(11):
                return "no priorities"
            rew, pr = arr(f, 8, "f", n), arr(f, 11, "f", n)
            want = [bits_f(fbits(bits_f(fbits(abs(r))) + eps)) for r in rew]
            return "" if pr == want else "priorities %s, want |R| + eps %s" % (pr[:3], want[:3])

        def eval_finite(r):
            return "" if math.isfinite(float(r["eval_mean"])) else "eval_mean %s" % r["eval_mean"]

        for name, b in F_FINITE:
            chk = zero_q if b in (F_ZERO, F_NEG_ZERO) else None
            self.take(g, "every one %s" % name, nv(), f32a([b] * P),
                      check=chk if self.actor else eval_finite)

        def frames_step(step, frames):
            def chk(r):
                if self.actor:
                    return ""
                if int(r["updates"]) != step or int(r["env_frames"]) != frames:
                    return "eval.csv updates %s, env_frames %s (want %d, %d)" % (
                        r["updates"], r["env_frames"], step, frames)
                return eval_finite(r)
            return chk

        g = "%s weights: Weights.learner_step and env_frames" % c
        for name, step, frames in (("learner_step 0", 0, 7), ("learner_step u64 max", U64_MAX, 7),
                                   ("env_frames 0", 3, 0), ("env_frames u64 max", 3, U64_MAX)):
            self.take(g, name, nv(), learner_step=step, env_frames=frames,
                      check=frames_step(step, frames))
        g = "%s weights: Weights.version (newer each time)" % c
        for name, ver in (("2^32 - 1", (1 << 32) - 1), ("2^32 (incarnation 1)", 1 << 32),
                          ("2^63", 1 << 63), ("u64 max - 1", U64_MAX - 1), ("u64 max", U64_MAX)):
            v[0] = ver
            self.take(g, name, ver)
        # Nothing is newer than u64 max: a learner started afresh (version 300) is followed
        # once the u64 max publisher has been quiet for WIRE_OLDER_WEIGHTS_AFTER_MS (3 s).
        g = "%s weights: after version u64 max" % c
        t0 = time.monotonic()
        fresh = weights(300, 1, P, self.params())
        last = [0.0]

        def republish(t):
            if time.monotonic() - last[0] >= 0.25:
                self.send_w(fresh)
                last[0] = time.monotonic()
            self.pump(t)
        ok = wait_until(lambda: self.asked(300, t0), 15.0, republish)
        acted = ok and self.acted(300, t0) is not None
        R.edge(g, "an older version (300, a fresh learner) taken once u64 max went quiet "
               "(%.1f s)" % (time.monotonic() - t0), ok and acted,
               "asked %s, acted %s" % (ok, acted))
        self.take(g, "then a newer normal version (301)", 301)
        R.flush()
        return True

    # -- acks (actor) --
    def ack_edge(self, group, name, make, taken):
        """Holds back the acks of the next two new batches s < t, sends make(s, t) as an ack,
        and lets both time out. The actor re-sends its window oldest first, so in every round
        that re-sends t, s is re-sent too (before it) unless it was taken as acknowledged.
        Judged on the round after the first re-send of t, when the ack has surely been read."""
        self.hold = []
        self.holding = True
        why = []
        if not wait_until(lambda: len(self.hold) >= 2, 10.0, self.pump):
            why.append("no new batches")
        self.holding = False
        if not why:
            s, t = self.hold[0], self.hold[1]
            self.send_ack(make(s, t))
            rounds = []
            for _ in range(2):
                n_t = self.seen[t]
                if not wait_until(lambda: self.seen[t] > n_t, 10.0, self.pump):
                    why.append("batch %d was not sent again" % t)
                    break
                rounds.append(self.seen[s])
            if len(rounds) == 2:
                resent = rounds[1] > rounds[0]
                if resent == taken:
                    why.append("batch %d %s" % (s, "sent again: the ack was not taken" if taken
                                                else "not sent again: the ack was taken"))
        for q in self.hold:
            self.withheld.discard(q)
            self.send_ack(insert_ack(self.a.index, q))
        self.hold = []
        R.edge(group, name + (" (taken)" if taken else " (ignored)"), not why, "; ".join(why))

    def ack_edges(self):
        i, N = self.a.index, self.a.num_actors
        g = "actor acks: InsertAck.actor_id (this actor %d of %d)" % (i, N)
        self.ack_edge(g, "its own", lambda s, t: insert_ack(i, s), True)
        for name, v in (("0", 0), ("num_actors", N), ("u32 max", U32_MAX)):
            if v != i:
                self.ack_edge(g, name, lambda s, t, v=v: insert_ack(v, s), False)
        g = "actor acks: InsertAck.seq"
        for name, v in (("0", 0), ("WIRE_SEQ_MAX", WIRE_SEQ_MAX), ("u64 max", U64_MAX)):
            self.ack_edge(g, name + " (no batch in flight)", lambda s, t, v=v: insert_ack(i, v),
                          False)
        self.ack_edge(g, "a seq not sent yet (the newest + 1000)",
                      lambda s, t: insert_ack(i, t + 1000), False)
        g = "actor acks: InsertAck.seqs (WIRE_ACK_MAX_SEQS %d in all)" % WIRE_ACK_MAX_SEQS
        K = WIRE_ACK_MAX_SEQS
        edge_seqs = [0, WIRE_SEQ_MAX, U64_MAX, 1 << 63]
        self.ack_edge(g, "%d seqs, the batch's last" % K,
                      lambda s, t: insert_ack(i, U64_MAX, (edge_seqs * K)[:K - 2] + [s]), True)
        self.ack_edge(g, "%d seqs, the batch's last" % (K + 1),
                      lambda s, t: insert_ack(i, U64_MAX, (edge_seqs * K)[:K - 1] + [s]), False)
        g = "actor acks: Envelope.version"
        for name, ev in ENVELOPE_VERSIONS:
            self.ack_edge(g, name, lambda s, t, ev=ev: insert_ack(i, s, version=ev), False)
        g = "actor acks: after the edges"
        self.ack_edge(g, "a normal ack: the batch is not sent again",
                      lambda s, t: insert_ack(i, s), True)
        R.flush()

    def run(self):
        if not self.weights_edges():
            return
        if self.actor:
            self.ack_edges()
            bad = [(seq, why) for _, seq, _, why in self.batches if why]
            R.line(self.batches and not bad,
                   "actor: all %d batches it sent were well-formed (finite, counts and dims "
                   "right, priorities within bounds or absent)%s" % (
                       len(self.batches), ": %s" % bad[:3] if bad else ""))
            nopr = sum(1 for _, _, f, _ in self.batches if not f.get(11))
            print("INFO %d of %d batches without priorities" % (nopr, len(self.batches)))
            sbad = [why for _, why in self.stats if why]
            R.line(self.stats and not sbad, "actor: all %d ActorStats it sent were within the "
                   "wire's bounds%s" % (len(self.stats), ": %s" % sbad[:3] if sbad else ""))
        R.line(self.bad_requests == 0, "%s: all %d of its weights requests were one-frame "
               "WeightsRequests (%d not)" % (self.a.client, len(self.requests),
                                             self.bad_requests))


# ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["replay", "capacity", "learner", "learner-replay",
                                     "upstream"])
    ap.add_argument("--insert")
    ap.add_argument("--sample")
    ap.add_argument("--stats")
    ap.add_argument("--weights")
    ap.add_argument("--metrics")
    ap.add_argument("--eval-csv")
    ap.add_argument("--client", choices=["actor", "eval"], default="actor")
    ap.add_argument("--rows-out")
    ap.add_argument("--obs-dim", type=int, default=4)
    ap.add_argument("--n-actions", type=int, default=2)
    ap.add_argument("--num-actors", type=int, default=3)
    ap.add_argument("--index", type=int, default=1)
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--capacity", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--num-params", type=int, default=0)
    ap.add_argument("--priority-eps", type=float, default=1e-6)
    a = ap.parse_args()
    random.seed(26)
    if a.mode == "replay":
        Replay(a).run()
    elif a.mode == "capacity":
        run_capacity(a)
    elif a.mode == "learner":
        Learner(a).run()
    elif a.mode == "learner-replay":
        LearnerReplay(a).run()
    else:
        Upstream(a).run()
    R.flush()
    print("DONE", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
