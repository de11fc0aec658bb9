#!/usr/bin/env bash
# Hostile peers against every endpoint of every daemon (tests/smoke/hostile_peer.py).
#
# A real cluster (scripts/apex-local configs/smoke.ini --no-eval, free loopback ports) trains
# while, in turn, hostile peers attack the replay's insert ROUTER, the replay's sample ROUTER,
# the learner's stats PULL and the learner's weights ROUTER for a few seconds each (random
# bytes, empty/extra frames, giant frames, wrong versions, absurd counts and dimensions,
# NaN/Inf, out-of-range actions and actor ids, replayed/out-of-order sequence numbers,
# priority updates with random keys, a WeightsRequest flood, silent askers that never read,
# wrong socket types, raw TCP garbage). Meanwhile a separate apex-actor is pointed at a fake
# learner weights ROUTER and a fake replay ROUTER that answer it with garbage,
# finite-but-huge weights and giant frames.
#
# Asserts: no daemon dies; updates, inserts and frames keep increasing during every phase
# and after; actors take new weights; a well-behaved weights client keeps getting newer
# weights during the attack on the learner's weights endpoint, and SUB/XSUB peers get
# nothing; bad messages are counted (replay stats line, metrics bad_messages) and logged at
# a bounded rate; memory (VmHWM) grows < HOSTILE_MEM_MB per daemon; the separate actor
# keeps stepping, asks with well-formed requests, counts bad input, recovers, and exits 0 on
# SIGTERM; a TransitionBatch with seq 2^64-1 does not hang a replay server (standalone); the
# launcher exits 0 on SIGTERM. The peers must have connected and sent > 0 messages.
#
# Knobs: HOSTILE_PHASE_S (seconds per phase, default 5), HOSTILE_MEM_MB (default 64),
# HOSTILE_KEEP (a directory that receives the logs and results).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# HOSTILE_KEEP=DIR keeps the logs, metrics and peer results there for a post-mortem.
if [ -n "${HOSTILE_KEEP:-}" ]; then
  trap 'mkdir -p "$HOSTILE_KEEP" && cp -r "$TMP"/. "$HOSTILE_KEEP"/ 2>/dev/null; cleanup' EXIT
fi
PHASE_S=${HOSTILE_PHASE_S:-5}
MEM_MB=${HOSTILE_MEM_MB:-64}
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0)
# ep KEY: the endpoint the cluster uses for [endpoints] KEY.
ep() { local s; for s in "${SETS[@]}"; do [[ $s == endpoints.$1=* ]] && echo "${s#*=}"; done; }
now() { date +%s.%N; }
# mark WHAT: a progress line with the time since the start.
mark() { echo "  .... [$("$PY" -c "print('%5.1fs' % ($(now) - $T_START))")] $*"; }
# alive PID: the process exists and is not a zombie.
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
HP=("$PY" tests/smoke/hostile_peer.py)
T_START=$(date +%s.%N)

trains() { gt updates 20 && gt replay_inserted 0 && gt env_frames 0 && gt actor_version_min 0; }

# mem_one LABEL NAME PID: VmRSS and VmHWM (kB) of one process into $TMP/mem.txt.
mem_one() {
  local rss hwm
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$3/status" 2>/dev/null || echo -1)
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$3/status" 2>/dev/null || echo -1)
  echo "$1 $2 ${rss:--1} ${hwm:--1}" >>"$TMP/mem.txt"
}
# mem_snap LABEL: the same for every daemon of the cluster.
mem_snap() {
  local name
  for name in "${!DPID[@]}"; do mem_one "$1" "$name" "${DPID[$name]}"; done
}

