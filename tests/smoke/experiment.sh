#!/usr/bin/env bash
# smoke: slow
# scripts/apex-experiment (issue #31): many seeds and honest statistics.
#   - tests/smoke/experiment_stats.py: the IQM against hand-computed values (scipy's
#     trim_mean(x, 0.25) definition), the stratified bootstrap against the exact bootstrap
#     distribution enumerated on 2 tasks x 2 and 2 x 3 runs (and a pooled resampler shown to
#     fail that check), and `aggregate` on fabricated run directories with the real eval.csv
#     and metrics.csv headers, whose every statistic is known by hand;
#   - end to end: 2 seeds of configs/cartpole.ini with a budget of 3000 updates each through
#     apex-local (which ends a run whose learner trained its [learner] max_steps with exit 0),
#     then the table, the CSV and the PNG; the same command again runs nothing; other
#     settings on finished runs are refused; a run that fails is reported and the exit is 1;
#     --slurm --dry-run prints one apex-slurm call per seed, and against stand-ins for sbatch
#     and squeue one job is submitted per seed, and only the jobs that are neither done nor
#     queued are submitted again.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
EXP=scripts/apex-experiment

# 1. The statistics and the aggregation (each line of the Python checks is one check here).
while IFS= read -r line; do
  case "$line" in
    "ok   "*) ok "${line#ok   }" ;;
    "FAIL "*) bad "${line#FAIL }" ;;
    *) echo "       $line" ;;
  esac
done < <("$PY" tests/smoke/experiment_stats.py "$TMP" 2>&1 || echo "FAIL experiment_stats.py exited $?")

# 2. A real experiment: 2 seeds, 3000 updates each, endpoints on free ports.
DIR="$TMP/cartpole-exp"
ARGS=(run configs/cartpole.ini --seeds 1-2 --dir "$DIR" --max-steps 3000 --max-seconds 60 --eval-episodes 10
      --bin "$APEX_BIN" $(endpoint_sets))
rc=0
"$EXP" "${ARGS[@]}" >"$TMP/exp.out" 2>&1 || rc=$?
n_done=$(grep -c "cartpole.s[12]: done in .* (exit 0): the learner trained its budget (\[learner\] max_steps = 3000)" "$TMP/exp.out" || true)
[ "$rc" = 0 ] && [ "$n_done" = 2 ] && ok "2 seeds ran to their budget of 3000 updates through apex-local, exit 0" \
  || { bad "the experiment (exit $rc, $n_done of 2 runs done)"; tail -20 "$TMP/exp.out"; }
grep -q "apex-local: stopping: the learner trained its budget" "$DIR/logs/cartpole.s1.out" \
  && grep -q "run directory .*cartpole.s1 (metrics.csv" "$DIR/logs/cartpole.s1.out" \
  && ok "apex-local ends a run whose learner reached [learner] max_steps as a stop, not a failure" \
  || { bad "apex-local's end of a max_steps run"; tail -5 "$DIR/logs/cartpole.s1.out"; }
for s in 1 2; do
  "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["finished"] and j["seed"] == int(sys.argv[2]) and "run.seed="+sys.argv[2] in j["sets"] else 1)' \
    "$DIR/cartpole.s$s/experiment.json" "$s" && grep -q "^seed = $s\$" "$DIR/cartpole.s$s/config.ini" \
    && ok "cartpole.s$s: its own run directory, [run] seed = $s, experiment.json says finished" \
    || bad "cartpole.s$s: experiment.json or config.ini"
done
# The table against the runs' own eval.csv, read here by column name: the score is the mean of
# the last 5 eval_mean, and with 2 runs the IQM is their mean (int(0.25 * 2) = 0 cut).
want=$("$PY" - "$DIR" <<'PY'
import csv, sys
s = []
for seed in (1, 2):
    rows = list(csv.DictReader(open(f"{sys.argv[1]}/cartpole.s{seed}/eval.csv")))
    last = [float(r["eval_mean"]) for r in rows][-5:]
    s.append(sum(last) / len(last))
print(f"{(s[0] + s[1]) / 2:.6f} {min(s):.6f} {max(s):.6f}")
PY
)
got=$("$PY" -c 'import csv,sys; r=[x for x in csv.DictReader(open(sys.argv[1]))]; print(len(r), r[0]["task"], r[0]["runs"], "%.6f %.6f %.6f" % (float(r[0]["iqm"]), float(r[0]["min"]), float(r[0]["max"])))' \
  "$DIR/summary.csv" 2>/dev/null || echo "?")
[ "$got" = "1 cartpole 2 $want" ] && ok "summary.csv: one row, 2 runs, IQM/min/max = $want from the runs' eval.csv" \
  || bad "summary.csv: '$got', want '1 cartpole 2 $want'"
grep -q "^| base | cartpole | 2 |" "$TMP/exp.out" && ok "the Markdown table is printed: $(grep '^| base | cartpole' "$TMP/exp.out")" \
  || bad "no table in the output"
[ "$(head -c 4 "$DIR/iqm_frames.png" | od -An -c | tr -d ' ')" = "211PNG" ] && ok "iqm_frames.png is a PNG" \
  || bad "iqm_frames.png missing or not a PNG"

