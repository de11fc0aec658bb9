#!/usr/bin/env bash
# smoke: slow
# apex-slurm against a real Slurm: Debian's slurm-wlm and munge, started here as a one-node
# cluster (scripts/slurm-test-cluster: slurmctld + slurmd, proctrack/linuxproc, task/none,
# no cgroups, no accounting), whose node has this machine's 2 CPUs for 6 steps (srun
# --overlap). Checks:
#   - --dry-run prints the batch script and changes nothing (also with --shards/--learners,
#     and --relays on 2 nodes: a relay step per node with actors, its actors asking it);
#   - job A (configs/cartpole.ini, --learners 2: a learner group; --relays: the actors ask
#     the node's apex-relay for weights, which logs the versions it took and served) solves: apex-slurm picks
#     the launch srun --mpi=list says (srun --mpi=pmix where Slurm has PMIx, as Debian's
#     does; mpirun otherwise); squeue -s and scontrol show its steps while it runs
#     (--min-seconds 10 keeps it running that long), the learner step with its 2 tasks
#     (scontrol listpids: apex-learner ranks 0 and 1, PMIX_RANK, each logging "rank r of a
#     learner group of 2"), the evaluator (apex-eval --follow at nice 10, --eval-episodes as
#     [eval] episodes); eval.csv gains rows; the watcher stops the job on an eval.csv row
#     that reached target_return; the steps stop in order (actors and the evaluator, the
#     learner with rank 0's final checkpoint, replay): both ranks stop at one update, whose
#     optimizer shards are on disk; best.bin is evaluated once more at the end; the job ends
#     COMPLETED with exit 0 and leaves no process (apex, mpirun, orted, prted) behind;
#   - job B (never solves, --no-eval: no evaluator step): an actor and the learner killed
#     with SIGKILL come back as new steps (the learner resumes from its checkpoint); then
#     `scancel` stops every step and leaves no apex process, and what it leaves on disk is
#     recoverable: the checkpoint loads (srun may SIGKILL a daemon in its orderly shutdown,
#     so how many stopped in order is printed, not asserted);
#   - job C (CurveZMQ, keys in a shared directory; --learners 2 --learner-launch mpirun, the
#     fallback: mpirun in one step of 1 task, the ranks its children): the evaluator follows
#     the weights with the actors' key pair; `scancel --batch --signal=USR1` stops it in
#     order (the ranks get the SIGTERM, not mpirun: both write the final checkpoint),
#     COMPLETED, no process left.
#   - then jobs D1 and D2 (--deterministic, the same seed): bit-identical checkpoint payloads,
#     metrics rows and evaluations; each ends at the learner's budget, not at target_return;
# The cluster is stopped at the end, also when the test fails. Needs root; without Slurm it
# is skipped (failed under CI: .ci/run installs it with APEX_SLURM_DEPS=1).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

[ "$(id -u)" = 0 ] || skip "needs root (slurmd)"
export PATH=$PATH:/usr/sbin:/sbin # slurmctld, slurmd, munged
command -v slurmctld >/dev/null && command -v munged >/dev/null ||
  skip "Slurm not installed (APEX_SLURM_DEPS=1 scripts/install-deps.sh)"

export APEX_SLURM_DIR="$TMP/slurm"
export APEX_SLURM_PORT APEX_SLURMD_PORT
APEX_SLURM_PORT=$(free_port)
APEX_SLURMD_PORT=$(free_port)
slurm_cleanup() {
  set +e
  [ -n "${APEX_SMOKE_KEEP:-}" ] && mkdir -p "$APEX_SMOKE_KEEP" && cp -r "$TMP/runs" "$APEX_SMOKE_KEEP/" 2>/dev/null
  scripts/slurm-test-cluster stop
  cleanup
}
trap slurm_cleanup EXIT
trap 'exit 130' INT TERM HUP

T0=$(date +%s)
scripts/slurm-test-cluster start && ok "one-node test cluster up in $(($(date +%s) - T0)) s: $(scripts/slurm-test-cluster exec sinfo -h -N -o '%N %c CPUs %t')" ||
  { bad "the test cluster did not start"; finish; exit 1; }
eval "$(scripts/slurm-test-cluster env)"

