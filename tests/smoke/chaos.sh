#!/usr/bin/env bash
# smoke: slow
# Chaos: a CartPole run through scripts/apex-local --restart on-failure with [replay]
# durability = wal while scripts/chaos kills a random daemon (replay, learner, an actor) with
# SIGKILL every few seconds (the plan's kills, then none), plus a wal "probe" replay server
# fed with known batches for the loss accounting. Passes when the run is solved anyway, only the killed daemons died, no
# acknowledged probe batch is lost or stored twice, and the cluster's replay stored no batch
# twice (see scripts/chaos for every check).
#   CHAOS_MODE=short (default, for make test): configs/smoke.ini, >= 15 kills (5 of each
#     kind) every 1..2 s, solved = greedy mean >= 475, 150 s budget.
#   CHAOS_MODE=full (make chaos): configs/cartpole.ini, >= 24 kills (8 of each kind) every
#     1.5..3.5 s, solved = greedy mean >= 475, 180 s budget.
# CHAOS_THRESHOLD, CHAOS_SEED and CHAOS_KEEP=DIR (keep the run directory) override;
# APEX_SKIP_CHAOS=1 skips the whole script (e.g. in a CI job short of time).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
if [ "${APEX_SKIP_CHAOS:-0}" = 1 ]; then echo "chaos.sh: skipped (APEX_SKIP_CHAOS=1)"; exit 0; fi
case "${CHAOS_MODE:-short}" in
  short) ARGS=(configs/smoke.ini --kills 15 --min-per-kind 5 --interval 1,2 --budget 150) ;;
  full) ARGS=(configs/cartpole.ini --kills 24 --min-per-kind 8 --interval 1.5,3.5 --budget 180) ;;
  *) echo "CHAOS_MODE must be short or full"; exit 2 ;;
esac
ARGS+=(--threshold "${CHAOS_THRESHOLD:-475}")
[ -n "${CHAOS_SEED:-}" ] && ARGS+=(--seed "$CHAOS_SEED")
OUT="$TMP/chaos"
rc=0
"$PY" scripts/chaos "${ARGS[@]}" --bin "$APEX_BIN" --out "$OUT" >"$TMP/chaos.out" 2>&1 || rc=$?
grep '^chaos: ' "$TMP/chaos.out" | sed 's/^chaos: /    /' || true
while IFS= read -r line; do
  case "$line" in
    "  ok   "*) ok "${line#  ok   }" ;;
    "  FAIL "*) bad "${line#  FAIL }" ;;
  esac
done <"$TMP/chaos.out"
[ "$rc" = 0 ] && ok "scripts/chaos exits 0" || bad "scripts/chaos exit $rc"
if [ "$FAIL" -gt 0 ]; then
  echo "    --- tail of $OUT/launcher.out"; tail -n 25 "$OUT/launcher.out" 2>/dev/null | sed 's/^/    /'
  [ -n "${CHAOS_KEEP:-}" ] || CHAOS_KEEP="/tmp/apex-chaos-failed.$$"
fi
if [ -n "${CHAOS_KEEP:-}" ]; then
  rm -rf "$CHAOS_KEEP" && cp -r "$OUT" "$CHAOS_KEEP" && echo "    run directory kept in $CHAOS_KEEP"
fi
finish
