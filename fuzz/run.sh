#!/usr/bin/env bash
# fuzz/run.sh: run the libFuzzer harnesses built by `make fuzz-build`.
#
#   fuzz/run.sh [target...]        targets: wire config pywire replay learner (default: all)
#   FUZZ_SECONDS=60                time per target
#   FUZZ_JOBS=1                    parallel fuzzing jobs per target (the CI box has 2 cores)
#   FUZZ_WORK=dir                  keep the run's corpus and artifacts there (default: a
#                                  fresh directory under ${TMPDIR:-/tmp}, removed on success)
#   FUZZ_BUILD=build-fuzz          where the harness binaries are
#
# Each target first runs every file of fuzz/regressions/<target> and fuzz/replay/<target>
# once, then fuzzes a writable copy of fuzz/corpus/<target>, so a run never adds files to
# the repository. Exits non-zero if any target found a crash,
# leak, timeout, out-of-memory or sanitizer report, and prints the reproducer paths; the
# work directory is then kept. To keep a new reproducer, minimise it and add it to
# fuzz/regressions/<target>/ (see fuzz/README.md).
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_JOBS=${FUZZ_JOBS:-1}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(wire config pywire replay learner)
fi

if [ -n "${FUZZ_WORK:-}" ]; then
    work=$FUZZ_WORK
    mkdir -p "$work"
    keep_work=1
else
    work=$(mktemp -d "${TMPDIR:-/tmp}/apex-fuzz.XXXXXX")
    keep_work=0
fi

# Per-target libFuzzer options: the wire harness takes up to 64 KiB messages (a real
# sample reply of a few hundred rows); configs are short text with a key dictionary; a
# bridge message is a header and a reply region of at most 4 KiB (fuzz_pywire.c).
s_options() {
    case "$1" in
    wire) echo "-max_len=65536" ;;
    config) echo "-max_len=4096 -dict=$PWD/fuzz/config.dict" ;;
    pywire) echo "-max_len=4096" ;;
    # Programs of operations (fuzz_prog.h): a few hundred operations fit in 4 KiB.
    replay | learner) echo "-max_len=4096" ;;
    *) echo "run.sh: unknown target '$1'" >&2; return 1 ;;
    esac
}

failed=()
for t in "${targets[@]}"; do
    bin=$FUZZ_BUILD/fuzz_$t
    if [ ! -x "$bin" ]; then
        echo "run.sh: $bin not built (make fuzz-build)" >&2
        exit 2
    fi
    bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
    opts=$(s_options "$t")
    corpus=$work/$t/corpus
    artifacts=$work/$t/artifacts
    mkdir -p "$corpus" "$artifacts"
    cp fuzz/corpus/"$t"/* "$corpus"/
    rc=0
    # Saved crashes and slow inputs run once each first; they are not fuzzed further
    # (fuzz/replay/ holds inputs that would slow the fuzzer down as seeds).
    replay=$(find fuzz/regressions/"$t" fuzz/replay/"$t" -type f 2>/dev/null | sort || true)
    if [ -n "$replay" ]; then
        echo "== fuzz_$t: replaying $(echo "$replay" | wc -l) saved input(s)"
        # shellcheck disable=SC2086
        "$bin" -artifact_prefix="$artifacts/" $replay > "$work/$t/replay.log" 2>&1 || rc=$?
        if [ "$rc" -ne 0 ]; then
            tail -n 30 "$work/$t/replay.log"
            echo "!! reproducer: $(grep '^Running: ' "$work/$t/replay.log" | tail -n 1 | cut -c10-)"
        fi
    fi
    echo "== fuzz_$t: ${FUZZ_SECONDS}s, $FUZZ_JOBS job(s), corpus $corpus"
    # -jobs=N runs N fuzzing processes, each for max_total_time, whose logs go to
    # fuzz-<i>.log in the current directory, hence the subshell. One job runs in-process.
    if [ "$FUZZ_JOBS" -gt 1 ]; then
        opts="$opts -jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS"
    fi
    # shellcheck disable=SC2086
    (cd "$work/$t" && exec "$bin" $opts -timeout=10 -rss_limit_mb=2048 \
        -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" > "$work/$t/fuzz.log" 2>&1) || rc=$?
    # With -jobs the per-job logs hold the stats; show the last lines of every log.
    for log in "$work/$t"/fuzz*.log; do
        [ -f "$log" ] || continue
        grep -E '^(stat::|Done|#[0-9]+ +DONE)|ERROR|SUMMARY|Test unit written' "$log" | tail -n 12 \
            | sed "s|^|  [$(basename "$log")] |" || true
    done
    found=$(find "$artifacts" -type f 2>/dev/null | sort)
    if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
        echo "!! fuzz_$t FAILED (exit $rc); logs in $work/$t/"
        for f in $found; do
            echo "!! reproducer: $f"
            echo "!!   rerun: $bin $f"
        done
        failed+=("$t")
    else
        echo "== fuzz_$t: no findings"
    fi
done

if [ ${#failed[@]} -ne 0 ]; then
    echo "run.sh: findings in: ${failed[*]} (work directory kept: $work)"
    exit 1
fi
if [ "$keep_work" -eq 0 ]; then
    rm -rf "$work"
fi
echo "run.sh: all targets clean"
