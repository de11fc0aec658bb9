#!/usr/bin/env bash
# Edge values against every daemon (issue #26 item 3; tests/smoke/edge_peer.py).
#
# Over real sockets, messages whose numeric fields sit at their edges (0, -0, the type's min
# and max, each bound of common/wire.h with the next representable value past it and just
# inside it, NaN, +-inf, denormals), one field at a time, each followed by normal traffic
# whose answer is checked:
#   - apex-replay, standalone: every field of TransitionBatch (insert ROUTER), SampleRequest
#     and PriorityUpdate (sample ROUTER). Taken batches are acknowledged, refused ones not; a
#     normal batch after each is acknowledged and a normal request answered (decodes, right
#     count, importance weights in [0, 1]); the server's counters in the reply stats
#     (inserted, bad_messages, duplicates, updated, stale, sampled, size) move by exactly what
#     the edge message should have done; valid requests are answered OK, NOT_READY or REFUSED
#     as documented, refused ones never. Then SIGKILL and --dump: the write-ahead log, edge
#     records and all, restores exactly the rows that were taken, bit for bit. A second
#     replay with [replay] capacity < max_batch answers a request above capacity REFUSED.
#   - apex-learner, standalone (a replay without data, no actors): every field of ActorStats
#     (stats PULL): metrics.csv's env_frames, episodes, bad_messages and actor_version_min
#     move exactly as the accepted messages say; WeightsRequest.have_version at its edges is
#     answered at once or held (metrics weights_held) and then answered, with Weights of the
#     right size, finite; messages that are not WeightsRequests are refused and counted. Then
#     it trains on transitions at +-FLT_MAX (through its replay): its Weights stay finite.
#   - apex-learner against a fake replay sample ROUTER: every field of SampleReply and its
#     ReplayStats. A reply it takes is trained on and its keys (0 and u64 max included) come
#     back in a PriorityUpdate with priorities within bounds; one it refuses is counted; late,
#     NOT_READY and REFUSED replies are neither; metrics.csv's updates and bad_messages after
#     each field are exactly that, its replay_* columns show the stats as sent; its requests
#     stay well-formed and its Weights finite.
#   - apex-actor against a fake learner weights ROUTER, replay insert ROUTER and stats PULL:
#     Weights at every edge of version, learner_step, env_frames, num_params and params
#     (finite extremes taken and acted with, +-0 weights give priorities |R| + eps exactly;
#     NaN/inf refused), an older version taken once u64 max went quiet, then a newer one;
#     InsertAcks at the edges of actor_id, seq and seqs: taken or ignored (the batch is sent
#     again or not); every batch and ActorStats it sends stays within the wire's bounds.
#   - apex-eval --follow against the same fake weights ROUTER: the same Weights edges; the
#     versions it takes are evaluated (eval.csv rows carry learner_step and env_frames as
#     sent), the ones it refuses never are.
# Every daemon is alive after its edges and exits 0 on SIGTERM.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
EP=tests/smoke/edge_peer.py
LOCAL=tcp://127.0.0.1

# alive PID: the process exists and is not a zombie.
alive() { [ -r "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status"; }
# report NAME: the peer's PASS/FAIL lines as ok/FAIL; a peer that did not finish is a FAIL.
report() {
  local name=$1 rc=$2 v msg
  while read -r v msg; do
    case $v in PASS) ok "$msg" ;; FAIL) bad "$msg" ;; esac
  done <"$TMP/$name.out"
  if [ "$rc" != 0 ] || ! grep -q '^DONE' "$TMP/$name.out"; then
    bad "peer $name did not finish (exit $rc)"; grep -v '^PASS\|^FAIL' "$TMP/$name.out" | tail -8 | sed 's/^/       /'
  fi
}
peer() { local name=$1 rc=0; shift; "$PY" "$EP" "$@" >"$TMP/$name.out" 2>&1 || rc=$?; report "$name" "$rc"; }
# stop NAME PID: SIGTERM; the daemon must exit 0.
stop() {
  local rc=0
  kill -TERM "$2" 2>/dev/null || true
  wait "$2" || rc=$?
  [ "$rc" = 0 ] && ok "$1 exits 0 on SIGTERM" || { bad "$1 exited $rc on SIGTERM"; tail -5 "$TMP/$1.log" | sed 's/^/       /'; }
}
still_alive() { alive "$2" && ok "$1 is alive after the edge values" || bad "$1 died: $(tail -3 "$TMP/$1.log")"; }
bin() { echo "$APEX_BIN/$1"; }