# 3. Resumable: the same command runs nothing; other settings on finished runs are refused.
before=$(stat -c %Y "$DIR/cartpole.s1/experiment.json" "$DIR/cartpole.s2/experiment.json")
rc=0
"$EXP" "${ARGS[@]}" >"$TMP/again.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "2 run(s) already finished or running: not run again" "$TMP/again.out" \
  && ! grep -q "done in" "$TMP/again.out" && [ "$(stat -c %Y "$DIR"/cartpole.s[12]/experiment.json)" = "$before" ] \
  && ok "the same command again: both runs finished, nothing run" || { bad "rerun (exit $rc)"; tail -5 "$TMP/again.out"; }
rc=0
"$EXP" "${ARGS[@]}" --max-steps 4000 >"$TMP/other.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "cartpole.s1 was made with other settings" "$TMP/other.out" \
  && ok "another budget on finished runs is refused (exit 2): $(grep -o 'made with other settings' "$TMP/other.out")" \
  || { bad "other settings (exit $rc)"; tail -3 "$TMP/other.out"; }

# 4. A run that fails (a config error) is reported, the others go on, the exit is 1.
rc=0
"$EXP" run configs/cartpole.ini --seeds 1 --dir "$TMP/failing" --bin "$APEX_BIN" --set learner.lr=-1 \
  --no-aggregate >"$TMP/fail.out" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "cartpole.s1: NOT finished .*(exit 2)" "$TMP/fail.out" && grep -q "1 run(s) failed: cartpole.s1" "$TMP/fail.out" \
  && ok "a failed run is reported and makes the exit 1" || { bad "failing run (exit $rc)"; tail -5 "$TMP/fail.out"; }

# 5. Slurm: one apex-slurm call per run (printed by --dry-run, nothing submitted).
rc=0
"$EXP" run configs/cartpole.ini --seeds 3-4 --dir "$TMP/slurm-exp" --slurm --sbatch=--time=5 --dry-run \
  >"$TMP/slurm.out" 2>&1 || rc=$?
n=$(grep -c "^scripts/apex-slurm .*configs/cartpole.ini .*--sbatch=--time=5 .*--set run.seed=[34] --set run.name=cartpole.s[34] " "$TMP/slurm.out" || true)
[ "$rc" = 0 ] && [ "$n" = 2 ] && [ ! -e "$TMP/slurm-exp" ] && ok "--slurm --dry-run: one apex-slurm call per seed, nothing written" \
  || { bad "--slurm --dry-run (exit $rc, $n calls)"; cat "$TMP/slurm.out"; }
# 6. Slurm for real, against stand-ins for sbatch and squeue (tests/smoke/slurm.sh runs
# apex-slurm against a real Slurm): one job per run, its id in experiment.json; again, a job
# whose batch output says "done (exit 0)" and a job still in squeue are left alone; a job
# gone from squeue without its end line is submitted again.
mkdir -p "$TMP/fakebin" "$TMP/fake"
cat >"$TMP/fakebin/sbatch" <<'SH'
#!/bin/sh
n=$(cat "$FAKE/next" 2>/dev/null || echo 100); echo $((n + 1)) >"$FAKE/next"; echo "$n"
SH
cat >"$TMP/fakebin/squeue" <<'SH'
#!/bin/sh
# squeue -h -j ID -o %i: the ID when it is in $FAKE/queue
for a; do j=$a; done
while [ $# -gt 0 ]; do [ "$1" = -j ] && j=$2; shift; done
grep -qx "$j" "$FAKE/queue" 2>/dev/null && echo "$j"; exit 0
SH
chmod +x "$TMP/fakebin/sbatch" "$TMP/fakebin/squeue"
SDIR="$TMP/slurm-real"
slurm_exp() { FAKE="$TMP/fake" PATH="$TMP/fakebin:$PATH" "$EXP" run configs/cartpole.ini --seeds 1-2 --dir "$SDIR" --slurm --bin "$APEX_BIN"; }
rc=0; slurm_exp >"$TMP/s1.out" 2>&1 || rc=$?
jobs=$(cat "$SDIR"/cartpole.s[12]/experiment.json 2>/dev/null | grep -o '"slurm_job": "[0-9]*"' | tr -dc '0-9\n' | tr '\n' ' ')
[ "$rc" = 0 ] && [ "$jobs" = "100 101 " ] && [ -f "$SDIR/cartpole.s1/apex.sbatch" ] \
  && ok "--slurm: apex-slurm submitted one job per seed (jobs $jobs), recorded in experiment.json" \
  || { bad "--slurm submission (exit $rc, jobs '$jobs')"; tail -5 "$TMP/s1.out"; }
echo "apex-slurm: job 100 done (exit 0); run directory $SDIR/cartpole.s1" >"$SDIR/cartpole.s1/slurm-100.out"
echo 101 >"$TMP/fake/queue"
rc=0; slurm_exp >"$TMP/s2.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "2 run(s) already finished or running" "$TMP/s2.out" && ! grep -q "submitted" "$TMP/s2.out" \
  && ok "--slurm again: the done job and the queued one are not submitted again" || { bad "--slurm again (exit $rc)"; cat "$TMP/s2.out"; }
: >"$TMP/fake/queue"
rc=0; slurm_exp >"$TMP/s3.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "cartpole.s2: submitted Slurm job 102" "$TMP/s3.out" && ! grep -q "cartpole.s1: submitted" "$TMP/s3.out" \
  && ok "a job gone from squeue without its end line is submitted again (102), the done one is not" \
  || { bad "--slurm resubmission (exit $rc)"; cat "$TMP/s3.out"; }
finish
