#!/usr/bin/env bash
# The continuous evaluator (apex-eval --follow, started by apex-local) and apex-eval --trace.
# A smoke-config cluster trains; the evaluator follows the learner's weights stream. Asserts:
# eval.csv gains rows whose weights versions only increase (each version at most once; the
# newest when behind); tb/eval/ holds the same numbers, read back by an independent reader;
# best.bin holds the best version: apex-eval --checkpoint on it gives exactly the best mean
# of eval.csv (the same fixed env streams); SIGTERM stops it with status 0. Then --trace of
# MinAtar Breakout equals the trace of the real MinAtar (tests/fixtures/
# minatar_trace_breakout.txt) line for line, and --actions replays it; a continuous env
# (Pendulum-v1) traces with seeded actions in its bounds, and --actions replays those too;
# --checkpoint on it reads a DPG policy (a missing file: a load error) and refuses --epsilon.
# [eval] every_updates: every point of the learner's evaluated, in order, a stray file aside.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
RUN="$RUNS/smoke"
# key: eval.interval_s
SETS=($(endpoint_sets) --set eval.interval_s=0.4 --set run.out_dir="$RUNS" --set run.target_return=100000
      --set run.max_seconds=0 --set eval.episodes=20)
scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet "${SETS[@]}" >"$TMP/launcher.out" 2>&1 &
LPID=$!
PIDS+=("$LPID")
eval_rows() { local n; n=$(wc -l <"$RUN/eval.csv" 2>/dev/null || echo 1); echo $((n > 0 ? n - 1 : 0)); }
enough() { [ "$(eval_rows)" -ge 5 ]; }
wait_for 90 enough && ok "the evaluator follows the weights ($(eval_rows) evaluations)" || bad "eval.csv has $(eval_rows) rows"
wait_for 30 grep -q "best so far" "$RUN/eval.log" && ok "it keeps the best version in best.bin" || bad "no best.bin line in eval.log"
kill -TERM "$LPID"
rc=0; wait "$LPID" || rc=$?
[ "$rc" = 0 ] && ok "SIGTERM: launcher, evaluator and daemons exit 0" || bad "launcher exit $rc: $(tail -3 "$TMP/launcher.out")"
"$PY" - "$RUN/eval.csv" <<'PY' && ok "weights versions only increase in eval.csv, each evaluated once" || bad "versions in eval.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
v = [(int(r["incarnation"]) << 32) | int(r["version"]) for r in rows]
print("    %d evaluations, versions %d..%d, episodes %s" % (len(v), v[0] & 0xFFFFFFFF, v[-1] & 0xFFFFFFFF, rows[0]["episodes"]))
sys.exit(0 if all(b > a for a, b in zip(v, v[1:])) and rows[0]["episodes"] == "20" else 1)
PY
# An evaluation starts interval_s after the previous one ended (elapsed_s is its end, on the monotonic clock).
"$PY" - "$RUN/eval.csv" <<'PY' && key_ok eval.interval_s "[eval] interval_s spaces evaluations" || bad "evaluations closer than interval_s"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
gaps = [float(b["elapsed_s"]) - float(a["elapsed_s"]) - float(b["eval_s"]) for a, b in zip(rows, rows[1:])]
print("    smallest pause between evaluations %.3f s" % min(gaps))
sys.exit(0 if min(gaps) >= 0.4 - 0.01 else 1)
PY
"$PY" tests/tb_read.py "$RUN/tb/eval" >"$TMP/tb.csv" 2>"$TMP/tb.err" || bad "tb_read.py: $(cat "$TMP/tb.err")"
"$PY" - "$RUN/eval.csv" "$TMP/tb.csv" <<'PY' && ok "tb/eval/ holds eval.csv's means, stepped by env frames" || bad "tb/eval/ differs from eval.csv"
import csv, struct, sys
rows = list(csv.DictReader(open(sys.argv[1])))
tb = [r for r in csv.DictReader(open(sys.argv[2])) if r["tag"] == "eval/mean_return"]
f32 = lambda x: struct.unpack("f", struct.pack("f", x))[0]
ok = len(tb) == len(rows) and all(int(t["step"]) == int(r["env_frames"]) and abs(float(t["value"]) - f32(float(r["eval_mean"]))) <= 1e-4 * abs(float(r["eval_mean"])) + 1e-4 for t, r in zip(tb, rows))
print("    %d rows, %d events" % (len(rows), len(tb)))
sys.exit(0 if ok else 1)
PY
best=$("$PY" -c "import csv, sys; print('%.2f' % max(float(r['eval_mean']) for r in csv.DictReader(open(sys.argv[1]))))" "$RUN/eval.csv")
expect_rc 0 "apex-eval loads best.bin" "$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/best.bin" --episodes 20
grep -q " mean $best " "$TMP/out" && ok "best.bin is the best version: the same mean $best on the same env streams" || bad "best.bin: $(cat "$TMP/out"), best in eval.csv $best"

