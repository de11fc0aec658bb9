#!/usr/bin/env python3
"""hostile_peer.py: a hostile peer for every apex endpoint (driven by tests/smoke/hostile.sh).

  hostile_peer.py replay-insert --endpoint EP [options]   DEALERs -> apex-replay insert ROUTER
  hostile_peer.py replay-sample --endpoint EP [options]   DEALERs -> apex-replay sample ROUTER
  hostile_peer.py learner-stats --endpoint EP [options]   PUSH    -> apex-learner stats PULL
  hostile_peer.py learner-weights   --endpoint EP [options]   DEALERs/REQ/SUB/XSUB/raw TCP ->
                                                          apex-learner weights ROUTER
  hostile_peer.py fake-upstream --pub EP --router EP --pull EP [options]
        binds a fake learner weights ROUTER, a fake replay ROUTER and a stats PULL for a real
        apex-actor
  hostile_peer.py seq-max --endpoint EP                   one batch with seq 2^64-1, then a probe

Every mode stops by itself after --seconds (at most --rate messages a second). Messages are
built from proto/apex.proto with apexwire.py's primitives (extended here with the kinds it
lacks) and are of two classes: "bad" (the daemon must refuse and count them: random bytes,
empty and extra frames, wrong protocol versions, absurd counts or dimensions, NaN/Inf,
out-of-range actions, actor ids beyond [actor] num_actors, kinds that do not belong on the
socket) and "good" (well-formed but hostile: replayed, out-of-order and absurd sequence
numbers, priority updates with random keys, ...). Giant frames (bigger than the daemon's
ZMQ_MAXMSGSIZE) are sent a few times per run; libzmq must drop the connection, which the
peer sees on its socket monitor and counts as a disconnect.

Output: one line "sent KIND N" per kind, then one line "RESULT {json}" with the totals
(sent_bad, sent_good, sent_giant, handshakes, disconnects, replies, ...). The process ends
with os._exit, without tearing down its many sockets (the daemons, not this peer, are under
test).
"""
import argparse
import json
import math
import os
import random
import socket
import struct
import sys
import time

import zmq
from zmq.utils.monitor import recv_monitor_message

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apexwire  # noqa: E402
from apexwire import _bytes, _f32, _uint  # noqa: E402

NAN = float("nan")
INF = float("inf")
U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1

# Envelope body fields (proto/apex.proto).
B_BATCH, B_SREQ, B_SREPLY, B_PUPD, B_WEIGHTS, B_STATS, B_ACK, B_WREQ = 2, 3, 4, 5, 6, 7, 8, 9


# ---------------------------------------------------------------------------------------
# Encoders for every message kind, with every field under the caller's control (lengths
# need not match counts, values need not be sane).

def env(body_field, body, version=apexwire.VERSION):
    return apexwire.envelope(body_field, body, version)


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def i32(vals):
    return struct.pack("<%di" % len(vals), *vals)


def u32(vals):
    return struct.pack("<%dI" % len(vals), *vals)


def u64(vals):
    return struct.pack("<%dQ" % len(vals), *vals)


def batch_body(actor_id=0, epoch=0, seq=0, wv=0, count=0, obs_dim=0, obs=b"", actions=b"",
               rewards=b"", discounts=b"", next_obs=b"", priorities=b""):
    return (_uint(1, actor_id) + _uint(2, seq) + _uint(3, wv) + _uint(4, count) +
            _uint(5, obs_dim) + _bytes(6, obs) + _bytes(7, actions) + _bytes(8, rewards) +
            _bytes(9, discounts) + _bytes(10, next_obs) + _bytes(11, priorities) +
            _uint(12, epoch))


def sample_request(req_id, batch_size, beta, version=apexwire.VERSION):
    return env(B_SREQ, _uint(1, req_id) + _uint(2, batch_size) + _f32(3, beta), version)


def priority_update(count, keys, prios, version=apexwire.VERSION):
    return env(B_PUPD, _uint(1, count) + _bytes(2, keys) + _bytes(3, prios), version)


def weights(version_no, step, num_params, params, version=apexwire.VERSION):
    return env(B_WEIGHTS, _uint(1, version_no) + _uint(2, step) + _uint(3, num_params) +
               _bytes(4, params), version)


def weights_request(have_version, version=apexwire.VERSION):
    return env(B_WREQ, _uint(1, have_version), version)


def actor_stats(actor_id, frames, wv, dropped, n, returns, lengths, epsilons,
                version=apexwire.VERSION):
    return env(B_STATS, _uint(1, actor_id) + _uint(2, frames) + _uint(3, wv) + _uint(4, dropped) +
               _uint(5, n) + _bytes(6, returns) + _bytes(7, lengths) + _bytes(8, epsilons),
               version)


def insert_ack(actor_id, seq, version=apexwire.VERSION):
    return env(B_ACK, _uint(1, actor_id) + _uint(2, seq), version)


def sample_reply_notready(req_id):
    return env(B_SREPLY, _uint(1, req_id) + _uint(2, 1))


# ---------------------------------------------------------------------------------------
# Decoding what the daemons send back (apexwire.decode raises on a foreign version).

def fields(buf):
    try:
        return apexwire.decode(buf)
    except Exception:
        return None, {}


