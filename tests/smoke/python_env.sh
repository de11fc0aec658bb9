#!/usr/bin/env bash
# [env] id = python through the real binaries (configs/python-cartpole.ini: the CartPole of
# python/apex_cartpole.py stepped by apex-actor's env workers). Checks:
#   - a worker whose spaces do not fit the run is refused at start-up (exit 2) with one
#     message naming both sides (obs_dim, n_actions, obs_dtype);
#   - every [env]/[python] key of the bridge changes what the actor does: make, kwargs,
#     workers, groups, transport, interpreter, script, hello_timeout_ms, step_timeout_ms (a
#     hung worker is restarted), spawn = false with a fixed bind (a worker started by hand);
#   - faults through the cluster (apex-local: replay, learner, actor): an env that raises
#     every 50 steps is logged with its message, its episodes are dropped and counted in
#     metrics.csv (env_faults, episodes_dropped) while training goes on; a worker killed with
#     SIGKILL is restarted; an actor killed with SIGKILL takes its workers with it and the
#     launcher's restart starts new ones; after the launcher's stop no worker is left.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
PYC=configs/python-cartpole.ini
RUNS="$TMP/runs"
# No eval_id: the checks below change the spaces (the eval_id check is its own).
BASE=(--set run.out_dir="$RUNS" --set actor.max_steps_per_s=200 --set actor.ack_timeout_ms=100000
      --set env.eval_id=)

# gone PID: the process has ended (or is a zombie).
gone() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
# workers LOG: the pids of the workers an actor's log says it started.
workers() { { grep -o "worker [0-9]*: started pid [0-9]*" "$1" || true; } | awk '{print $5}'; }
# started_ge LOG N: that actor has started at least N workers.
started_ge() { [ "$(workers "$1" | wc -l)" -ge "$2" ]; }
# all_gone LOG: every worker that actor started has ended.
all_gone() { local p; for p in $(workers "$1"); do gone "$p" || return 1; done; }
# actor NAME SETS...: apex-actor 0 in the background, logging to $TMP/NAME.log (pid in APID).
actor() {
  local name=$1; shift
  "$APEX_BIN/apex-actor" -c "$PYC" --index 0 $(endpoint_sets) "${BASE[@]}" "$@" >"$TMP/$name.log" 2>&1 &
  APID=$!; PIDS+=("$APID")
}
# stop_actor NAME: SIGTERM, its exit status in RC, and a check that its workers are gone.
stop_actor() {
  kill -TERM "$APID" 2>/dev/null || true
  RC=0; wait "$APID" || RC=$?
  [ "$RC" = 0 ] && ok "$1: exit 0 on SIGTERM" || { bad "$1: exit $RC"; tail -3 "$TMP/$1.log" | sed 's/^/       /'; }
  wait_for 10 all_gone "$TMP/$1.log" && ok "$1: no worker left" || bad "$1: workers left: $(workers "$TMP/$1.log")"
}
# refused [--keys KEYS] NAME MESSAGE SETS...: apex-actor exits 2 at start-up and logs MESSAGE
# (fixed text); with --keys, that is the check of those keys (key_ok).
refused() {
  local keys=""
  if [ "$1" = --keys ]; then keys=$2; shift 2; fi
  local name=$1 msg=$2; shift 2
  local rc=0
  "$APEX_BIN/apex-actor" -c "$PYC" --index 0 $(endpoint_sets) "${BASE[@]}" "$@" >"$TMP/$name.log" 2>&1 || rc=$?
  if [ "$rc" = 2 ] && grep -qF -- "$msg" "$TMP/$name.log"; then
    key_ok "$keys" "$name: refused (exit 2): $(grep -oF -- "$msg" "$TMP/$name.log" | head -1 | cut -c1-110)"
  else
    bad "$name: exit $rc, want 2 and '$msg'"; tail -3 "$TMP/$name.log" | sed 's/^/       /'
  fi
  wait_for 10 all_gone "$TMP/$name.log" || bad "$name: workers left"
}

# --- the spaces, checked against the workers' HELLO -------------------------------------
refused obs_dim "does not fit this run: it has float32 observations of shape (4,) (4 elements) and 2 discrete actions; the run expects 5 float32 elements per observation ([env] obs_dim, obs_dtype) and 2 actions ([env] n_actions)" \
  --set env.obs_dim=5
refused n_actions "and 2 discrete actions; the run expects 4 float32 elements per observation ([env] obs_dim, obs_dtype) and 3 actions ([env] n_actions)" \
  --set env.n_actions=3
