#!/usr/bin/env python3
"""gen_programs.py: writes the seed corpora of the handler harnesses, fuzz_replay and
fuzz_learner (fuzz/corpus/replay/, fuzz/corpus/learner/).

Their inputs are programs (fuzz/fuzz_prog.h): a byte that configures the run, then operations,
each an opcode byte and its operands, read in the order fuzz_replay.c and fuzz_learner.c read
them. The builders below mirror that order; a change to a harness's reading order needs the
same change here (tests/check_fuzz_replay.c and check_fuzz_learner.c fail when the seeds stop
reaching the handlers). Numbers are written as indices into the harnesses' edge tables where
they can be (one byte below 224), so the seeds stay short.

Usage: python3 fuzz/gen_programs.py [fuzz dir]   (make fuzz-corpus runs it)
"""
import os
import sys

# Edge-table indices (fuzz_prog.h).
F32 = {"0": 0, "-0": 1, "1": 2, "-1": 3, "0.5": 4, "0.25": 5, "2": 6, "100": 7, "min": 8,
       "tmin": 9, "-tmin": 10, "max": 11, "-max": 12, "inf": 13, "-inf": 14, "nan": 15,
       "1e-8": 16, "1e20": 17, "1e28": 18, "prio_max": 19, "beta_max": 20, "after1": 21,
       "before1": 22, "after_prio_max": 23}
F64 = {"0": 0, "-0": 1, "1": 2, "0.5": 3, "min": 4, "tmin": 5, "-tmin": 6, "max": 7, "-1": 8,
       "inf": 9, "-inf": 10, "nan": 11, "1e300": 12, "flt_max": 13, "mass_max": 14,
       "after_mass_max": 15, "1e-30": 16, "1e20": 17}
I32 = {"0": 0, "1": 1, "2": 2, "3": 3, "-1": 4, "max": 5, "min": 6, "5": 7, "17": 8}


def u64(v):
    """fuzz_u64: values below 32 in one byte; UINT64_MAX - k (k < 4) as 0x60 | k."""
    if v < 32:
        return [v]
    if v >= (1 << 64) - 4:
        return [0x60 | ((1 << 64) - 1 - v)]
    return [0xE0] + list(v.to_bytes(8, "little"))


def f32(name):
    return [F32[name]]


def f64(name):
    return [F64[name]]


# ---------------------------------------------------------------------------------------
# fuzz_replay.c: config byte b -> capacity caps[b % 3] (1, 7, 64), alpha (b / 3) % 3,
# uint8 (b / 9) & 1, (b / 18) % 4: one server, shard 0 of 2, shard 1 of 2, spi 2;
# (b / 72) & 1: min_size_to_sample 3. OBS = 4.
R_OBS = 4


def r_cfg(cap=2, alpha=0, uint8=0, mode=0, minsize=0):
    return [cap + 3 * alpha + 9 * uint8 + 18 * mode + 72 * minsize]


def r_batch(rows, actor=0, seq=0, prio=None, flags=0, epoch=0):
    """Operation 0. flags: 1 i32 actions, 2 f32 rewards, 4 f32 discounts, 8 raw observations,
    16 obs_dim - 1, 32 the other dtype, 64 priorities sent."""
    b = [0, flags | (64 if prio else 0), rows - 1]
    b += [F32["0.5"], F32["0.5"], 7, 9] * (rows * R_OBS)
    for i in range(rows):
        b += [i % 3] if not flags & 1 else [I32["1"]]
        b += [i] if not flags & 2 else f32("1")
        b += [3] if not flags & 4 else f32("0.5")  # 3 % 5 * 0.25 = 0.75
        b += f32(prio or "1")
    return b + [actor, epoch] + u64(seq) + u64(1)


def r_sample(rows, batches=1, beta="0.5", min_prio=None, rid=1, stats_only=False, after=0):
    """Operation 1."""
    flags = (1 if stats_only else 0) | (2 if min_prio else 0) | 4 | (16 if after else 0)
    b = [1, flags] + u64(rid)
    if min_prio:
        b += f64(min_prio)
    b += f32(beta)
    if stats_only:
        return b + u64(after)
    b += [rows, batches]
    if after:
        b += u64(after)
    return b


def r_update(keys, prio="2"):
    """Operation 2: keys (slot, generation) with slot < 70, generation < 4."""
    b = [2, len(keys) - 1]
    for slot, gen in keys:
        b += [slot, gen] + f32(prio)
    return b


def r_tick(tens_of_ms):
    return [5, tens_of_ms]


