#!/usr/bin/env bash
# A learner group started as the README shows it, `mpirun -np 2 bin/apex-learner -c run.ini`,
# with none of the launchers' OpenMPI settings (no OMPI_MCA_* in the environment; only
# mpirun's two root-confirmation variables, as this runs as root), against a replay server
# and 2 actors started by hand on the smoke config ([learner] ranks = 1). Checks, from the
# learner's log:
#   - both ranks found OMPI_MCA_mpi_yield_when_idle=1 at MPI_Init, apex-learner's default
#     (OpenMPI's own, with 2 ranks on 2 cores, is not to yield: ranks that spin in
#     collectives starve the daemons); and ompi_info shows that OpenMPI takes that variable
#     for mpi_yield_when_idle (true, data source: environment);
#   - rank 0 warns that the group of 2 differs from [learner] ranks = 1, naming both;
#   - the group trains, and stops in order on SIGTERM to its ranks (exit 0, same update);
#   - a value the user set stands: under `mpirun --mca mpi_yield_when_idle 0` with [learner]
#     ranks = 2 both ranks find 0 (from the environment), and rank 0 does not warn about ranks;
#   - a single apex-learner (no mpirun) with [learner] ranks = 2 warns that it is one.
# ~25 s.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# LeakSanitizer under make asan: OpenMPI's allocations (tests/lsan-mpi.supp, check_group.c).
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
# Nothing of the launchers' settings may reach mpirun: the point is a plain start.
for v in $(compgen -e | grep '^OMPI_MCA_' || true); do unset "$v"; done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # = --allow-run-as-root
CFG=configs/smoke.ini
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS")
"$APEX_BIN/apex-replay" -c "$CFG" "${SETS[@]}" >"$TMP/replay.log" 2>&1 &
PIDS+=($!)
for i in 0 1; do
  "$APEX_BIN/apex-actor" -c "$CFG" "${SETS[@]}" --index $i >"$TMP/actor$i.log" 2>&1 &
  PIDS+=($!)
done
DAEMONS=("${PIDS[@]}") # replay, actor 0, actor 1

# group MPIRUN_ARGS... -- LEARNER_ARGS...: starts `mpirun MPIRUN_ARGS... bin/apex-learner -c
# $CFG ... LEARNER_ARGS...` with its log in $TMP/group.log; MPIRUN is its pid. ranks: its
# children.
group() {
  local m=()
  while [ "$1" != -- ]; do m+=("$1"); shift; done
  shift
  mpirun "${m[@]}" "$APEX_BIN/apex-learner" -c "$CFG" "${SETS[@]}" "$@" >"$TMP/group.log" 2>&1 &
  MPIRUN=$!
  PIDS+=("$MPIRUN")
}
ranks() { cat "/proc/$MPIRUN/task/$MPIRUN/children" 2>/dev/null; }
two_ranks() { [ "$(ranks | wc -w)" = 2 ]; }
# stop_group: SIGTERM to each rank (not to mpirun, which would SIGKILL them), then mpirun's
# exit status.
stop_group() {
  local r rc=0
  wait_for 30 two_ranks || true
  r=$(ranks)
  PIDS+=($r) # killed by the trap should anything below fail
  kill -TERM $r 2>/dev/null || true
  wait "$MPIRUN" || rc=$?
  return $rc
}
both_up() { [ "$(grep -c "rank [01] of a learner group of 2" "$TMP/group.log" || true)" = 2 ]; }

# 1. Exactly as the README: mpirun -np 2 bin/apex-learner -c run.ini.
group -np 2 --
wait_for 60 both_up || bad "the group did not start: $(tail -5 "$TMP/group.log")"
n_yield=$(grep -c "rank [01] of a learner group of 2 .* OMPI_MCA_mpi_yield_when_idle=1 (apex-learner's default: waiting ranks yield their core)" "$TMP/group.log" || true)
[ "$n_yield" = 2 ] && ok "both ranks set OMPI_MCA_mpi_yield_when_idle=1 before MPI_Init (apex-learner's default)" \
  || { bad "ranks with the default: $n_yield of 2"; grep "of a learner group" "$TMP/group.log" | sed 's/^/       /' || true; }