# phase NAME PEER-ARGS...: runs one hostile peer to completion, records its time window.
phase() {
  local name=$1; shift
  local t0 t1 rc=0
  t0=$(now)
  "${HP[@]}" "$@" --json "$TMP/$name.json" >"$TMP/$name.out" 2>&1 || rc=$?
  t1=$(now)
  echo "$name $t0 $t1" >>"$TMP/phases.txt"
  mem_snap "$name"
  if [ "$rc" != 0 ] || [ ! -s "$TMP/$name.json" ]; then
    bad "peer $name failed (exit $rc)"; tail -5 "$TMP/$name.out" | sed 's/^/       /'
  else
    "$PY" - "$TMP/$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("  .... %-14s sent %d bad, %d good, %d giant in %.1fs; handshakes %d, disconnects %d, replies %s"
      % (sys.argv[2], d["sent_bad"], d["sent_good"], d["sent_giant"], d["seconds"],
         d["handshakes"], d["disconnects"], d.get("replies", "-")))
PY
  fi
  mark "$name done"
  # The counts of this phase (delta() below reads the last row before the next phase) are
  # in the rows the learner writes from now on: two more rows (one every 0.5 s), not a sleep.
  local rows_end
  rows_end=$(csv_rows)
  wait_for 60 rows_ge $((rows_end + 2)) || bad "$name: no metrics rows after the phase"
}

# --- the cluster --------------------------------------------------------------------------
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
if wait_for 60 trains; then
  ok "the cluster trains (updates $(col updates), actor_version_min $(col actor_version_min))"
else
  bad "the cluster did not start training"; tail -20 "$TMP/launcher.out"; finish; exit 1
fi
declare -A DPID
# The launcher prints the pids after its start-up grace period; on an idle machine the
# cluster can be training before that.
wait_for 30 grep -q "all daemons up: " "$TMP/launcher.out" || true
up=$(grep -o "all daemons up: .*" "$TMP/launcher.out" || true)
for name in replay learner actor0 actor1; do
  DPID[$name]=$(echo "$up" | sed -n "s/.* $name\[\([0-9]*\)\].*/\1/p")
done
[ -n "${DPID[replay]}" ] && [ -n "${DPID[learner]}" ] && ok "daemon pids: $up" || bad "no daemon pids in: $up"
NUM_PARAMS=$({ grep -o "learner: [0-9]* parameters" "$RUN/learner.log" || true; } | head -1 | tr -dc 0-9)
[ -n "$NUM_PARAMS" ] || NUM_PARAMS=1315
mark "training; attacks start"
mem_snap baseline
echo "baseline $(now) $(now)" >>"$TMP/phases.txt"
COMMON=(--num-actors 2 --obs-dim 4 --n-actions 2 --num-params "$NUM_PARAMS" --max-batch 4096)

# --- the actor-side attack: a separate apex-actor fed by fake upstream peers (background) -
UP_WEIGHTS="tcp://127.0.0.1:$(free_port)"
UP_ROUTER="tcp://127.0.0.1:$(free_port)"
UP_PULL="tcp://127.0.0.1:$(free_port)"
"${HP[@]}" fake-upstream --pub "$UP_WEIGHTS" --router "$UP_ROUTER" --pull "$UP_PULL" "${COMMON[@]}" \
  --attack-seconds $((2 * PHASE_S)) --clean-seconds 7 --huge-weights --rate 600 \
  --json "$TMP/upstream.json" >"$TMP/upstream.out" 2>&1 &
UPID=$!
PIDS+=("$UPID")
# (The peer waits for the actor to connect, and the actor retries until the peer is bound.)
"$APEX_BIN/apex-actor" -c configs/smoke.ini --index 0 --set run.out_dir="$TMP/hactor" \
  --set actor.max_steps_per_s=500 --set endpoints.learner_weights="$UP_WEIGHTS" \
  --set endpoints.replay_insert="$UP_ROUTER" --set endpoints.learner_stats="$UP_PULL" \
  >"$TMP/hactor.log" 2>&1 &
HAPID=$!
PIDS+=("$HAPID")
# Its baseline once it has built everything (its start-up line).
wait_for 30 grep -q " I actor: actor 0: " "$TMP/hactor.log" || bad "the actor fed by hostile peers did not start: $(tail -3 "$TMP/hactor.log")"
mem_one baseline hostile-actor "$HAPID"

