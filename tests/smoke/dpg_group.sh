#!/usr/bin/env bash
# smoke: slow
# The DPG learner as a learner group (issue #28): configs/pendulum.ini through apex-local with
# [learner] ranks = 2 (two ranks under mpirun, ZeRO stage 2: the optimizer moments and the
# gradients sharded, tests/check_group.c's equivalence through the real daemons) and 64 rows per
# rank, so that each update trains the 128 rows of the single learner's config and the
# budget is pendulum_learn.sh's: DPG_GROUP_UPDATES updates (default 6000, ~24 000 frames).
# Checks: both ranks start and say their stage; the group runs its budget; the final
# checkpoint (rank 0 writes it) evaluates, 100 greedy episodes, at a mean >= DPG_GROUP_MIN
# (default -400; random ~-1 200, solved ~-150).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# LeakSanitizer under make asan: OpenMPI's allocations (tests/lsan-mpi.supp, check_group.c).
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
UPDATES=${DPG_GROUP_UPDATES:-6000}
MIN=${DPG_GROUP_MIN:--400}
RUNS="$TMP/runs"
RUN="$RUNS/pendulum"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set run.max_seconds=600 --set run.target_return=0
      --set learner.ranks=2 --set learner.zero_stage=2 --set learner.batch_size=64
      --set learner.max_steps="$UPDATES" --set eval.interval_s=30)
rc=0
scripts/apex-local configs/pendulum.ini --bin "$APEX_BIN" --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 || rc=$?
for r in 0 1; do
  grep -q "rank $r of a learner group of 2 (ZeRO stage 2)" "$RUN"/learner*.log \
    && ok "rank $r of the DPG learner group started (ZeRO stage 2)" \
    || bad "rank $r did not start: $(grep -h -m2 -i "error\|rank" "$RUN"/learner*.log | head -2)"
done
grep -q "reached \[learner\] max_steps = $UPDATES" "$RUN"/learner*.log && ok "the group ran its budget of $UPDATES updates ($(col env_frames) frames)" \
  || bad "the group did not finish its budget: $(grep stopping "$TMP/launcher.out" | tail -1)"
"$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 100 >"$TMP/eval.out" 2>"$TMP/eval.err" \
  || bad "apex-eval failed: $(cat "$TMP/eval.err")"
mean=$(sed -n 's/.* mean \([-0-9.]*\) .*/\1/p' "$TMP/eval.out")
awk -v m="${mean:--99999}" -v t="$MIN" 'BEGIN { exit !(m >= t) }' \
  && ok "Pendulum learned by a group: greedy mean return $mean over 100 episodes (bar $MIN)" \
  || bad "the group did not learn enough: mean ${mean:-?} (bar $MIN): $(cat "$TMP/eval.out")"
finish
