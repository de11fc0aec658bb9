#!/usr/bin/env python3
"""replay_driver.py: actors with exactly known transitions, for the replay crash test.

  replay_driver.py ENDPOINT WORKDIR [--actors 3] [--rows 5] [--window 64] [--pace-ms 5]

Each actor sends numbered batches (row r of batch seq of actor a has obs [a, seq, r, 0.5])
with initial priorities 1 + seq % 7, keeps unacknowledged batches, re-sends them after
--resend-s, and appends every acknowledged "actor seq" to WORKDIR/acked.txt. When
WORKDIR/stop appears it stops producing, waits until every batch is acknowledged (at most
--drain-s), writes WORKDIR/sent.txt and exits 0, or 1 if some were never acknowledged.
"""
import argparse
import os
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apexwire  # noqa: E402


def batch(actor, epoch, seq, rows):
    obs = [[float(actor), float(seq), float(r), 0.5] for r in range(rows)]
    nxt = [[float(actor), float(seq), float(r), 1.5] for r in range(rows)]
    return apexwire.transition_batch(actor, epoch, seq, obs, [r % 2 for r in range(rows)],
                                     [float(seq)] * rows, [0.99] * rows, nxt,
                                     [1.0 + seq % 7] * rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("workdir")
    ap.add_argument("--actors", type=int, default=3)
    ap.add_argument("--rows", type=int, default=5)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--pace-ms", type=float, default=5.0)
    ap.add_argument("--resend-s", type=float, default=1.0)
    ap.add_argument("--drain-s", type=float, default=60.0)
    a = ap.parse_args()
    ctx = zmq.Context()
    socks, unacked, next_seq = [], [], []
    epoch = int(time.time() * 1e6)
    for i in range(a.actors):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, b"actor-%d" % i)
        s.setsockopt(zmq.IMMEDIATE, 1)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RECONNECT_IVL, 50)
        s.connect(a.endpoint)
        socks.append(s)
        unacked.append({})
        next_seq.append(0)
    acked_f = open(os.path.join(a.workdir, "acked.txt"), "a")
    poller = zmq.Poller()
    for s in socks:
        poller.register(s, zmq.POLLIN)
    stop_path = os.path.join(a.workdir, "stop")
    stopping_since = None
    resent = 0
    while True:
        now = time.monotonic()
        if stopping_since is None and os.path.exists(stop_path):
            stopping_since = now
        for i, s in enumerate(socks):
            u = unacked[i]
            if stopping_since is None and len(u) < a.window:
                seq = next_seq[i]
                next_seq[i] += 1
                u[seq] = [batch(i, epoch, seq, a.rows), 0.0]
            for seq, entry in sorted(u.items()):
                if entry[1] == 0.0 or now - entry[1] > a.resend_s:
                    try:
                        s.send(entry[0], zmq.NOBLOCK)
                        resent += entry[1] != 0.0
                        entry[1] = now
                    except zmq.Again:
                        break  # not connected: try again next round
        for s, _ in poller.poll(timeout=a.pace_ms):
            for actor, seq in apexwire.drain_acks(s):
                if unacked[actor].pop(seq, None) is not None:
                    acked_f.write("%d %d\n" % (actor, seq))
            acked_f.flush()
        if stopping_since is not None:
            if all(not u for u in unacked):
                break
            if now - stopping_since > a.drain_s:
                break
    with open(os.path.join(a.workdir, "sent.txt"), "w") as f:
        for i in range(a.actors):
            f.write("%d %d\n" % (i, next_seq[i]))
    left = sum(len(u) for u in unacked)
    print("driver: sent %s batches, %d re-sent, %d never acknowledged"
          % (next_seq, resent, left), flush=True)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
