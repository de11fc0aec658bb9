#!/usr/bin/env bash
# A learner group's lifecycle, quickly: scripts/apex-local --learners 2 (ZeRO stage 2) on the
# smoke config for a few seconds, stopped by the launcher (SIGTERM to each rank). Checks: the
# launcher exits 0; both ranks stop at the same update with their final checkpoint; the set
# on disk is checkpoint.bin (online and target, naming 2 shards) plus one optimizer shard per
# rank of that update, and nothing stale; rank 0's metrics sum both ranks' samples (about
# 2 x batch_size per update); apex-eval reads checkpoint.bin; a single apex-learner (no
# mpirun) resumes from the sharded set and trains on; then 3 ranks of stage 1 resume from
# the single learner's checkpoint; then the same lifecycle in ZeRO stage 3 (parameters
# sharded: published and checkpointed weights gathered to rank 0). ~35 s.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# LeakSanitizer under make asan: OpenMPI's allocations (tests/lsan-mpi.supp, check_group.c).
# (Appended: make asan sets LSAN_OPTIONS for every test; the last suppressions= wins.)
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$ROOT/tests/lsan-mpi.supp:print_suppressions=0:fast_unwind_on_malloc=0"
CFG=configs/smoke.ini
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
EPS=$(endpoint_sets)
rc=0
# key: learner.zero_stage
scripts/apex-local "$CFG" --bin "$APEX_BIN" --quiet --no-eval --learners 2 $EPS --set learner.zero_stage=2 \
  --set run.out_dir="$RUNS" --set run.max_seconds=6 \
  >"$TMP/launcher.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && ok "launcher exit 0" || { bad "launcher exit $rc"; tail -20 "$RUN/learner.log"; }
stops=$(sed -n 's/.*stopped at update \([0-9]*\) (final checkpoint written).*/\1/p' "$RUN/learner.log" | sort -u)
n_stops=$(grep -c "stopped at update .* (final checkpoint written)" "$RUN/learner.log" || true)
[ "$n_stops" = 2 ] && [ "$(echo "$stops" | wc -l)" = 1 ] \
  && ok "both ranks stopped at update $stops with the final checkpoint" \
  || bad "stops: $n_stops lines, updates: $stops"
# zero_stage = 2 shards the gradients: a rank holds less than one full gradient (params
# counts online + target, two full copies); stage 1 holds a full one plus its shard.
"$PY" - "$RUN/learner.log" <<'PY' && key_ok learner.zero_stage "stage 2: each rank holds less than a full gradient" || bad "stage 2 memory"
import re, sys
m = re.findall(r"rank (\d) memory: params (\d+), gradients (\d+), optimizer state (\d+),", open(sys.argv[1]).read())
print("    " + "; ".join("rank %s: params %s, gradients %s, optimizer %s" % r for r in m))
sys.exit(0 if len(m) >= 2 and all(int(g) < int(p) // 2 and int(o) < int(p) for _, p, g, o in m) else 1)
PY
shard_files=$(cd "$RUN" && ls checkpoint.bin.s*.opt* 2>/dev/null | sort | tr '\n' ' ')
[ "$shard_files" = "checkpoint.bin.s$stops.opt0of2 checkpoint.bin.s$stops.opt1of2 " ] \
  && ok "shards on disk: $shard_files" || bad "shards on disk: $shard_files"
"$PY" - "$RUN/metrics.csv" <<'PY' && ok "metrics sum both ranks' samples" || bad "metrics do not sum the ranks"
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if float(r["updates_per_s"]) > 0]
r = rows[-2] if len(rows) > 1 else rows[-1]
per = float(r["samples_per_s"]) / float(r["updates_per_s"])
print(f"    {per:.1f} samples per update (batch 64, 2 ranks)")
sys.exit(0 if 100 <= per <= 160 else 1)
PY
expect_rc 0 "apex-eval reads the group's checkpoint.bin" \
  "$APEX_BIN/apex-eval" -c "$CFG" $EPS --checkpoint "$RUN/checkpoint.bin" --episodes 1
# A single learner resumes from the sharded set (the replay server is gone: max_steps =
# the stored update, so it stops at once after loading and writing back its checkpoint).
expect_rc 0 "a single learner resumes from the sharded checkpoint" \
  "$APEX_BIN/apex-learner" -c "$RUN/config.ini" --set learner.max_steps="$stops"
grep -q "resumed from .* at update $stops" "$TMP/err" && ok "single learner at update $stops" \
  || { bad "single learner did not resume at $stops"; tail -3 "$TMP/err"; }
shard_files=$( (cd "$RUN" && ls checkpoint.bin.s*.opt* 2>/dev/null || true) | tr '\n' ' ')
[ -z "$shard_files" ] && ok "its full checkpoint removed the stale shards" || bad "left: $shard_files"
# 3 ranks of stage 1 resume from the single learner's checkpoint (re-shard on load).
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader
     --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1 -np 3)
