# bench/lib.sh: helpers some bench/run_*.sh scripts source (not a benchmark itself; the
# machine header is bench/machine.sh).
#
#   bench_median V...     the median of the numbers given (mean of the middle two if even).
#   bench_field OUT KIND NAME
#                         field 3 of the line "KIND NAME value ..." in OUT (BENCH or RESULT).

bench_median() {
  printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {
    if (NR == 0) exit 1
    if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

bench_field() {
  awk -v k="$2" -v n="$3" '$1 == k && $2 == n {print $3; exit}' <<<"$1"
}