# --- the cluster-side attacks, one endpoint at a time -------------------------------------
phase replay-insert replay-insert --endpoint "$(ep replay_insert_bind)" --seconds "$PHASE_S" "${COMMON[@]}"
phase replay-sample replay-sample --endpoint "$(ep replay_sample_bind)" --seconds "$PHASE_S" "${COMMON[@]}" --unread 400
phase learner-stats learner-stats --endpoint "$(ep learner_stats_bind)" --seconds "$PHASE_S" "${COMMON[@]}"
phase learner-weights learner-weights --endpoint "$(ep learner_weights_bind)" --seconds "$PHASE_S" "${COMMON[@]}" \
  --subscribers 50 --giant-bytes $((1 << 20))

# --- after the attack ----------------------------------------------------------------------
rc=0; wait "$UPID" || rc=$?
[ "$rc" = 0 ] && [ -s "$TMP/upstream.json" ] || { bad "fake upstream peer failed (exit $rc)"; tail -5 "$TMP/upstream.out"; }
if alive "$HAPID"; then
  ok "the actor fed by hostile upstream peers is alive"
  mem_one final hostile-actor "$HAPID"
  kill -TERM "$HAPID"
  rc=0; wait "$HAPID" || rc=$?
  [ "$rc" = 0 ] && ok "that actor exits 0 on SIGTERM" || bad "that actor exited $rc on SIGTERM"
else
  rc=0; wait "$HAPID" || rc=$?
  bad "the actor fed by hostile upstream peers died (exit $rc)"; tail -5 "$TMP/hactor.log"
fi
mark "attacks over"
# The window after the attacks: the analysis wants >= 3 metrics rows in it; wait for 4.
t0=$(now)
rows_after=$(csv_rows)
wait_for 60 rows_ge $((rows_after + 4)) || bad "no metrics rows after the attacks"
echo "after $t0 $(now)" >>"$TMP/phases.txt"
mem_snap final

for name in "${!DPID[@]}"; do
  alive "${DPID[$name]}" && ok "$name[${DPID[$name]}] is alive" || bad "$name[${DPID[$name]}] died"
done
grep -q "died unexpectedly" "$TMP/launcher.out" && bad "launcher: $(grep 'died unexpectedly' "$TMP/launcher.out")" \
  || ok "the launcher reported no death"

# The analysis: PASS/FAIL lines.
"$PY" - "$TMP" "$RUN" "$MEM_MB" "$T_START" <<'PY' >"$TMP/verdicts.txt" 2>&1 || echo "FAIL analysis crashed: $(tail -1 "$TMP/verdicts.txt")" >>"$TMP/verdicts.txt"
import csv, datetime, glob, json, math, os, re, sys
tmp, run, mem_mb, t_start = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])

def verdict(cond, msg):
    print(("PASS " if cond else "FAIL ") + msg)

def load(name):
    try:
        return json.load(open(os.path.join(tmp, name + ".json")))
    except Exception:
        return None

def ts(iso):
    return datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()

rows = list(csv.DictReader(open(os.path.join(run, "metrics.csv"))))
for r in rows:
    r["t"] = ts(r["wall_time"])
phases = {}
order = []
for line in open(os.path.join(tmp, "phases.txt")):
    n, a, b = line.split()
    phases[n] = (float(a), float(b))
    order.append(n)

def at(t):
    """The last metrics row written at or before t."""
    best = None
    for r in rows:
        if r["t"] <= t:
            best = r
    return best

def num(r, k):
    return float(r[k]) if r and r.get(k, "") != "" else float("nan")

