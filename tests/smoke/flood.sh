#!/usr/bin/env bash
# smoke: slow
# Producers far faster than the consumer, on loopback: 3 unthrottled actors (16 envs each)
# feed a small replay ring (20000 transitions) read by a deliberately slow learner (256x256
# network, batches of 256). Actor 2's replay endpoint is a port where nothing ever listens,
# so its window is always full; mid-run the replay server is frozen with SIGSTOP for 5 s
# (unresponsive, not dead) so that every actor's window fills, then resumed with SIGCONT.
# Checks, from /proc/PID/status and the logs, over ~35 s: the replay server's VmRSS stays
# under a bound computed from its capacity and stops growing once the ring is full, each
# actor's VmRSS stays flat after warm-up (its window is bounded), drops are counted, the
# replay holds exactly `capacity` transitions once full, nothing crashes, and SIGTERM stops
# every daemon with exit status 0.
# This test is why ZeroMQ's own heartbeats are off: with them on both ends of a connection,
# libzmq 4.3.4 often aborted in an I/O thread after SIGCONT ("Assertion failed: !_io_error
# (src/stream_engine_base.cpp:331)", upstream zeromq/libzmq#4364).
# The script runs under `set -o pipefail`: a pipeline that may find nothing yet (no metrics
# row, no status line) needs its `|| true`, or the script ends silently with the daemons.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

