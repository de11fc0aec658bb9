#!/usr/bin/env bash
# smoke: slow
# A learner group learns: configs/cartpole.ini through scripts/apex-local with [learner]
# ranks = 2 (two ranks under mpirun, ZeRO stage 2; learner_group_stop.sh starts its group with
# --learners 2) with --restart on-failure. Once the group has written a
# checkpoint, one rank is killed with SIGKILL: the group dies with it (MPI's semantics),
# apex-local restarts the whole group, which resumes from the sharded checkpoint, and the
# run still solves CartPole after the restart: a greedy evaluation (100 episodes) of 475,
# Gymnasium's threshold. A functional check within a generous budget (LEARN_MAX_SECONDS,
# default 300), ~1-2 min.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# LeakSanitizer under make asan: OpenMPI's allocations (tests/lsan-mpi.supp, check_group.c).
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
RUNS="$TMP/runs"
RUN="$RUNS/cartpole"
rc=0
# key: learner.ranks
scripts/apex-local configs/cartpole.ini --bin "$APEX_BIN" --quiet --set learner.ranks=2 \
  --restart on-failure --min-seconds 20 $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.seed=1 --set run.target_return=475 \
  --set learner.zero_stage=2 --set learner.checkpoint_interval_s=2 \
  --set run.max_seconds="${LEARN_MAX_SECONDS:-300}" >"$TMP/launcher.out" 2>&1 &
LAUNCHER=$!
PIDS+=("$LAUNCHER")
# ranks: the children of the group's mpirun.
ranks() {
  local mp
  mp=$(pgrep -f "^mpirun -np 2 .*$RUN/config.ini" | head -1) || return 1
  cat "/proc/$mp/task/$mp/children" 2>/dev/null
}
# a periodic checkpoint (not the one of update 0 written at the start) is on disk.
shards() { ls "$RUN"/checkpoint.bin.s[1-9]*.opt1of2 >/dev/null 2>&1; }
trained() { gt updates 300; }
if wait_for 120 trained && wait_for 60 shards; then
  r=($(ranks))
  [ "${#r[@]}" = 2 ] && key_ok learner.ranks "a group of 2 ranks trains ($(col updates) updates)" || bad "ranks: ${r[*]:-none}"
  u_kill=$(col updates)
  kill -9 "${r[1]}" || true
  rank_gone() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
  wait_for 30 rank_gone "${r[1]}" && ok "rank 1 (pid ${r[1]}) killed with SIGKILL at update $u_kill" \
    || bad "rank 1 (pid ${r[1]}) still runs 30 s after its SIGKILL"
else
  bad "the group did not train and checkpoint"
fi
wait "$LAUNCHER" || rc=$?
grep -q "learner died" "$TMP/launcher.out" && ok "the group died with its rank" || bad "no learner death seen"
grep -q "learner restarted" "$TMP/launcher.out" && ok "apex-local restarted the group" || bad "no restart"
resumed=$(sed -n 's/.*resumed from .*checkpoint.bin at update \([0-9]*\).*/\1/p' "$RUN/learner.log" | head -1)
[ -n "$resumed" ] && [ "$resumed" -gt 0 ] && ok "the group resumed from its checkpoint at update $resumed" \
  || bad "no resume past update 0 in learner.log"
# The stop on a solved evaluation (>= 475) comes after the restart.
awk '/learner restarted/ {r = NR} /stopping: solved: greedy mean return .* >= 475 / {s = NR} END {exit !(r && s > r)}' "$TMP/launcher.out" \
  && ok "solved after the restart: $(grep -o 'solved: .*' "$TMP/launcher.out")" \
  || { bad "not solved after the restart"; tail -8 "$TMP/launcher.out"; tail -3 "$RUN/eval.csv" 2>/dev/null; }
[ "$rc" = 0 ] && ok "launcher exit 0" || { bad "launcher exit $rc"; tail -20 "$RUN/learner.log"; }
finish
