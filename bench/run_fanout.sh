#!/usr/bin/env bash
# run_fanout.sh: hundreds of actor processes against one apex-replay and one apex-learner
# (issue #29; bench/fanout.py says what each BENCH line measures). Four runs of 8, 64, 128
# and 256 actors at one total env rate (2 560 CartPole frames/s, so only the number of peers
# changes): on this machine's loopback without and with a weights relay, then, where
# network namespaces are allowed (root), the same split over 4 namespaces standing for 4
# hosts, without and with one relay per host. Prefixes: fanout (loopback), fanout.relay,
# fanout.ns4, fanout.ns4.relay. ~25 minutes; one benchmark at a time.
# Usage: bash bench/run_fanout.sh   env: BIN (default bin), FANOUT_ARGS (extra flags)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
PY=/usr/bin/python3
for b in apex-replay apex-learner apex-actor apex-relay; do
  [ -x "$BIN/$b" ] || { make --no-print-directory >&2; break; }
done
status=0
run() {
  echo "# apex:  bench/fanout.py $* ${FANOUT_ARGS:-}"
  # shellcheck disable=SC2086 # FANOUT_ARGS is a list of flags
  "$PY" bench/fanout.py --bin "$BIN" "$@" ${FANOUT_ARGS:-} || { echo "run_fanout: '$*' failed" >&2; status=1; }
}
run --relays 0 --prefix fanout
run --relays 1 --prefix fanout.relay
if [ "$(id -u)" = 0 ] && ip netns add "apexfo-probe-$$" 2>/dev/null; then
  ip netns del "apexfo-probe-$$"
  run --hosts 4 --relays 0 --prefix fanout.ns4
  run --hosts 4 --relays 1 --prefix fanout.ns4.relay
else
  echo "# run_fanout: network namespaces not allowed here (root and ip netns): the 4-host runs skipped"
fi
exit $status
