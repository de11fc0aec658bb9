#!/usr/bin/env bash
# [env] id = external with obs_dtype = uint8, through the real daemons. apex-replay and
# apex-learner run without apex-actor (obs_dim 85, an odd size, and 4 actions); python
# actors speaking proto/apex.proto (apexwire.py, DEALERs "actor-0" and "actor-1") push byte
# observations with known patterns (every value 0..255 occurs). Checks:
#   - the replay's start-up line "capacity N (X MiB)" shows slots of 1-byte observations
#     (the same config with obs_dtype = float32, started and stopped, shows 4-byte ones,
#     ~3.6x the memory): the dtype reaches the storage;
#   - every uint8 batch is acknowledged, the learner trains on them (metrics.csv updates),
#     the replay's stats line holds exactly the acknowledged rows;
#   - a float32 TransitionBatch and a uint8 one with float32-sized observations are refused
#     (no ack; replay log names the dtypes; stats line and metrics.csv bad_messages count
#     them) and the replay keeps serving;
#   - a SampleReply (python sampler on the sample socket) carries obs_dtype = uint8 and
#     exactly the bytes sent;
#   - SIGTERM stops the replay and the learner with exit 0; --dump of the final snapshot,
#     then (after a restart, more batches and kill -9) of snapshot + write-ahead log, holds
#     every acknowledged row exactly once, obs printed as integers equal to the bytes sent;
#   - apex-actor refuses id = external (non-zero exit, HINT line); apex-replay refuses
#     obs_dtype = uint8 for CartPole-v1 (exit 2, named reason).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=85 # obs_dim
A=4  # n_actions
R=16 # rows per batch
CAP=20000
RUNS="$TMP/runs"
RUN="$RUNS/ext"
W="$TMP/work"
mkdir -p "$W"; touch "$W/acked.txt"
EXT=(--set env.id=external --set env.obs_dim=$D --set env.n_actions=$A)
COMMON=(--set run.out_dir="$RUNS" --set run.max_seconds=0 --set run.target_return=100000
        --set network.hidden=32 --set learner.batch_size=32 --set learner.metrics_interval_ms=200
        --set replay.capacity=$CAP --set replay.min_size_to_sample=64
        --set replay.samples_per_insert=8 --set replay.spi_tolerance=3200
        --set replay.stats_interval_ms=200)
SETS=($(endpoint_sets) "${EXT[@]}" --set env.obs_dtype=uint8 "${COMMON[@]}" --set run.name=ext
      --set replay.durability=wal --set replay.wal_sync_ms=10 --set replay.snapshot_interval_s=1000)
# ep KEY: the endpoint of [endpoints] KEY in SETS.
ep() { local s; for s in "${SETS[@]}"; do [[ $s == endpoints.$1=* ]] && echo "${s#*=}"; done; return 0; }
INS=$(ep replay_insert)
SMP=$(ep replay_sample)
# exited PID: the process is gone or a zombie (wait can reap it).
exited() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# stop PID SIGNAL: sends SIGNAL, waits (at most 30 s, then SIGKILL); the exit status in RC.
stop() {
  kill -"$2" "$1" 2>/dev/null || true
  wait_for 30 exited "$1" || { echo "  .... pid $1 ignored SIG$2 for 30 s: killed"; kill -9 "$1" 2>/dev/null || true; }
  RC=0; wait "$1" 2>/dev/null || RC=$? # no "Killed" notice
}
# verdicts FILE: PASS/FAIL lines of a python check into ok/bad.
verdicts() {
  local v msg
  while read -r v msg; do
    case $v in PASS) ok "$msg" ;; FAIL) bad "$msg" ;; esac
  done <"$1"
  grep -q '^\(PASS\|FAIL\) ' "$1" || { bad "no verdicts in ${1##*/}:"; tail -5 "$1" | sed 's/^/       /'; }
}