# Frame-mode runs (config bytes from 144): c = b - 144 -> capacity caps[c % 3], frame_capacity
# (6, 16, 40)[(c / 3) % 3] (alpha likewise), MinAtar uint8 K 3 if (c / 9) & 1 else CartPole
# float32 K 2, (c / 18) % 3: one server, shard 0 of 2, shard 1 of 2; ack_timeout_ms 3000 if
# (c / 54) & 1 else 100; min_size_to_sample 3 from c = 108 up.
def f_cfg(cap=2, fcap=2, uint8=0, mode=0, slow_ack=0, minsize=0):
    c = cap + 3 * fcap + 9 * uint8 + 18 * mode + 54 * slow_ack
    if minsize:
        c = 108 + cap + 3 * fcap
        assert c < 112
    return [144 + c]


def f_count(n):
    """The frame-count byte: n % 9 below 224, n % 19 from 224."""
    return n if n < 9 else next(b for b in range(224, 256) if b % 19 == n)


def f_batch(frames, rows=(), actor=0, epoch=0, seq=0, first=None, prev=None, flags=0,
            prio=None, values=None, wild_rows=None):
    """Operation 0 of a frame-mode run (fuzz_replay.c s_op_frames). flags: 1 i32 actions, 2 f32
    rewards, 4 f32 discounts, 8 raw frames (values: f32 names per element, CartPole), 16
    wild links (prev: u64 values), 32 wild row numbers (wild_rows: (obs, next) pairs), 64
    priorities, 128 whole observations. first: None (on from the actor's last stored batch),
    ("ahead", k) k in 1..64, ("back", k) k < 32, ("at", v). prev: per frame (default 1, 0
    for frame 0). rows: (back, gap) per row: next_obs's newest frame is back before the last
    frame sent, obs's gap + 1 before that."""
    flags |= 64 if prio else 0
    flags |= 32 if wild_rows else 0
    b = [0, flags, actor, epoch] + u64(seq)
    if first is None:
        b += [0]
    elif first[0] == "ahead":
        b += [0x80 | (first[1] - 1)]
    elif first[0] == "back":
        b += [0xC0 | first[1]]
    else:
        b += [0xE0] + u64(first[1])
    n_rows = len(wild_rows) if wild_rows else len(rows)
    b += [f_count(frames), n_rows]
    for i in range(frames):
        b += u64(prev[i]) if flags & 16 else [prev[i] if prev else 1]
        if flags & 8:
            b += sum((f32(v) for v in values[i]), [])
        else:
            b += [(7 * i + 3) & 255]
    for i in range(n_rows):
        if wild_rows:
            b += u64(wild_rows[i][0]) + u64(wild_rows[i][1])
        else:
            b += list(rows[i])
        b += [i % 2] + [i] + [3] + f32(prio or "1")
    return b


def f_start(frames, rows=(), **kw):
    """An episode's start: frame 0 links to itself."""
    return f_batch(frames, rows, prev=[0] + [1] * (frames - 1), **kw)


def steps(k):
    """Rows of the last k steps of a batch (obs t, next_obs t + 1; 1-step returns)."""
    return [(i, 0) for i in range(k)]


