# bench/lib.sh: helpers some bench/run_*.sh scripts source (not a benchmark itself; the
# machine header is bench/machine.sh).
#
#   bench_median V...     the median of the numbers given (mean of the middle two if even).
#   bench_field OUT KIND NAME
#                         field 3 of the line "KIND NAME value ..." in OUT (BENCH or RESULT).
#   free_port_sets        --set lines giving the four [endpoints] pairs free loopback ports
#                         (learn_bench.sh, learn_minatar.sh)
#   bench_learn_init      how learn_bench.sh and learn_minatar.sh start: BIN (default bin) and
#                         PYTHON (default Debian's python3), and BIN's four daemons built by
#                         make when one is missing; returns 1 when make fails

bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    if (NR == 0) exit 1
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

bench_field() {
  awk -v k="$2" -v n="$3" '$1 == k && $2 == n {print $3; exit}' <<<"$1"
}

# Four free loopback ports as endpoint overrides (bind to port 0, read the port, close).
free_port_sets() {
  "${PYTHON:-/usr/bin/python3}" - <<'PY'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
for s in socks:
    s.close()
for name, p in zip(("replay_insert", "replay_sample", "learner_weights", "learner_stats"), ports):
    print(f"endpoints.{name}_bind=tcp://127.0.0.1:{p}")
    print(f"endpoints.{name}=tcp://127.0.0.1:{p}")
PY
}

bench_learn_init() {
  BIN=${BIN:-bin}
  PYTHON=${PYTHON:-/usr/bin/python3}
  local b
  for b in apex-replay apex-learner apex-actor apex-eval; do
    [ -x "$BIN/$b" ] || { make --no-print-directory >&2 || return 1; break; }
  done
}
