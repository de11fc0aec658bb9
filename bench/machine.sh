# bench/machine.sh: sourced by every bench/run_*.sh, before anything is measured. Prints what
# a figure in bench/RESULTS.md must name next to it (ratios against PyTorch move with all
# three): the CPU, the OpenBLAS kernel in use and the OpenBLAS settings of the environment.
#   # machine: <CPU model> (<n> CPUs), <date>
#   # openblas: <package version>, kernel <Core: line of OPENBLAS_VERBOSE=2>
#   # env: OPENBLAS_*=... (or "no OPENBLAS_* variables set")
#   # apex blas: <the kernel line an apex daemon logs at start-up: which core runs, and why>
# Never sets OPENBLAS_CORETYPE: the benchmarks run on the kernel an apex daemon would run
# here (model/blas.h: OpenBLAS's own, or the one apex chooses for the CPU), as users do.
bench_machine() {
  local bin=${BIN:-bin} cpu n kernel ver vars
  # A fresh clone has no binaries yet: without them (and set -e -o pipefail in the callers)
  # the kernel line below would end the script before it printed anything.
  make --no-print-directory "$bin/apex-learner" "$bin/apex-eval" >/dev/null
  cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)
  n=$(nproc 2>/dev/null || echo '?')
  # OpenBLAS (a DYNAMIC_ARCH build) names the kernel it chose at load when asked.
  kernel=$(OPENBLAS_VERBOSE=2 "$bin/apex-learner" --help 2>&1 | sed -n 's/^Core: *//p' | head -1)
  ver=$(dpkg-query -W -f='${Version}' libopenblas0-pthread 2>/dev/null || echo unknown)
  vars=$(env | grep '^OPENBLAS_' | tr '\n' ' ' || true) # grep finds none: status 1
  echo "# machine: ${cpu:-unknown CPU} ($n CPUs), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "# openblas: $ver, kernel ${kernel:-unknown (not a DYNAMIC_ARCH build?)}"
  echo "# env: ${vars:-no OPENBLAS_* variables set}"
  # apex-eval logs the kernel line and then fails on the missing checkpoint.
  local line
  line=$("$bin/apex-eval" -c configs/cartpole.ini --checkpoint /nonexistent 2>&1 \
    | sed -n 's/.* blas: //p' | head -1 || true)
  echo "# apex blas: ${line:-unknown}"
}
bench_machine