expect_rc 0 "3 ranks of stage 1 resume from it" \
  "${mpi[@]}" "$APEX_BIN/apex-learner" -c "$RUN/config.ini" --set learner.zero_stage=1 \
  --set learner.max_steps="$stops"
[ "$(grep -c "resumed from .* at update $stops" "$TMP/out" "$TMP/err" | awk -F: '{s += $2} END {print s}')" = 3 ] \
  && ok "all 3 ranks resumed at update $stops" || { bad "3 ranks did not resume"; tail -5 "$TMP/err" "$TMP/out"; }
[ "$(cd "$RUN" && ls checkpoint.bin.s"$stops".opt*of3 2>/dev/null | wc -l)" = 3 ] \
  && ok "3 shards written" || bad "no 3 shards"
# ZeRO stage 3 (parameters sharded): the same lifecycle through the launcher. Each rank holds
# half of online and target; rank 0 gathers what it publishes into the weights message (the actors train on it: the
# weights version climbs) and what it checkpoints (apex-eval reads it); 2 ranks of stage 3
# resume from the set.
RUN3="$RUNS/stage3"
rc=0
scripts/apex-local "$CFG" --bin "$APEX_BIN" --quiet --no-eval --learners 2 $EPS --set learner.zero_stage=3 \
  --set run.out_dir="$RUNS" --set run.name=stage3 --set run.max_seconds=6 \
  >"$TMP/launcher3.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && ok "stage 3: launcher exit 0" || { bad "stage 3: launcher exit $rc"; tail -20 "$RUN3/learner.log"; }
stops3=$(sed -n 's/.*stopped at update \([0-9]*\) (final checkpoint written).*/\1/p' "$RUN3/learner.log" | sort -u)
[ "$(grep -c "stopped at update .* (final checkpoint written)" "$RUN3/learner.log" || true)" = 2 ] \
  && [ "$(echo "$stops3" | wc -l)" = 1 ] && ok "stage 3: both ranks stopped at update $stops3" \
  || bad "stage 3: stops $stops3"
"$PY" - "$RUN3/learner.log" "$RUN3/metrics.csv" <<'PY' && ok "stage 3: half the parameters per rank, weights published and taken" || bad "stage 3 memory or publishing"
import csv, re, sys
m = re.findall(r"rank (\d) memory: params (\d+), gradients (\d+), optimizer state (\d+), gathered layers (\d+)", open(sys.argv[1]).read())
print("    " + "; ".join("rank %s: params %s, gathered layers %s" % (r[0], r[1], r[4]) for r in m))
P = int(re.search(r"(\d+) parameters, batch", open(sys.argv[1]).read()).group(1))
rows = list(csv.DictReader(open(sys.argv[2])))
v = max(int(float(r["weights_version"])) for r in rows)
a = max(int(float(r["actor_version_min"])) for r in rows)
print(f"    {P} parameters; weights version {v} published, every actor at {a} or later")
p = {r[0]: int(r[1]) for r in m}
# A rank's half of online and of target (+ 64-byte rounding), against 2 x 4 x P whole.
ok = len(p) == 2 and all(b <= 4 * P + 128 for b in p.values()) and v >= 3 and a >= 2
sys.exit(0 if ok else 1)
PY
expect_rc 0 "stage 3: apex-eval reads the group's checkpoint.bin" \
  "$APEX_BIN/apex-eval" -c "$CFG" $EPS --checkpoint "$RUN3/checkpoint.bin" --episodes 1
mpi[${#mpi[@]}-1]=2
expect_rc 0 "stage 3: 2 ranks of stage 3 resume from it" \
  "${mpi[@]}" "$APEX_BIN/apex-learner" -c "$RUN3/config.ini" --set learner.max_steps="$stops3"
[ "$(grep -c "resumed from .* at update $stops3" "$TMP/out" "$TMP/err" | awk -F: '{s += $2} END {print s}')" = 2 ] \
  && ok "stage 3: both ranks resumed at update $stops3" || { bad "stage 3 did not resume"; tail -5 "$TMP/err" "$TMP/out"; }
finish
