#!/usr/bin/env bash
# apex's MuJoCo v4 tasks against Gymnasium's own code, bit for bit (issue #28). Each fixture
# in tests/fixtures/mujoco/gymref/ was written by gen_gym_traces.py from Gymnasium alone:
# Gymnasium's hopper_v4.py, walker2d_v4.py, half_cheetah_v4.py, ant_v4.py,
# inverted_(double_)pendulum_v4.py run unmodified on the same libmujoco (2.2.2, through our
# ctypes stand-in for the `mujoco` package), on apex's own test models, with Gymnasium's
# reset noise drawn from apex's env stream. apex-eval --trace replays each fixture's actions
# and must print the fixture byte for byte: every float32 observation bit, every float32
# reward, every terminated / truncated flag (a 1 000-step truncation included) and every
# reset state. MANIFEST.txt gives each fixture's command (seed, steps, config, model).
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
D=tests/fixtures/mujoco/gymref
n=0
for f in "$D"/*.trace; do
  name=$(basename "$f")
  cmd=$(grep -A1 "^$name " "$D/MANIFEST.txt" | sed -n '2s/^ *//p')
  if [ -z "$cmd" ]; then bad "$name: no command in MANIFEST.txt"; continue; fi
  # "bin/apex-eval ARGS --actions F | cmp - F": ARGS run with the binaries under test.
  read -r -a args <<<"$(echo "$cmd" | sed 's|^bin/apex-eval ||; s| --actions F .*$||')"
  "$APEX_BIN/apex-eval" "${args[@]}" --actions "$f" >"$TMP/out" 2>"$TMP/err" || true
  if cmp -s "$TMP/out" "$f"; then
    ok "$name: $(grep -c . "$f") lines identical to Gymnasium's ($(grep -c 'term=1' "$f") terminations, $(grep -c 'trunc=1' "$f") truncations)"
  else
    l=$(cmp "$TMP/out" "$f" 2>/dev/null | sed -n 's/.* line \([0-9]*\)$/\1/p')
    bad "$name differs at line ${l:-?}: apex '$(sed -n "${l:-1}p" "$TMP/out" | cut -c1-120)' gymnasium '$(sed -n "${l:-1}p" "$f" | cut -c1-120)' $(head -c 200 "$TMP/err")"
  fi
  n=$((n + 1))
done
[ "$n" -ge 8 ] || bad "only $n fixtures in $D"
finish