refused obs_dtype "it has float32 observations of shape (4,) (4 elements) and 2 discrete actions; the run expects 4 uint8 elements" \
  --set env.obs_dtype=uint8

# --- every key of the bridge does something -----------------------------------------------
actor defaults
wait_for 60 grep -q "actor 0: 8 x python (apex_cartpole:CartPoleEnv) (in overlapped groups)" "$TMP/defaults.log" \
  && grep -q "python env bridge at local (pipes and shared memory): 1 worker x 8 envs (float32 (4,), 2 actions), 2 groups of 4" "$TMP/defaults.log" \
  && ok "defaults: 1 worker, 2 groups of 4, the local transport" || bad "defaults: $(grep -m1 'bridge at' "$TMP/defaults.log")"
stop_actor defaults
# key: python.workers
# key: python.groups
# key: python.transport
actor shape --set python.workers=2 --set python.groups=1 --set python.transport=zmq
wait_for 60 grep -q "python env bridge at tcp://127.0.0.1:[0-9]*: 2 workers x 4 envs (float32 (4,), 2 actions), 1 group of 8" "$TMP/shape.log" \
  && [ "$(workers "$TMP/shape.log" | wc -l)" = 2 ] && key_ok python.workers,python.groups,python.transport "workers = 2, groups = 1, transport = zmq: two processes over ZeroMQ, lock step" \
  || bad "workers/groups/transport: $(grep -m1 'bridge at' "$TMP/shape.log")"
stop_actor shape
# kwargs reach the factory: an argument it does not take stops the worker.
# key: env.kwargs
refused kwargs "python env worker 0: its pipe was closed: the process ended" --set 'env.kwargs={"no_such_arg": 1}'
grep -q "unexpected keyword argument 'no_such_arg'" "$TMP/kwargs.log" && key_ok env.kwargs "kwargs: the factory's TypeError is in the log" \
  || bad "kwargs: no TypeError in the log"
# key: env.make
refused make "python env worker 0: its pipe was closed: the process ended" --set env.make=no_such_module:Env
grep -q "No module named 'no_such_module'" "$TMP/make.log" && key_ok env.make "make: the worker's own error is in the log" || bad "make: no ModuleNotFoundError in the log"
# key: python.interpreter
refused --keys python.interpreter interpreter "the interpreter /nonexistent/python3" --set python.interpreter=/nonexistent/python3
# key: python.script
refused --keys python.script script "the worker script $TMP/none.py" --set python.script="$TMP/none.py"
# hello_timeout with its own kwargs: the config's max_episode_steps would make the factory
# raise at once, and the check then passed only where the interpreter took over 300 ms to start.
# key: python.hello_timeout_ms
refused --keys python.hello_timeout_ms hello_timeout "workers 0 (starting) not ready after 300 ms" --set python.hello_timeout_ms=300 \
  --set env.make=tests/pyenv_faults.py:slow_cartpole --set 'env.kwargs={"seconds": 60}'
# key: env.eval_id
refused --keys env.eval_id eval_id "[env] eval_id: Acrobot-v1 has 6 float32 observation elements and 3 actions" --set env.eval_id=Acrobot-v1
# step_timeout_ms: a worker that hangs (once) is restarted after it; the other keeps going.
# key: python.step_timeout_ms
actor hang --set python.step_timeout_ms=700 --set env.make=tests/pyenv_faults.py:counter --set env.n_actions=3 \
  --set python.workers=2 --set "env.kwargs={\"faults\": {\"0.1\": \"hang\"}, \"once_file\": \"$TMP/hung\"}"
wait_for 60 grep -q "worker 0 (.*): no reply within [0-9]* ms; the episodes of its 4 envs are dropped, restarting it" "$TMP/hang.log" \
  && key_ok python.step_timeout_ms "step_timeout_ms: $(grep -o "no reply within [0-9]* ms" "$TMP/hang.log" | head -1), restarted" || bad "hang: $(tail -2 "$TMP/hang.log")"
wait_for 60 started_ge "$TMP/hang.log" 3 && ok "the hung worker was replaced by a new process" || bad "no new worker"
stop_actor hang
# spawn = false, transport zmq, a fixed bind: the actor waits for a worker started by hand.
port=$(free_port)
# key: python.spawn
# key: python.bind
actor byhand --set python.spawn=false --set python.transport=zmq --set python.bind=tcp://127.0.0.1:$port
"$PY" python/apex_env.py --connect tcp://127.0.0.1:$port --worker-id 0 --make apex_cartpole:CartPoleEnv \
  --num-envs 8 >"$TMP/byhand_worker.log" 2>&1 &