# The python peers: actors, sampler and dump check (apexwire.py for the wire format).
cat >"$TMP/ext_peer.py" <<'PY'
"""ext_peer.py MODE ...: uint8 actors, a sampler and the dump check for external.sh.

Row r of batch seq of actor a: obs = [a, seq % 256, seq // 256, r, 0, 255, f(a, seq, r, j)
for j >= 6], next_obs = 255 - obs, action (seq + r) % A, reward seq + r / 8, discount 0 for
the last row of a batch and 0.99 otherwise, priority 1 + seq % 7. Verdicts are printed as
"PASS ..." / "FAIL ..." lines."""
import csv
import os
import re
import struct
import sys
import time

import zmq

sys.path.insert(0, sys.argv[1])
import apexwire  # noqa: E402
from apexwire import _bytes, _uint  # noqa: E402

D, A, R, MODE = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ARGS = sys.argv[6:]


def obs_row(a, seq, r):
    return [a, seq % 256, seq // 256, r, 0, 255] + [(a * 97 + seq * 31 + r * 7 + j * 13) % 256
                                                    for j in range(6, D)]


def batch(a, epoch, seq, dtype="uint8"):
    obs = [obs_row(a, seq, r) for r in range(R)]
    nxt = [[255 - x for x in o] for o in obs]
    if dtype == "float32":
        obs = [[float(x) for x in o] for o in obs]
        nxt = [[float(x) for x in o] for o in nxt]
    return apexwire.transition_batch(a, epoch, seq, obs, [(seq + r) % A for r in range(R)],
                                     [seq + r / 8.0 for r in range(R)],
                                     [0.0 if r == R - 1 else 0.99 for r in range(R)], nxt,
                                     [1.0 + seq % 7] * R, obs_dtype=dtype)


def u8_with_f32_sized_obs(a, epoch, seq):
    """obs_dtype uint8, but 4 bytes per element: the lengths do not match count x obs_dim."""
    o = bytes(x for r in range(R) for x in obs_row(a, seq, r)) * 4
    f32 = lambda v: struct.pack("<%df" % len(v), *v)
    i32 = struct.pack("<%di" % R, *[x % A for x in range(R)])
    body = (_uint(1, a) + _uint(2, seq) + _uint(4, R) + _uint(5, D) + _bytes(6, o) +
            _bytes(7, i32) + _bytes(8, f32([1.0] * R)) + _bytes(9, f32([0.5] * R)) +
            _bytes(10, o) + _uint(12, epoch) + _uint(13, apexwire.OBS_UINT8))
    return apexwire.envelope(2, body)


def row_ok(obs, nxt, action, reward, discount):
    """Whether a row (obs and next_obs as ints) is one the actors send; the (a, seq, r) or
    a reason."""
    a, seq, r = obs[0], obs[1] + 256 * obs[2], obs[3]
    if r >= R:
        return None, "row index %d" % r
    if list(obs) != obs_row(a, seq, r):
        return None, "obs of (%d, %d, %d) differ" % (a, seq, r)
    if list(nxt) != [255 - x for x in obs]:
        return None, "next_obs of (%d, %d, %d) differ" % (a, seq, r)
    if action != (seq + r) % A or abs(reward - (seq + r / 8.0)) > 1e-3 or \
            abs(discount - (0.0 if r == R - 1 else 0.99)) > 1e-6:
        return None, "action/reward/discount of (%d, %d, %d): %s %s %s" % (
            a, seq, r, action, reward, discount)
    return (a, seq, r), None


def dealer(ctx, ep, ident):
    s = ctx.socket(zmq.DEALER)
    s.setsockopt(zmq.IDENTITY, ident)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RECONNECT_IVL, 50)
    s.connect(ep)
    return s


def recv_acks(s, timeout_ms):
    """The (actor, seq) pairs of the InsertAcks that arrive within timeout_ms."""
    return apexwire.drain_acks(s) if s.poll(timeout_ms) else []