def frame_programs():
    p = {}
    # Frames stored once, rows naming them, sampled back and checked against the frames sent.
    p["frames_basic"] = (f_cfg() + f_start(4, steps(3)) + r_sample(4) +
                         f_batch(4, steps(4), seq=1, prio="2") + r_sample(8, rid=2) +
                         r_update([(0, 1), (1, 1), (5, 1)]) + f_batch(3, [], seq=2) +
                         f_batch(0, [(0, 0), (1, 0)], seq=3, first=("back", 0)) +
                         r_sample(4, batches=2, rid=3))
    # Frame order: a batch ahead of the one before it is held back until that one comes (and
    # is re-sent), then stored; a gap that outlives 4 ack timeouts (100 ms here) is given up on.
    p["frames_gap"] = (f_cfg(cap=1, fcap=1) + f_start(4, steps(3)) +
                       f_batch(4, steps(4), seq=2, first=("ahead", 4)) +
                       f_batch(4, steps(4), seq=1) + f_batch(4, steps(4), seq=2) + r_sample(4) +
                       f_batch(4, steps(4), seq=4, first=("ahead", 5)) + r_tick(10) +
                       f_batch(4, steps(4), seq=4, first=("ahead", 5)) + r_tick(50) +
                       f_batch(4, steps(4), seq=4, first=("ahead", 5)) + r_sample(4, rid=2) +
                       f_batch(2, steps(2), seq=5) + r_sample(7, rid=3))
    # The default ack timeout: a gap is given up on after 12 s.
    p["frames_gap_slow"] = (f_cfg(slow_ack=1, mode=1) + f_start(3, steps(2)) +
                            f_batch(3, steps(2), seq=1, first=("ahead", 30)) +
                            r_tick(255) * 4 + f_batch(3, steps(2), seq=1, first=("ahead", 30)) +
                            r_tick(255) + f_batch(3, steps(2), seq=1, first=("ahead", 30)) +
                            r_sample(2))
    # Few frames: rows die as their frames are evicted, some are never stored (their frames
    # are gone already), the rest sampled.
    ev = f_cfg(cap=2, fcap=0) + f_start(4, steps(3))
    for q in range(1, 8):
        ev += f_batch(2 + q % 3, [(0, 0), (1, 0), (6, 0), (2, 3)], seq=q) + r_sample(2, rid=q)
    p["frames_evict"] = ev + r_update([(0, 1), (3, 1), (9, 1)]) + r_sample(4, rid=9)
    # uint8 frames, 3 deep (MinAtar): episodes starting mid-batch (a stack repeats its first
    # frame), another actor, another epoch (which empties the actor's map), min_size 3.
    p["frames_uint8"] = (f_cfg(cap=1, fcap=1, uint8=1) + f_start(5, steps(4)) +
                         f_batch(5, steps(4), seq=1, prev=[1, 0, 1, 1, 0]) +
                         f_start(4, steps(3), actor=2) + r_sample(6) +
                         f_start(3, steps(2), epoch=1, seq=2) +
                         f_batch(0, [(2, 0), (4, 1)], epoch=1, seq=3) + r_sample(4, rid=2) +
                         f_batch(2, [(3, 0)], seq=9, first=("back", 5)) + r_sample(4, rid=3))
    p["frames_minsize"] = (f_cfg(cap=2, fcap=0, minsize=1) + f_start(3, steps(2)) + r_sample(2) +
                           f_batch(3, steps(3), seq=1) + r_tick(1) + r_sample(2, rid=2))
    # A shard of two: its own actors' batches only.
    p["frames_shard1"] = (f_cfg(cap=1, fcap=2, mode=2) + f_start(4, steps(3), actor=1) +
                          f_start(4, steps(3), actor=0) + f_start(4, steps(3), actor=3) +
                          r_sample(2) + r_sample(0, stats_only=True, after=20))
    # Refusals and edges: whole observations to a frame-mode server, links and row numbers
    # out of bounds, a huge first frame, too many frames, a NaN frame, a duplicate batch.
    bad = f_cfg(fcap=1) + f_start(4, steps(3))
    bad += f_batch(2, steps(2), seq=1, flags=128)
    bad += f_batch(2, steps(1), seq=2, flags=16, prev=[1, 1 << 40])
    bad += f_batch(2, seq=3, wild_rows=[(0, 5), (7, 3), ((1 << 64) - 1, 0), (0, 1 << 62)])
    bad += f_batch(2, seq=4, wild_rows=[(0, 1), (2, 3)])
    bad += f_batch(3, steps(2), seq=5, first=("at", (1 << 62) - 3))
    bad += f_batch(3, steps(2), seq=6, first=("at", 1 << 62))
    bad += f_batch(17, steps(2), seq=7) + f_batch(16, steps(8), seq=8)
    bad += f_batch(1, [], seq=9, flags=8, values=[["1", "nan", "0", "0"]])
    bad += f_batch(1, [], seq=10, flags=8, values=[["max", "-tmin", "-0", "1e28"]])
    bad += f_batch(2, steps(1), seq=10) + f_batch(0, [], seq=11)
    bad += f_batch(2, steps(2), seq=12, first=("back", 20), prio="nan")
    p["frames_refusals"] = bad + r_sample(4) + r_update([(0, 1), (1, 2)]) + r_sample(2, rid=2)
    # A frame-mode batch to a whole-observation server.
    p["frame_layout"] = r_cfg() + r_batch(3, flags=128) + r_batch(2, seq=1) + r_sample(2)
    return p


