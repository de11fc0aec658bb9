#!/usr/bin/env bash
# The BLAS kernel of the computing daemons (issue #32; [run] blas_kernel, model/blas.h): each
# of apex-learner, apex-actor and apex-eval logs which OpenBLAS core runs and why; a core named
# in the config runs after the process started itself again (same pid), and was checked
# against the naive reference; with [run] blas_kernel = auto and no OPENBLAS_CORETYPE the core
# is of the best instruction set the CPU has; a user's OPENBLAS_CORETYPE is respected, and a
# warning with the remedy says when it is far below the CPU; openblas keeps OpenBLAS's own
# choice; anything else is a config error. The named core is Sandybridge (AVX), which every
# x86-64 CPU of the last ten years runs; what the choice is for any other CPU is check_blas's.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
RUNS="$TMP/runs"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS")
flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
has() { [[ " $flags " == *" $1 "* ]]; }
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl; then
  best="AVX-512"
elif has avx2 && has fma; then
  best="AVX2+FMA"
elif has avx; then
  best="AVX"
else
  best="SSE"
fi
if ! has avx; then
  [ "${CI:-}" = true ] && bad "this CPU has no AVX: the named-core checks cannot run" || true
  echo "  (no AVX on this CPU: the named-core checks are skipped)"
fi

# blas_line LOG: the kernel line a daemon logged.
blas_line() { grep -m1 ' blas: ' "$1" || true; }

# A learner with a named core: it restarts itself (same pid), logs the core, runs, and stops
# in order; its checkpoint loads.
if has avx; then
  # key: run.blas_kernel
  env -u OPENBLAS_CORETYPE "$APEX_BIN/apex-learner" --set run.blas_kernel=Sandybridge \
    -c configs/cartpole.ini "${SETS[@]}" >"$TMP/learner.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  if wait_for 60 grep -q 'learner: .* parameters' "$TMP/learner.log"; then
    ok "learner runs with [run] blas_kernel = Sandybridge"
  else
    bad "learner did not start"; tail -5 "$TMP/learner.log"
  fi
  line=$(blas_line "$TMP/learner.log")
  [[ "$line" == *"OpenBLAS Sandybridge (AVX), set by [run] blas_kernel, checked at start-up"* ]] \
    && key_ok run.blas_kernel "learner: the named core runs, checked: ${line#* blas: }" \
    || bad "learner kernel line: '$line'"
  [[ "$line" == *"apex-learner[$pid]"* ]] && ok "the restart kept the pid ($pid)" \
    || bad "the kernel line's pid is not the started process's $pid: '$line'"
  kill -TERM "$pid"
  rc=0; wait "$pid" || rc=$?
  [ "$rc" = 0 ] && ok "learner: SIGTERM, exit 0" || bad "learner exit $rc"
  ckpt="$RUNS/cartpole/checkpoint.bin"

  # An actor with the named core (no replay or learner: it keeps stepping, and stops in order).
  env -u OPENBLAS_CORETYPE "$APEX_BIN/apex-actor" -c configs/cartpole.ini "${SETS[@]}" \
    --set run.blas_kernel=Sandybridge --index 0 >"$TMP/actor.log" 2>&1 &
  apid=$!
  PIDS+=("$apid")
  wait_for 60 grep -q ' blas: ' "$TMP/actor.log" || true
  line=$(blas_line "$TMP/actor.log")
  [[ "$line" == *"OpenBLAS Sandybridge (AVX), set by [run] blas_kernel"* && "$line" == *"[$apid]"* ]] \
    && ok "actor: the named core runs" || bad "actor kernel line: '$line'"
  # auto (the default) on an MLP: no conv body to run, so oneDNN is not even mapped
  if wait_for 60 grep -q "blas_library = auto: OpenBLAS computes everything" "$TMP/actor.log"; then
    grep -q libdnnl "/proc/$apid/maps" && bad "the CartPole actor mapped oneDNN under auto" \
      || key_ok run.blas_library "auto, CartPole's actor: oneDNN not loaded (not in its maps)"
  else
    bad "no 'oneDNN not loaded' line in the actor's log: $(grep -m2 'blas' "$TMP/actor.log")"
  fi
  kill -TERM "$apid"
  rc=0; wait "$apid" || rc=$?
  [ "$rc" = 0 ] && ok "actor: SIGTERM, exit 0" || bad "actor exit $rc"

  # apex-eval on the learner's checkpoint: auto, with no variable set.
  env -u OPENBLAS_CORETYPE "$APEX_BIN/apex-eval" -c configs/cartpole.ini "${SETS[@]}" \
    --checkpoint "$ckpt" --episodes 2 >"$TMP/eval.out" 2>"$TMP/eval.log" \
    && ok "eval evaluates the checkpoint (auto)" || bad "eval failed: $(tail -2 "$TMP/eval.log")"
  line=$(blas_line "$TMP/eval.log")
  [[ "$line" == *"($best)"* ]] && ok "auto runs a core of the CPU's best instruction set ($best)" \
    || bad "auto on a CPU with $best: '$line'"
  [[ "$line" != *" W blas:"* ]] && ok "auto: no warning" || bad "auto warned: '$line'"

  # [run] blas_library = onednn: the same evaluation with oneDNN's sgemm computing the products
  # (Debian's libdnnl2, which the test set-up installs), loaded and checked at start-up.
  # key: run.blas_library
  "$APEX_BIN/apex-eval" -c configs/cartpole.ini "${SETS[@]}" --set run.blas_library=onednn \
    --checkpoint "$ckpt" --episodes 2 >"$TMP/eval_dnnl.out" 2>"$TMP/eval_dnnl.log" \
    && ok "eval evaluates the checkpoint with oneDNN" \
    || bad "eval with oneDNN failed: $(tail -2 "$TMP/eval_dnnl.log")"
  grep -q "oneDNN's sgemm (libdnnl.so.2) computes the products, checked at start-up" \
    "$TMP/eval_dnnl.log" && key_ok run.blas_library "eval: oneDNN computes, checked at start-up" \
    || bad "no oneDNN line: $(grep -m2 'blas\|oneDNN' "$TMP/eval_dnnl.log")"
