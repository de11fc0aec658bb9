#!/usr/bin/env bash
# smoke: slow
# A run across three (virtual) hosts: network namespaces "srv" (apex-replay, apex-learner),
# "h1" and "h2" (one apex-actor each), joined by veth pairs srv<->h1 (10.231.1.0/30) and
# srv<->h2 (10.231.2.0/30). The servers bind 0.0.0.0 and the actors connect to srv's address
# on their link (no loopback between hosts). With configs/cartpole.ini it checks that
# transitions arrive, the learner trains, the actors take new weights, and that the run
# learns (apex-eval of the checkpoint over 20 greedy episodes). Then h1's link goes down for
# 10 s: the actor on h1 keeps stepping, its window fills and it drops (and says so), the rest
# goes on; after the link comes back the actor on h1 delivers again (acked count rises, its
# weights catch up), all without restarting a process. Finally SIGTERM: every daemon exits 0.
# Needs root and network namespaces; prints "skipped" and exits 0 where they are not allowed
# (fails under CI=true, as slurm_nodes.sh, which needs them too).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ID="$$-$RANDOM"
NS_SRV="apex-srv-$ID" NS_H1="apex-h1-$ID" NS_H2="apex-h2-$ID"
NSES=()
EVAL_EPISODES=20
EVAL_MIN=150          # greedy mean return over EVAL_EPISODES the checkpoint must beat
LEARN_TIMEOUT=${MULTIHOST_LEARN_TIMEOUT:-120}     # seconds allowed to get there
OUTAGE_S=11

ns_cleanup() {
  set +e
  # Nothing below may die of a closed stdout/stderr (bash reports killed jobs on stderr).
  trap '' PIPE
  exec >/dev/null 2>&1
  # APEX_SMOKE_KEEP=DIR keeps the run directory (logs, metrics.csv) for a post-mortem.
  [ -n "${APEX_SMOKE_KEEP:-}" ] && [ -d "${RUN:-}" ] && mkdir -p "$APEX_SMOKE_KEEP" && cp -r "$RUN" "$APEX_SMOKE_KEEP/"
  for ns in "${NSES[@]:-}"; do
    [ -n "$ns" ] || continue
    # Only processes inside our own namespaces (the daemons this script started).
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for ns in "${NSES[@]:-}"; do
    [ -n "$ns" ] || continue
    # (SIGKILLed above: they are gone as soon as the kernel has reaped them.)
    wait_for 10 bash -c "[ -z \"\$(ip netns pids '$ns' 2>/dev/null)\" ]"
    ip netns del "$ns" 2>/dev/null
  done
  cleanup
}
trap ns_cleanup EXIT
trap 'exit 130' INT TERM HUP
trap 'exit 141' PIPE # e.g. piped into head: still delete the namespaces

# since T: seconds elapsed since the `date +%s.%N` time T, one decimal.
since() { awk -v a="$(date +%s.%N)" -v b="$1" 'BEGIN { printf "%.1f", a - b }'; }
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
if ! ip netns add "$NS_SRV" 2>"$TMP/nserr"; then
  skip "network namespaces not permitted ($(head -1 "$TMP/nserr"))"
fi
NSES+=("$NS_SRV")
ip netns add "$NS_H1" && NSES+=("$NS_H1")
ip netns add "$NS_H2" && NSES+=("$NS_H2")
for ns in "${NSES[@]}"; do ip -n "$ns" link set lo up; done
# The veth pairs are created inside srv, their other ends moved straight into h1 and h2:
# nothing is added to the host's own namespace.
if ! ip -n "$NS_SRV" link add vs1 type veth peer name vh1 netns "$NS_H1" 2>"$TMP/nserr"; then
  skip "cannot create veth pairs ($(head -1 "$TMP/nserr"))"
fi
ip -n "$NS_SRV" link add vs2 type veth peer name vh2 netns "$NS_H2"
ip -n "$NS_SRV" addr add 10.231.1.1/30 dev vs1
ip -n "$NS_H1" addr add 10.231.1.2/30 dev vh1
ip -n "$NS_SRV" addr add 10.231.2.1/30 dev vs2
ip -n "$NS_H2" addr add 10.231.2.2/30 dev vh2
for l in "$NS_SRV vs1" "$NS_SRV vs2" "$NS_H1 vh1" "$NS_H2 vh2"; do
  set -- $l
  ip -n "$1" link set "$2" up
done
ok "namespaces $NS_SRV, $NS_H1, $NS_H2 joined by veth pairs"