def check_batch(f, obs_dim, n_actions):
    """Returns '' if a TransitionBatch body (field dict) is well-formed, else why not."""
    n, d = f.get(4, 0), f.get(5, 0)
    if n == 0 or d != obs_dim:
        return "count %d obs_dim %d" % (n, d)
    want = {6: 4 * n * d, 7: 4 * n, 8: 4 * n, 9: 4 * n, 10: 4 * n * d}
    for k, ln in want.items():
        if len(f.get(k, b"")) != ln:
            return "field %d has %d bytes, want %d" % (k, len(f.get(k, b"")), ln)
    floats = {k: struct.unpack("<%df" % (len(f[k]) // 4), f[k]) for k in (6, 8, 9, 10)}
    for k in (6, 8, 10):
        if not all(math.isfinite(x) for x in floats[k]):
            return "non-finite values in field %d" % k
    if not all(0.0 <= x <= 1.0 for x in floats[9]):
        return "discount outside [0, 1]"
    if not all(0 <= a < n_actions for a in struct.unpack("<%di" % n, f[7])):
        return "action out of range"
    pr = f.get(11, b"")
    if pr:
        if len(pr) != 4 * n:
            return "priorities: %d bytes for %d rows" % (len(pr), n)
        p = struct.unpack("<%df" % n, pr)
        if not all(math.isfinite(x) and x >= 0 for x in p):
            return "non-finite or negative priority"
    return ""


# ---------------------------------------------------------------------------------------
# Plumbing: counted sends, socket monitors, pacing.

class Peer:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        self.ctx = zmq.Context()
        self.sent = {}
        self.classes = {}
        self.blocked = 0
        self.monitors = []
        self.events = {"handshakes": 0, "disconnects": 0, "handshake_failed": 0}
        self.extra = {}
        self.epoch = self.rng.getrandbits(63) | 1
        self.t0 = time.monotonic()

    def sock(self, kind, endpoint=None, bind=None, ident=None, monitor=True, **opts):
        s = self.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RECONNECT_IVL, 50)
        if ident is not None:
            s.setsockopt(zmq.ROUTING_ID, ident)
        for k, v in opts.items():
            s.setsockopt(getattr(zmq, k), v)
        if monitor:
            self.monitors.append(s.get_monitor_socket())
        if bind:
            s.bind(bind)
        if endpoint:
            s.connect(endpoint)
        return s

    def poll_monitors(self):
        for m in self.monitors:
            while m.poll(0):
                ev = recv_monitor_message(m)["event"]
                if ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self.events["handshakes"] += 1
                elif ev == zmq.EVENT_DISCONNECTED:
                    self.events["disconnects"] += 1
                elif ev in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                            zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                    self.events["handshake_failed"] += 1

    def wait_handshake(self, n=1, timeout=5.0):
        deadline = time.monotonic() + timeout
        while self.events["handshakes"] < n and time.monotonic() < deadline:
            self.poll_monitors()
            time.sleep(0.01)
        return self.events["handshakes"] >= n

    def count(self, name, cls, n=1):
        self.sent[name] = self.sent.get(name, 0) + n
        self.classes[name] = cls

    def send(self, s, name, cls, msg, prefix=()):
        """Sends msg (bytes, or a list of frames) without blocking; counts it if it left."""
        frames = list(prefix) + (msg if isinstance(msg, list) else [msg])
        try:
            s.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            self.blocked += 1
            return False
        except zmq.ZMQError as e:  # EHOSTUNREACH on a ROUTER_MANDATORY socket
            self.extra["send_errors"] = self.extra.get("send_errors", 0) + 1
            self.extra["last_send_error"] = str(e)
            return False
        self.count(name, cls)
        return True

    def giant(self):
        return os.urandom(1024) * (self.a.giant_bytes // 1024)

    def raw_tcp_garbage(self, endpoint, n=3):
        """Plain TCP connections that send bytes that are not a ZMTP greeting."""
        host, port = endpoint.replace("tcp://", "").rsplit(":", 1)
        done = 0
        for _ in range(n):
            try:
                c = socket.create_connection((host, int(port)), timeout=1.0)
                c.sendall(os.urandom(self.rng.randint(1, 256)))
                c.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + os.urandom(64))
                c.close()
                done += 1
            except OSError:
                pass
        self.count("raw_tcp_garbage_connection", "bad-transport", done)

    def pace(self, n_sent):
        # At most --rate messages a second; also lets the monitors be read.
        ahead = n_sent / self.a.rate - (time.monotonic() - self.t0)
        if ahead > 0:
            time.sleep(min(ahead, 0.05))

    def report(self, **kw):
        self.poll_monitors()
        for k in sorted(self.sent):
            print("sent %-34s %7d  (%s)" % (k, self.sent[k], self.classes[k]))
        res = {
            "mode": self.a.mode,
            "sent": self.sent,
            "sent_bad": sum(v for k, v in self.sent.items() if self.classes[k] == "bad"),
            "sent_good": sum(v for k, v in self.sent.items() if self.classes[k] == "good"),
            "sent_giant": sum(v for k, v in self.sent.items() if self.classes[k] == "giant"),
            "sent_total": sum(self.sent.values()),
            "blocked": self.blocked,
            "seconds": round(time.monotonic() - self.t0, 2),
        }
        res.update(self.events)
        res.update({k: v for k, v in self.extra.items() if k != "silent"})
        res.update(kw)
        print("RESULT " + json.dumps(res, sort_keys=True), flush=True)
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump(res, f, sort_keys=True)
        sys.stdout.flush()
        os._exit(0)


def run_catalog(p, s, catalog, seconds, on_tick=None, prefix=(), rare=(), rare_every=100):
    """Sends the catalog's kinds round-robin for `seconds`; giant frames at evenly spaced
    moments; the (expensive) kinds in `rare` once every rare_every messages. catalog: list of
    (name, cls, factory)."""
    n_giant = p.a.giants
    giant_at = [seconds * (k + 1) / (n_giant + 1) for k in range(n_giant)]
    start = time.monotonic()
    p.t0 = start
    i = n = 0
    while True:
        el = time.monotonic() - start
        if el >= seconds:
            break
        if giant_at and el >= giant_at[0]:
            giant_at.pop(0)
            time.sleep(0.2)  # let the queue drain: messages behind the giant die with it
            p.send(s, "giant_frame", "giant", p.giant(), prefix)
            time.sleep(0.3)
        if rare and i % rare_every == rare_every - 1:
            name, cls, fac = rare[(i // rare_every) % len(rare)]
        else:
            name, cls, fac = catalog[i % len(catalog)]
        i += 1
        if p.send(s, name, cls, fac(), prefix):
            n += 1
        if on_tick:
            on_tick()
        if n % 50 == 0:
            p.poll_monitors()
        p.pace(n)
    p.poll_monitors()


def common_bad(p, valid):
    """Frames that are bad on any socket: valid() builds a message that belongs there."""
    r = p.rng
    return [
        ("random_bytes", "bad", lambda: os.urandom(r.randint(1, 2048))),
        ("empty_frame", "bad", lambda: b""),
        ("multipart_valid_then_junk", "bad", lambda: [valid(), os.urandom(r.randint(0, 64))]),
        ("multipart_empty_then_valid", "bad", lambda: [b"", valid()]),
        ("truncated_valid", "bad", lambda: valid()[:-r.randint(1, 8)]),
        ("varint_overlong", "bad", lambda: b"\x08" + b"\xff" * 11),
    ]


# ---------------------------------------------------------------------------------------
# Mode: replay insert (DEALER -> ROUTER, TransitionBatch, InsertAck back)

def rows(r, n, d):
    return [[r.uniform(-0.2, 0.2) for _ in range(d)] for _ in range(n)]


def flat(rs):
    return f32([x for row in rs for x in row])


def good_batch(p, actor, epoch, seq, n=4, prio=True, version=apexwire.VERSION):
    d, r = p.a.obs_dim, p.rng
    o, no = rows(r, n, d), rows(r, n, d)
    return env(B_BATCH, batch_body(actor, epoch, seq, 0, n, d, flat(o),
                                   i32([r.randrange(p.a.n_actions) for _ in range(n)]),
                                   f32([1.0] * n), f32([0.97] * n), flat(no),
                                   f32([1.0] * n) if prio else b""), version)


def bad_batch(p, **over):
    """A 4-row batch with one field spoiled (over: field overrides as raw values)."""
    d, n, r = p.a.obs_dim, 4, p.rng
    f = dict(actor_id=r.randrange(p.a.num_actors), epoch=p.epoch, seq=r.randrange(1 << 40),
             count=n, obs_dim=d, obs=flat(rows(r, n, d)), actions=i32([0] * n),
             rewards=f32([1.0] * n), discounts=f32([0.97] * n), next_obs=flat(rows(r, n, d)),
             priorities=f32([1.0] * n))
    version = over.pop("version", apexwire.VERSION)
    f.update(over)
    return env(B_BATCH, batch_body(f["actor_id"], f["epoch"], f["seq"], 0, f["count"],
                                   f["obs_dim"], f["obs"], f["actions"], f["rewards"],
                                   f["discounts"], f["next_obs"], f["priorities"]), version)


def wrong_kinds(p, exclude):
    n = 4
    kinds = {
        B_BATCH: ("wrong_kind_TransitionBatch", lambda: good_batch(p, 0, p.epoch, 1)),
        B_SREQ: ("wrong_kind_SampleRequest", lambda: sample_request(1, 32, 0.5)),
        B_SREPLY: ("wrong_kind_SampleReply", lambda: sample_reply_notready(7)),
        B_PUPD: ("wrong_kind_PriorityUpdate",
                 lambda: priority_update(n, u64([U64_MAX] * n), f32([1.0] * n))),
        B_WEIGHTS: ("wrong_kind_Weights",
                    lambda: weights(1, 1, p.a.num_params, f32([0.0] * p.a.num_params))),
        B_STATS: ("wrong_kind_ActorStats",
                  lambda: actor_stats(0, 10, 1, 0, 1, f32([1.0]), u32([1]), f32([0.1]))),
        B_ACK: ("wrong_kind_InsertAck", lambda: insert_ack(0, 1)),
        B_WREQ: ("wrong_kind_WeightsRequest", lambda: weights_request(1)),
    }
    return [(name, "bad", fac) for k, (name, fac) in kinds.items() if k not in exclude]


def mode_replay_insert(p):
    a, r = p.a, p.rng
    p.epoch = r.getrandbits(63) | 1
    d, A, N = a.obs_dim, a.n_actions, a.num_actors
    big = a.max_batch + 1
    over_max = bad_batch(p, count=big, obs=f32([0.0] * big * d), actions=i32([0] * big),
                         rewards=f32([0.0] * big), discounts=f32([0.5] * big),
                         next_obs=f32([0.0] * big * d), priorities=f32([1.0] * big))
    max_rows = good_batch(p, 0, p.epoch, 1 << 41, n=a.max_batch)
    seq = {"next": 0, "sent": []}

    def new_seq():
        seq["next"] += 1
        seq["sent"].append(seq["next"])
        return seq["next"]

    def nan4(pos):
        v = [0.1] * 4
        v[pos] = NAN
        return f32(v)

    bad = common_bad(p, lambda: good_batch(p, 0, p.epoch, new_seq())) + [
        ("wrong_version_0", "bad", lambda: good_batch(p, 0, p.epoch, 5, version=0)),
        ("wrong_version_2", "bad", lambda: good_batch(p, 0, p.epoch, 5, version=2)),
        ("wrong_version_max", "bad", lambda: good_batch(p, 0, p.epoch, 5, version=U32_MAX)),
        ("count_zero", "bad", lambda: bad_batch(p, count=0, obs=b"", actions=b"", rewards=b"",
                                                discounts=b"", next_obs=b"", priorities=b"")),
        ("count_u32_max_short_arrays", "bad", lambda: bad_batch(p, count=U32_MAX)),
        ("count_mismatch_arrays", "bad", lambda: bad_batch(p, count=5)),
        ("obs_dim_wrong", "bad", lambda: bad_batch(p, obs_dim=d + 1, obs=f32([0.0] * 4 * (d + 1)),
                                                   next_obs=f32([0.0] * 4 * (d + 1)))),
        ("obs_dim_u32_max", "bad", lambda: bad_batch(p, obs_dim=U32_MAX)),
        ("obs_nan", "bad", lambda: bad_batch(p, obs=f32([0.1] * (4 * d - 1) + [NAN]))),
        ("next_obs_inf", "bad", lambda: bad_batch(p, next_obs=f32([INF] + [0.1] * (4 * d - 1)))),
        ("reward_nan", "bad", lambda: bad_batch(p, rewards=nan4(r.randrange(4)))),
        ("reward_inf", "bad", lambda: bad_batch(p, rewards=f32([1.0, -INF, 1.0, 1.0]))),
        ("discount_nan", "bad", lambda: bad_batch(p, discounts=nan4(2))),
        ("discount_above_1", "bad", lambda: bad_batch(p, discounts=f32([0.9, 1.5, 0.9, 0.9]))),
        ("discount_negative", "bad", lambda: bad_batch(p, discounts=f32([0.9, 0.9, -0.1, 0.9]))),
        ("priority_negative", "bad", lambda: bad_batch(p, priorities=f32([1, 1, 1, -1.0]))),
        ("priority_nan", "bad", lambda: bad_batch(p, priorities=nan4(0))),
        ("priority_inf", "bad", lambda: bad_batch(p, priorities=f32([INF, 1, 1, 1]))),
        ("priority_length_mismatch", "bad", lambda: bad_batch(p, priorities=f32([1.0] * 3))),
        ("action_negative", "bad", lambda: bad_batch(p, actions=i32([0, -1, 0, 0]))),
        ("action_equal_n_actions", "bad", lambda: bad_batch(p, actions=i32([0, 0, A, 0]))),
        ("action_i32_max", "bad", lambda: bad_batch(p, actions=i32([0x7FFFFFFF, 0, 0, 0]))),
        ("actor_id_equal_num_actors", "bad", lambda: bad_batch(p, actor_id=N)),
        ("actor_id_u32_max", "bad", lambda: bad_batch(p, actor_id=U32_MAX)),
        ("unknown_body_field_99", "bad", lambda: _uint(1, 1) + _bytes(99, b"\x08\x01")),
    ] + wrong_kinds(p, exclude={B_BATCH})
    good = [
        ("valid_batch_new_seq", "good", lambda: good_batch(p, r.randrange(N), p.epoch, new_seq())),
        ("valid_batch_replayed_seq", "good",
         lambda: good_batch(p, 0, p.epoch, r.choice(seq["sent"]) if seq["sent"] else 0)),
        ("valid_batch_out_of_order_seq", "good",
         lambda: good_batch(p, 0, p.epoch, seq["next"] + r.randint(2, 5000))),
        ("valid_batch_seq_2^63", "good", lambda: good_batch(p, 1, p.epoch + 1, 1 << 63)),
        ("valid_batch_seq_2^64-2", "good", lambda: good_batch(p, 1, p.epoch + 2, U64_MAX - 1)),
        ("valid_batch_new_epoch_each_time", "good",
         lambda: good_batch(p, r.randrange(N), r.getrandbits(64), r.getrandbits(20))),
        ("valid_batch_no_priorities", "good",
         lambda: good_batch(p, 0, p.epoch, new_seq(), prio=False)),
    ]
    rare = [("count_over_max_batch", "bad", lambda: over_max),
            ("valid_batch_max_batch_rows", "good", lambda: max_rows)]
    # Bad kinds far outnumber good ones: weight the good ones so both are exercised.
    catalog = bad + good * 2
    s = p.sock(zmq.DEALER, a.endpoint, ident=b"hostile-insert")
    # A second identity that looks like a real actor's routing id but speaks garbage.
    s2 = p.sock(zmq.DEALER, a.endpoint, ident=b"actor-%d" % (N + 7))
    # A peer of an incompatible socket type: the ZMTP handshake must fail.
    wrong = p.sock(zmq.PUSH, a.endpoint)
    p.wait_handshake(2)
    p.raw_tcp_garbage(a.endpoint)
    acks = {"n": 0, "bad": 0}

    def drain():
        for sock in (s, s2):
            while sock.poll(0):
                body, f = fields(sock.recv())
                if body == apexwire.BODY_INSERT_ACK:
                    acks["n"] += len(apexwire.ack_seqs(f))
                else:
                    acks["bad"] += 1

    for _ in range(20):
        p.send(wrong, "wrong_socket_type_PUSH", "bad-transport", good_batch(p, 0, p.epoch, 1))
        p.send(s2, "random_bytes_as_actor_id", "bad", os.urandom(r.randint(1, 300)))
    run_catalog(p, s, catalog, a.seconds, on_tick=drain, rare=rare)
    time.sleep(0.5)
    drain()
    p.report(acks=acks["n"], unexpected_replies=acks["bad"], replies=acks["n"])


# ---------------------------------------------------------------------------------------
# Mode: replay sample (DEALER -> ROUTER, SampleRequest / PriorityUpdate, SampleReply back)

def mode_replay_sample(p):
    a, r = p.a, p.rng
    p.epoch = 99
    M = a.max_batch
    over = M + 1

    def pu(n, keys=None, prios=None, count=None):
        keys = keys if keys is not None else u64([r.getrandbits(64) | (0xFFFFFFFF << 32)
                                                  for _ in range(n)])
        prios = prios if prios is not None else f32([1.0] * n)
        return priority_update(n if count is None else count, keys, prios)

    rand_keys = {"rows": 0}
    pu_over = pu(over, keys=u64([1] * over), prios=f32([1.0] * over))

    def random_keys():
        n = r.randint(1, 256)
        rand_keys["rows"] += n
        # generation 0xffffffff (a slot overwritten 4 billion times) or a slot beyond any
        # capacity: these keys can never match, so each row must be counted stale.
        ks = [(r.getrandbits(32) | (0xFFFFFFFF << 32)) if r.random() < 0.5
              else ((1 << 31) + r.getrandbits(31)) | (r.getrandbits(32) << 32) for _ in range(n)]
        return pu(n, keys=u64(ks), prios=f32([r.uniform(0, 10) for _ in range(n)]))

    bad = common_bad(p, lambda: sample_request(r.getrandbits(40), 32, 0.5)) + [
        ("sample_batch_size_0", "bad", lambda: sample_request(1, 0, 0.5)),
        ("sample_batch_size_over_max", "bad", lambda: sample_request(2, over, 0.5)),
        ("sample_batch_size_u32_max", "bad", lambda: sample_request(3, U32_MAX, 0.5)),
        ("sample_beta_nan", "bad", lambda: sample_request(4, 32, NAN)),
        ("sample_beta_inf", "bad", lambda: sample_request(5, 32, INF)),
        ("sample_beta_negative", "bad", lambda: sample_request(6, 32, -0.5)),
        ("sample_beta_above_1", "bad", lambda: sample_request(7, 32, 1.5)),
        ("sample_wrong_version_0", "bad", lambda: sample_request(8, 32, 0.5, version=0)),
        ("sample_wrong_version_2", "bad", lambda: sample_request(9, 32, 0.5, version=2)),
        ("prio_update_count_0", "bad", lambda: pu(0, keys=b"", prios=b"")),
        ("prio_update_count_over_max", "bad", lambda: pu_over),
        ("prio_update_count_u32_max", "bad", lambda: pu(4, count=U32_MAX)),
        ("prio_update_keys_length_mismatch", "bad", lambda: pu(4, keys=u64([1, 2, 3]))),
        ("prio_update_prios_length_mismatch", "bad", lambda: pu(4, prios=f32([1.0] * 5))),
        ("prio_update_nan", "bad", lambda: pu(4, prios=f32([1.0, NAN, 1.0, 1.0]))),
        ("prio_update_inf", "bad", lambda: pu(4, prios=f32([INF, 1.0, 1.0, 1.0]))),
        ("prio_update_negative", "bad", lambda: pu(4, prios=f32([1.0, 1.0, 1.0, -2.0]))),
        ("prio_update_wrong_version", "bad",
         lambda: priority_update(1, u64([1]), f32([1.0]), version=2)),
    ] + wrong_kinds(p, exclude={B_SREQ, B_PUPD})
    replies = {"ok": 0, "not_ready": 0, "refused": 0, "other": 0, "ids_ok": 0}
    asked = set()

    def valid_request():
        i = r.getrandbits(40)
        asked.add(i)
        return sample_request(i, r.choice([1, 32, 64]), r.random())

    good = [
        ("sample_request_valid", "good", valid_request),
        ("prio_update_random_keys", "good", random_keys),
        ("prio_update_guessed_keys_extreme_prios", "good",
         lambda: pu(3, keys=u64([r.randrange(200), r.randrange(200), r.randrange(200)]),
                    prios=f32([0.0, 1e-30, 3e38]))),
    ]
    catalog = bad + good * 3
    s = p.sock(zmq.DEALER, a.endpoint, ident=b"hostile-sample")
    # The slow consumer: asks for the largest samples the server allows and never reads.
    slow = p.sock(zmq.DEALER, a.endpoint, ident=b"hostile-slow-consumer", RCVHWM=1,
                  RCVBUF=4096)
    wrong = p.sock(zmq.PUSH, a.endpoint)
    p.wait_handshake(2)
    p.raw_tcp_garbage(a.endpoint)
    for _ in range(20):
        p.send(wrong, "wrong_socket_type_PUSH", "bad-transport", sample_request(1, 32, 0.5))
    for i in range(a.unread):
        p.send(slow, "unread_sample_request_max_batch", "good", sample_request(1 << 50 | i, M, 0.5))

    def drain():
        while s.poll(0):
            body, f = fields(s.recv())
            if body != apexwire.BODY_SAMPLE_REPLY:
                replies["other"] += 1
                continue
            st = f.get(2, 0)
            replies[{0: "ok", 1: "not_ready", 2: "refused"}.get(st, "other")] += 1
            replies["ids_ok"] += f.get(1, 0) in asked

    run_catalog(p, s, catalog, a.seconds, on_tick=drain)
    time.sleep(0.5)
    drain()
    p.report(replies=replies["ok"] + replies["not_ready"] + replies["refused"],
             reply_status=replies, random_key_rows=rand_keys["rows"])


# ---------------------------------------------------------------------------------------
# Mode: learner stats (PUSH -> PULL, ActorStats)

def mode_learner_stats(p):
    a = p.a
    N = a.num_actors

    def st(actor=0, frames=0, wv=0, n=2, returns=None, lengths=None, eps=None, count=None,
           version=apexwire.VERSION):
        returns = f32([10.0] * n) if returns is None else returns
        lengths = u32([10] * n) if lengths is None else lengths
        eps = f32([0.1] * n) if eps is None else eps
        return actor_stats(actor, frames, wv, 0, n if count is None else count, returns,
                           lengths, eps, version)

    bad = common_bad(p, lambda: st(actor=N + 1)) + [
        ("stats_return_nan", "bad", lambda: st(returns=f32([1.0, NAN]))),
        ("stats_return_inf", "bad", lambda: st(returns=f32([INF, 1.0]))),
        ("stats_epsilon_above_1", "bad", lambda: st(eps=f32([0.1, 1.5]))),
        ("stats_epsilon_nan", "bad", lambda: st(eps=f32([NAN, 0.1]))),
        ("stats_lengths_mismatch", "bad", lambda: st(lengths=u32([1]))),
        ("stats_returns_mismatch", "bad", lambda: st(returns=f32([1.0] * 3))),
        ("stats_n_episodes_u32_max", "bad", lambda: st(count=U32_MAX)),
        ("stats_n_episodes_65537", "bad", lambda: st(count=65537)),
        ("stats_wrong_version_0", "bad", lambda: st(version=0)),
        ("stats_wrong_version_2", "bad", lambda: st(version=2)),
        # Beyond [actor] num_actors: not an actor of this run. Forged version 0 and 0 frames:
        # if accepted, actor_version_min is pinned at 0 for the rest of the run.
        ("stats_actor_id_equal_num_actors", "bad", lambda: st(actor=N, n=0)),
        ("stats_actor_id_1023", "bad", lambda: st(actor=1023, n=0)),
        ("stats_actor_id_1024", "bad", lambda: st(actor=1024, n=0)),
        ("stats_actor_id_u32_max", "bad", lambda: st(actor=U32_MAX, n=0)),
    ] + wrong_kinds(p, exclude={B_STATS})
    s = p.sock(zmq.PUSH, a.endpoint)
    wrong = p.sock(zmq.DEALER, a.endpoint)
    p.wait_handshake(1)
    p.raw_tcp_garbage(a.endpoint)
    for _ in range(20):
        p.send(wrong, "wrong_socket_type_DEALER", "bad-transport", st(actor=N + 1))
    run_catalog(p, s, bad, a.seconds)
    time.sleep(0.5)
    p.report()


# ---------------------------------------------------------------------------------------
# Mode: learner pub (DEALERs -> the learner's weights ROUTER: WeightsRequest in, Weights
# out). The name is the endpoint's ([endpoints] learner_weights_bind); it is no PUB any more.

WEIGHTS_RESEND_S = 2.5  # common/weights_client.h WEIGHTS_RESEND_MS
WRONG_TYPE_RECONNECTS = 20  # per SUB/XSUB: libzmq does not retry a refused handshake itself


class WeightsListener:
    """A well-behaved weights client (common/weights_client.c): one request in flight with
    the newest version it holds, asked again as soon as an answer arrives and after
    WEIGHTS_RESEND_S without one. Records when each Weights arrived and its version."""

    def __init__(self, sock):
        self.s = sock
        self.have, self.in_flight, self.sent_t = 0, False, 0.0
        self.first_ask = None
        self.got = []  # (monotonic time, version)
        self.num_params, self.other, self.requests = set(), 0, 0

    def tick(self):
        now = time.monotonic()
        while self.s.poll(0):
            frames = self.s.recv_multipart()
            self.in_flight = False  # any answer means the request was taken
            body, f = fields(frames[0]) if len(frames) == 1 else (None, {})
            if body == B_WEIGHTS:
                self.got.append((now, f.get(1, 0)))
                self.num_params.add(f.get(3, 0))
                self.have = max(self.have, f.get(1, 0))
            else:
                self.other += 1
        if not self.in_flight or now - self.sent_t >= WEIGHTS_RESEND_S:
            try:
                self.s.send(weights_request(self.have), zmq.NOBLOCK)
            except zmq.Again:
                return  # not connected yet (ZMQ_IMMEDIATE): asked again on the next tick
            self.in_flight, self.sent_t = True, now
            self.requests += 1
            if self.first_ask is None:
                self.first_ask = now

    def result(self, t_end):
        v = [x for _, x in self.got]
        t = [self.first_ask or t_end] + [x for x, _ in self.got] + [t_end]
        return {"weights_received": len(v),
                # Never back, and forward over the attack (a held request is answered after
                # ~1 s with the same version: repeats are the learner's heartbeat).
                "weights_versions_increasing": bool(v) and v[-1] > v[0] and
                all(x <= y for x, y in zip(v, v[1:])),
                "weights_distinct": len(set(v)), "weights_first": v[0] if v else 0,
                "weights_last": v[-1] if v else 0,
                "weights_max_gap_s": round(max(b - a for a, b in zip(t, t[1:])), 2),
                "num_params": sorted(self.num_params), "other_messages": self.other,
                "listener_requests": self.requests}


def mode_learner_weights(p):
    """A listener (WeightsListener) must keep getting newer weights while: a flooder DEALER
    (routing id of 255 bytes) sends valid WeightsRequests as fast as it can (have_version 0,
    random, and the current version, which the learner holds) and reads the answers;
    --subscribers silent DEALERs keep asking and never read; a hostile DEALER sends garbage,
    multipart messages, other message kinds, wrong protocol versions and, --giants times, a
    frame above the learner's 4096-byte MAXMSGSIZE (the learner drops that connection); a
    REQ sends its delimiter frame; SUB and XSUB sockets (re)connect by hand and must be
    refused at the ZMTP handshake and get nothing; raw TCP connections send garbage."""
    a, r = p.a, p.rng
    ep = a.endpoint
    listener = WeightsListener(p.sock(zmq.DEALER, ep, IMMEDIATE=1, SNDHWM=1, RCVHWM=4))
    hostile = p.sock(zmq.DEALER, ep, ident=b"hostile-weights")
    flooder = p.sock(zmq.DEALER, ep, ident=b"\xff" * 255)
    silent = [p.sock(zmq.DEALER, ep, monitor=False, RCVHWM=1, RCVBUF=4096)
              for _ in range(a.subscribers)]
    p.extra["silent"] = silent
    # SUB/XSUB: a ROUTER accepts DEALER, REQ and ROUTER peers only. Their own monitors (not
    # p.events, which must count the DEALERs' handshakes and giant-frame disconnects).
    wt = {"connections": 0, "handshakes": 0, "disconnects": 0, "messages": 0, "reconnects": 0}
    wrong = []
    for kind in (zmq.SUB, zmq.XSUB, zmq.SUB, zmq.XSUB):
        s = p.ctx.socket(kind)
        s.setsockopt(zmq.LINGER, 0)
        if kind == zmq.SUB:
            s.setsockopt(zmq.SUBSCRIBE, b"")
        wrong.append([s, s.get_monitor_socket(), 0])
        s.connect(ep)
    req = p.sock(zmq.REQ, ep, monitor=False)
    p.wait_handshake(3)
    p.raw_tcp_garbage(ep)
    p.send(req, "req_delimiter_then_request", "bad", weights_request(0))
    for s, _, _ in wrong:
        if s.type == zmq.XSUB:  # queued for a connection that never comes up
            p.send(s, "xsub_subscription", "refused", b"\x01")
            p.send(s, "xsub_request", "refused", weights_request(0))
    answers = {"flood": 0, "flood_weights": 0, "hostile": 0}
    fl = {"n": 0, "silent": 0}
    flood_kinds = ("flood_request_have_0", "flood_request_have_random",
                   "flood_request_have_current")

    def flood():
        for _ in range(256):
            k = fl["n"] % 3
            have = (0, r.getrandbits(64), listener.have)[k]
            try:
                flooder.send(weights_request(have), zmq.NOBLOCK)
            except zmq.Again:
                p.blocked += 1
                break
            p.count(flood_kinds[k], "good")
            fl["n"] += 1
        for _ in range(1024):
            try:
                msg = flooder.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            answers["flood"] += 1
            answers["flood_weights"] += fields(msg)[0] == B_WEIGHTS

    def wrong_types():
        for w in wrong:
            s, m = w[0], w[1]
            while m.poll(0):
                ev = recv_monitor_message(m)["event"]
                if ev == zmq.EVENT_CONNECTED:
                    wt["connections"] += 1
                elif ev == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    wt["handshakes"] += 1
                elif ev == zmq.EVENT_DISCONNECTED:
                    wt["disconnects"] += 1
                    if w[2] < WRONG_TYPE_RECONNECTS:
                        w[2] += 1
                        wt["reconnects"] += 1
                        try:
                            s.disconnect(ep)
                        except zmq.ZMQError:
                            pass
                        s.connect(ep)
            while s.poll(0):
                s.recv_multipart()
                wt["messages"] += 1

    def tick():
        listener.tick()
        flood()
        i = fl["silent"] % max(1, len(silent))
        if silent:
            p.send(silent[i], "silent_request_have_%s" % ("0" if i % 2 else "current"), "good",
                   weights_request(0 if i % 2 else listener.have))
        fl["silent"] += 1
        while hostile.poll(0):
            hostile.recv_multipart()
            answers["hostile"] += 1
        wrong_types()

    def valid():
        return weights_request(r.getrandbits(64))

    bad = common_bad(p, valid) + [
        ("request_wrong_version_0", "bad", lambda: weights_request(1, version=0)),
        ("request_wrong_version_2", "bad", lambda: weights_request(1, version=2)),
        ("request_wrong_version_u32_max", "bad", lambda: weights_request(1, version=U32_MAX)),
        ("request_have_version_as_bytes", "bad", lambda: env(B_WREQ, _bytes(1, b"\x01\x02"))),
        # Weights of a small model: a real one (5 kB) is above MAXMSGSIZE, a giant frame.
        ("wrong_kind_Weights_small", "bad", lambda: weights(1, 1, 4, f32([0.0] * 4))),
    ] + wrong_kinds(p, exclude={B_WEIGHTS, B_WREQ})
    good = [
        ("request_have_random", "good", valid),
        ("request_have_0", "good", lambda: weights_request(0)),
        ("request_unknown_field_7", "good", lambda: env(B_WREQ, _uint(1, 5) + _uint(7, 9))),
    ]
    run_catalog(p, hostile, bad + good, a.seconds, on_tick=tick)
    t_end = time.monotonic()
    tick()
    res = listener.result(t_end)
    p.report(replies=res["weights_received"], flood_requests=fl["n"],
             flood_answers=answers["flood"], flood_answers_weights=answers["flood_weights"],
             hostile_answers=answers["hostile"], silent_connections=len(silent),
             wrong_type=wt, expected_num_params=a.num_params, **res)


# ---------------------------------------------------------------------------------------
# Mode: fake upstream for a real actor (fake learner weights ROUTER, fake replay ROUTER,
# stats PULL)

HOLD_S = 0.5  # a clean stage holds a request that has its version this long (a heartbeat)


def mode_fake_upstream(p):
    """Stages (each result is reported per stage):
      garbage   --attack-seconds: each WeightsRequest of the actor answered with a bad Weights
                (wrong num_params, short, NaN, Inf, wrong protocol version), garbage, a
                multipart message or another message kind, or a valid Weights (a new or an
                old version); with no request waiting, more of the same unsolicited; bad
                InsertAcks and garbage on the replay ROUTER, interleaved with valid acks (no
                giant frames)
      settle    requests answered with valid weights of version V_SETTLE only; every batch
                acked
      huge      (--huge-weights) answered with finite weights of magnitude 1e30, V_HUGE
      recover   valid weights of version V_RECOVER
      giant     one giant frame on the weights ROUTER and one on the replay ROUTER, then
                --clean-seconds of valid weights of version V_FINAL; every batch acked
      final     2.5 s more of the same: has the actor reconnected both sockets?
    In the clean stages (all but garbage) a request is answered at once unless it already
    has the stage's version; then it is held HOLD_S and answered with the same weights, as
    the learner does (a heartbeat). Every request is checked: one frame, a WeightsRequest.
    """
    a, r = p.a, p.rng
    P, d = a.num_params, a.obs_dim
    V_SETTLE, V_HUGE, V_RECOVER, V_FINAL = 500000, 600000, 700000, 800000
    wrouter = p.sock(zmq.ROUTER, bind=a.pub, ROUTER_MANDATORY=1, SNDHWM=16)
    router = p.sock(zmq.ROUTER, bind=a.router, ROUTER_MANDATORY=1, ROUTER_HANDOVER=1)
    pull = p.sock(zmq.PULL, bind=a.pull)
    st = {"version": 1000, "peer": None, "wid": None, "seqs": [], "stage": "connect"}
    pending = []  # weights requests not answered yet: [routing id, have_version, arrival]
    seen = set()
    stages = {}

    def stage_rec(name):
        return stages.setdefault(name, {"batches": 0, "new_seqs": 0, "resent": 0,
                                        "malformed": 0, "malformed_why": {}, "acks": 0,
                                        "stats": 0, "weights_version_last": None,
                                        "frames_first": None, "frames_last": None,
                                        "dropped_last": None, "seconds": 0.0,
                                        "weights_requests": 0, "weights_requests_bad": 0,
                                        "have_last": None, "weights_answers": 0,
                                        "weights_unsolicited": 0})

    def weights_of(version_no, scale=0.05):
        return weights(version_no, 1, P, f32([r.uniform(-scale, scale) for _ in range(P)]))

    def valid_new():
        st["version"] += 1
        return weights_of(st["version"])

    # Multipart frames included: an actor SUB with ZMQ_CONFLATE once aborted on them (libzmq
    # 4.3.4's conflating pipe); a DEALER must drop them like any other bad answer.
    weights_catalog = common_bad(p, valid_new) + [
        ("weights_num_params_minus_1", "bad", lambda: weights(5, 1, P - 1, f32([0.0] * (P - 1)))),
        ("weights_num_params_plus_1", "bad", lambda: weights(5, 1, P + 1, f32([0.0] * (P + 1)))),
        ("weights_num_params_0", "bad", lambda: weights(5, 1, 0, b"")),
        ("weights_num_params_u32_max", "bad", lambda: weights(5, 1, U32_MAX, f32([0.0] * P))),
        ("weights_bytes_short", "bad", lambda: weights(5, 1, P, f32([0.0] * (P - 1)))),
        ("weights_nan", "bad", lambda: weights(5, 1, P, f32([0.0] * (P - 1) + [NAN]))),
        ("weights_inf", "bad", lambda: weights(5, 1, P, f32([-INF] + [0.0] * (P - 1)))),
        ("weights_wrong_version", "bad", lambda: weights(5, 1, P, f32([0.0] * P), version=2)),
    ] + wrong_kinds(p, exclude={B_WEIGHTS}) + [
        ("weights_valid_new_version", "good", valid_new),
        ("weights_valid_older_version", "good", lambda: weights_of(3)),
    ]

    def ack(seq, actor=None):
        return insert_ack(a.actor_index if actor is None else actor, seq)

    def last_seq():
        return st["seqs"][-1] if st["seqs"] else 0

    router_catalog = common_bad(p, lambda: ack(last_seq())) + [
        ("ack_wrong_actor_id", "bad", lambda: ack(last_seq(), actor=a.actor_index + 1)),
        ("ack_actor_id_u32_max", "bad", lambda: ack(last_seq(), actor=U32_MAX)),
        ("ack_wrong_version", "bad", lambda: insert_ack(a.actor_index, last_seq(), version=0)),
        ("ack_seq_u64_max", "good", lambda: ack(U64_MAX)),
        ("ack_seq_far_future", "good", lambda: ack(last_seq() + 100000)),
        ("ack_seq_replayed", "good", lambda: ack(r.choice(st["seqs"]) if st["seqs"] else 0)),
    ] + wrong_kinds(p, exclude={B_ACK})

    def take():
        rec = stage_rec(st["stage"])
        while wrouter.poll(0):
            frames = wrouter.recv_multipart()
            rec["weights_requests"] += 1
            body, f = fields(frames[1]) if len(frames) == 2 else (None, {})
            if body != B_WREQ:
                rec["weights_requests_bad"] += 1
                continue
            st["wid"] = frames[0]
            rec["have_last"] = f.get(1, 0)
            pending.append([frames[0], f.get(1, 0), time.monotonic()])
            del pending[:-64]  # unsolicited answers make it ask again: keep the newest
        while router.poll(0):
            frames = router.recv_multipart()
            if len(frames) != 2:
                continue
            ident, msg = frames
            st["peer"] = ident
            body, f = fields(msg)
            why = "kind %s" % body if body != B_BATCH else check_batch(f, d, a.n_actions)
            rec["batches"] += 1
            if why:
                rec["malformed"] += 1
                rec["malformed_why"][why] = rec["malformed_why"].get(why, 0) + 1
            seq = f.get(2, 0)
            if seq in seen:
                rec["resent"] += 1
            else:
                rec["new_seqs"] += 1
            seen.add(seq)
            st["seqs"].append(seq)
            try:
                router.send_multipart([ident, ack(seq)], zmq.NOBLOCK)
                rec["acks"] += 1
            except zmq.ZMQError:
                pass
        while pull.poll(0):
            body, f = fields(pull.recv())
            if body == B_STATS:
                rec["stats"] += 1
                rec["weights_version_last"] = f.get(3, 0)
                rec["frames_last"] = f.get(2, 0)
                if rec["frames_first"] is None:
                    rec["frames_first"] = f.get(2, 0)
                rec["dropped_last"] = f.get(4, 0)

    def hostile_weights(nxt):
        """One bad-or-valid answer per tick: to the oldest waiting request, else unsolicited
        to the last routing id that asked."""
        def turn(n):
            rec = stage_rec(st["stage"])
            if pending:
                wid = pending.pop(0)[0]
                key = "weights_answers"
            elif st["wid"] is not None:
                wid, key = st["wid"], "weights_unsolicited"
            else:
                return
            nm, cls, msg = nxt(n)
            rec[key] += p.send(wrouter, "learner_" + nm, cls, msg, prefix=[wid])
        return turn

    def clean_weights(nm, version_no, msg):
        """Every waiting request answered with msg, at once unless it has version_no."""
        def turn(n):
            rec, now = stage_rec(st["stage"]), time.monotonic()
            keep = []
            for w in pending:
                if w[1] != version_no or now - w[2] >= HOLD_S:
                    rec["weights_answers"] += p.send(wrouter, "learner_" + nm, "good", msg,
                                                     prefix=[w[0]])
                else:
                    keep.append(w)
            pending[:] = keep
        return turn

    def run_stage(name, seconds, weights_turn, router_next=None, rate=None):
        st["stage"] = name
        stage_rec(name)
        t0 = time.monotonic()
        n = 0
        while time.monotonic() - t0 < seconds:
            weights_turn(n)
            if router_next and st["peer"] is not None:
                nm, cls, msg = router_next(n)
                p.send(router, "replay_" + nm, cls, msg, prefix=[st["peer"]])
            n += 1
            take()
            if n % 20 == 0:
                p.poll_monitors()
            ahead = n / (rate or a.rate) - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(min(ahead, 0.02))
        take()
        stage_rec(name)["seconds"] = round(time.monotonic() - t0, 2)

    def from_catalog(cat):
        def nxt(n):
            nm, cls, fac = cat[n % len(cat)]
            return nm, cls, fac()
        return nxt

    # The actor connects after we bind; its first batch names its replay routing id (and it
    # asks for weights at once, which names its weights routing id).
    t_connect = time.monotonic()
    while (st["peer"] is None or st["wid"] is None) and \
            time.monotonic() - t_connect < a.connect_timeout:
        take()
        time.sleep(0.01)
    if st["peer"] is None or st["wid"] is None:
        p.report(error="the actor never sent a batch" if st["peer"] is None
                 else "the actor never asked for weights", stages=stages, batches=0)
    p.t0 = time.monotonic()
    run_stage("garbage", a.attack_seconds, hostile_weights(from_catalog(weights_catalog)),
              from_catalog(router_catalog))
    # 4 s: a request answered with garbage stays in flight until the actor's resend timeout
    # (weights_client.h WEIGHTS_RESEND_MS, 2.5 s), so settle must outlast it.
    run_stage("settle", 4.0, clean_weights("settle", V_SETTLE, weights_of(V_SETTLE)), rate=100)
    if a.huge_weights:
        run_stage("huge", 1.5, clean_weights("finite_1e30", V_HUGE,
                                             weights(V_HUGE, 1, P, f32([1e30] * P))), rate=100)
        run_stage("recover", 2.0, clean_weights("recover", V_RECOVER, weights_of(V_RECOVER)),
                  rate=100)
    p.send(wrouter, "giant_frame_weights", "giant", p.giant(), prefix=[st["wid"]])
    p.send(router, "giant_frame_replay", "giant", p.giant(), prefix=[st["peer"]])
    final = clean_weights("final", V_FINAL, weights_of(V_FINAL))
    run_stage("giant", a.clean_seconds, final, rate=100)
    run_stage("final", 2.5, final, rate=100)
    p.poll_monitors()
    p.report(batches=sum(s["batches"] for s in stages.values()), unique_seqs=len(seen),
             replies=sum(s["batches"] for s in stages.values()),
             peer=(st["peer"] or b"").decode(errors="replace"), stages=stages,
             weights_requests=sum(s["weights_requests"] for s in stages.values()),
             weights_requests_bad=sum(s["weights_requests_bad"] for s in stages.values()),
             versions={"settle": V_SETTLE, "huge": V_HUGE, "recover": V_RECOVER,
                       "final": V_FINAL})


# ---------------------------------------------------------------------------------------
# Mode: seq-max. One otherwise valid batch whose seq is 2^64-1, then an ordinary batch as a
# probe: a server that is still serving acknowledges the probe.

def mode_seq_max(p):
    a = p.a
    p.epoch = 4242
    s = p.sock(zmq.DEALER, a.endpoint, ident=b"hostile-seq-max")
    p.wait_handshake(1)
    p.send(s, "valid_batch_seq_u64_max", "good", good_batch(p, 0, p.epoch, U64_MAX))
    p.send(s, "probe_batch_seq_1", "good", good_batch(p, 1, p.epoch, 1))
    acks = []
    deadline = time.monotonic() + a.seconds
    while time.monotonic() < deadline and len(acks) < 2:
        if s.poll(50):
            body, f = fields(s.recv())
            if body == apexwire.BODY_INSERT_ACK:
                acks.extend([f.get(1, 0), seq] for seq in apexwire.ack_seqs(f))
    p.report(acks=acks, replies=len(acks), probe_acked=[1, 1] in acks)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["replay-insert", "replay-sample", "learner-stats",
                                     "learner-weights", "fake-upstream", "seq-max"])
    ap.add_argument("--endpoint")
    ap.add_argument("--pub", help="fake-upstream: where to bind the fake learner's weights ROUTER")
    ap.add_argument("--router")
    ap.add_argument("--pull")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rate", type=float, default=1500.0, help="messages per second, at most")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--giants", type=int, default=3, help="giant frames per run")
    ap.add_argument("--giant-bytes", type=int, default=4 << 20)
    ap.add_argument("--obs-dim", type=int, default=4)
    ap.add_argument("--n-actions", type=int, default=2)
    ap.add_argument("--num-actors", type=int, default=2)
    ap.add_argument("--num-params", type=int, default=0)
    ap.add_argument("--max-batch", type=int, default=4096)
    ap.add_argument("--unread", type=int, default=400,
                    help="replay-sample: max-size sample requests whose replies are never read")
    ap.add_argument("--subscribers", type=int, default=50,
                    help="learner-weights: DEALERs that keep asking for weights and never read")
    ap.add_argument("--attack-seconds", type=float, default=10.0)
    ap.add_argument("--clean-seconds", type=float, default=7.0)
    ap.add_argument("--connect-timeout", type=float, default=15.0)
    ap.add_argument("--actor-index", type=int, default=0)
    ap.add_argument("--huge-weights", action="store_true",
                    help="fake-upstream: also publish finite weights of magnitude 1e30")
    ap.add_argument("--json", help="also write the RESULT object to this file")
    a = ap.parse_args()
    p = Peer(a)
    {"replay-insert": mode_replay_insert, "replay-sample": mode_replay_sample,
     "learner-stats": mode_learner_stats, "learner-weights": mode_learner_weights,
     "fake-upstream": mode_fake_upstream, "seq-max": mode_seq_max}[a.mode](p)


if __name__ == "__main__":
    main()