fi

# [run] blas_library = auto (the default) on a conv net, through apex-local: OpenBLAS computes
# the products and the learner's conv layers run on oneDNN's convolution primitives
# (model/dnnconv.h; the first layer, 8x8 stride 4, as space to depth), it trains
# ONEDNN_UPDATES updates on MinAtar Breakout drawn as 84x84 frames, and apex-eval evaluates
# the checkpoint with the same library (its batch of one: conv.c's path), and with openblas
# without loading oneDNN at all.
UPD=${ONEDNN_UPDATES:-30}
RUN="$RUNS/pixels-auto"
rc=0
scripts/apex-local configs/minatar-breakout-pixels.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
  --set run.out_dir="$RUNS" --set run.name=pixels-auto \
  --set replay.min_size_to_sample=300 --set learner.batch_size=32 --set learner.max_steps="$UPD" \
  --set run.max_seconds=300 >"$TMP/pixels.out" 2>&1 || rc=$?
grep -q "OpenBLAS computes the products; oneDNN's convolution primitives (libdnnl.so.2) the conv" \
  "$RUN"/learner*.log && key_ok run.blas_library "auto: OpenBLAS's products, oneDNN's convolutions" \
  || bad "no auto line in the learner's log: $(grep -h -m2 'blas:' "$RUN"/learner*.log)"