# Deterministic runs: after the config byte, a byte from 0xF0 (DET_MARK): 1 prefetch 2, 2 ranks
# 2 (the lag of updates: prefetch x ranks), 4 one batch per request (else 4), 8 a window of 2
# batches (else 8). The first byte's mode (r_cfg's, or f_cfg's) then chooses the ratio: 0
# samples_per_insert 1 with tolerance 0, 1 0.25 with the default tolerance, 2 8 with 2, 3 2
# with 4 (frame mode: modes 0-2 likewise). Operations 0-2 read one more byte (fuzz_replay.c
# s_det_batch, s_det_request, s_det_update).
def d_run(prefetch2=0, ranks2=0, one_batch=1, window2=0):
    return [0xF0 | prefetch2 | ranks2 << 1 | one_batch << 2 | window2 << 3]


D_PERIOD = {"cur": 0, "next": 4, "prev": 5, "none": 6, "any": 7}


def d_tail(period="cur", end=False, empty=False, seq_as_read=False, wild=None, cols=None):
    """The det byte of a batch: det_period (the actor's current, next, previous, none or
    any = wild), the period's end, no rows, seq as read (else the actor's next); cols with
    an end: the actor's columns in range, (frames // 1000, episodes beyond the returns,
    [returns as whole numbers in -128..127])."""
    e = D_PERIOD[period] | (8 if end else 0) | (16 if empty else 0) | (32 if seq_as_read else 0)
    tail = u64(wild) if period == "any" else []
    if cols is not None:
        frames_k, extra, rets = cols
        e |= 64 | 128
        tail += [len(rets), frames_k, extra] + [r & 0xFF for r in rets]
    return [e] + tail


def d_batch(rows, actor=0, seq=None, **kw):
    """Operation 0 of a deterministic whole-observation run (empty: rows is still read, 1)."""
    flags = kw.pop("flags", 0)
    return r_batch(rows, actor=actor, seq=seq or 0, flags=flags) + \
        d_tail(seq_as_read=seq is not None, **kw)


def d_frames(frames, rows=(), start=False, det=None, **kw):
    """Operation 0 of a deterministic frame-mode run."""
    b = f_start(frames, rows, **kw) if start else f_batch(frames, rows, **kw)
    return b + d_tail(**(det or {}))


D_INDEX = {"next": 0, "back": 4, "ahead": 5, "none": 6, "any": 7}


def d_sample(rows, batches=1, index="next", k=0, horizon=False, wild=None, again=False):
    """Operation 1 for rows: det_index the next (the harness counts), k + 1 back, k + 1 ahead,
    none, any (wild); horizon: det_horizon 1 too (refused); again: the id's attempt is k + 1
    (a learner asking again after a timeout)."""
    g = D_INDEX[index] | (8 if horizon else 0) | (16 if again else 0) | k << 5
    return r_sample(rows, batches=batches) + [g] + (u64(wild) if index == "any" else [])


D_WATCH = {"plain": 0, "next": 1, "cur": 3, "ahead": 4, "any": 5, "with_index": 6,
           "with_after": 7}


def d_watch(h="next", k=0, after=0, wild=None):
    """Operation 1, stats only: det_horizon the next horizon, the current one, k + 2 ahead,
    any (wild); with det_index or stats_after too (refused); plain: stats_after as before."""
    return (r_sample(0, stats_only=True, after=after) + [D_WATCH[h] | k << 5] +
            (u64(wild) if h == "any" else []))


D_UPDATE = {"owed": 0, "unserved": 4, "none": 5, "old": 6, "any": 7}


def d_update(keys, which="owed", k=0, empty=False, wild=None, prio="2"):
    """Operation 2: det_index the request owed updates (the harness counts), one not served
    (k past the schedule's next), none, k + 1 before the owed one, any (wild); empty: no keys."""
    g = D_UPDATE[which] | (8 if empty else 0) | k << 5
    return r_update(keys, prio=prio) + [g] + (u64(wild) if which == "any" else [])