# --- legitimate traffic kept flowing in every phase, and after ----------------------------
for n in order:
    if n == "baseline":
        continue
    a, b = phases[n]
    win = [r for r in rows if a <= r["t"] <= b]
    if len(win) < 3:
        prev = [r for r in rows if r["t"] < b]
        verdict(False, "%s: only %d metrics rows in %.1fs: the learner wrote none for %.1fs (stalled)"
                % (n, len(win), b - a, b - prev[-1]["t"] if prev else b - a))
        continue
    for k in ("updates", "replay_inserted", "env_frames"):
        v0, v1 = num(win[0], k), num(win[-1], k)
        stall, last_t, last_v = 0.0, win[0]["t"], v0
        for r in win[1:]:
            if num(r, k) > last_v:
                last_t, last_v = r["t"], num(r, k)
            stall = max(stall, r["t"] - last_t)
        verdict(v1 > v0 and stall <= 3.0,
                "%s: %s kept increasing (%d -> %d, longest stall %.1fs)" % (n, k, v0, v1, stall))
base = at(phases["baseline"][0])
last = rows[-1]
v0, v1 = num(base, "actor_version_min"), num(last, "actor_version_min")
verdict(v1 > v0, "metrics: actor_version_min advanced over the attack (%d -> %d)%s" % (
    v0, v1, "" if v1 > v0 else ": forged ActorStats with actor_id >= num_actors pin it"))
mr = num(last, "mean_return_100")
verdict(math.isfinite(mr), "metrics: mean_return_100 is finite after NaN/Inf returns (%s)" % mr)
for log in ("actor0.log", "actor1.log"):
    vs = [(int(i) << 32) | int(c) for i, c in re.findall(r"steps \d+ .* weights v(\d+):(\d+)", open(os.path.join(run, log)).read())]
    verdict(len(vs) >= 2 and vs[-1] > vs[0],
            "%s: the actor takes newer weights during the attack (status lines: %s)" % (log, vs))

# --- the peers really connected and sent ---------------------------------------------------
res = {n: load(n) for n in ("replay-insert", "replay-sample", "learner-stats", "learner-weights")}
for n, d in res.items():
    if d is None:
        verdict(False, "%s: no peer result" % n)
        continue
    verdict(d["handshakes"] >= 1 and d["sent_total"] > 100,
            "%s: the peer connected (%d handshakes) and sent %d messages (%d bad, %d good)"
            % (n, d["handshakes"], d["sent_total"], d["sent_bad"], d["sent_good"]))
    if n in ("replay-insert", "replay-sample", "learner-stats", "learner-weights"):
        verdict(d["sent_giant"] > 0 and d["disconnects"] >= d["sent_giant"],
                "%s: %d giant frames, %d disconnects: libzmq drops oversized messages (ZMQ_MAXMSGSIZE)"
                % (n, d["sent_giant"], d["disconnects"]))
d = res["replay-insert"]
if d:
    # A message in flight when a giant frame kills the connection may be lost: allow that.
    verdict(d["sent_good"] - 2 * d["sent_giant"] <= d["acks"] <= d["sent_good"]
            and d["unexpected_replies"] == 0,
            "replay-insert: every well-formed hostile batch (replayed, out-of-order, absurd seqs) acked: %d of %d"
            % (d["acks"], d["sent_good"]))
d = res["replay-sample"]
if d:
    verdict(d["reply_status"]["ok"] > 0 and d["reply_status"]["ids_ok"] == d["replies"],
            "replay-sample: valid hostile sample requests answered with their ids (%s)" % d["reply_status"])