def produce(ep, workdir, actor, first, n, pace_ms, window=32, drain_s=30.0):
    """Sends batches first .. first+n-1 (uint8), at most one per pace_ms and window
    unacknowledged, until WORKDIR/stop appears; re-sends after 2 s; waits for the acks."""
    ctx = zmq.Context()
    s = dealer(ctx, ep, b"actor-%d" % actor)
    epoch = int(time.time() * 1e6)
    unacked, nxt, stop = {}, first, os.path.join(workdir, "stop")
    acked = open(os.path.join(workdir, "acked.txt"), "a")
    stopping, last_send, resent = None, 0.0, 0
    while True:
        now = time.monotonic()
        if stopping is None and (nxt == first + n or os.path.exists(stop)):
            stopping = now
        if stopping is None and len(unacked) < window and now - last_send >= pace_ms / 1000.0:
            unacked[nxt] = [batch(actor, epoch, nxt), 0.0]
            nxt += 1
            last_send = now
        for seq, e in sorted(unacked.items()):
            if e[1] == 0.0 or now - e[1] > 2.0:
                resent += e[1] != 0.0
                s.send(e[0])
                e[1] = now
        for a, seq in recv_acks(s, 5):
            if a == actor and unacked.pop(seq, None) is not None:
                acked.write("%d %d\n" % (actor, seq))
        acked.flush()
        if stopping is not None and (not unacked or now - stopping > drain_s):
            break
    print("produce: actor %d sent %d batches (seq %d..%d), %d re-sent, %d never acknowledged"
          % (actor, nxt - first, first, nxt - 1, resent, len(unacked)))
    return 1 if unacked else 0


def verdict(cond, msg):
    print(("PASS " if cond else "FAIL ") + msg, flush=True)
    return cond


def probe(ins, smp, workdir):
    """actor-1: good, float32, mis-sized uint8, good; then one sample on the sample socket."""
    ctx = zmq.Context()
    s = dealer(ctx, ins, b"actor-1")
    epoch = int(time.time() * 1e6)
    acked = open(os.path.join(workdir, "acked.txt"), "a")
    got = set()

    def wait_ack(seq, secs):
        deadline = time.monotonic() + secs
        while seq not in got and time.monotonic() < deadline:
            for a, q in recv_acks(s, 50):
                if a == 1 and q not in got:
                    got.add(q)
                    acked.write("1 %d\n" % q)
                    acked.flush()
        return seq in got

    s.send(batch(1, epoch, 0))
    verdict(wait_ack(0, 15), "actor-1: a uint8 batch is acknowledged")
    s.send(batch(1, epoch, 1, "float32"))
    s.send(u8_with_f32_sized_obs(1, epoch, 2))
    s.send(batch(1, epoch, 3))
    verdict(wait_ack(3, 15), "actor-1: a uint8 batch sent after two bad ones is acknowledged "
            "(the replay keeps serving)")
    wait_ack(-1, 0.3)  # anything still in flight
    verdict(1 not in got, "a float32 TransitionBatch to the uint8 replay is not acknowledged")
    verdict(2 not in got, "a uint8 TransitionBatch with 4 bytes per element is not acknowledged")

    q = dealer(ctx, smp, b"ext-sampler")
    rep = None
    for attempt in range(10):  # the rate limiter may answer NOT_READY
        q.send(apexwire.sample_request(77 + attempt, 64, 0.4))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and q.poll(200):
            body, f = apexwire.decode(q.recv())
            if body == apexwire.BODY_SAMPLE_REPLY and f.get(1, 0) == 77 + attempt:
                rep = apexwire.sample_reply(f)
                break
        if rep and rep["status"] == 0:
            break
    if not verdict(rep is not None and rep["status"] == 0,
                   "the sampler gets a SampleReply (status %s)" % (rep and rep["status"])):
        return
    verdict(rep["obs_dtype"] == "uint8" and rep["obs_dim"] == D and rep["count"] == 64,
            "SampleReply: obs_dtype %s, obs_dim %d, count %d (want uint8, %d, 64)"
            % (rep["obs_dtype"], rep["obs_dim"], rep["count"], D))
    bad = [why for o, n, a, r, d in zip(rep["obs"], rep["next_obs"], rep["actions"],
                                        rep["rewards"], rep["discounts"])
           for key, why in [row_ok(o, n, a, r, d)] if why]
    verdict(not bad, "SampleReply: the 64 sampled rows are bytes the actors sent%s"
            % ("" if not bad else ": %d differ, e.g. %s" % (len(bad), bad[0])))