def det_programs():
    p = {}
    # Four actors' periods stored period-major, requests served in order as the ratio (1, no
    # tolerance) lets them, each request's updates before the next is served (lag 1), the
    # horizon watched for the weights of the next period.
    basic = r_cfg(mode=0) + d_run()
    for a in range(4):
        basic += d_batch(4, actor=a, end=True)
    basic += d_watch("next") + d_watch("cur")
    for q in range(1, 4):
        basic += d_sample(4) + d_update([(0, 1), (1, 1)])
    basic += r_tick(1)
    for a in range(4):
        basic += d_batch(2, actor=a) + d_batch(2, actor=a, end=True)
    basic += d_watch("next")
    for q in range(4, 9):
        basic += d_sample(2) + d_update([(q % 5, 1)])
    p["det_basic"] = basic + r_tick(1) + d_watch("cur") + d_sample(4)
    # Lag 4 (prefetch 2 x ranks 2), four batches per request, uint8 observations: requests
    # run ahead of their updates; updates come late, some in one message per batch, some
    # empty (every priority NaN), and hold the schedule until they are all in.
    lag = r_cfg(mode=3, uint8=1) + d_run(prefetch2=1, ranks2=1, one_batch=0)
    for a in range(4):
        lag += d_batch(6, actor=a) + d_batch(2, actor=a, end=True)
    for q in range(6):
        lag += d_sample(1, batches=4)
    for q in range(6):
        for b in range(4):
            lag += d_update([(b, 1)], empty=(b == 3))
    lag += d_watch("next") + r_tick(2)
    for a in range(4):
        lag += d_batch(3, actor=a, end=True)
    p["det_lag"] = lag + d_sample(1, batches=4) + r_tick(1) + d_watch("cur")
    # Periods out of order, an actor not in deterministic mode, periods at and past their
    # bound, an end without rows and a batch without rows that ends nothing (refused), a
    # window of 2 overrun, a re-sent batch.
    per = r_cfg(mode=0) + d_run(window2=1)
    per += d_batch(2, actor=1, end=True) + d_batch(2, actor=1, period="next")
    per += d_batch(2, actor=1, period="next", end=True) + d_batch(2, actor=1, period="next")
    per += d_batch(2, actor=0, period="none") + d_batch(2, actor=0, end=True)
    per += d_batch(1, actor=2, end=True, empty=True) + d_batch(1, actor=3, empty=True)
    # Periods far ahead (the turn jumps there: fuzz/regressions/replay/det_period_far_ahead).
    per += d_batch(1, actor=0, empty=True, end=True, period="any", wild=(1 << 64) - 2)
    per += d_batch(2, actor=3, period="any", wild=(1 << 64) - 1)
    per += d_batch(2, actor=3, end=True, seq=5) + d_batch(2, actor=3, end=True, seq=5)
    per += d_batch(2, actor=0, period="prev") + d_batch(2, actor=4, end=True)
    for q in range(6):
        per += d_sample(2) + d_update([(q, 1)])
    p["det_periods"] = per + d_watch("next") + r_tick(3)
    # The default tolerance (1e5) with samples_per_insert 0.25: once min_size_to_sample (3)
    # rows are in, every request may be served, so no further batch is applied before them.
    tol = r_cfg(mode=1, minsize=1, alpha=1) + d_run()
    for a in range(4):
        tol += d_batch(2, actor=a, end=True)
    for q in range(4):
        tol += d_sample(3) + d_update([(q, 1), (q + 1, 1)])
    p["det_tolerance"] = tol + d_watch("cur") + r_tick(1)
    # Requests and updates a learner of another schedule sends: det_index 0 (refused), one
    # again, back (a restarted learner), ahead beyond the window (a restarted replay), the
    # largest; det_horizon on a request for rows; updates of requests not served, applied
    # already, of none and of any number, empty without det_index (refused); watches far ahead
    # (the turn jumps there), at any number, with det_index or stats_after (refused).
    req = r_cfg(mode=0, cap=2) + d_run(prefetch2=1)
    for a in range(4):
        req += d_batch(8, actor=a, end=True)
    # Asked again: a served place (dropped), and the next place (held as a first ask is).
    req += d_sample(2) + d_sample(2, index="back", again=True) + d_sample(2, again=True)
    req += d_update([(0, 1)], which="old") + d_sample(2, index="none")
    req += d_sample(2, index="back")
    req += d_update([(0, 1)]) + d_sample(2) + d_sample(2, index="ahead", k=7)
    req += d_sample(2, index="back", k=7) + d_sample(2, horizon=True)
    req += d_sample(2, index="any", wild=(1 << 64) - 1) + d_sample(2, index="any", wild=1 << 40)
    req += d_update([(1, 1)], which="unserved", k=3) + d_update([(1, 1)], which="old")
    req += d_update([(1, 1)], which="none") + d_update([(2, 1)], which="any", wild=1 << 63)
    req += d_update([(2, 1)], which="none", empty=True) + d_update([(2, 1)], empty=True)
    req += d_watch("ahead", k=3) + d_watch("any", wild=(1 << 64) - 1) + d_watch("next")
    req += d_watch("with_index") + d_watch("with_after", after=7) + d_watch("plain", after=3)
    for a in range(4):
        req += d_batch(2, actor=a, end=True)
    p["det_requests"] = req + d_sample(2) + r_tick(1) + d_sample(2)
    # Frame mode: frames-only batches, rows naming earlier batches' frames, a period that
    # ends with no rows and no frames.
    fr = f_cfg(cap=2, fcap=2, mode=0) + d_run()
    for a in range(4):
        fr += d_frames(4, steps(3), start=True, actor=a)
        fr += d_frames(3, [], seq=1, actor=a, det={"end": True})
    fr += d_sample(2) + d_update([(0, 1)]) + d_sample(4) + d_update([(1, 1)])
    for a in range(4):
        fr += d_frames(0, [], seq=2, actor=a, det={"end": True, "empty": True})
    fr += d_watch("next") + d_sample(2) + d_update([(2, 1)])
    fr += d_frames(2, [(0, 0), (2, 1)], seq=3, det={"end": True}) + d_sample(2) + r_tick(1)
    p["det_frames"] = fr
    # Frame mode, uint8 stacks, no tolerance: each period's batches in turn.
    fu = f_cfg(cap=1, fcap=1, uint8=1, mode=0) + d_run(window2=1)
    for a in range(4):
        fu += d_frames(5, steps(4), start=True, actor=a, det={"end": True})
    for q in range(4):
        fu += d_sample(2) + d_update([(q, 1)])
    fu += d_frames(3, steps(2), seq=1, det={"period": "next"})
    p["det_frames_uint8"] = fu + d_watch("cur") + d_sample(2)
    # Shard 1 of two (minsize=1 with a deterministic run: replay.shards=2; mode 2: ratio 8 x 2,
    # min_size_to_sample 3 of the run, 2 of this shard): actors 1 and 3 are its turns, actors
    # 0 and 2 are refused (they insert into shard 0); the horizon moves without them.
    sh = r_cfg(cap=1, mode=2, minsize=1) + d_run()
    for a in range(4):
        sh += d_batch(2, actor=a, end=True)
    sh += d_watch("next") + d_sample(4) + d_update([(0, 1)]) + r_tick(1)
    for a in (3, 1):
        sh += d_batch(3, actor=a, end=True)
    p["det_shard"] = sh + d_watch("cur") + d_sample(4) + d_update([(1, 1)]) + r_tick(1)
    # The actors' columns on their periods' ends (metrics.csv's env_frames, episodes,
    # mean_return_100 as of the horizon): two periods of four actors, one with 100 returns.
    co = r_cfg(mode=0) + d_run()
    for p_ in range(2):
        for a in range(4):
            rets = list(range(-3, 97)) if (a, p_) == (2, 1) else [a + p_, -a]
            co += d_batch(3, actor=a, end=True, cols=(p_ + 1, 1, rets))
        co += d_watch("next")
        for q in range(3):  # (inserts wait while the next request could be served)
            co += d_sample(4) + d_update([(q, 1)])
    p["det_columns"] = co + r_tick(1) + d_watch("cur")
    return p


