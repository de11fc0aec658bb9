# lib.sh: helpers shared by the smoke tests (sourced, not run).
# APEX_BIN is the directory of the binaries under test (set by make).
set -euo pipefail
# A command that fails outside a condition ends the script (set -e); say where, or a smoke
# test that stops early (a grep that found nothing yet, under pipefail) fails silently.
set -E
trap '__rc=$?; [ "$BASH_SUBSHELL" = 0 ] && echo "  FAIL ${0##*/} stopped at line $LINENO: $BASH_COMMAND (exit $__rc)" >&2' ERR
APEX_BIN=${APEX_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/bin}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PASS=0
FAIL=0

ok() { PASS=$((PASS + 1)); echo "  ok   $*"; }
bad() { FAIL=$((FAIL + 1)); echo "  FAIL $*"; }
# key_ok KEYS MESSAGE: ok, from the check that shows the effect of the config keys KEYS
# (section.key, comma separated) that this script tags "# key: section.key" above the
# command that sets them (tests/check_keys.c's smoke rows). finish fails a tagged key that
# no key_ok showed: a tag is a claim that this script checks the key, not a comment.
KEYS_SHOWN=" "
key_ok() {
  local k
  for k in ${1//,/ }; do KEYS_SHOWN+="$k "; done
  shift
  ok "$*"
}
# expect_rc WANT DESCRIPTION CMD...: runs CMD, checks its exit status.
expect_rc() {
  local want=$1 what=$2; shift 2
  local rc=0
  "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [ "$rc" = "$want" ]; then ok "$what"; else bad "$what (exit $rc, want $want)"; sed 's/^/       /' "$TMP/err" | tail -5; fi
}
# free_port: an unused TCP port on loopback, below the kernel's ephemeral range. A port from
# bind(0) is an ephemeral one, which any connect() on the machine may be given between this
# check and the daemon's bind (hostile.sh's fake upstream lost its port that way to one of
# the cluster's own connections: "Address already in use"); a port below the range is never
# handed out to a connection. Random within the 12 000 ports below it, checked free, and never
# one this script was given before: a port handed out is not bound until its daemon starts,
# so two calls could be given the same one (the likely cause of deterministic.sh's learner finding a port
# of its own in use in CI: 4 draws of 12 000 collide 1 time in 2 000). $TMP/.ports keeps the ports given.
free_port() {
  "$PY" - "$TMP/.ports" <<'PY'
import os, random, socket, sys
given = set()
if os.path.exists(sys.argv[1]):
    given = {int(x) for x in open(sys.argv[1]).read().split()}
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(500):
    p = random.randint(max(1024, lo - 12000), lo - 1) if lo > 2048 else 0
    if p in given:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        p = s.getsockname()[1]
    except OSError:
        continue
    finally:
        s.close()
    with open(sys.argv[1], "a") as f:
        f.write("%d\n" % p)
    print(p)
    break
else:
    raise SystemExit("free_port: no free port below the ephemeral range")
PY
}
# endpoint_sets: --set options pointing every endpoint at fresh loopback ports.
endpoint_sets() {
  local p1 p2 p3 p4
  p1=$(free_port); p2=$(free_port); p3=$(free_port); p4=$(free_port)
  echo "--set endpoints.replay_insert_bind=tcp://127.0.0.1:$p1 --set endpoints.replay_insert=tcp://127.0.0.1:$p1" \
       "--set endpoints.replay_sample_bind=tcp://127.0.0.1:$p2 --set endpoints.replay_sample=tcp://127.0.0.1:$p2" \
       "--set endpoints.learner_weights_bind=tcp://127.0.0.1:$p3 --set endpoints.learner_weights=tcp://127.0.0.1:$p3" \
       "--set endpoints.learner_stats_bind=tcp://127.0.0.1:$p4 --set endpoints.learner_stats=tcp://127.0.0.1:$p4"
}
# wait_for SECONDS CMD...: polls CMD every 0.2 s until it succeeds; returns 1 on timeout.
wait_for() {
  local deadline=$(( $(date +%s) + $1 )); shift
  while ! "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$deadline" ] && return 1
    sleep 0.2
  done
}
finish() {
  local k
  for k in $(sed -n 's/^[[:space:]]*# key: \([a-z_]*\.[a-z_0-9]*\)[[:space:]]*$/\1/p' "$0"); do
    case "$KEYS_SHOWN" in
      *" $k "*) ;;
      *) bad "key $k is tagged here, but no check showed its effect (key_ok $k)" ;;
    esac
  done
  echo "$(basename "$0"): $PASS passed, $FAIL failed"
  [ "$FAIL" -eq 0 ]
}
# skip WHY: the script cannot run here (no root, no Slurm, no network namespaces...): says so
# and exits 0; under CI=true (.ci/run), where everything it needs must be there, it fails.
skip() {
  if [ "${CI:-}" = true ]; then
    bad "cannot run under CI: $*"
    finish || exit 1
  fi
  echo "$(basename "$0"): skipped: $*"
  exit 0
}
# no_procs PATTERN: no process's command line matches PATTERN (pgrep -f); for an orphan check,
# wait_for SECONDS no_procs PATTERN: a stopped daemon's children may take a moment to exit.
no_procs() { ! pgrep -f "$1" >/dev/null; }
# Debian's interpreter has python3-zmq and numpy (another python3 may come first on PATH).
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# col NAME: column NAME of the last row of $RUN/metrics.csv ("" when there is none yet).
col() {
  "$PY" - "$RUN/metrics.csv" "$1" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
    print(rows[-1][sys.argv[2]] if rows else "")
except Exception:
    print("")
PY
}
# csv_rows: data rows in $RUN/metrics.csv (0 while it is missing); rows_ge N: at least N.
csv_rows() { local n; n=$(wc -l <"$RUN/metrics.csv" 2>/dev/null || echo 1); echo $((n > 0 ? n - 1 : 0)); }
rows_ge() { [ "$(csv_rows)" -ge "$1" ]; }
# gt NAME X: the metric NAME is above X (false while it is missing).
gt() { local v; v=$(col "$1"); [ -n "$v" ] && "$PY" -c "import sys; sys.exit(0 if float('$v') > float('$2') else 1)"; }
TMP=$(mktemp -d /tmp/apex_smoke.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  # Anything still running from this script's scratch directory (a daemon a launcher left
  # behind) would go on sending to the ports of the scripts after it: named, then killed.
  local left
  left=$(pgrep -f "$TMP/" | grep -vx "$$" || true)
  if [ -n "$left" ]; then
    echo "  ORPHAN processes left by $(basename "$0"): $(ps -o pid=,args= -p "$(echo $left | tr ' ' ,)" | cut -c1-160 | tr '\n' ';')" >&2
    kill -9 $left 2>/dev/null || true
  fi
  # APEX_SMOKE_KEEP=1 keeps the scratch directory (run dirs, logs) for a post-mortem.
  if [ "${APEX_SMOKE_KEEP:-0}" = 1 ]; then echo "  kept $TMP" >&2; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
