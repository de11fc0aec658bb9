# bench/lib.sh: helpers the bench/run_*.sh scripts source (not a benchmark itself).
#
#   bench_header BINARY   prints "#" lines: the CPU model and cores, the load average, the
#                         OpenBLAS kernel BINARY's OpenBLAS picks on this machine (it prints
#                         it at load time under OPENBLAS_VERBOSE=2; BINARY is run with an
#                         argument it refuses, so it exits at once), and every OPENBLAS_*
#                         variable of the environment (none should be set: never
#                         OPENBLAS_CORETYPE).
#   bench_median V...     the median of the numbers given (mean of the middle two if even).
#   bench_field OUT KIND NAME
#                         field 3 of the line "KIND NAME value ..." in OUT (BENCH or RESULT).

bench_header() {
  local bin=$1 model core vars
  model=$(awk -F: '/^model name/ {sub(/^ +/, "", $2); print $2; exit}' /proc/cpuinfo)
  echo "# cpu: ${model:-unknown} ($(nproc) online), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  core=$(OPENBLAS_VERBOSE=2 "$bin" --openblas-probe 2>&1 | awk '/^Core:/ {print $2; exit}' || true)
  echo "# openblas: kernel ${core:-unknown} (OPENBLAS_VERBOSE=2 of $bin)"
  vars=$(env | grep '^OPENBLAS_' || true)
  if [ -n "$vars" ]; then
    sed 's/^/# env: /' <<<"$vars"
  else
    echo "# env: no OPENBLAS_* variables set"
  fi
}

bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    if (NR == 0) exit 1
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

bench_field() {
  awk -v k="$2" -v n="$3" '$1 == k && $2 == n {print $3; exit}' <<<"$1"
}