def replay_programs():
    p = frame_programs()
    p.update(det_programs())
    p["basic"] = (r_cfg() + r_batch(8, prio="1") + r_sample(4) +
                  r_update([(0, 1), (1, 1), (2, 1), (3, 0)]) + r_sample(4, batches=2, rid=2) +
                  r_tick(1) + r_batch(8, seq=1) + r_sample(8, rid=3))
    # The numbers of a request at their edges, past an insert so the store can serve.
    req = r_cfg() + r_batch(6, prio="2")
    for m in ["0", "-0", "tmin", "1e300", "flt_max", "mass_max", "after_mass_max", "inf", "nan",
              "-tmin"]:
        req += r_sample(2, min_prio=m)
    for beta in ["0", "-0", "before1", "beta_max", "after1", "inf", "nan", "tmin", "max"]:
        req += r_sample(2, beta=beta)
    p["request_edges"] = req
    # Priorities at their edges, in inserts and updates.
    pr = r_cfg()
    for v in ["0", "tmin", "1e-8", "1e20", "1e28", "prio_max", "after_prio_max", "max", "inf",
              "nan"]:
        pr += r_batch(2, seq=len(pr) % 30, prio=v) + r_update([(0, 1), (1, 1)], prio=v)
    p["priority_edges"] = pr + r_sample(4)
    # The replay ratio: requests held, then served or expired by time.
    p["limiter"] = (r_cfg(mode=3) + r_batch(8) + r_sample(4) + r_sample(16) + r_sample(16, rid=5) +
                    r_batch(8, seq=1) + r_tick(1) + r_tick(255) + r_tick(255) + r_sample(4))
    p["min_size"] = (r_cfg(cap=1, minsize=1) + r_sample(2) + r_batch(2) + r_batch(2, seq=1) +
                     r_tick(2) + r_sample(2))
    # A shard: its own actors only; a sharded learner's minimum and stats watches.
    p["shard1"] = (r_cfg(mode=2) + r_batch(4, actor=1) + r_batch(4, actor=0) +
                   r_sample(4, min_prio="0.5") + r_sample(0, stats_only=True, after=20) +
                   r_batch(4, actor=3, seq=1) + r_tick(255) + r_sample(0, stats_only=True))
    p["shard0"] = (r_cfg(mode=1, alpha=1) + r_batch(5, actor=2) + r_sample(3) +
                   r_sample(0, stats_only=True, after=3))
    p["uint8"] = (r_cfg(uint8=1, alpha=2) + r_batch(6) + r_batch(3, flags=32, seq=1) +
                  r_sample(6) + r_update([(5, 1)]))
    p["capacity1"] = r_cfg(cap=0) + r_batch(3) + r_sample(1) + r_update([(0, 3)]) + r_sample(1)
    # Exactly-once: the same (actor, epoch, seq) again, another epoch, seq at the top.
    p["dedupe"] = (r_cfg() + r_batch(2, seq=7) + r_batch(2, seq=7) + r_batch(2, seq=7, epoch=1) +
                   r_batch(2, seq=(1 << 64) - 1) + r_batch(2, seq=(1 << 64) - 2) +
                   r_batch(2, actor=5) + r_sample(2))
    # Messages that must be refused: bad numbers, raw bytes, kinds, versions, routing ids.
    bad = r_cfg() + r_batch(4)
    for flags in [1, 2, 4, 8, 16, 32]:
        bad += r_batch(3, flags=flags, seq=1)
    bad += [3, 1] + list(b"\x08\x01\x0a\x03abc" + bytes(9))  # raw, insert socket
    bad += [4, 1] + list(b"\x08\x01\x1a\x02\x10\x05" + bytes(10))  # raw, sample socket
    for kind in range(5):
        bad += [6, kind] + ([0] if kind == 2 else []) + [kind & 1]
    bad += [7, 0, 7, 2, 7, 255]
    bad += [8, 0, 8, 200] + [0x41] * 200 + [8, 3, 1, 2, 3] + r_sample(4)
    p["refusals"] = bad
    return p