d = res["learner-weights"]
if d:
    # The learner answers a held request within ~2 s (REPUBLISH_MS and its timer); an actor
    # that hears nothing for 5 s (SILENT_RECONNECT_MS) takes its link for dead.
    verdict(d["weights_received"] > 0 and d["weights_versions_increasing"]
            and d["weights_max_gap_s"] < 5.0 and d["num_params"] == [d["expected_num_params"]]
            and d["other_messages"] == 0,
            "learner-weights: a well-behaved weights DEALER kept receiving Weights during the attack: "
            "%d answers to %d requests, %d versions v%d..v%d (never back), longest wait %.1fs, "
            "num_params %s (want %d), %d other messages"
            % (d["weights_received"], d["listener_requests"], d["weights_distinct"],
               d["weights_first"], d["weights_last"], d["weights_max_gap_s"], d["num_params"],
               d["expected_num_params"], d["other_messages"]))
    verdict(d["flood_requests"] > 1000 and d["flood_answers_weights"] > 0,
            "learner-weights: the flooder sent %d valid WeightsRequests (%d answered with Weights); "
            "%d silent DEALERs asked and never read" % (d["flood_requests"],
                                                        d["flood_answers_weights"],
                                                        d["silent_connections"]))
    w = d["wrong_type"]
    verdict(w["connections"] > 0 and w["disconnects"] > 0 and w["handshakes"] == 0
            and w["messages"] == 0,
            "learner-weights: SUB/XSUB peers are refused at the ZMTP handshake and get nothing (%s)" % w)

# --- bad messages were counted ---------------------------------------------------------------
def delta(n, key):
    a, b = phases[n]
    nxt = order[order.index(n) + 1]
    r0, r1 = at(a), at(phases[nxt][0])  # the row before the peer started / before the next one
    return num(r1, key) - num(r0, key)

for n in ("replay-insert", "replay-sample"):
    d = res[n]
    if not d:
        continue
    # libzmq takes raw TCP garbage that does not start like a ZMTP 3 greeting for ZMTP 1.0
    # frames (>= 2 bytes each), so each raw connection (<= 330 bytes) may add bad messages.
    slack = 165 * d["sent"].get("raw_tcp_garbage_connection", 0)
    dl = delta(n, "bad_messages")
    verdict(0.5 * d["sent_bad"] <= dl <= d["sent_bad"] + slack,
            "%s: the replay counted %d bad messages of %d sent (metrics bad_messages)" % (n, dl, d["sent_bad"]))
if res["replay-sample"]:
    dl = delta("replay-sample", "stale_updates")
    want = res["replay-sample"]["random_key_rows"]
    verdict(dl >= 0.5 * want, "replay-sample: priority updates with random keys counted stale (%d stale, %d rows sent)" % (dl, want))
if res["learner-weights"]:
    d = res["learner-weights"]
    slack = 165 * d["sent"].get("raw_tcp_garbage_connection", 0)
    dl = delta("learner-weights", "bad_messages")
    verdict(0.5 * d["sent_bad"] <= dl <= d["sent_bad"] + slack,
            "learner-weights: the learner counted %d bad messages on its weights endpoint of %d sent (metrics bad_messages)"
            % (dl, d["sent_bad"]))
if res["learner-stats"]:
    dl = delta("learner-stats", "bad_messages")
    verdict(dl >= 0.5 * res["learner-stats"]["sent_bad"],
            "learner-stats: the learner's bad ActorStats show in metrics bad_messages (+%d for %d sent)"
            % (dl, res["learner-stats"]["sent_bad"]))
rlog = open(os.path.join(run, "replay.log")).read()
bads = [int(x) for x in re.findall(r"  bad (\d+)  ", rlog)]
verdict(bads and bads[-1] > 0, "replay.log stats line: bad %s" % (bads[-1] if bads else "missing"))
llog = open(os.path.join(run, "learner.log")).read()
verdict("dropped bad actor stats" in llog, "learner.log warns about bad actor stats")
verdict("weights endpoint: dropped a message that is not a weights request" in llog,
        "learner.log warns about what is not a weights request on its weights endpoint")

# --- log volume ------------------------------------------------------------------------------
import time
elapsed = time.time() - t_start
for log in sorted(glob.glob(os.path.join(run, "*.log"))) + [os.path.join(tmp, "hactor.log")]:
    lines = open(log, errors="replace").read().splitlines()
    warn = [l for l in lines if re.match(r"\S+ apex-[\w-]+\[\d+\] [WE] ", l)]
    verdict(len(warn) <= max(5.0, elapsed),
            "%s: %d warning/error lines in %.0fs (bound: 1/s)" % (os.path.basename(log), len(warn), elapsed))

