#!/usr/bin/env bash
# A subscription flood against the learner's weights publisher: a peer subscribes to distinct
# random topics without end (1000 through SUBs, which send them again on every reconnect, and
# raw frames through an XSUB, as fast as they go). A plain PUB stores every one and walks them
# on every send (a flood of 40 000 once stalled publishing for ~26 s); the learner's XPUB
# applies only the weights topic and bounds what libzmq keeps (learner.c, s_open_pub).
# Asserts, while the flood goes on: a real actor keeps receiving new weights, the learner's
# memory stays far below what storing the flood would take, the dropped subscriptions are
# counted and logged at a bounded rate, and nothing died.
# SUB_FLOOD_N: raw subscriptions sent before the checks start (default 150 000);
# SUB_FLOOD_EXTRA_KB: memory allowed on top (make asan: ASan's quarantine keeps freed memory).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
N=${SUB_FLOOD_N:-150000}
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.target_return=100000 --set run.max_seconds=0)
PUB=$(for s in "${SETS[@]}"; do [[ $s == endpoints.learner_pub=* ]] && echo "${s#*=}"; done; true)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --no-eval --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 60 gt actor_version_min 2 && ok "the cluster trains and actors take weights" || bad "no weights at the actors"
wait_for 30 grep -q "all daemons up" "$TMP/launcher.out" || true
LEARNER_PID=$(sed -n "s/.*all daemons up: .*learner\[\([0-9]*\)\].*/\1/p" "$TMP/launcher.out")
[ -n "$LEARNER_PID" ] || bad "no learner pid in: $(cat "$TMP/launcher.out")"
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$LEARNER_PID/status"; }
rss0=$(rss_kb)

# actor_version: the newest "weights vI:C" of actor 0's status lines, as one number.
actor_version() {
  "$PY" - "$RUN/actor0.log" <<'PY'
import re, sys
v = re.findall(r"weights v(\d+):(\d+)", open(sys.argv[1]).read())
print((int(v[-1][0]) << 32 | int(v[-1][1])) if v else 0)
PY
}
"$PY" - "$PUB" "$N" "$TMP/flood.done" >"$TMP/flood.out" 2>&1 <<'PY' &
import os, sys, time, zmq
ep, n, done = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = zmq.Context()
subs = []
for _ in range(4):  # SUBs whose subscriptions go out again on every reconnect
    s = ctx.socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    s.setsockopt(zmq.RCVHWM, 1)
    s.connect(ep)
    for _ in range(250):
        s.setsockopt(zmq.SUBSCRIBE, os.urandom(40))
    subs.append(s)
xsub = ctx.socket(zmq.XSUB)  # and raw subscription frames, as fast as they go, until stopped
xsub.setsockopt(zmq.LINGER, 0)
xsub.connect(ep)
sent = 0
while not os.path.exists(done + ".stop"):
    try:
        xsub.send(b"\x01" + os.urandom(40), zmq.NOBLOCK)
        sent += 1
        if sent == n:
            open(done, "w").write("%d subscriptions sent\n" % n)
    except zmq.Again:
        time.sleep(0.001)
print("flood: %d raw subscriptions sent in all" % sent, flush=True)
PY
FPID=$!
PIDS+=("$FPID")
wait_for 120 test -s "$TMP/flood.done" && ok "the flood is on: $(cat "$TMP/flood.done") so far" || bad "the flood did not get going: $(tail -2 "$TMP/flood.out")"
has_version() { [ "$(actor_version)" -gt 0 ]; }
wait_for 30 has_version || bad "actor 0 logs no weights version"
v0=$(actor_version)
newer() { [ "$(actor_version)" -gt "$v0" ]; }
# New versions are published every 10 updates and taken every 50 frames: a stalled
# publisher would show as the actor's version standing still. Generous deadline.
wait_for 60 newer && ok "actor 0 keeps receiving new weights during the flood (v$((v0 >> 32)):$((v0 & 0xFFFFFFFF)) -> newer)" \
  || bad "actor 0 stuck at v$((v0 >> 32)):$((v0 & 0xFFFFFFFF)) during the flood"
# Storing every topic costs ~1.7 kB each (a trie node per byte); bounded, the learner holds a
# few thousand at a time (plus what the allocator keeps of the freed ones).
rss1=$(rss_kb)
limit_kb=$((N * 17 / 20 + ${SUB_FLOOD_EXTRA_KB:-0})) # half of what storing N would take
[ $((rss1 - rss0)) -lt "$limit_kb" ] && ok "the learner's memory stays bounded under the flood (VmRSS ${rss0} -> ${rss1} kB, limit +${limit_kb} kB)" \
  || bad "the learner grew by $(((rss1 - rss0) / 1024)) MB under the flood (VmRSS ${rss0} -> ${rss1} kB): subscriptions are being kept"
wait_for 30 grep -q "dropped a subscription to a topic other than the weights" "$RUN/learner.log" \
  && ok "the learner drops and counts the foreign subscriptions (logged at a bounded rate: $(grep -c 'dropped a subscription' "$RUN/learner.log") lines)" \
  || bad "no dropped-subscription line in learner.log"
grep -q "foreign subscriptions: opened .* again" "$RUN/learner.log" \
  && ok "$(grep 'foreign subscriptions: opened' "$RUN/learner.log" | tail -1 | sed 's/.* W learner: //' | cut -c1-150)" \
  || bad "the learner never re-opened its weights socket"
touch "$TMP/flood.done.stop"
wait "$FPID" || true
echo "    $(cat "$TMP/flood.out")"
kill -0 "$LPID" 2>/dev/null && ok "every daemon alive after the flood" || bad "the launcher stopped: $(tail -3 "$TMP/launcher.out")"
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher and daemons exit 0" || bad "launcher exit $rc"
finish