grep -q "reached \[learner\] max_steps = $UPD" "$RUN"/learner*.log \
  && ok "MinAtar Breakout from 84x84 frames: $UPD updates with oneDNN's convolutions" \
  || { bad "the oneDNN conv run did not train (exit $rc)"; grep -h -i -m3 "error\|refus" "$RUN"/*.log; }
line=$(grep -m1 "conv layers on oneDNN's convolution primitives" "$RUN"/learner*.log || true)
[[ "$line" == *"at batch 32 (first layer s2d"* ]] && ok "the learner's conv layers on oneDNN: ${line#*I apex: }" \
  || bad "no oneDNN conv line in the learner's log: '$line'"
grep -q "the conv layers run on im2col" "$RUN"/*.log && bad "a body fell back: $(grep -h -m1 'im2col' "$RUN"/*.log)" \
  || ok "no conv body fell back to im2col"
"$APEX_BIN/apex-eval" -c "$RUN/config.ini" --checkpoint "$RUN/checkpoint.bin" --episodes 2 \
  >"$TMP/pixels_eval.out" 2>"$TMP/pixels_eval.err" && grep -q " mean " "$TMP/pixels_eval.out" \
  && ok "apex-eval with oneDNN evaluates it: $(grep -o 'mean [-0-9.]*' "$TMP/pixels_eval.out")" \
  || bad "apex-eval on the oneDNN checkpoint: $(cat "$TMP/pixels_eval.err" "$TMP/pixels_eval.out" | tail -3)"
"$APEX_BIN/apex-eval" -c "$RUN/config.ini" --set run.blas_library=openblas \
  --checkpoint "$RUN/checkpoint.bin" --episodes 2 >"$TMP/pixels_eval_ob.out" \
  2>"$TMP/pixels_eval_ob.err" && grep -q " mean " "$TMP/pixels_eval_ob.out" \
  && ! grep -q "oneDNN" "$TMP/pixels_eval_ob.err" \
  && ok "apex-eval with openblas evaluates it without oneDNN" \
  || bad "apex-eval with openblas: $(grep -h -m2 'oneDNN\|rror' "$TMP/pixels_eval_ob.err")"

# [run] blas_library = onednn (oneDNN's sgemm for the products too) in bfloat16 ([learner]
# precision = bf16) where the CPU has AVX512_BF16: the convolutions in bfloat16 on oneDNN's
# primitives.
if has avx512_bf16; then
  RUN="$RUNS/pixels-onednn-bf16"
  rc=0
  scripts/apex-local configs/minatar-breakout-pixels.ini --bin "$APEX_BIN" --quiet $(endpoint_sets) \
    --set run.out_dir="$RUNS" --set run.name=pixels-onednn-bf16 --set run.blas_library=onednn \
    --set learner.precision=bf16 --set replay.min_size_to_sample=300 --set learner.batch_size=32 \
    --set learner.max_steps="$UPD" --set run.max_seconds=300 >"$TMP/pixels16.out" 2>&1 || rc=$?
  grep -q "reached \[learner\] max_steps = $UPD" "$RUN"/learner*.log \
    && grep -q "conv layers in bfloat16 on oneDNN's convolution primitives" "$RUN"/learner*.log \
    && grep -q "oneDNN's sgemm (libdnnl.so.2) computes the products" "$RUN"/learner*.log \
    && ok "bf16: $UPD updates with the convolutions in bfloat16 on oneDNN" \
    || { bad "the bf16 oneDNN conv run (exit $rc)"; grep -h -i -m3 "error\|refus\|bfloat16" "$RUN"/*.log; }
fi

# A library that is not one: a config error naming the choices.
expect_rc 2 "blas_library = bogus is a config error" "$APEX_BIN/apex-eval" -c configs/cartpole.ini \
  --set run.blas_library=bogus --checkpoint /nonexistent
grep -q "openblas|onednn" "$TMP/err" && ok "the error names the choices" \
  || bad "error: $(cat "$TMP/err")"

# The user's variable: respected; far below the CPU (SSE on an AVX2 CPU) it is a warning.
OPENBLAS_CORETYPE=Prescott "$APEX_BIN/apex-eval" -c configs/cartpole.ini "${SETS[@]}" \
  --checkpoint /nonexistent >/dev/null 2>"$TMP/user.log" || true
line=$(blas_line "$TMP/user.log")
[[ "$line" == *"OpenBLAS Prescott (SSE), as OPENBLAS_CORETYPE=Prescott in the environment asks"* ]] \
  && ok "OPENBLAS_CORETYPE=Prescott is respected" || bad "user's variable: '$line'"
if has avx2 && has fma; then
  [[ "$line" == *" W blas:"* && "$line" == *"HINT: unset OPENBLAS_CORETYPE"* ]] \
    && ok "SSE on an AVX2 CPU: a warning with the remedy" || bad "no warning: '$line'"
fi

# openblas: OpenBLAS's own choice, no restart.
env -u OPENBLAS_CORETYPE "$APEX_BIN/apex-eval" -c configs/cartpole.ini "${SETS[@]}" \
  --set run.blas_kernel=openblas --checkpoint /nonexistent >/dev/null 2>"$TMP/own.log" || true
line=$(blas_line "$TMP/own.log")
[[ "$line" == *"OpenBLAS's own choice ([run] blas_kernel = openblas)"* ]] \
  && ok "openblas keeps OpenBLAS's choice" || bad "openblas: '$line'"

# A value that is no kernel: a config error naming the choices.
expect_rc 2 "blas_kernel = bogus is a config error" "$APEX_BIN/apex-learner" -c configs/cartpole.ini \
  --set run.blas_kernel=bogus
grep -q "blas_kernel: 'bogus' is not auto, openblas or one of" "$TMP/err" \
  && ok "the error names the choices" || bad "error: $(cat "$TMP/err")"
finish