# --- memory ------------------------------------------------------------------------------------
mem = {}
for line in open(os.path.join(tmp, "mem.txt")):
    label, name, rss, hwm = line.split()
    mem.setdefault(name, []).append((label, int(rss), int(hwm)))
for name, snaps in sorted(mem.items()):
    base_hwm = snaps[0][2]
    steps, prev = [], base_hwm
    for label, rss, hwm in snaps[1:]:
        steps.append("%s +%.1f" % (label, (hwm - prev) / 1024.0))
        prev = max(prev, hwm)
    growth = (max(s[2] for s in snaps) - base_hwm) / 1024.0
    verdict(growth < mem_mb, "%s: peak memory grew %.1f MB (< %g MB; VmHWM %.1f -> %.1f MB; per phase: %s)"
            % (name, growth, mem_mb, base_hwm / 1024.0, max(s[2] for s in snaps) / 1024.0, ", ".join(steps)))

# --- the actor fed by hostile upstream peers ----------------------------------------------------
u = load("upstream")
if u is None or "error" in u or "stages" not in u:
    verdict(False, "fake upstream: no result (%s)" % (u or {}).get("error", "missing"))
else:
    S, V = u["stages"], u["versions"]
    g = S.get("garbage", {})
    verdict(u["handshakes"] >= 3 and g.get("batches", 0) > 0 and u["sent_bad"] > 100
            and g.get("weights_answers", 0) > 0,
            "actor side: the actor connected to the fake weights ROUTER/replay ROUTER/stats PULL (%d handshakes), "
            "%d bad messages sent to it (%d as answers to its weights requests, %d unsolicited)"
            % (u["handshakes"], u["sent_bad"], g.get("weights_answers", 0), g.get("weights_unsolicited", 0)))
    verdict(u["weights_requests"] > 0 and u["weights_requests_bad"] == 0,
            "actor side: its weights requests are one-frame WeightsRequests (%d, %d malformed)"
            % (u["weights_requests"], u["weights_requests_bad"]))
    frames = [(n, S[n]["frames_first"], S[n]["frames_last"]) for n in ("garbage", "settle", "huge", "recover", "giant", "final") if n in S]
    flat = [f for _, a, b in frames for f in (a, b)]
    verdict(None not in flat and all(x < y for x, y in zip(flat, flat[1:])),
            "actor side: the actor kept stepping through every stage (frames %s)" % frames)
    verdict(S["garbage"]["malformed"] == 0 and S["garbage"]["new_seqs"] > 0,
            "actor side: under garbage, %d well-formed batches, 0 malformed (%d)" % (S["garbage"]["new_seqs"], S["garbage"]["malformed"]))
    verdict(S["settle"]["weights_version_last"] == V["settle"] and S["settle"]["new_seqs"] > 0,
            "actor side: after garbage it takes valid weights (v%s, want v%d) and keeps sending (%d batches)"
            % (S["settle"]["weights_version_last"], V["settle"], S["settle"]["new_seqs"]))
    verdict(S["settle"]["have_last"] == V["settle"],
            "actor side: it then asks with the version it holds (have_version %s, want %d)"
            % (S["settle"]["have_last"], V["settle"]))
    if "huge" in S:
        verdict(S["huge"]["malformed"] == 0,
                "actor side: finite weights of magnitude 1e30 -> %d of %d batches malformed %s"
                % (S["huge"]["malformed"], S["huge"]["batches"], S["huge"]["malformed_why"]))
        verdict(S["recover"]["weights_version_last"] == V["recover"],
                "actor side: it then takes valid weights again (v%s)" % S["recover"]["weights_version_last"])
    fi = S.get("final", {})
    gw, gr = u["sent"].get("giant_frame_weights", 0), u["sent"].get("giant_frame_replay", 0)
    verdict(gw == 1 and fi.get("weights_version_last") == V["final"],
            "actor side: after a giant frame on its weights DEALER (%d sent) it reconnects and takes new weights (v%s, want v%d)"
            % (gw, fi.get("weights_version_last"), V["final"]))
    verdict(gr == 1 and fi.get("new_seqs", 0) > 0,
            "actor side: after a giant frame on its replay DEALER (%d sent) its batches arrive again (%d new in the last %.1fs; dropped %s)"
            % (gr, fi.get("new_seqs", 0), fi.get("seconds", 0), fi.get("dropped_last")))
    hl = open(os.path.join(tmp, "hactor.log"), errors="replace").read()
    verdict("dropped bad weights message" in hl, "actor side: the actor logs the bad Weights it dropped")
    verdict(re.search(r" W actor: .*bad.*(replay|ack|Ack|insert)", hl) is not None,
            "actor side: the actor logs the bad InsertAcks/garbage from the replay it dropped")
    st = [int(x) for x in re.findall(r"I actor: steps (\d+) ", hl)]
    stop = [int(x) for x in re.findall(r"stopping after (\d+) steps", hl)]
    verdict(st and stop and stop[-1] > st[0],
            "actor side: its status lines advance (steps %s, stopped after %s)" % (st, stop))