WPID=$!; PIDS+=("$WPID")
wait_for 60 grep -q "actor 0: 8 x python" "$TMP/byhand.log" \
  && grep -q "python env bridge at tcp://127.0.0.1:$port: 1 worker x 8 envs" "$TMP/byhand.log" \
  && key_ok python.bind "spawn = false: a worker started by hand at bind tcp://127.0.0.1:$port" || bad "by hand: $(tail -2 "$TMP/byhand.log")"
[ -z "$(workers "$TMP/byhand.log")" ] && key_ok python.spawn "spawn = false: the actor started no worker" || bad "spawn = false started workers"
stop_actor byhand
kill -TERM "$WPID" 2>/dev/null || true; wait "$WPID" 2>/dev/null || true

# --- faults through the cluster ----------------------------------------------------------
RUN="$RUNS/pyfaults"
scripts/apex-local "$PYC" --bin "$APEX_BIN" --quiet --no-eval --actors 1 --restart on-failure $(endpoint_sets) "${BASE[@]}" \
  --set run.name=pyfaults --set run.max_seconds=0 --set learner.metrics_interval_ms=200 \
  --set env.make=tests/pyenv_faults.py:faulty_cartpole --set 'env.kwargs={"every": 50}' \
  --set actor.stats_interval_ms=200 >"$TMP/launcher.out" 2>&1 &
LPID=$!; PIDS+=("$LPID")
wait_for 90 gt env_faults 20 && ok "metrics.csv env_faults $(col env_faults), episodes_dropped $(col episodes_dropped)" \
  || { bad "no env faults in metrics.csv ('$(col env_faults)')"; tail -5 "$TMP/launcher.out"; }
gt episodes_dropped 0 && ok "episodes dropped are counted" || bad "episodes_dropped '$(col episodes_dropped)'"
grep -q "step raised RuntimeError: injected fault at step 50 of this env; its episode is dropped" "$RUN/actor0.log" \
  && ok "actor log: the env's own message" || bad "actor log: $(grep -m1 'faults in all' "$RUN/actor0.log")"
f0=$(col env_frames); u0=$(col updates)
wait_for 60 gt env_frames "$((f0 + 2000))" && wait_for 60 gt updates "$((u0 + 20))" \
  && ok "the actor keeps stepping and the learner training ($f0 -> $(col env_frames) frames)" || bad "stalled at $(col env_frames) frames"
gt episodes 10 && ok "episodes still finish ($(col episodes)), return(100) $(col mean_return_100)" || bad "episodes '$(col episodes)'"
w0=$(workers "$RUN/actor0.log" | tail -1)
kill -KILL "$w0"
wait_for 60 started_ge "$RUN/actor0.log" 2 && ok "a SIGKILLed worker (pid $w0) is restarted" || bad "no restart after SIGKILL"
f1=$(col env_frames)
wait_for 60 gt env_frames "$((f1 + 2000))" && ok "frames go on after the restart" || bad "stalled after the restart"
# The launcher's restart path: the actor SIGKILLed, its workers die with it (PDEATHSIG),
# and the restarted actor starts its own.
apid=$(sed -n 's/.*actor0\[\([0-9]*\)\].*/\1/p' "$TMP/launcher.out" | head -1)
old=$(workers "$RUN/actor0.log")
nold=$(echo "$old" | wc -l)
kill -KILL "$apid"
all_old_gone() { local p; for p in $old; do gone "$p" || return 1; done; }
wait_for 30 all_old_gone && ok "the SIGKILLed actor's workers died with it" || bad "workers outlived their actor: $old"
wait_for 60 grep -q "actor0 restarted" "$TMP/launcher.out" && wait_for 60 started_ge "$RUN/actor0.log" "$((nold + 1))" \
  && ok "the restarted actor started its own worker" || bad "no restart: $(tail -2 "$TMP/launcher.out")"
f2=$(col env_frames)
wait_for 60 gt env_frames "$((f2 + 2000))" && ok "frames go on after the actor's restart" || bad "stalled after the actor's restart"
kill -TERM "$LPID"; rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "launcher and daemons exit 0" || { bad "launcher exit $rc"; tail -5 "$TMP/launcher.out"; }
wait_for 10 all_gone "$RUN/actor0.log" && ok "no worker left after the launcher's stop" || bad "workers left: $(workers "$RUN/actor0.log")"
! grep -l "runtime error\|AddressSanitizer" "$TMP"/*.log "$RUN"/*.log 2>/dev/null && ok "no sanitizer report in any log" \
  || bad "sanitizer reports in the logs above"
finish