def check_dump(path, workdir, what):
    acked = set(tuple(map(int, l.split())) for l in open(os.path.join(workdir, "acked.txt")))
    want = set((a, q, r) for a, q in acked for r in range(R))
    seen, dup, wrong, non_int = set(), 0, [], 0
    rows = list(csv.DictReader(open(path)))
    intre = re.compile(r"^\d+$")
    for row in rows:
        ov = [row["obs%d" % j] for j in range(D)] + [row["next_obs%d" % j] for j in range(D)]
        non_int += sum(1 for v in ov if not intre.match(v))
        vals = [int(float(v)) for v in ov]
        key, why = row_ok(vals[:D], vals[D:], int(row["action"]), float(row["reward"]),
                          float(row["discount"]))
        if why:
            wrong.append(why)
            continue
        if key in seen:
            dup += 1
        seen.add(key)
        # The learner's priority updates replace the initial ones: any finite value > 0.
        if not 0.0 < float(row["priority_alpha"]) < float("inf"):
            wrong.append("priority of %s: %s" % (key, row["priority_alpha"]))
    verdict(len(rows) > 0 and len(rows[0]) == 6 + 2 * D,
            "%s: %d rows of %d columns (want %d)" % (what, len(rows), len(rows[0]) if rows else 0,
                                                   6 + 2 * D))
    verdict(non_int == 0, "%s: obs and next_obs printed as unsigned integers (%d are not)"
            % (what, non_int))
    verdict(not wrong, "%s: every row holds the bytes the actors sent%s"
            % (what, "" if not wrong else ": %d differ, e.g. %s" % (len(wrong), wrong[0])))
    verdict(seen == want and dup == 0,
            "%s: every acknowledged row exactly once (%d rows of %d batches; missing %d, "
            "not acknowledged %d, doubled %d)" % (what, len(seen), len(acked), len(want - seen),
                                                  len(seen - want), dup))


if MODE == "produce":
    ep, workdir, actor, first, n, pace = ARGS
    sys.exit(produce(ep, workdir, int(actor), int(first), int(n), float(pace)))
elif MODE == "probe":
    probe(*ARGS)
elif MODE == "check-dump":
    check_dump(*ARGS)
PY
PEER=("$PY" "$TMP/ext_peer.py" "$ROOT/tests/smoke" "$D" "$A" "$R")

# --- storage: the same config with float32 and with uint8 -------------------------------
mib() { sed -n 's/.*replay: capacity [0-9]* (\([0-9.]*\) MiB).*/\1/p' "$1" | tail -1; }
"$APEX_BIN/apex-replay" -c configs/smoke.ini $(endpoint_sets) "${EXT[@]}" --set env.obs_dtype=float32 \
  "${COMMON[@]}" --set run.name=f32 >"$TMP/f32.log" 2>&1 &
FPID=$!; PIDS+=("$FPID")
wait_for 20 grep -q "inserts on" "$TMP/f32.log" && ok "apex-replay starts with id = external, obs_dtype = float32" \
  || { bad "float32 replay did not start"; tail -5 "$TMP/f32.log"; }
stop "$FPID" TERM; rc=$RC
[ "$rc" = 0 ] && ok "float32 replay exits 0 on SIGTERM" || bad "float32 replay exit $rc"

"$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" >"$TMP/replay.log" 2>&1 &
RPID=$!; PIDS+=("$RPID")
"$APEX_BIN/apex-learner" -c configs/smoke.ini "${SETS[@]}" >"$TMP/learner.log" 2>&1 &
LPID=$!; PIDS+=("$LPID")
wait_for 20 grep -q "inserts on" "$TMP/replay.log" && ok "apex-replay starts with id = external, obs_dtype = uint8" \
  || { bad "uint8 replay did not start"; tail -5 "$TMP/replay.log"; }
F32=$(mib "$TMP/f32.log"); U8=$(mib "$TMP/replay.log")
# Per slot: a 16-byte header and obs + next_obs, rounded up to 4 bytes; the rest (the
# sum tree) is the same for both.
"$PY" - "${F32:-0}" "${U8:-0}" "$CAP" "$D" <<'PY' && ok "replay memory: float32 $F32 MiB, uint8 $U8 MiB (the uint8 slots a quarter's size)" \
  || bad "replay memory: float32 ${F32:-?} MiB, uint8 ${U8:-?} MiB"