# ---------------------------------------------------------------------------------------
# fuzz_learner.c: config byte b -> shards 1 + (b & 1), uint8 (b >> 1) & 1, batch 4 if
# (b >> 2) & 1 else 1, 2 batches per request if (b >> 3) & 1, 3 slots if (b >> 4) & 1,
# continuous actions (action_dim 1 in [-1, 2]) if (b >> 5) & 1. OBS = 3.
L_OBS = 3


def l_cfg(shards=1, uint8=0, batch4=0, batches2=0, slots3=0, cont=0):
    return [(shards - 1) | uint8 << 1 | batch4 << 2 | batches2 << 3 | slots3 << 4 | cont << 5]


def l_issue(beta="0.5"):
    return [0] + f32(beta)


def l_reply(asked, inflight=0, status=0, flags=1, id_=0, shard=0, delta=0, total=None,
            stats_shard=0, stats_shards=0, cont=None):
    """Operation 1. flags: 1 answer the inflight-th request read off the stand-ins (2: on
    another shard), 4/8/16 f32 weights/rewards/discounts, 32 i32 actions, 64 f32
    observations, 128 the other dtype; cont (a continuous run's): with flags & 32, the f32
    action (by name), else the action byte scaled into [-1, 2]. asked: the rows a request of
    the run asks for; delta:
    0 those, 3 one fewer, 4 one more. status: 0 OK, 2 NOT_READY, 3 REFUSED, 4 unknown."""
    rows = asked + {0: 0, 1: 0, 2: 0, 3: -1, 4: 1}[delta]
    b = [1, flags, shard] + u64(id_)
    if flags & 1:
        b += [inflight]
    b += [delta]
    for i in range(rows):
        b += u64(i + 1)
        b += f32("0.5") if flags & 4 else []
        b += f32("1") if flags & 8 else []
        b += f32("0.5") if flags & 16 else []
        b += [I32["1"]] if flags & 32 else [i % 2]
        b += f32(cont) if cont is not None and flags & 32 else []
        for _ in range(L_OBS):
            b += (f32("0.25") + f32("-1")) if flags & 64 else []
            b += [3, 4]
    b += [status]
    sb = 1 if total else 0
    b += [sb] + u64(10) + u64(20) + u64(10) + u64(0)
    if total:
        b += f64(total)
    return b + [stats_shard, stats_shards]