CAPACITY=20000
RUN_S=35              # length of the sampled run (actor status lines at ~10, 20, 30 s)
STOP_AT=12 STOP_S=5   # SIGSTOP the replay server at this second, for this long
# Allowed above start-up + ring: what is touched lazily as traffic comes: ZeroMQ's receive
# queues (rcvhwm 1000 x ~1.1 kB per connected actor, ~2.2 MB), the 16 zero-copy reply
# buffers (16 x 49 kB), the decoders' arenas, and the pages the I/O threads' malloc arenas
# keep once a lagging server has let them fill (seen: 9-10.7 MB in all at load 12-17 on 2
# cores). A leak of the inserted data (100 k rows/s x 48 B, ~4.8 MB/s) passes it in ~3 s.
REPLAY_SLACK_KB=12288
# RSS growth allowed once the ring is full: the same lazily touched memory (most of it comes
# when the frozen server is let go and drains its backlog: +6.7 MB seen at load 12), so
# nearly the same allowance. A leak of the inserted data would grow ~140 MB over the run.
GROWTH_KB=10240
ACTOR_GROWTH_KB=3072 # the actors preallocate their windows: growth there is a leak
RUNS="$TMP/runs"
RUN="$RUNS/flood"
mkdir -p "$RUN"
# Five distinct free loopback ports in one go; nothing will ever listen on DEAD_PORT, where
# actor 2 sends its batches (they are never acknowledged).
read -r P1 P2 P3 P4 DEAD_PORT < <("$PY" -c '
import socket
ss = [socket.socket() for _ in range(5)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
EP=()
for kp in replay_insert:$P1 replay_sample:$P2 learner_weights:$P3 learner_stats:$P4; do
  EP+=(--set "endpoints.${kp%%:*}_bind=tcp://127.0.0.1:${kp##*:}" --set "endpoints.${kp%%:*}=tcp://127.0.0.1:${kp##*:}")
done
SETS=(-c configs/smoke.ini "${EP[@]}" --set run.out_dir="$RUNS" --set run.name=flood
      --set replay.capacity=$CAPACITY --set replay.stats_interval_ms=1000
      --set network.hidden=256,256 --set learner.batch_size=256
      --set actor.num_actors=3 --set actor.envs_per_actor=16 --set actor.max_steps_per_s=0
      --set actor.max_pending_batches=256 --set actor.ack_timeout_ms=1000)

# start NAME BINARY ARGS...: sets PID_<NAME>.
start() {
  local name=$1 bin=$2; shift 2
  "$APEX_BIN/$bin" "$@" >"$RUN/$name.log" 2>&1 &
  PIDS+=("$!")
  eval "PID_$name=$!"
}
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

start replay apex-replay "${SETS[@]}"
wait_for 10 grep -q "inserts on" "$RUN/replay.log" || bad "replay did not start: $(tail -3 "$RUN/replay.log")"
REPLAY_BASE_KB=$(rss "$PID_replay")
STORE_MIB=$(sed -nE 's/.*capacity [0-9]+ \(([0-9.]+) MiB\).*/\1/p' "$RUN/replay.log")
REPLAY_BOUND_KB=$("$PY" -c "print(int($REPLAY_BASE_KB + $STORE_MIB * 1024 + $REPLAY_SLACK_KB))")
start learner apex-learner "${SETS[@]}"
start actor0 apex-actor "${SETS[@]}" --index 0
start actor1 apex-actor "${SETS[@]}" --index 1
start actor2 apex-actor "${SETS[@]}" --set "endpoints.replay_insert=tcp://127.0.0.1:$DEAD_PORT" --index 2
DAEMONS="replay learner actor0 actor1 actor2"
T0=$(date +%s.%N)

# Sample every daemon's VmRSS twice a second (cheaply: the loop must keep its pace on a
# loaded machine); freeze the replay server in the middle. Times in ms from $EPOCHREALTIME.
us() { local t=${EPOCHREALTIME/./}; REPLY=$((10#$t)); }
us; T0_US=$REPLY
echo "t replay learner actor0 actor1 actor2 replay_size updates" >"$TMP/rss.txt"
stopped=0 T_STOP=0 T_CONT=0
for _ in $(seq 1 $((RUN_S * 4))); do
  us; el=$(( (REPLY - T0_US) / 1000 ))
  [ "$el" -ge $((RUN_S * 1000)) ] && break
  if [ "$stopped" = 0 ] && [ "$el" -ge $((STOP_AT * 1000)) ]; then
    kill -STOP "$PID_replay"; stopped=1; T_STOP=$el
    for a in 0 1; do { grep "batches sent" "$RUN/actor$a.log" || true; } | tail -1 >"$TMP/pre$a"; done
  elif [ "$stopped" = 1 ] && [ "$el" -ge $((T_STOP + STOP_S * 1000)) ]; then
    kill -CONT "$PID_replay"; stopped=2; T_CONT=$el
  fi
  # VmRSS of the 5 daemons in one awk (0 for a dead one); replay_size, updates from the
  # last metrics row.
  mem=$(awk -v pids="$PID_replay $PID_learner $PID_actor0 $PID_actor1 $PID_actor2" 'BEGIN {
          n = split(pids, p, " ")
          for (i = 1; i <= n; i++) {
            v = 0; f = "/proc/" p[i] "/status"
            while ((getline l < f) > 0) if (l ~ /^VmRSS:/) { split(l, w, " "); v = w[2] }
            close(f); printf " %s", v
          } }')
  # (no metrics.csv yet in the first half second: tail fails, and pipefail must not end the script)
  m=$({ tail -n 1 "$RUN/metrics.csv" 2>/dev/null || true; } | awk -F, '$5 ~ /^[0-9]+$/ { print $11, $5 }')
  printf '%d.%d%s %s\n' $((el / 1000)) $((el % 1000 / 100)) "$mem" "${m:-0 0}" >>"$TMP/rss.txt"
  sleep 0.5
done
[ "$stopped" = 1 ] && kill -CONT "$PID_replay"
[ "$stopped" = 2 ] || bad "the SIGSTOP/SIGCONT cycle did not happen (stopped=$stopped)"
echo "       replay frozen from $((T_STOP / 1000)).$((T_STOP % 1000 / 100)) s to $((T_CONT / 1000)).$((T_CONT % 1000 / 100)) s; VmRSS (kB), every 2nd sample:"
awk 'NR == 1 || NR % 2 == 0' "$TMP/rss.txt" | column -t | sed 's/^/         /'

alive=0
for d in $DAEMONS; do
  eval "pid=\$PID_$d"
  kill -0 "$pid" 2>/dev/null && alive=$((alive + 1)) || bad "$d (pid $pid) died: $(tail -3 "$RUN/$d.log")"
done
[ "$alive" = 5 ] && ok "all 5 daemons alive after ${RUN_S}s of flooding"

# The replay ring: full, exactly at capacity, and its memory bounded and flat.
ring_full() { [ "$(col replay_size)" = "$CAPACITY" ]; }
wait_for 20 ring_full && ok "replay_size = capacity $CAPACITY once full (inserted $(col replay_inserted))" || bad "replay_size $(col replay_size), want $CAPACITY"
wait_for 20 grep -q "size $CAPACITY/$CAPACITY" "$RUN/replay.log" && ok "the replay server reports size $CAPACITY/$CAPACITY" || bad "no full-ring stats line in replay.log"
"$PY" - "$TMP/rss.txt" "$REPLAY_BOUND_KB" "$GROWTH_KB" "$CAPACITY" "$REPLAY_BASE_KB" "$STORE_MIB" <<'PY' && ok "replay VmRSS bounded and flat once full (see above)" || bad "replay memory not shown bounded"
import sys
rows = [l.split() for l in open(sys.argv[1])][1:]
bound, growth, cap, base, store = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
rss = [int(r[1]) for r in rows]
if 0 in rss[1:]:
    print("       replay gone at %ss: its memory was only sampled until then" % rows[rss.index(0, 1)][0]); sys.exit(1)
full = [i for i, r in enumerate(rows) if r[6] == cap]
print("       replay: start-up %s kB + ring %s MiB -> bound %d kB; max %d kB" % (base, store, bound, max(rss)))
if max(rss) > bound:
    print("       replay VmRSS %d kB > bound %d kB" % (max(rss), bound)); sys.exit(1)
if not full:
    print("       the ring never filled"); sys.exit(1)
# Once full (plus 2 s for the first overwrites), the RSS may not grow by more than `growth`.
i0 = full[0] + 4
after = rss[i0:]
if len(after) < 20 or max(after) - after[0] > growth:
    print("       replay VmRSS grew %d kB after the ring was full (allowed %d)" % (max(after) - after[0], growth)); sys.exit(1)
print("       replay: %d kB when full, %d kB max afterwards, %d kB at the end" % (after[0], max(after), after[-1]))
PY

# The actors: RSS flat after warm-up (window buffers are preallocated; at most 256 batches).
"$PY" - "$TMP/rss.txt" "$ACTOR_GROWTH_KB" "$STOP_AT" <<'PY' && ok "every actor's VmRSS flat after warm-up, across the freeze" || bad "actor memory grows"
import sys
rows = [l.split() for l in open(sys.argv[1])][1:]
growth, stop_at = int(sys.argv[2]), float(sys.argv[3])
bad = 0
for col, name in ((3, "actor0"), (4, "actor1"), (5, "actor2")):
    warm = [int(r[col]) for r in rows if float(r[0]) >= 4.0]  # warm-up: 4 s
    if 0 in warm:
        print("       %s gone" % name); bad += 1; continue
    late = [int(r[col]) for r in rows if float(r[0]) >= stop_at + 8]
    g = max(warm) - warm[0]
    trend = max(late) - min(late) if late else 0
    print("       %s: %d kB after warm-up, max %d kB (+%d), last %d s within %d kB" %
          (name, warm[0], max(warm), g, len(late) // 2, trend))
    if g > growth or trend > growth // 3:
        bad += 1
sys.exit(1 if bad else 0)
PY

# Drops and liveness messages. field N NAME: NAME's count in actor N's last status line
# ("... batches sent 3 re-sent 4 acked 5 dropped 6 unacked 7 ..."); pre N NAME: the same in
# its last line before the freeze.
num() { sed -nE "s/.* $1 ([0-9]+) .*/\1/p"; }
field() { { grep "batches sent" "$RUN/actor$1.log" || true; } | tail -1 | num "$2"; }
pre() { num "$2" <"$TMP/pre$1"; }
dropped() { field "$1" dropped; }
for a in 0 1; do
  last=$({ grep "batches sent" "$RUN/actor$a.log" || true; } | tail -1 | sed 's/.* I actor: //')
  if [ "$(field $a dropped)" -gt "$(pre $a dropped)" ] 2>/dev/null; then
    ok "actor $a counted drops in the freeze: dropped $(pre $a dropped) before it, now: $last"
  else
    bad "actor $a: no drops counted in the freeze (before: $(cat "$TMP/pre$a"); now: $last)"
  fi
  if [ "$(field $a acked)" -gt "$(pre $a acked)" ] 2>/dev/null && [ "$(field $a unacked)" -lt 256 ]; then
    ok "actor $a is acknowledged again after SIGCONT (acked $(pre $a acked) -> $(field $a acked), unacked $(field $a unacked))"
  else
    bad "actor $a not acknowledged after SIGCONT (acked $(pre $a acked) -> $(field $a acked), unacked $(field $a unacked))"
  fi
done
d=$(dropped 2)
[ "${d:-0}" -gt 0 ] && ok "actor 2 (nobody listening) drops and counts: $(grep "batches sent" "$RUN/actor2.log" | tail -1 | sed 's/.* I actor: //')" || bad "actor 2 dropped nothing"
grep -q "acked 0 dropped" <(grep "batches sent" "$RUN/actor2.log" | tail -1) && ok "actor 2 never got an ack" || bad "actor 2 got acks from a port nobody listens on?"
wait_for 20 grep -q "not acknowledging" "$RUN/actor0.log" && ok "actor 0 logs: $(grep -m1 "not acknowledging" "$RUN/actor0.log" | sed 's/.* W actor: //')" || bad "actor 0 did not log the missing acks"
wait_for 20 grep -q "has not answered" "$RUN/learner.log" && ok "learner logs: $(grep -m1 "has not answered" "$RUN/learner.log" | sed 's/.* W learner: //')" || bad "the learner did not notice the frozen replay server"
"$PY" - "$TMP/rss.txt" "$T_STOP" "$T_CONT" <<'PY' && ok "the learner trains again after SIGCONT" || bad "the learner does not train after SIGCONT"
import sys
rows = [l.split() for l in open(sys.argv[1])][1:]
t_stop, t_cont = int(sys.argv[2]) / 1000, int(sys.argv[3]) / 1000
upd = lambda pred: [int(r[7]) for r in rows if pred(float(r[0]))]
during = upd(lambda t: t_stop + 1.5 <= t <= t_cont)   # metrics rows lag up to 0.5 s
after = upd(lambda t: t >= t_cont + 3)                # past the first replies after SIGCONT
print("       learner updates while frozen: %s -> %s; from 3 s after SIGCONT: %s -> %s" %
      (during[0] if during else "?", during[-1] if during else "?", after[0] if after else "?",
       after[-1] if after else "?"))
sys.exit(0 if len(after) >= 10 and after[-1] > after[0] + 10 else 1)
PY
echo "       replay stats after the freeze: $({ grep "size $CAPACITY" "$RUN/replay.log" || true; } | tail -1 | sed 's/.* I replay: //')"

for d in actor0 actor1 actor2 learner replay; do
  eval "pid=\$PID_$d"
  kill -TERM "$pid" 2>/dev/null || true
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] && ok "$d exits 0 on SIGTERM" || { bad "$d exit $rc"; tail -5 "$RUN/$d.log" | sed 's/^/       /'; }
done
echo "       run time (from the start of the daemons) $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN { printf "%.1f", a - b }') s"
[ "$FAIL" -gt 0 ] && for d in $DAEMONS; do echo "--- $d.log"; tail -8 "$RUN/$d.log"; done
finish