OMPI_MCA_mpi_yield_when_idle=1 ompi_info --param mpi all --level 9 | grep -q '"mpi_yield_when_idle" (current value: "true", data source: environment' \
  && ok "OpenMPI takes OMPI_MCA_mpi_yield_when_idle=1 for mpi_yield_when_idle (ompi_info)" \
  || bad "ompi_info: $(OMPI_MCA_mpi_yield_when_idle=1 ompi_info --param mpi all --level 9 | grep '"mpi_yield_when_idle"')"
grep -q "W learner: a learner group of 2 ranks, but \[learner\] ranks = 1" "$TMP/group.log" \
  && ok "the group says it differs from [learner] ranks: $(grep -o 'a learner group of 2 ranks, but.*' "$TMP/group.log" | head -1)" \
  || bad "no warning about [learner] ranks = 1"
trained() { gt updates 200; }
wait_for 90 trained && ok "the group trains ($(col updates) updates)" || bad "no training: $(tail -3 "$TMP/group.log")"
rc=0; stop_group || rc=$?
[ "$rc" = 0 ] && ok "mpirun exit 0 after SIGTERM to each rank" || bad "mpirun exit $rc: $(tail -5 "$TMP/group.log")"
stops=$(sed -n 's/.*stopped at update \([0-9]*\) (final checkpoint written).*/\1/p' "$TMP/group.log" | sort -u)
[ "$(grep -c "stopped at update" "$TMP/group.log" || true)" = 2 ] && [ "$(echo "$stops" | wc -l)" = 1 ] \
  && ok "both ranks stopped at update $stops with the final checkpoint" || bad "stops: $stops"
mv "$TMP/group.log" "$TMP/group1.log" # the next group's log starts empty (both_up reads it)

# 2. The user's value stands, and a config that says 2 ranks is not warned about.
group --mca mpi_yield_when_idle 0 -np 2 -- --set learner.ranks=2
wait_for 60 both_up || bad "the second group did not start: $(tail -5 "$TMP/group.log")"
n_spin=$(grep -c "rank [01] of a learner group of 2 .* OMPI_MCA_mpi_yield_when_idle=0 (from the environment)" "$TMP/group.log" || true)
[ "$n_spin" = 2 ] && ok "mpirun --mca mpi_yield_when_idle 0 is respected by both ranks" \
  || { bad "ranks that kept the user's 0: $n_spin of 2"; grep "of a learner group" "$TMP/group.log" | sed 's/^/       /' || true; }
rc=0; stop_group || rc=$?
[ "$rc" = 0 ] && ok "mpirun exit 0" || bad "mpirun exit $rc: $(tail -5 "$TMP/group.log")"
! grep -q "\[learner\] ranks =" "$TMP/group.log" && ok "no warning when the group matches [learner] ranks = 2" \
  || bad "warned although [learner] ranks = 2: $(grep "\[learner\] ranks =" "$TMP/group.log")"

# 3. A single learner where the config asks for a group (it trains a few steps and stops).
expect_rc 0 "a single learner with [learner] ranks = 2 runs" \
  "$APEX_BIN/apex-learner" -c "$CFG" "${SETS[@]}" --set run.name=single --set learner.ranks=2 \
  --set learner.max_steps=20
grep -q "W learner: one learner, but \[learner\] ranks = 2" "$TMP/err" \
  && ok "it says so: $(grep -o 'one learner, but.*' "$TMP/err")" || { bad "no warning from a single learner"; tail -5 "$TMP/err"; }
kill -TERM "${DAEMONS[@]}"
n=0; for p in "${DAEMONS[@]}"; do rc=0; wait "$p" || rc=$?; [ "$rc" = 0 ] && n=$((n + 1)); done
[ "$n" = 3 ] && ok "replay and actors stop with exit 0" || bad "$n of 3 daemons stopped with exit 0"
finish