# --- apex-replay -------------------------------------------------------------------------
P_INS=$(free_port); P_SMP=$(free_port)
R1=(--set run.out_dir="$TMP/r1" --set actor.num_actors=3 --set replay.capacity=4096
    --set replay.max_batch=64 --set replay.min_size_to_sample=1 --set replay.samples_per_insert=0
    --set replay.sample_timeout_ms=300 --set replay.durability=wal --set replay.wal_sync_ms=1
    --set replay.snapshot_interval_s=1e6 --set endpoints.replay_insert_bind=$LOCAL:$P_INS
    --set endpoints.replay_sample_bind=$LOCAL:$P_SMP)
"$(bin apex-replay)" -c configs/smoke.ini "${R1[@]}" >"$TMP/apex-replay.log" 2>&1 &
RPID=$!
PIDS+=("$RPID")
wait_for 30 grep -q "inserts on" "$TMP/apex-replay.log" || bad "apex-replay did not start"
peer replay replay --insert $LOCAL:$P_INS --sample $LOCAL:$P_SMP --num-actors 3 --max-batch 64 \
  --rows-out "$TMP/rows.txt"
still_alive apex-replay "$RPID"
# Every taken batch was acknowledged, so with durability = wal it is in the log: SIGKILL, and
# the restore decodes each edge record again (a bound the decoder and the store disagree on
# would show here too).
kill -9 "$RPID" 2>/dev/null || true; wait "$RPID" 2>/dev/null || true
expect_rc 0 "apex-replay --dump restores the log of the edge values" \
  "$(bin apex-replay)" -c configs/smoke.ini "${R1[@]}" --dump "$TMP/dump.csv"
! grep -q "not applicable" "$TMP/out" "$TMP/err" && ok "no log record was refused on restore" \
  || bad "restore: $(grep -hm1 "not applicable" "$TMP/out" "$TMP/err")"
"$PY" - "$TMP/rows.txt" "$TMP/dump.csv" <<'PY' && ok "the dump holds exactly the rows taken, bit for bit" || bad "the dump differs from the rows taken"
import collections, csv, struct, sys
bits = lambda x: struct.unpack("<I", struct.pack("<f", float(x)))[0]
want = collections.Counter(tuple(int(x) for x in l.split()) for l in open(sys.argv[1]) if l.strip())
rows = list(csv.DictReader(open(sys.argv[2])))
d = sum(1 for k in rows[0] if k.startswith("obs")) if rows else 0
got = collections.Counter(
    tuple([int(r["action"]), bits(r["reward"]), bits(r["discount"])] +
          [bits(r["obs%d" % j]) for j in range(d)] + [bits(r["next_obs%d" % j]) for j in range(d)])
    for r in rows)
print("    %d rows taken, %d in the dump; %d missing, %d unexpected" % (
    sum(want.values()), len(rows), sum((want - got).values()), sum((got - want).values())))
sys.exit(0 if want == got and rows else 1)
PY

# --- apex-learner, with a replay of capacity < max_batch ----------------------------------
P2_INS=$(free_port); P2_SMP=$(free_port); P_PUB=$(free_port); P_STATS=$(free_port)
R2=(--set run.out_dir="$TMP/r2" --set actor.num_actors=3 --set replay.capacity=256
    --set replay.max_batch=512 --set replay.sample_timeout_ms=300
    --set endpoints.replay_insert_bind=$LOCAL:$P2_INS --set endpoints.replay_sample_bind=$LOCAL:$P2_SMP)
"$(bin apex-replay)" -c configs/smoke.ini "${R2[@]}" >"$TMP/apex-replay2.log" 2>&1 &
R2PID=$!
PIDS+=("$R2PID")
wait_for 30 grep -q "inserts on" "$TMP/apex-replay2.log" || bad "the second apex-replay did not start"
peer capacity capacity --sample $LOCAL:$P2_SMP --capacity 256 --max-batch 512
L=(--set run.out_dir="$TMP/l" --set actor.num_actors=3 --set replay.capacity=256
   --set replay.max_batch=512 --set learner.metrics_interval_ms=100
   --set learner.checkpoint_interval_s=1e6 --set endpoints.replay_sample=$LOCAL:$P2_SMP
   --set endpoints.learner_weights_bind=$LOCAL:$P_PUB --set endpoints.learner_stats_bind=$LOCAL:$P_STATS)