PY
while read -r v msg; do
  if [ "$v" = PASS ]; then ok "$msg"; else bad "$msg"; fi
done <"$TMP/verdicts.txt"

mark "analysis done"
# --- a batch with seq 2^64-1, against a standalone replay server ---------------------------
P_INS=$(free_port); P_SMP=$(free_port)
"$APEX_BIN/apex-replay" -c configs/smoke.ini --set run.out_dir="$TMP/seqmax" \
  --set endpoints.replay_insert_bind="tcp://127.0.0.1:$P_INS" \
  --set endpoints.replay_sample_bind="tcp://127.0.0.1:$P_SMP" >"$TMP/seqmax.log" 2>&1 &
SPID=$!
PIDS+=("$SPID")
wait_for 10 grep -q "inserts on" "$TMP/seqmax.log" || bad "standalone replay did not start"
"${HP[@]}" seq-max --endpoint "tcp://127.0.0.1:$P_INS" --seconds 2 "${COMMON[@]}" --json "$TMP/seqmax.json" >"$TMP/seqmax.out" 2>&1 || true
"$PY" -c "import json,sys; d=json.load(open('$TMP/seqmax.json')); sys.exit(0 if d['probe_acked'] else 1)" 2>/dev/null \
  && ok "replay: a TransitionBatch with seq 2^64-1, then a probe: the probe is acked" \
  || bad "replay: after a TransitionBatch with seq 2^64-1 the server stops answering (acks: $(grep -o '"acks": [^]]*]' "$TMP/seqmax.out" || echo none))"
kill -TERM "$SPID" 2>/dev/null || true
if wait_for 30 bash -c "grep -q '^State:[[:space:]]*Z' /proc/$SPID/status 2>/dev/null || [ ! -e /proc/$SPID ]"; then
  rc=0; wait "$SPID" || rc=$?
  [ "$rc" = 0 ] && ok "standalone replay exits 0 on SIGTERM" || bad "standalone replay exited $rc"
else
  bad "standalone replay ignores SIGTERM (hung in its loop); killed"
  kill -9 "$SPID" 2>/dev/null || true
  wait "$SPID" 2>/dev/null || true
fi

# --- shutdown ------------------------------------------------------------------------------
mark "shutdown"
kill -TERM "$LPID" 2>/dev/null || true
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || { bad "launcher exit $rc"; tail -20 "$TMP/launcher.out"; }
wait_for 30 no_procs "$RUNS" && ok "no orphan processes" || bad "orphan processes 30 s after the stop: $(pgrep -af "$RUNS")"
mark "end"
finish