# A restarted evaluator (here: the run resumed) continues eval.csv and keeps best.bin unless a
# version beats it: its first evaluation of a worse network must not replace it.
cp "$RUN/best.bin" "$TMP/best_before.bin"
rc=0; scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet --resume "${SETS[@]}" --set run.max_seconds=4 \
  >"$TMP/resumed.out" 2>&1 || rc=$?
[ "$rc" = 0 ] && grep -q "continuing .*eval.csv: best.bin holds the best so far, mean $best" "$RUN/eval.log" \
  && ok "the resumed evaluator starts from the best so far ($best)" || bad "resume: exit $rc, $(grep continuing "$RUN/eval.log")"
after=$("$PY" -c "import csv, sys; print('%.2f' % max(float(r['eval_mean']) for r in csv.DictReader(open(sys.argv[1]))))" "$RUN/eval.csv")
if [ "$after" = "$best" ]; then
  cmp -s "$RUN/best.bin" "$TMP/best_before.bin" && ok "no better version after the resume: best.bin untouched" || bad "best.bin was replaced by a worse version"
else
  expect_rc 0 "apex-eval loads the new best.bin" "$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/best.bin" --episodes 20
  grep -q " mean $after " "$TMP/out" && ok "a better version ($after > $best) replaced best.bin" || bad "best.bin: $(cat "$TMP/out"), best $after"
fi

# [eval] every_updates: the learner writes the network every 100 updates to evals/, the
# evaluator takes every one in order (none skipped, however it is timed) and removes it; a
# stray file numbered past the learner (garbage) is set aside as .bad with an error, and
# does not make the points before it look evaluated. The run ends at its budget.
mkdir -p "$RUNS/every/evals"
echo "not a checkpoint" >"$RUNS/every/evals/u000000009999.bin"
rc=0
# key: eval.every_updates
scripts/apex-local configs/smoke.ini --set eval.every_updates=100 --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.name=every --set run.target_return=100000 --set run.max_seconds=120 \
  --set eval.episodes=10 --set learner.max_steps=600 >"$TMP/every.out" 2>&1 || rc=$?
ups=$("$PY" -c "import csv, sys; print(' '.join(r['updates'] for r in csv.DictReader(open(sys.argv[1]))))" "$RUNS/every/eval.csv" 2>/dev/null)
[ "$rc" = 0 ] && [ "$ups" = "100 200 300 400 500 600" ] && [ -z "$(ls "$RUNS/every/evals" | grep -v '\.bad$')" ] \
  && key_ok eval.every_updates "every_updates = 100: eval.csv rows at updates $ups, each file removed" \
  || bad "every_updates: exit $rc, rows at '$ups', left: $(ls "$RUNS/every/evals") $(tail -2 "$TMP/every.out")"
[ -f "$RUNS/every/evals/u000000009999.bin.bad" ] && grep -q "cannot evaluate .*u000000009999.bin: .*moved to" "$RUNS/every/eval.log" \
  && ok "a file that is not a checkpoint: set aside, said, the others evaluated" || bad "stray file: $(grep -i u000000009999 "$RUNS/every/eval.log")"

# Stopped with points not evaluated yet: it evaluates them first. A run without an evaluator
# leaves u100 .. u400 (the launcher says they pile up); an evaluator started on an empty
# evals/ is frozen, the points are put back, and it is told to stop, then thawed.
rc=0; scripts/apex-local configs/smoke.ini --bin "$APEX_BIN" --quiet --no-eval $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.name=held --set eval.every_updates=100 --set eval.episodes=5 \
  --set learner.max_steps=400 --set run.max_seconds=120 >"$TMP/held.out" 2>&1 || rc=$?
grep -q "every_updates > 0 without an evaluator: the learner's evaluation points pile up" "$TMP/held.out" \
  && [ "$(ls "$RUNS/held/evals" | wc -l)" = 4 ] && ok "without an evaluator: 4 points left, and said" \
  || bad "held run: exit $rc, $(ls "$RUNS/held/evals" 2>&1) $(tail -2 "$TMP/held.out")"