"$(bin apex-learner)" -c configs/smoke.ini "${L[@]}" >"$TMP/apex-learner.log" 2>&1 &
LPID=$!
PIDS+=("$LPID")
wait_for 60 grep -q "learner: [0-9]* parameters" "$TMP/apex-learner.log" || bad "apex-learner did not start"
NUM_PARAMS=$({ grep -o "learner: [0-9]* parameters" "$TMP/apex-learner.log" || true; } | head -1 | tr -dc 0-9)
peer learner learner --stats $LOCAL:$P_STATS --weights $LOCAL:$P_PUB --metrics "$TMP/l/smoke/metrics.csv" \
  --insert $LOCAL:$P2_INS --capacity 256 \
  --num-actors 3 --num-params "${NUM_PARAMS:-0}"
still_alive apex-learner "$LPID"
stop apex-learner "$LPID"
stop apex-replay2 "$R2PID"

# --- apex-learner against a fake replay (its SampleReplies at the edges) -----------------
P_FS=$(free_port); P_PUB2=$(free_port); P_STATS2=$(free_port)
L2=(--set run.out_dir="$TMP/l2" --set replay.max_batch=64 --set learner.batch_size=4
    --set learner.batches_per_request=1 --set learner.prefetch=1 --set learner.request_timeout_ms=2000
    --set learner.publish_every=1 --set learner.metrics_interval_ms=100
    --set learner.checkpoint_interval_s=1e6 --set endpoints.replay_sample=$LOCAL:$P_FS
    --set endpoints.learner_weights_bind=$LOCAL:$P_PUB2 --set endpoints.learner_stats_bind=$LOCAL:$P_STATS2)
"$PY" "$EP" learner-replay --sample $LOCAL:$P_FS --weights $LOCAL:$P_PUB2 --metrics "$TMP/l2/smoke/metrics.csv" \
  --batch-size 4 --max-batch 64 --num-params "${NUM_PARAMS:-0}" >"$TMP/learner-replay.out" 2>&1 &
UPID=$!
PIDS+=("$UPID")
"$(bin apex-learner)" -c configs/smoke.ini "${L2[@]}" >"$TMP/apex-learner2.log" 2>&1 &
L2PID=$!
PIDS+=("$L2PID")
rc=0; wait "$UPID" || rc=$?
report learner-replay "$rc"
still_alive apex-learner2 "$L2PID"
stop apex-learner2 "$L2PID"

# --- apex-actor against a fake learner and replay -----------------------------------------
P_AW=$(free_port); P_AI=$(free_port); P_AS=$(free_port)
"$PY" "$EP" upstream --client actor --weights $LOCAL:$P_AW --insert $LOCAL:$P_AI --stats $LOCAL:$P_AS \
  --index 1 --num-actors 3 --max-batch 64 --num-params "${NUM_PARAMS:-0}" --priority-eps 1e-6 \
  >"$TMP/actor-peer.out" 2>&1 &
UPID=$!
PIDS+=("$UPID")
"$(bin apex-actor)" -c configs/smoke.ini --index 1 --set run.out_dir="$TMP/a" --set actor.num_actors=3 \
  --set replay.max_batch=64 --set actor.send_batch=8 --set actor.weight_sync_steps=8 \
  --set actor.ack_timeout_ms=200 --set actor.max_steps_per_s=200 --set learner.priority_eps=1e-6 \
  --set endpoints.learner_weights=$LOCAL:$P_AW --set endpoints.replay_insert=$LOCAL:$P_AI \
  --set endpoints.learner_stats=$LOCAL:$P_AS >"$TMP/apex-actor.log" 2>&1 &
APID=$!
PIDS+=("$APID")
rc=0; wait "$UPID" || rc=$?
report actor-peer "$rc"
still_alive apex-actor "$APID"
stop apex-actor "$APID"

# --- apex-eval --follow against a fake learner --------------------------------------------
P_EW=$(free_port)
"$PY" "$EP" upstream --client eval --weights $LOCAL:$P_EW --eval-csv "$TMP/e/smoke/eval.csv" \
  --num-params "${NUM_PARAMS:-0}" >"$TMP/eval-peer.out" 2>&1 &
UPID=$!
PIDS+=("$UPID")
"$(bin apex-eval)" -c configs/smoke.ini --follow --set run.out_dir="$TMP/e" --set eval.episodes=2 \
  --set eval.interval_s=0 --set eval.max_episode_steps=50 --set endpoints.learner_weights=$LOCAL:$P_EW \
  >"$TMP/apex-eval.log" 2>&1 &
EPID=$!
PIDS+=("$EPID")
rc=0; wait "$UPID" || rc=$?
report eval-peer "$rc"
still_alive apex-eval "$EPID"
stop apex-eval "$EPID"
finish