RUNS="$TMP/runs"
# run_sets NAME: a run directory under $RUNS and fresh ports for its endpoints.
run_sets() {
  echo "--set run.out_dir=$RUNS --set run.name=$1" \
       "--set endpoints.replay_insert_bind=tcp://127.0.0.1:$(free_port)" \
       "--set endpoints.replay_sample_bind=tcp://127.0.0.1:$(free_port)" \
       "--set endpoints.learner_weights_bind=tcp://127.0.0.1:$(free_port)" \
       "--set endpoints.learner_stats_bind=tcp://127.0.0.1:$(free_port)"
}
# submit NAME ARGS...: apex-slurm; sets JOB to the job id.
submit() {
  local name=$1; shift
  scripts/apex-slurm configs/cartpole.ini --bin "$APEX_BIN" $(run_sets "$name") "$@" >"$TMP/submit-$name.out" 2>&1 || {
    bad "apex-slurm $name: $(cat "$TMP/submit-$name.out")"; return 1; }
  JOB=$(sed -n 's/^apex-slurm: submitted job \([0-9]*\).*/\1/p' "$TMP/submit-$name.out")
  [ -n "$JOB" ]
}
steps() { squeue -h -s -j "$1" -o '%j' 2>/dev/null | sort | tr '\n' ' '; }
has_steps() { [ "$(steps "$1")" = "$2" ]; }
# step_id JOB NAME: the id of the newest step NAME (a step being replaced may still be listed).
step_id() { squeue -h -s -j "$1" -o '%i %j' | awk -v n="$2" '$2 == n { print $1 }' | sort -t. -k2 -n | tail -n 1; }
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
job_exit() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*ExitCode=\([0-9:]*\).*/\1/p'; }
job_ended() { [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ] && [ -n "$(job_state "$1")" ]; }
# apex_procs DIR: the apex processes of the run in DIR (none once a job has stopped).
apex_procs() { pgrep -af "apex-(replay|learner|actor|eval) -c $1/" || true; }
# job_procs JOB: every process of job JOB of this cluster (apex daemons, srun, mpirun,
# orted, prted...), by the SLURM_JOB_ID and SLURM_CONF in its environment.
job_procs() {
  local e p
  for e in /proc/[0-9]*/environ; do
    p=${e#/proc/}; p=${p%/environ}
    grep -qzx "SLURM_JOB_ID=$1" "$e" 2>/dev/null && grep -qzxF "SLURM_CONF=$SLURM_CONF" "$e" 2>/dev/null &&
      echo "$p $(tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | cut -c1-100)"
  done
  return 0
}
no_job_procs() { [ -z "$(job_procs "$1")" ]; }
# group_ranks STEP: "PID:RANK" of each apex-learner process of step STEP, by scontrol
# listpids (on this, the only node) and the rank its launcher gave it (PMIX_RANK, which
# srun --mpi=pmix and mpirun both set), sorted by rank.
group_ranks() {
  local p r
  for p in $(scontrol listpids "$1" 2>/dev/null | awk 'NR > 1 { print $1 }'); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = apex-learner ] || continue
    r=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^PMIX_RANK=//p')
    echo "$p:$r"
  done | sort -t: -k2 -n | tr '\n' ' '
}
two_ranks() { [ "$(group_ranks "$1" | grep -o ':[0-9]*' | tr -d ':\n')" = 01 ]; }
step_tasks() { scontrol show step "$1" 2>/dev/null | sed -n 's/.* Tasks=\([0-9]*\) .*/\1/p'; }
# check_group RUN STEP: the learner step STEP runs ranks 0 and 1 (scontrol listpids), and
# each logged its rank in RUN/learner.log under its own pid.
check_group() {
  local r p0 p1
  if wait_for 60 two_ranks "$2"; then
    r=$(group_ranks "$2"); p0=${r%%:*}; p1=${r#* }; p1=${p1%%:*}
    wait_for 30 grep -q "apex-learner\[$p0\] I learner: rank 0 of a learner group of 2" "$1/learner.log" &&
      wait_for 30 grep -q "apex-learner.1\[$p1\] I learner: rank 1 of a learner group of 2" "$1/learner.log" &&
      ok "both ranks run in step $2 (scontrol listpids, pid:PMIX_RANK): ${r% }; each logs 'rank r of a learner group of 2' under its pid" ||
      bad "learner ranks $r: no 'rank r of a learner group of 2' lines under their pids: $(grep 'learner group' "$1/learner.log" | head -2)"
  else
    bad "the learner step $2 does not run ranks 0 and 1: '$(group_ranks "$2")'; $(scontrol listpids "$2" 2>&1 | tr '\n' ' ')"
  fi
}
# group_stop RUN: both ranks stopped at one update with the final checkpoint (rank 0 wrote
# checkpoint.bin), and that update's optimizer shards are on disk.
group_stop() {
  local u
  u=$(sed -n 's/.*apex-learner\[[0-9]*\] I learner: stopped at update \([0-9]*\) (final checkpoint written).*/\1/p' "$1/learner.log" | tail -n 1)
  [ -n "$u" ] && grep -q "apex-learner.1\[[0-9]*\] I learner: stopped at update $u (final checkpoint written)" "$1/learner.log" &&
    [ -s "$1/checkpoint.bin.s$u.opt0of2" ] && [ -s "$1/checkpoint.bin.s$u.opt1of2" ] &&
    echo "$u"
}
ALL_STEPS="actor0 actor1 batch eval learner replay "
A_STEPS="actor0 actor1 batch eval learner relay0 replay " # job A runs with --relays
NOEVAL_STEPS="actor0 actor1 batch learner replay "
# eval_rows DIR: data rows in DIR/eval.csv (0 while it is missing); eval_rows_ge DIR N.
eval_rows() { local n; n=$(wc -l <"$1/eval.csv" 2>/dev/null || echo 1); echo $((n > 0 ? n - 1 : 0)); }
eval_rows_ge() { [ "$(eval_rows "$1")" -ge "$2" ]; }

# --- --dry-run -------------------------------------------------------------------------
scripts/apex-slurm configs/cartpole.ini --bin "$APEX_BIN" $(run_sets dry) --nodes 2 --dry-run >"$TMP/dry.sbatch" 2>"$TMP/dry.err"
if grep -q '^#SBATCH --nodes=2$' "$TMP/dry.sbatch" && grep -q '^step replay 0 .*apex-replay' "$TMP/dry.sbatch" &&
  grep -q '^step actor0 1 .*apex-actor.* --index 0' "$TMP/dry.sbatch" && grep -q '^step eval 0 .*-- nice -n 10 .*apex-eval.* --follow' "$TMP/dry.sbatch" &&
  [ ! -e "$RUNS/dry" ] && bash -n "$TMP/dry.sbatch"; then
  ok "--dry-run prints the batch script ($(wc -l <"$TMP/dry.sbatch") lines, bash -n clean; actor0 on node 1 of 2, the evaluator on node 0 at nice 10) and writes nothing"
else
  bad "--dry-run: $(head -3 "$TMP/dry.err") $(grep -c . "$TMP/dry.sbatch") lines"
fi
# --relays on 2 nodes: one relay step per node that runs actors, each node's actors given its socket.
scripts/apex-slurm configs/cartpole.ini --bin "$APEX_BIN" $(run_sets dry) --nodes 2 --actors 3 --relays --dry-run >"$TMP/dry3.sbatch" 2>"$TMP/dry3.err" || true
if grep -q '^step relay0 0 .*apex-relay.*relay0.sock' "$TMP/dry3.sbatch" && grep -q '^step relay1 1 .*apex-relay.*relay1.sock' "$TMP/dry3.sbatch" &&
  grep -q '^step actor0 1 .*apex-actor.*relay1.sock.* --index 0' "$TMP/dry3.sbatch" && grep -q '^step actor1 0 .*apex-actor.*relay0.sock.* --index 1' "$TMP/dry3.sbatch" && bash -n "$TMP/dry3.sbatch"; then
  ok "--relays --nodes 2: steps relay0 (node 0) and relay1 (node 1), each node's actors ask their node's relay"
else
  bad "--relays --dry-run: $(head -3 "$TMP/dry3.err")"
fi
# --shards and --learners: the lines are generated (a sharded job is not run here).
scripts/apex-slurm configs/cartpole.ini --bin "$APEX_BIN" $(run_sets dry) --shards 2 --learners 2 --learner-launch pmix --dry-run >"$TMP/dry2.sbatch" 2>"$TMP/dry2.err" || true
if grep -q '^step replay1 0 .*--shard 1' "$TMP/dry2.sbatch" && grep -q '^step learner 0 --ntasks=2 --mpi=pmix' "$TMP/dry2.sbatch" &&
  grep -q 'replay_insert=tcp://${ADDR\[0\]}:[0-9]*,tcp://${ADDR\[0\]}:' "$TMP/dry2.sbatch"; then
  ok "--shards 2 --learners 2: steps replay0/replay1 (--shard k), one 2-rank learner step (srun --mpi=pmix), lists of shard endpoints"
else
  bad "--shards 2 --learners 2 --dry-run: $(head -3 "$TMP/dry2.err")"
fi

# --- job A: a learner group solves ----------------------------------------------------
# The launch apex-slurm picks: srun --mpi=pmix where Slurm lists PMIx (Debian's 22.05 does).
if srun --mpi=list 2>&1 | grep -q '^[[:space:]]*pmix'; then WANT_LAUNCH="srun --mpi=pmix"; else WANT_LAUNCH=mpirun; fi
T_A=$(date +%s)
submit a --set run.target_return=195 --set run.max_seconds=300 --min-seconds 10 --eval-episodes 50 --learners 2 --relays &&
  ok "job A submitted: $JOB: $(grep -o 'learner ([^)]*)' "$TMP/submit-a.out")"
A=$JOB
RUN_A="$RUNS/a"
grep -q "learner (2 ranks, $WANT_LAUNCH)" "$TMP/submit-a.out" &&
  ok "--learners 2 takes $WANT_LAUNCH, as srun --mpi=list says: $(srun --mpi=list 2>&1 | sed -n 's/^[[:space:]]*//p' | tr '\n' ' ')" ||
  bad "--learners 2: want $WANT_LAUNCH: $(cat "$TMP/submit-a.out")"
wait_for 60 has_steps "$A" "$A_STEPS" && ok "squeue -s shows job A's steps: $(steps "$A")" ||
  bad "job A's steps: '$(steps "$A")' (state $(job_state "$A"))"
scontrol show job "$A" | grep -q "JobState=RUNNING" && ok "scontrol show job: RUNNING on $(scontrol show job "$A" | sed -n 's/^ *NodeList=//p')" || bad "scontrol: $(job_state "$A")"
LSTEP=$(step_id "$A" learner)
WANT_TASKS=2; [ "$WANT_LAUNCH" = mpirun ] && WANT_TASKS=1 # (mpirun is the step's one task)
scontrol show step "$LSTEP" 2>/dev/null | tr '\n' ' ' | grep -q "StepId=$LSTEP .*State=RUNNING" && [ "$(step_tasks "$LSTEP")" = "$WANT_TASKS" ] &&
  ok "scontrol show step $LSTEP: the learner, RUNNING, Tasks=$(step_tasks "$LSTEP")" || bad "scontrol show step $LSTEP: $(scontrol show step "$LSTEP" 2>&1 | head -3 | tr '\n' ' ')"
check_group "$RUN_A" "$LSTEP"
ESTEP=$(step_id "$A" eval)
scontrol show step "$ESTEP" 2>/dev/null | tr '\n' ' ' | grep -q "StepId=$ESTEP .*State=RUNNING" && ok "scontrol show step $ESTEP: the evaluator, RUNNING" || bad "scontrol show step '$ESTEP': $(scontrol show step "$ESTEP" 2>&1 | head -2)"
# (The daemon itself, once srun has started it: srun's command line names apex-eval too.)
eval_pid() { pgrep -f "^$APEX_BIN/apex-eval -c $RUN_A/config.ini .*--follow"; }
wait_for 30 eval_pid || true
epid=$(eval_pid || true)
[ -n "$epid" ] && [ "$(ps -o ni= -p "$epid" | tr -d ' ')" = 10 ] && ok "the evaluator (pid $epid) runs at nice 10" || bad "evaluator pid '$epid', nice '$(ps -o ni= -p "${epid:-1}" 2>/dev/null)'"
wait_for 120 eval_rows_ge "$RUN_A" 2 && ok "eval.csv gains rows as job A runs ($(eval_rows "$RUN_A") so far)" || bad "eval.csv of job A: $(eval_rows "$RUN_A") rows"
wait_for 300 job_ended "$A" || bad "job A did not end within 300 s"
if grep -q "apex-slurm: solved: greedy mean return" "$RUN_A/slurm-$A.out"; then
  ok "job A solved CartPole in $(($(date +%s) - T_A)) s: $(grep -o 'solved: .*' "$RUN_A/slurm-$A.out")"
else
  bad "job A not solved: $(tail -5 "$RUN_A/slurm-$A.out")"
fi
# The stop was decided on a row of eval.csv (the evaluator's, 50 episodes) that reached the target.
"$PY" - "$RUN_A" "$A" <<'PY' && ok "the stop happened on an eval.csv row" || bad "the solved line matches no eval.csv row at >= 195"
import csv, re, sys
line = next((l for l in open(f"{sys.argv[1]}/slurm-{sys.argv[2]}.out") if "solved:" in l), "")
m = re.search(r"mean return (\S+) >= \S+ over (\d+) episodes \(v(\d+):(\d+), update (\d+)", line)
rows = list(csv.DictReader(open(f"{sys.argv[1]}/eval.csv")))
hit = m and [r for r in rows if (r["incarnation"], r["version"], r["updates"], r["episodes"]) == m.group(3, 4, 5, 2)
             and float(r["eval_mean"]) >= 195 and f"{float(r['eval_mean']):.1f}" == m.group(1)]
print(f"    eval.csv: {len(rows)} rows; the stop on v{m.group(3)}:{m.group(4)} (update {m.group(5)}), "
      f"mean {m.group(1)} over {m.group(2)} episodes" if hit else f"    {line.strip()}")
sys.exit(0 if hit else 1)
PY
grep -q "apex-slurm: all steps up after" "$RUN_A/slurm-$A.out" && grep -q "stopping the steps: actors and the evaluator, then the relays, then the learner" "$RUN_A/slurm-$A.out" &&
  ok "$(grep -o 'all steps up after [0-9.]* s' "$RUN_A/slurm-$A.out"); the evaluator stopped with the actors, the relay after them" || bad "no 'all steps up' / stop line in slurm-$A.out"
# --relays: the node's relay took the learner's versions and served both actors, which
# asked it (a Unix socket under /tmp named by the job) and not the learner.
grep -q "relaying the weights of tcp://.* to ipc:///tmp/apex-$A-relay0.sock" "$RUN_A/relay0.log" &&
  grep -q "relay: stopping: weights v[0-9]*:[1-9][0-9]*, [1-9][0-9]* versions taken, [1-9][0-9]* answers to the actors" "$RUN_A/relay0.log" &&
  grep -qF 'endpoints.relay=ipc:///tmp/apex-$SLURM_JOB_ID-relay0.sock' "$RUN_A/apex.sbatch" &&
  ok "--relays: $(grep -o 'stopping: .*' "$RUN_A/relay0.log")" || bad "relay0: $(tail -2 "$RUN_A/relay0.log" 2>&1)"
grep -q "apex-slurm: evaluation of the best checkpoint .*episodes 50 .*mean" "$RUN_A/slurm-$A.out" &&
  ok "best.bin evaluated at the end: $(grep -o 'episodes 50 .*mean [0-9.]*' "$RUN_A/slurm-$A.out")" || bad "no final evaluation of best.bin: $(tail -3 "$RUN_A/slurm-$A.out")"
[ "$(job_state "$A")" = COMPLETED ] && [ "$(job_exit "$A")" = 0:0 ] && ok "job A COMPLETED, exit 0:0" || bad "job A: $(job_state "$A") exit $(job_exit "$A")"
grep -q "final checkpoint written" "$RUN_A/learner.log" && grep -q "replay: stopping:" "$RUN_A/replay.log" &&
  grep -q "actor: stopping after" "$RUN_A/actor0.log" && grep -q "actor: stopping after" "$RUN_A/actor1.log" &&
  ok "every daemon of job A stopped in order (final checkpoint written)" || bad "job A's daemons did not all stop cleanly"
"$PY" - "$RUN_A" <<'PY' && ok "stop order: actors, then the learner, then the replay" || bad "stop order wrong"
import re, sys
def t(name, pat):
    for line in open(f"{sys.argv[1]}/{name}.log"):
        if re.search(pat, line):
            return line[:24]
    return "~"
a = max(t("actor0", "stopping after"), t("actor1", "stopping after"))
l, r = t("learner", r"apex-learner\[\d+\] I learner: stopped .*final checkpoint"), t("replay", "replay: stopping")
print(f"    actors {a}, learner (rank 0) {l}, replay {r}")
sys.exit(0 if a <= l <= r < "~" else 1)
PY
u=$(group_stop "$RUN_A") && ok "both ranks stopped at update $u with the final checkpoint: checkpoint.bin, checkpoint.bin.s$u.opt0of2, .opt1of2" ||
  bad "the group's stop: $(grep 'stopped at update' "$RUN_A/learner.log") shards $(cd "$RUN_A" && ls checkpoint.bin.s* 2>/dev/null | tr '\n' ' ')"
[ -s "$RUN_A/best.bin" ] && [ -s "$RUN_A/eval.csv" ] && ok "best.bin and eval.csv in the run directory" || bad "no best.bin/eval.csv"
[ -z "$(apex_procs "$RUN_A")" ] && wait_for 30 no_job_procs "$A" && ok "no apex process left after job A, nor any other of the job (mpirun, orted, prted)" ||
  bad "left: $(apex_procs "$RUN_A") $(job_procs "$A")"

# --- job B: restarts, then scancel -----------------------------------------------------
submit b --set run.target_return=100000 --set run.max_seconds=0 --no-eval && ok "job B submitted: $JOB"
B=$JOB
RUN_B="$RUNS/b"
wait_for 60 has_steps "$B" "$NOEVAL_STEPS" && ok "job B (--no-eval): no evaluator step: $(steps "$B")" || bad "job B's steps: '$(steps "$B")'"
# The learner is killed once it has trained and checkpointed: it must resume past update 0.
RUN=$RUN_B
wait_for 60 gt updates 300 || bad "job B: the learner did not train"
ck0=$(stat -c '%i %.9Y' "$RUN_B/checkpoint.bin" 2>/dev/null || echo none)
newer_ckpt() { [ "$(stat -c '%i %.9Y' "$RUN_B/checkpoint.bin" 2>/dev/null)" != "$ck0" ]; }
wait_for 30 newer_ckpt || bad "job B: no checkpoint after training started"
actor_step=$(step_id "$B" actor1)
apid=$(pgrep -f "apex-actor -c $RUN_B/config.ini .*--index 1" || true)
[ -n "$apid" ] && kill -9 $apid
restarted() { [ -n "$(step_id "$B" actor1)" ] && [ "$(step_id "$B" actor1)" != "$actor_step" ]; }
wait_for 60 restarted && grep -q "actor1 died (exit 137); restarting" "$RUN_B/slurm-$B.out" &&
  ok "actor1 killed (SIGKILL): restarted as step $(step_id "$B" actor1) (was $actor_step): $(grep -m1 'actor1 died' "$RUN_B/slurm-$B.out")" ||
  bad "actor1 not restarted: $(tail -3 "$RUN_B/slurm-$B.out")"
learner_step=$(step_id "$B" learner)
lpid=$(pgrep -f "apex-learner -c $RUN_B/config.ini" || true)
[ -n "$lpid" ] && kill -9 $lpid
lrestarted() { [ -n "$(step_id "$B" learner)" ] && [ "$(step_id "$B" learner)" != "$learner_step" ] && grep -q "resumed from .* at update [1-9]" "$RUN_B/learner.log"; }
wait_for 60 lrestarted && ok "learner killed: restarted as step $(step_id "$B" learner), $(grep -m1 -o 'resumed from.*' "$RUN_B/learner.log")" ||
  bad "learner not restarted/resumed: $(tail -3 "$RUN_B/slurm-$B.out")"
wait_for 30 has_steps "$B" "$NOEVAL_STEPS" || bad "job B's steps after the restarts: '$(steps "$B")'"
scancel "$B"
wait_for 90 job_ended "$B" && ok "scancel: job B ended ($(job_state "$B"), exit $(job_exit "$B"))" || bad "job B still listed after scancel: $(squeue -s -j "$B")"
[ "$(job_state "$B")" = CANCELLED ] || bad "job B state $(job_state "$B")"
wait_for 30 bash -c "! pgrep -f 'apex-(replay|learner|actor) -c $RUN_B/'" && ok "scancel left no apex process" || bad "left after scancel: $(apex_procs "$RUN_B")"
# Slurm sends every step SIGTERM; srun, which gets it too, SIGKILLs its step a moment later,
# so a daemon may be cut short in its orderly shutdown: how many were is information (it
# varies from run to run). What must hold whatever was cut short: the learner's checkpoint
# (written atomically) is intact and loads, so the next start resumes from it.
clean=0
for d in replay learner actor0 actor1; do
  tail -n 3 "$RUN_B/$d.log" | grep -q "stopping\|stopped at update" && clean=$((clean + 1))
done
echo "       after scancel, $clean of 4 daemons logged their orderly shutdown (information)"
expect_rc 0 "after scancel the checkpoint loads (apex-eval --checkpoint)" \
  "$APEX_BIN/apex-eval" -c "$RUN_B/config.ini" --checkpoint "$RUN_B/checkpoint.bin" --episodes 2
if [ -e "$RUN_B/checkpoint.bin.tmp" ]; then echo "       (a checkpoint.bin.tmp was left by a write cut short)"; fi

# --- job C: the orderly stop on request ------------------------------------------------
# ... with CurveZMQ: the keys in a directory every node sees (here, this machine's).
(cd "$TMP" && "$APEX_BIN/apex-keygen" keys >/dev/null)
# ... and a learner group under mpirun (the fallback where Slurm has no PMIx), in one step.
submit c --set run.target_return=100000 --set run.max_seconds=0 --learners 2 --learner-launch mpirun \
  --set security.mode=curve --set security.key_dir="$TMP/keys" --set security.authorized_keys="$TMP/keys/authorized_keys" &&
  ok "job C submitted (CURVE, keys in $TMP/keys; $(grep -o 'learner ([^)]*)' "$TMP/submit-c.out")): $JOB"
C=$JOB
RUN_C="$RUNS/c"
wait_for 60 has_steps "$C" "$ALL_STEPS" || bad "job C's steps: '$(steps "$C")'"
CSTEP=$(step_id "$C" learner)
mpirun_ranks() { [ "$(pgrep -P "$(pgrep -f "^mpirun -np 2 .*apex-learner -c $RUN_C/config.ini")" -x apex-learner | wc -l)" = 2 ]; }
[ "$(step_tasks "$CSTEP")" = 1 ] && wait_for 60 mpirun_ranks &&
  ok "job C's learner step $CSTEP: Tasks=1, mpirun with 2 apex-learner children" || bad "job C's learner step '$CSTEP': Tasks=$(step_tasks "$CSTEP"), mpirun's children: $(pgrep -af mpirun)"
check_group "$RUN_C" "$CSTEP"
wait_for 60 grep -q "training starts" "$RUN_C/learner.log" && grep -q "CURVE on" "$RUN_C/replay.log" &&
  ok "job C trains over CURVE: $(grep -m1 -o 'CURVE on: [^,]*' "$RUN_C/replay.log")" || bad "job C: the learner did not train over CURVE"
wait_for 120 eval_rows_ge "$RUN_C" 1 && ok "job C's evaluator follows the weights over CURVE (actor key pair): $(eval_rows "$RUN_C") evaluation(s)" ||
  bad "job C: no evaluation over CURVE: $(tail -3 "$RUN_C/eval.log")"
scancel --batch --signal=USR1 "$C" || bad "scancel --batch --signal=USR1 $C failed (job C state $(job_state "$C"))"
wait_for 90 job_ended "$C" || bad "job C did not end after SIGUSR1"
[ "$(job_state "$C")" = COMPLETED ] && [ "$(job_exit "$C")" = 0:0 ] && grep -q "stopping: asked to" "$RUN_C/slurm-$C.out" &&
  grep -q "final checkpoint written" "$RUN_C/learner.log" && grep -q "replay: stopping:" "$RUN_C/replay.log" &&
  ok "scancel --batch --signal=USR1: an orderly stop, COMPLETED 0:0, final checkpoint written" ||
  bad "job C: $(job_state "$C") $(job_exit "$C"): $(tail -3 "$RUN_C/slurm-$C.out")"
u=$(group_stop "$RUN_C") && ok "under mpirun too, both ranks stopped at update $u with the final checkpoint and its shards" ||
  bad "job C's group did not stop in order: $(grep 'stopped at update\|rank\|mpirun' "$RUN_C/learner.log" | tail -5)"
[ -z "$(apex_procs "$RUN_C")" ] && wait_for 30 no_job_procs "$C" && ok "no apex process left after job C, no mpirun or orted" ||
  bad "left: $(apex_procs "$RUN_C") $(job_procs "$C")"

# --- jobs D1 and D2: --deterministic, twice ---------------------------------------------
# The same config and seed give the same checkpoint payload (parameters, optimizer state,
# step), the same evaluations at the metrics rows' updates and the same learner and replay
# columns of metrics.csv; each job ends when the learner has trained its budget (not on
# target_return, which CartPole reaches before it), COMPLETED 0:0. (Slurm runs them one
# after the other: each asks for the whole node.)
DSETS=(--deterministic --eval-episodes 10 --set learner.max_steps=600 --set learner.metrics_every_updates=300
  --set run.max_seconds=300 --set run.target_return=10)
submit d1 "${DSETS[@]}" && D1=$JOB
submit d2 "${DSETS[@]}" && D2=$JOB
for j in "${D1:-x}" "${D2:-x}"; do
  wait_for 300 job_ended "$j" || bad "deterministic job $j did not end within 300 s"
done
for d in d1:"${D1:-x}" d2:"${D2:-x}"; do
  n=${d%%:*} j=${d#*:}
  [ "$(job_state "$j")" = COMPLETED ] && [ "$(job_exit "$j")" = 0:0 ] &&
    grep -q "watching .*: deterministic run, ends at \[learner\] max_steps" "$RUNS/$n/slurm-$j.out" &&
    grep -q "stopping: the learner trained its budget (\[learner\] max_steps = 600)" "$RUNS/$n/slurm-$j.out" &&
    ! grep -q "solved:" "$RUNS/$n/slurm-$j.out" &&
    ok "job $n ($j): --deterministic ends at the learner's budget, not at target_return 10: COMPLETED 0:0" ||
    bad "job $n ($j): $(job_state "$j") $(job_exit "$j"): $(tail -4 "$RUNS/$n/slurm-$j.out" 2>/dev/null)"
done
det_fingerprint() {
  "$PY" - "$RUNS/$1" <<'PY'
import csv, hashlib, os, sys
d = sys.argv[1]
out = ["checkpoint payload " + hashlib.sha256(open(os.path.join(d, "checkpoint.bin"), "rb").read()[240:]).hexdigest()]
cols = ["updates", "loss", "replay_size", "replay_inserted", "replay_sampled", "weights_version", "env_frames", "episodes"]
rows = list(csv.DictReader(open(os.path.join(d, "metrics.csv"))))
out.append("metrics: " + "; ".join(",".join(r[c] for c in cols) for r in rows))
ecols = ["updates", "version", "episodes", "eval_mean", "eval_std"]
out.append("eval: " + "; ".join(",".join(r[c] for c in ecols) for r in csv.DictReader(open(os.path.join(d, "eval.csv")))))
print("\n".join(out))
PY
}
fa=$(det_fingerprint d1 2>&1); fb=$(det_fingerprint d2 2>&1)
if [ "$fa" = "$fb" ] && [[ "$fa" == *"eval: 300,"*"; 600,"* ]]; then
  ok "jobs d1 and d2 identical: checkpoint payload, metrics rows, evaluations at updates 300 and 600 ($(echo "$fa" | head -1 | cut -c1-40)...)"
else
  bad "the deterministic jobs differ (or lack their evaluations)"
  diff <(echo "$fa") <(echo "$fb") | sed 's/^/       /'
  echo "$fa" | sed 's/^/       d1: /' | cut -c1-200
fi

if [ "$FAIL" -gt 0 ]; then
  for j in "$RUN_A/slurm-$A.out" "$RUN_B/slurm-${B:-x}.out" "$RUN_C/slurm-${C:-x}.out" \
    "$RUNS/d1/slurm-${D1:-x}.out" "$RUNS/d2/slurm-${D2:-x}.out"; do
    [ -f "$j" ] && { echo "--- $j"; tail -n 15 "$j"; }
  done
fi
echo "       slurm smoke test: $(($(date +%s) - T0)) s"
finish