def l_train(size, prio="1"):
    return [2] + f32(prio) * size + f32("0.5")


def l_tick(tens_of_ms):
    return [3, tens_of_ms]


def l_weights_request(peer=0, have=0, extra=False):
    return [5, peer | (0xC0 if extra else 0)] + u64(have)


def l_publish(step=0):
    return [7, 1, step]


def l_heartbeat(tens_of_ms):
    return [7, 0, tens_of_ms]


def l_stats(episodes, actor=0, frames=5, ret="1", eps="0.5"):
    b = [8, episodes]
    for _ in range(episodes):
        b += f32(ret) + f32(eps) + [10, 0, 0, 0]
    b += u64(frames) + [actor, 1]  # frames_delta = frames
    return b + u64(1) + u64(0) + u64(0) + u64(0)


def learner_programs():
    p = {}
    p["basic"] = (l_cfg() + l_issue() + l_reply(1) + l_train(1) + l_weights_request(have=0) +
                  l_publish() + l_weights_request(peer=1, have=0) + l_weights_request(have=1) +
                  l_heartbeat(255) + l_stats(2) + l_stats(1, actor=1, frames=9))
    p["batches"] = (l_cfg(batch4=1, batches2=1, slots3=1) + l_issue() + l_reply(8, inflight=0) +
                    l_reply(8, inflight=2) + l_train(4) + l_train(4, prio="nan") +
                    l_train(4, prio="after_prio_max") + l_train(4) + l_reply(8, inflight=1) +
                    l_train(4) + l_issue())
    p["shards"] = (l_cfg(shards=2, batch4=1) + l_issue() + l_tick(1) + l_issue() +
                   l_reply(4, inflight=0, stats_shard=0, stats_shards=2, total="1") +
                   l_reply(4, inflight=1, stats_shard=1, stats_shards=2, total="0.5") +
                   l_train(4) + l_train(4) + l_issue() +
                   l_reply(4, inflight=2, stats_shard=1, stats_shards=2, flags=3))
    p["uint8"] = (l_cfg(uint8=1, batch4=1) + l_issue() + l_reply(4) + l_train(4) +
                  l_reply(4, inflight=0, flags=1 | 128))
    p["refusals"] = (l_cfg(slots3=1) + l_issue() + l_reply(1, inflight=0, delta=3) +
                     l_reply(1, inflight=1, delta=4) + l_reply(1, inflight=2, status=2) +
                     l_issue() + l_reply(1, inflight=3, status=3) + l_reply(1, flags=0, id_=9) +
                     l_reply(1, inflight=4, status=4) +
                     l_reply(1, inflight=4, flags=1 | 4 | 8 | 16 | 32 | 64) +
                     l_reply(1, inflight=5, total="nan", stats_shard=2) +
                     [4, 0, 2] + list(b"\x08\x01\x1a\x04garbage!" + bytes(4)) +
                     l_weights_request(extra=True) + [6, 3, 1] + list(bytes(8)) +
                     l_stats(1, actor=5) + l_stats(1, ret="inf") + l_stats(1, eps="after1") +
                     l_stats(0, frames=(1 << 64) - 1) + [9, 1] + list(bytes(8)))
    # Continuous actions: in-bounds rows train; an action past action_high is refused.
    p["continuous"] = (l_cfg(batch4=1, cont=1) + l_issue() + l_reply(4, cont="0.5") +
                       l_train(4) + l_reply(4, inflight=0, flags=1 | 32, cont="0.5") +
                       l_train(4) + l_issue() + l_reply(4, inflight=1, flags=1 | 32, cont="100"))
    p["timeouts"] = (l_cfg(slots3=1) + l_issue() + l_tick(255) + l_tick(255) + l_reply(1) +
                     l_tick(1) + l_reply(1, inflight=4) + l_train(1))
    return p


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for target, programs in (("replay", replay_programs()), ("learner", learner_programs())):
        d = os.path.join(root, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, prog in programs.items():
            assert all(0 <= x < 256 for x in prog), (target, name)
            with open(os.path.join(d, name), "wb") as f:
                f.write(bytes(prog))
        print(f"gen_programs: {len(programs)} programs in {d}")


if __name__ == "__main__":
    main()