import sys
f32, u8, cap, d = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
slot = lambda e: (16 + 2 * d * e + 3) // 4 * 4
other = f32 - cap * slot(4) / 2**20
want = cap * slot(1) / 2**20 + other
print("  .... float32 %.1f MiB, uint8 %.1f MiB, ratio %.2f; uint8 want %.2f MiB" % (f32, u8, f32 / max(u8, 1e-9), want))
sys.exit(0 if f32 > 0 and abs(u8 - want) <= 0.15 and f32 / u8 > 3.0 else 1)
PY

# --- actors, learner, bad batches, sampler -----------------------------------------------
"${PEER[@]}" produce "$INS" "$W" 0 0 1150 20 >"$TMP/actor0.out" 2>&1 &
APID=$!; PIDS+=("$APID")
wait_for 30 gt updates 100 && ok "the learner trains on uint8 observations ($(col updates) updates, loss $(col loss))" \
  || { bad "the learner did not train (updates '$(col updates)')"; tail -5 "$TMP/learner.log"; }
"${PEER[@]}" probe "$INS" "$SMP" "$W" >"$TMP/probe.out" 2>&1 || true
verdicts "$TMP/probe.out"
wait_for 10 grep -q "dropped bad TransitionBatch from peer actor-1 .*observations of dtype float32 (0), the run's are uint8" "$TMP/replay.log" \
  && ok "replay log: $(grep -m1 -o "dropped bad TransitionBatch from peer actor-1.*" "$TMP/replay.log" | cut -c1-140)" \
  || bad "no replay log line about the float32 batch"
wait_for 10 grep -q "  bad 2  " "$TMP/replay.log" && ok "replay stats line counts the 2 bad batches" \
  || bad "replay stats line: $(grep "  bad " "$TMP/replay.log" | tail -1)"
wait_for 10 gt bad_messages 1 && ok "metrics.csv bad_messages $(col bad_messages)" || bad "metrics.csv bad_messages '$(col bad_messages)'"
u0=$(col updates)
wait_for 20 gt updates "$((u0 + 50))" && ok "the learner keeps training after the bad batches ($u0 -> $(col updates) updates)" \
  || bad "the learner stalled at $(col updates) updates"
kill -0 "$RPID" 2>/dev/null && ok "replay alive" || bad "replay died"

touch "$W/stop"
rc=0; wait "$APID" || rc=$?
[ "$rc" = 0 ] && ok "$(cat "$TMP/actor0.out")" || bad "actor-0 (exit $rc): $(cat "$TMP/actor0.out")"
ROWS=$(( $(wc -l <"$W/acked.txt") * R ))
wait_for 10 grep -q "size $ROWS/$CAP " "$TMP/replay.log" && ok "replay stats line holds the $ROWS acknowledged rows" \
  || bad "replay stats line: $(grep "size " "$TMP/replay.log" | tail -1 | cut -c1-100), want size $ROWS"
stop "$LPID" TERM; rc=$RC
[ "$rc" = 0 ] && ok "learner exits 0 on SIGTERM" || { bad "learner exit $rc"; tail -5 "$TMP/learner.log"; }
stop "$RPID" TERM; rc=$RC
[ "$rc" = 0 ] && ok "replay exits 0 on SIGTERM" || { bad "replay exit $rc"; tail -5 "$TMP/replay.log"; }
grep -q "stopping: $ROWS transitions held" "$TMP/replay.log" && ok "replay: stopping: $ROWS transitions held" \
  || bad "replay: $(grep "stopping:" "$TMP/replay.log" || echo 'no stopping line')"

# --- the dump: the final snapshot, then snapshot + log after kill -9 ------------------------
expect_rc 0 "apex-replay --dump (final snapshot)" "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" --dump "$TMP/dump1.csv"
"${PEER[@]}" check-dump "$TMP/dump1.csv" "$W" "dump of the snapshot" >"$TMP/check1.out" 2>&1 || true
verdicts "$TMP/check1.out"