mkdir -p "$TMP/held" && mv "$RUNS"/held/evals/*.bin "$TMP/held/"
"$APEX_BIN/apex-eval" -c "$RUNS/held/config.ini" --follow 2>"$TMP/held_eval.log" &
EP=$!
PIDS+=("$EP")
wait_for 20 grep -q "evaluating the network at every 100 updates" "$TMP/held_eval.log"
kill -STOP "$EP"; mv "$TMP"/held/*.bin "$RUNS/held/evals/"; kill -TERM "$EP"; kill -CONT "$EP"
rc=0; wait "$EP" || rc=$?
ups=$("$PY" -c "import csv, sys; print(' '.join(r['updates'] for r in csv.DictReader(open(sys.argv[1]))))" "$RUNS/held/eval.csv" 2>/dev/null)
[ "$rc" = 0 ] && [ "$ups" = "100 200 300 400" ] && [ -z "$(ls "$RUNS/held/evals")" ] \
  && grep -q "stopping: evaluating the points up to update 400 first" "$TMP/held_eval.log" \
  && ok "stopped with 4 points waiting: each evaluated before the exit" \
  || bad "stop with points waiting: exit $rc, rows '$ups', left $(ls "$RUNS/held/evals"): $(tail -3 "$TMP/held_eval.log")"

# --trace: the reference's own trace (gen_minatar.py --trace breakout 5 80), line for line.
"$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=MinAtar/Breakout-v0 --trace 5 80 >"$TMP/trace.txt" 2>"$TMP/err" \
  && cmp -s "$TMP/trace.txt" tests/fixtures/minatar_trace_breakout.txt \
  && ok "apex-eval --trace MinAtar/Breakout-v0 5 80 equals the real MinAtar's trace ($(wc -l <"$TMP/trace.txt") lines)" \
  || bad "trace differs: $(diff "$TMP/trace.txt" tests/fixtures/minatar_trace_breakout.txt | head -3)"
"$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=MinAtar/Breakout-v0 --trace 5 1000 --actions tests/fixtures/minatar_trace_breakout.txt >"$TMP/replayed.txt" \
  && cmp -s "$TMP/replayed.txt" tests/fixtures/minatar_trace_breakout.txt && ok "--actions replays a trace's actions" || bad "--actions replay differs"
# --trace of a continuous env: seeded uniform actions within the bounds, truncation at 200
# followed by a reset line (a=none), and --actions replays the floats exactly.
"$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=Pendulum-v1 --trace 3 201 >"$TMP/pd.txt" 2>"$TMP/err" \
  && [ "$(wc -l <"$TMP/pd.txt")" = 203 ] && grep -q "^t=200 a=[-0-9.e]* r=[-0-9.e]* term=0 trunc=1 " "$TMP/pd.txt" \
  && [ "$(grep -c "trunc=1" "$TMP/pd.txt")" = 1 ] && grep -A1 "trunc=1" "$TMP/pd.txt" | grep -q "^t=200 a=none " \
  && awk '{ split($2, a, "="); if (a[2] != "none" && (a[2] + 0 < -2 || a[2] + 0 > 2)) exit 1 }' "$TMP/pd.txt" \
  && ok "apex-eval --trace Pendulum-v1 3 201: actions in [-2, 2], truncated at 200, reset" \
  || bad "Pendulum trace: $(head -2 "$TMP/pd.txt") ... $(grep -A1 trunc=1 "$TMP/pd.txt") $(cat "$TMP/err")"
"$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=Pendulum-v1 --trace 3 1000 --actions "$TMP/pd.txt" >"$TMP/pd2.txt" \
  && cmp -s "$TMP/pd.txt" "$TMP/pd2.txt" && ok "--actions replays a continuous trace's actions" || bad "continuous --actions replay differs"
# --checkpoint on a continuous env reads DPG's policy (tests/check_dpg_actor.c evaluates
# one): a missing file is a load error naming it, and --epsilon, which only discrete actions
# have, is refused.
expect_rc 2 "apex-eval --checkpoint on Pendulum-v1 with no file: a load error" "$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=Pendulum-v1 --checkpoint "$TMP/none.bin"
grep -q "cannot load $TMP/none.bin" "$TMP/err" || bad "apex-eval's error names the file: $(cat "$TMP/err")"
expect_rc 2 "apex-eval --epsilon on Pendulum-v1 is refused" "$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=Pendulum-v1 --checkpoint "$TMP/none.bin" --epsilon 0.1
grep -q "epsilon is for discrete actions" "$TMP/err" || bad "apex-eval's refusal says why: $(cat "$TMP/err")"
expect_rc 2 "--trace of an env apex cannot step is refused" "$APEX_BIN/apex-eval" -c configs/smoke.ini --set env.id=external --set env.obs_dim=4 --set env.n_actions=2 --trace 1 5
finish
