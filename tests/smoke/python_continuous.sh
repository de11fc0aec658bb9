#!/usr/bin/env bash
# Continuous actions through the Python env bridge (issue #28), with the real binaries:
# Gymnasium's Pendulum-v1 in numpy (tests/pyenv_pendulum.py, a Box(-2, 2, (1,)) action
# space) as [env] id = python on configs/pendulum.ini's DPG run. Checks:
#   - an env whose Box bounds differ from [env] action_low/high is refused at start-up
#     (exit 2) with one message naming both, and so is a Discrete env in a continuous run;
#   - apex-local (replay, DPG learner, one actor with its env worker, no evaluator): the
#     actor's bridge says "continuous actions of 1 float", the learner trains past 500
#     updates, episodes finish (200-step truncations), no env fault; on SIGTERM everything
#     exits 0, the replay refused no message (every action finite and in the bounds), and no
#     worker is left. About 5 s.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/pycont"
UPDATES=500
PYSETS=(--set env.id=python --set env.make=tests/pyenv_pendulum.py:pendulum --set env.obs_dim=3
        --set env.action_dim=1 --set env.action_low=-2 --set env.action_high=2 --set env.eval_id=
        --set python.interpreter="$PY")
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.name=pycont "${PYSETS[@]}")

# refused NAME MESSAGE SETS...: apex-actor exits 2 at start-up and logs MESSAGE.
refused() {
  local name=$1 msg=$2; shift 2
  local rc=0
  "$APEX_BIN/apex-actor" -c configs/pendulum.ini --index 0 "${SETS[@]}" "$@" >"$TMP/$name.log" 2>&1 || rc=$?
  if [ "$rc" = 2 ] && grep -qF -- "$msg" "$TMP/$name.log"; then
    ok "$name: refused (exit 2): $(grep -oF -- "$msg" "$TMP/$name.log" | head -1 | cut -c1-110)"
  else
    bad "$name: exit $rc, want 2 and '$msg'"; tail -3 "$TMP/$name.log" | sed 's/^/       /'
  fi
}
refused bounds "its action_space is a Box with low [-2] and high [2] (as float32); the run has [env] action_low = [-1] and action_high = [1]" \
  --set env.action_low=-1 --set env.action_high=1
refused discrete "and 3 discrete actions; the run expects 3 float32 elements per observation ([env] obs_dim, obs_dtype) and continuous actions of 1 float ([env] action_dim)" \
  --set env.make=tests/pyenv_pendulum.py:discrete_pendulum

scripts/apex-local configs/pendulum.ini --bin "$APEX_BIN" --quiet --no-eval --actors 1 "${SETS[@]}" \
  --set run.max_seconds=0 --set run.target_return=0 --set learner.metrics_interval_ms=200 \
  --set actor.stats_interval_ms=200 --set replay.stats_interval_ms=200 --set actor.max_steps_per_s=400 \
  >"$TMP/launcher.out" 2>&1 &
LPID=$!; PIDS+=("$LPID")
wait_for 60 grep -q "python env bridge at local (pipes and shared memory): 1 worker x 8 envs (float32 (3,), continuous actions of 1 float), 2 groups of 4" "$RUN/actor0.log" \
  && ok "the actor's bridge: 1 worker x 8 envs, continuous actions of 1 float" || bad "actor log: $(grep -m1 'bridge at' "$RUN/actor0.log")"
wait_for 60 gt updates $UPDATES && ok "the DPG learner trains: $(col updates) updates, $(col env_frames) frames" \
  || bad "updates '$(col updates)', frames '$(col env_frames)'"
wait_for 60 gt episodes 8 && ok "episodes finish (200-step truncations): $(col episodes), return(100) $(col mean_return_100)" \
  || bad "episodes '$(col episodes)'"
[ "$(col env_faults)" = 0 ] && ok "no env fault" || bad "env_faults '$(col env_faults)'"
kill -TERM "$LPID"; rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "launcher and daemons exit 0 on SIGTERM" || { bad "launcher exit $rc"; tail -5 "$TMP/launcher.out"; }
grep -q "stopping: .* 0 bad messages" "$RUN/replay.log" && ! grep ' size ' "$RUN/replay.log" | grep -vq '  bad 0  ' \
  && ok "the replay refused no message (every action finite and in the bounds)" || bad "replay: $(grep -m1 'bad [1-9]' "$RUN/replay.log")"
workers() { { grep -o "worker [0-9]*: started pid [0-9]*" "$1" || true; } | awk '{print $5}'; }
gone() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
all_gone() { local p; for p in $(workers "$1"); do gone "$p" || return 1; done; }
[ -n "$(workers "$RUN/actor0.log")" ] && wait_for 10 all_gone "$RUN/actor0.log" && ok "no worker left" \
  || bad "workers: '$(workers "$RUN/actor0.log")'"
! grep -l "runtime error\|AddressSanitizer" "$TMP"/*.log "$RUN"/*.log 2>/dev/null && ok "no sanitizer report in any log" \
  || bad "sanitizer reports in the logs above"
finish