RUNS="$TMP/runs"
RUN="$RUNS/multihost"
mkdir -p "$RUN"
# Servers bind every interface of srv; each actor reaches srv through its own link.
COMMON=(-c configs/cartpole.ini --set run.out_dir="$RUNS" --set run.name=multihost
        --set run.max_seconds=90 --set run.target_return=100000
        --set endpoints.replay_insert_bind=tcp://0.0.0.0:5550
        --set endpoints.replay_sample_bind=tcp://0.0.0.0:5551
        --set endpoints.learner_weights_bind=tcp://0.0.0.0:5552
        --set endpoints.learner_stats_bind=tcp://0.0.0.0:5553
        --set endpoints.replay_sample=tcp://127.0.0.1:5551)
actor_sets() { # SRV_ADDR
  echo "--set endpoints.replay_insert=tcp://$1:5550 --set endpoints.learner_weights=tcp://$1:5552" \
       "--set endpoints.learner_stats=tcp://$1:5553"
}

# start NS NAME BINARY ARGS...: runs a daemon in a namespace; `ip netns exec` execs it, so
# $! is the daemon itself. Sets PID_<NAME> and START_<NAME> (start time, to detect restarts).
start() {
  local ns=$1 name=$2 bin=$3; shift 3
  ip netns exec "$ns" "$APEX_BIN/$bin" "$@" >"$RUN/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  eval "PID_$name=$pid"
  # (The start time is the fork's: exec keeps it, so there is nothing to wait for.)
  eval "START_$name=\$(awk '{print \$22}' /proc/$pid/stat 2>/dev/null || echo gone)"
}
start "$NS_SRV" replay apex-replay "${COMMON[@]}"
wait_for 10 grep -q "inserts on" "$RUN/replay.log" || bad "replay did not start: $(tail -3 "$RUN/replay.log")"
start "$NS_SRV" learner apex-learner "${COMMON[@]}"
start "$NS_H1" actor0 apex-actor "${COMMON[@]}" $(actor_sets 10.231.1.1) --index 0
start "$NS_H2" actor1 apex-actor "${COMMON[@]}" $(actor_sets 10.231.2.1) --index 1
DAEMONS="replay learner actor0 actor1"
T0=$(date +%s.%N)

# col NAME: value of a column in the last row of metrics.csv (empty if none yet).
# cols NAME...: the values of several columns of the same (last) row, space separated.
cols() {
  "$PY" - "$RUN/metrics.csv" "$@" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print(" ".join(rows[-1][c] for c in sys.argv[2:]))
PY
}
# status N FIELD: FIELD (steps, sent, re-sent, acked, dropped, unacked) of actor N's last
# status line ("steps 1 episodes 2 batches sent 3 re-sent 4 acked 5 dropped 6 unacked 7").
status() {
  { grep "batches sent" "$RUN/actor$1.log" || true; } | tail -1 |
    sed -E 's/.*steps ([0-9]+) .*sent ([0-9]+) re-sent ([0-9]+) acked ([0-9]+) dropped ([0-9]+) unacked ([0-9]+).*/steps=\1 sent=\2 re-sent=\3 acked=\4 dropped=\5 unacked=\6/' |
    tr ' ' '\n' | sed -n "s/^$2=//p"
}
status_count() { grep -c "batches sent" "$RUN/actor$1.log" || true; }
established() { # NS LOCAL_ADDR PEER: a TCP connection from LOCAL_ADDR to PEER is up
  ip netns exec "$1" ss -Htn state established "( dport = :${3##*:} )" | grep -q "$2:.* $3\$"
}

wait_for 20 gt replay_inserted 0 && ok "transitions reach the replay server ($(col replay_inserted))" || bad "no transitions in replay"
wait_for 20 gt updates 100 && ok "the learner trains ($(col updates) updates)" || bad "learner did not train"
wait_for 20 gt actor_version_min 2 && ok "both actors act with new weights (v$(col actor_version_min))" || bad "actors stuck on old weights (actor_version_min $(col actor_version_min))"
for d in $DAEMONS; do
  eval "pid=\$PID_$d"
  comm=$(cat /proc/$pid/comm 2>/dev/null || echo gone)
  [ "$comm" = "apex-${d%%[0-9]}" ] || bad "$d: pid $pid is '$comm'"
done
conns=0
for p in 5550 5552 5553; do
  established "$NS_H1" 10.231.1.2 "10.231.1.1:$p" && conns=$((conns + 1))
  established "$NS_H2" 10.231.2.2 "10.231.2.1:$p" && conns=$((conns + 1))
done
[ "$conns" = 6 ] && ok "actors' 6 connections run over the veth links (ss)" || bad "only $conns of 6 actor connections over veth: $(ip netns exec "$NS_H1" ss -Htn)"

# Learning: evaluate each new checkpoint (one every 3 s) greedily until one is good.
learned=""
deadline=$(( $(date +%s) + LEARN_TIMEOUT ))
ck_seen=none
ck_id() { stat -c '%i %.9Y' "$RUN/checkpoint.bin" 2>/dev/null || echo none; }
new_ckpt() { [ "$(ck_id)" != "$ck_seen" ] && [ "$(ck_id)" != none ]; }
while [ "$(date +%s)" -lt "$deadline" ]; do
  wait_for $((deadline - $(date +%s) + 1)) new_ckpt || break
  ck_seen=$(ck_id)
  cp "$RUN/checkpoint.bin" "$TMP/eval.bin"
  out=$("$APEX_BIN/apex-eval" -c configs/cartpole.ini --checkpoint "$TMP/eval.bin" --episodes $EVAL_EPISODES 2>&1) || continue
  mean=$(sed -nE 's/.* mean ([0-9.]+) .*/\1/p' <<<"$out")
  echo "       [$(since "$T0")s] eval mean $mean (updates $(col updates), mean_return_100 $(col mean_return_100))"
  if [ -n "$mean" ] && "$PY" -c "import sys; sys.exit(0 if $mean > $EVAL_MIN else 1)"; then
    learned=$mean
    break
  fi
done
[ -n "$learned" ] && ok "the run learns: greedy mean $learned > $EVAL_MIN over $EVAL_EPISODES episodes" || bad "no checkpoint reached a greedy mean of $EVAL_MIN within ${LEARN_TIMEOUT}s"

# Outage: h1's link down from just after a status line of actor 0 (one every 10 s) until its
# next one, ~10 s into the outage, which shows the full window; at least OUTAGE_S seconds
# (the scenario's length, not a wait). The insert rate before it is measured over the
# metrics rows (one a second) written between the first read and that status line.
read -r ins0 el0 < <(cols replay_inserted elapsed_s)
rows0=$(csv_rows)
n0=$(status_count 0)
status_after() { [ "$(status_count 0)" -gt "$1" ]; }
wait_for 30 status_after "$n0" || bad "no status line from actor 0 in 30 s"
wait_for 30 rows_ge $((rows0 + 2)) || bad "no metrics rows"
read -r ins1 el1 upd1 < <(cols replay_inserted elapsed_s updates)
steps_before=$(status 0 steps)
rate_both=$("$PY" -c "print(round(($ins1 - $ins0) / ($el1 - $el0)))")
log_at=$(wc -l <"$RUN/actor0.log")
n_down=$(status_count 0)
rows_down=$(csv_rows)
ip -n "$NS_H1" link set vh1 down
T_DOWN=$(date +%s.%N)
# actor_version_min stops with the last stats actor 0 got through: read it from a metrics
# row written more than a second after the link went down (stats every 0.25 s, rows every
# second), then again at the end: it must not have moved.
wait_for 30 rows_ge $((rows_down + 2)) || bad "no metrics rows during the outage"
avm_mid=$(col actor_version_min)
wait_for 30 status_after "$n_down" || bad "no status line from actor 0 in the first 30 s of the outage"
# The scenario's length: the link stays down at least OUTAGE_S seconds in all.
rest=$("$PY" -c "print(max(0.0, $OUTAGE_S - ($(date +%s.%N) - $T_DOWN)))")
sleep "$rest"
read -r ins2 el2 upd2 avm_end ver_up < <(cols replay_inserted elapsed_s updates actor_version_min weights_version)
ip -n "$NS_H1" link set vh1 up
T_UP=$(date +%s.%N)
rate_one=$("$PY" -c "print(round(($ins2 - $ins1) / ($el2 - $el1)))")
echo "       outage: insert rate $rate_both/s before, $rate_one/s during; actor_version_min v$avm_mid -> v$avm_end, weights v$ver_up"
tail -n +"$((log_at + 1))" "$RUN/actor0.log" >"$TMP/actor0.outage"
out_line=$({ grep "batches sent" "$TMP/actor0.outage" || true; } | tail -1)
dropped=$(sed -nE 's/.* dropped ([0-9]+) .*/\1/p' <<<"$out_line")
if [ -z "$out_line" ]; then
  bad "no status line from actor 0 during the outage"
elif [ "${dropped:-0}" -gt 0 ] && [ "$(sed -nE 's/.*steps ([0-9]+) .*/\1/p' <<<"$out_line")" -gt "${steps_before:-0}" ]; then
  ok "during the outage actor 0 keeps stepping (from $steps_before), fills its window and drops: $(sed 's/.* I actor: //' <<<"$out_line")"
else
  bad "actor 0 did not step on and drop during the outage (steps before $steps_before): $out_line"
fi
grep -q "not acknowledging" "$TMP/actor0.outage" && ok "actor 0 says so: $(grep -m1 "not acknowledging" "$TMP/actor0.outage" | sed 's/.* W actor: //')" || bad "actor 0 did not log that the replay is not acknowledging"
"$PY" -c "import sys; sys.exit(0 if $upd2 > $upd1 + 100 and $ins2 > $ins1 else 1)" && ok "the rest goes on during the outage (updates $upd1 -> $upd2, inserted $ins1 -> $ins2)" || bad "the cluster stalled during the outage (updates $upd1 -> $upd2, inserted $ins1 -> $ins2)"
"$PY" -c "import sys; sys.exit(0 if $rate_one < 0.75 * $rate_both else 1)" && ok "only actor 1 delivers during the outage (insert rate $rate_both/s -> $rate_one/s)" || bad "insert rate did not drop during the outage ($rate_both/s -> $rate_one/s): is actor 0 really cut off?"
[ "$avm_mid" = "$avm_end" ] && [ "$avm_end" -lt "$ver_up" ] && ok "actor 0's weights freeze while cut off (actor_version_min v$avm_end, learner at v$ver_up)" || bad "actor_version_min moved during the outage (v$avm_mid -> v$avm_end, learner at v$ver_up)"
steps_down=$(sed -nE 's/.*steps ([0-9]+) .*/\1/p' <<<"$out_line")

# Recovery, no process restarted.
acked_out=$(sed -nE 's/.* acked ([0-9]+) .*/\1/p' <<<"$out_line")
wait_for 15 gt actor_version_min "$ver_up" && ok "actor 0's weights catch up (actor_version_min v$(col actor_version_min) > v$ver_up) $(since "$T_UP") s after the link is back" || bad "actor_version_min stuck at v$(col actor_version_min) (weights were v$ver_up at restore)"
acked_up() { [ "$(status 0 acked)" -gt "${acked_out:-0}" ]; }
wait_for 25 acked_up && ok "actor 0 delivers again: acked $acked_out -> $(status 0 acked) (re-sent $(status 0 re-sent), unacked $(status 0 unacked))" || bad "actor 0's acked count stays at $acked_out after the link is back"
[ "$(status 0 steps)" -gt "${steps_down:-0}" ] && ok "actor 0 kept stepping throughout (steps $steps_down -> $(status 0 steps))" || bad "actor 0 stopped stepping"
established "$NS_H1" 10.231.1.2 10.231.1.1:5550 && ok "actor 0 reconnected over the veth" || bad "actor 0 has no connection to 10.231.1.1:5550"
same=0
for d in $DAEMONS; do
  eval "pid=\$PID_$d start0=\$START_$d"
  now=$(awk '{print $22}' /proc/$pid/stat 2>/dev/null || echo gone)
  [ "$now" = "$start0" ] && [ "$start0" != gone ] && same=$((same + 1)) || bad "$d (pid $pid) is not the process started at the beginning"
done
[ "$same" = 4 ] && ok "no process restarted (pids $PID_replay $PID_learner $PID_actor0 $PID_actor1 unchanged)"
echo "       veth srv side: vs1 rx $(ip -n "$NS_SRV" -s -j link show vs1 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])') bytes, vs2 rx $(ip -n "$NS_SRV" -s -j link show vs2 | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["bytes"])') bytes"

# Orderly shutdown: actors first, then the learner (final checkpoint), then the replay.
for d in actor0 actor1 learner replay; do
  eval "pid=\$PID_$d"
  kill -TERM "$pid" 2>/dev/null || true
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] && ok "$d exits 0 on SIGTERM" || { bad "$d exit $rc"; tail -5 "$RUN/$d.log" | sed 's/^/       /'; }
done
grep -q "final checkpoint written" "$RUN/learner.log" && ok "the learner wrote its final checkpoint" || bad "no final checkpoint line"
echo "       run time $(since "$T0") s"
if [ "$FAIL" -gt 0 ]; then
  for d in $DAEMONS; do echo "--- $d.log"; grep -v " D " "$RUN/$d.log" | tail -8; done
fi
finish