"$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" >"$TMP/replay2.log" 2>&1 &
RPID=$!; PIDS+=("$RPID")
wait_for 20 grep -q "inserts on" "$TMP/replay2.log" || bad "restarted replay did not start"
grep -q "restored from .* $ROWS transitions in the snapshot" "$TMP/replay2.log" \
  && ok "restart: $ROWS transitions restored from the snapshot" || bad "restart: $(grep -m1 "restored from" "$TMP/replay2.log" || echo 'no restore line')"
rm -f "$W/stop"
"${PEER[@]}" produce "$INS" "$W" 0 5000 20 5 >"$TMP/actor0b.out" 2>&1 \
  && ok "after the restart: $(cat "$TMP/actor0b.out")" || bad "after the restart: $(cat "$TMP/actor0b.out")"
stop "$RPID" KILL; rc=$RC
expect_rc 0 "apex-replay --dump after kill -9 (snapshot + log)" "$APEX_BIN/apex-replay" -c configs/smoke.ini "${SETS[@]}" --dump "$TMP/dump2.csv"
grep -q "restored from .* $ROWS transitions in the snapshot, [1-9][0-9]* log records" "$TMP/err" \
  && ok "the dump replays the log: $(grep -o "[0-9]* log records.*" "$TMP/err" | head -1)" || bad "restore: $(grep "restored from" "$TMP/err" || tail -2 "$TMP/err")"
"${PEER[@]}" check-dump "$TMP/dump2.csv" "$W" "dump of snapshot + log" >"$TMP/check2.out" 2>&1 || true
verdicts "$TMP/check2.out"

# --- what refuses the feature --------------------------------------------------------------
rc=0
"$APEX_BIN/apex-actor" -c configs/smoke.ini --index 0 "${SETS[@]}" >"$TMP/actor.log" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q "HINT: with id = external" "$TMP/actor.log" && ok "apex-actor refuses id = external (exit $rc) with a HINT" \
  || { bad "apex-actor with id = external: exit $rc"; tail -3 "$TMP/actor.log"; }
expect_rc 2 "apex-replay refuses obs_dtype = uint8 for CartPole-v1" "$APEX_BIN/apex-replay" -c configs/smoke.ini \
  $(endpoint_sets) --set run.out_dir="$RUNS" --set env.obs_dtype=uint8
grep -q "\[env\] obs_dtype: CartPole-v1's observations are float32" "$TMP/err" "$TMP/out" \
  && ok "named reason: $(cat "$TMP/err" "$TMP/out" | grep -o "\[env\] obs_dtype.*" | head -1)" || bad "message: $(cat "$TMP/err")"

# --- the launcher: replay and learner only, no apex-actor, no evaluation -------------------
rc=0
"$PY" "$ROOT/scripts/apex-local" configs/smoke.ini --bin "$APEX_BIN" $(endpoint_sets) "${EXT[@]}" \
  --set env.obs_dtype=uint8 --set run.out_dir="$RUNS" --set run.name=ext-local \
  --set run.max_seconds=2 >"$TMP/local.out" 2>&1 || rc=$?
grep -q "all daemons up: replay\[[0-9]*\], learner\[[0-9]*\]$" "$TMP/local.out" \
  && ok "apex-local starts only replay and learner for id = external" || bad "apex-local: $(grep "daemons up" "$TMP/local.out" || tail -3 "$TMP/local.out")"
grep -q "id = external: no apex-actor started; your actors push TransitionBatches (uint8" "$TMP/local.out" \
  && ok "apex-local says where external actors push" || bad "apex-local: no external-actor line"
grep -q "no evaluation (\[env\] id = external: apex-eval cannot step your environment; \[env\] eval_id can name a built-in one with the same dynamics), so no stop on a return" "$TMP/local.out" \
  && ! grep -q "stop at greedy eval\|best.bin" "$TMP/local.out" && ok "apex-local says it will not evaluate, and promises no best.bin" \
  || bad "apex-local: $(grep "run directory" "$TMP/local.out")"
[ "$rc" = 0 ] && ! grep -q "evaluation of the best\|gnuplot" "$TMP/local.out" && ok "apex-local ends with 0, no evaluation or plot" \
  || { bad "apex-local exit $rc"; tail -5 "$TMP/local.out"; }
finish
