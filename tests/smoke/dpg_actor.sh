#!/usr/bin/env bash
# The DPG actor (issue #28) through the real daemons, without a learner: apex-replay and two
# apex-actor processes on configs/pendulum.ini (Pendulum-v1, one float action in [-2, 2]).
# The actors act with their seeded initial policy plus Gaussian noise (no weights arrive)
# and send continuous TransitionBatches without priorities. Checks:
#   - each actor starts with its env's noise schedule (log line "Gaussian noise sigmas");
#   - the replay's size grows past 2 000 transitions, and its stats lines count no bad
#     message: every batch had the run's action shape and every action was inside the
#     bounds (the replay refuses anything else);
#   - SIGTERM stops the actors (exit 0; their last line: batches acked, where any were due) and the replay
#     (exit 0; "0 bad messages");
#   - the same with InvertedPendulum-v4 on tests/fixtures/mujoco/diverge.xml (every step
#     with a nonzero action diverges): the actor keeps running, counts and logs its void
#     steps, and sends nothing the replay refuses.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.name=dpg --set replay.stats_interval_ms=200
      --set replay.capacity=20000 --set actor.max_steps_per_s=200 --set actor.stats_interval_ms=200)

# exited PID: the process is gone or a zombie.
exited() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# stop PID: SIGTERM, wait (30 s at most, then SIGKILL); exit status in RC.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  wait_for 30 exited "$1" || { echo "  .... pid $1 ignored SIGTERM for 30 s: killed"; kill -9 "$1" 2>/dev/null || true; }
  RC=0; wait "$1" 2>/dev/null || RC=$?
}
# size_ge LOG N: the replay's last stats line in LOG shows at least N transitions held.
size_ge() {
  local n
  n=$(sed -n 's/.* size \([0-9]*\)\/[0-9]*  inserts.*/\1/p' "$1" | tail -1)
  [ -n "$n" ] && [ "$n" -ge "$2" ]
}
# no_bad LOG: every replay stats line in LOG counts 0 bad messages (and there is one).
no_bad() { grep -q ' size ' "$1" && ! grep ' size ' "$1" | grep -vq '  bad 0  '; }

# run_case NAME N_ACTORS WANT_SIZE SETS...: replay + actors; checks as above.
run_case() {
  local name=$1 n=$2 want=$3; shift 3
  local cfg=(-c configs/pendulum.ini "${SETS[@]}" --set actor.num_actors="$n" "$@")
  "$APEX_BIN/apex-replay" "${cfg[@]}" 2>"$TMP/$name.replay.log" &
  local rp=$!
  PIDS+=("$rp")
  local aps=() i
  for ((i = 0; i < n; i++)); do
    "$APEX_BIN/apex-actor" "${cfg[@]}" --index "$i" 2>"$TMP/$name.actor$i.log" &
    aps+=($!)
    PIDS+=($!)
  done
  if wait_for 60 size_ge "$TMP/$name.replay.log" "$want"; then
    ok "$name: the replay holds >= $want continuous transitions"
  else
    bad "$name: replay size stayed below $want: $(grep ' size ' "$TMP/$name.replay.log" | tail -1)"
  fi
  no_bad "$TMP/$name.replay.log" && ok "$name: the replay refused no batch" \
    || bad "$name: bad messages: $(grep ' size ' "$TMP/$name.replay.log" | grep -v '  bad 0  ' | head -1)"
  for ((i = 0; i < n; i++)); do
    grep -q "Gaussian noise sigmas" "$TMP/$name.actor$i.log" && ok "$name: actor $i explores with Gaussian noise" \
      || bad "$name: actor $i: $(head -3 "$TMP/$name.actor$i.log")"
  done
  CASE_ACTOR0="$TMP/$name.actor0.log"
  for ((i = 0; i < n; i++)); do
    stop "${aps[$i]}"
    [ "$RC" = 0 ] && { [ "$want" = 0 ] || grep -q "stopping after .* batches sent, [1-9][0-9]* acked" "$TMP/$name.actor$i.log"; } \
      && ok "$name: actor $i stopped on SIGTERM$( [ "$want" = 0 ] || echo ' with acked batches')" \
      || bad "$name: actor $i exit $RC: $(tail -2 "$TMP/$name.actor$i.log")"
  done
  stop "$rp"
  [ "$RC" = 0 ] && grep -q "stopping: .* 0 bad messages" "$TMP/$name.replay.log" \
    && ok "$name: the replay stopped with 0 bad messages" \
    || bad "$name: replay exit $RC: $(tail -2 "$TMP/$name.replay.log")"
}

run_case pendulum 2 2000

# MuJoCo with a model that diverges on any nonzero action: almost every step is void.
# Env 1..3's noise (sigma 0.5^34 and less of a half range) stays below what diverges
# once the policy's output is ~0, but the initial random policy's is not: only void steps
# and a few lucky ones. The actor must keep stepping, count them and send nothing bad.
run_case diverge 1 0 --set env.id=InvertedPendulum-v4 --set env.model_xml=tests/fixtures/mujoco/diverge.xml \
  --set actor.envs_per_actor=4 --set actor.noise_sigma=0.5 --set actor.noise_alpha=100
grep -q "void steps (a diverging simulation" "$CASE_ACTOR0" && ok "diverge: the actor logs its void steps" \
  || bad "diverge: no void-step line: $(tail -3 "$CASE_ACTOR0")"
grep -q "steps [0-9]*  episodes [0-9]*  void [1-9]" "$CASE_ACTOR0" && ok "diverge: its status line counts them" \
  || echo "  .... (no status line within its 10 s period)"
finish
