#!/usr/bin/env bash
# run_replay_tcp.sh: the apex replay server end to end over TCP loopback
# (build/bench/bench_replay_tcp: a real replay_server_t in a thread, capacity 2^20 pre-filled,
# CartPole dims; 4 pusher threads sending TransitionBatches of 50 like actors; one learner
# thread keeping 4 SampleRequests of 512 in flight and sending a PriorityUpdate per reply).
#
# Runs three set-ups back to back and prints their lines:
#   default      4 unpaced pushers (as fast as the server acks)   -> replay.tcp.*
#   paced        4 pushers sharing 200 k transitions/s, roughly what several actors feed
#                                                                 -> replay.tcp.paced200k.*
#   no inserts   sampling alone, the server's ceiling for the learner
#                                                                 -> replay.tcp.pushers0.*
# each once with four batches per SampleRequest (what the learner's default
# [learner] batches_per_request = 0, auto, picks for CartPole) and once with one
# (batches_per_request = 1; names get .batches1).
# Goal: >= 10 k sample batches/s to the learner. There is no peer for this benchmark:
# numpy_per.py is in-process only (bench/run_replay.sh compares the store with it).
# Everything (server thread, pushers, learner thread, libzmq I/O threads) shares this
# machine's cores; the "# cpu" lines say who used them.
# Usage: bash bench/run_replay_tcp.sh     env: BUILD (default build), REPLAY_TCP_ARGS (extra
# flags for every run, e.g. "--windows 7 --window 3")
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
bin="$BUILD/bench/bench_replay_tcp"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2

status=0
# shellcheck disable=SC2086 # REPLAY_TCP_ARGS is a list of flags
for args in "" "--insert-rate 200000" "--pushers 0" \
            "--batches 1" "--insert-rate 200000 --batches 1" "--pushers 0 --batches 1"; do
  echo "# apex:  $bin $args ${REPLAY_TCP_ARGS:-}"
  "$bin" $args ${REPLAY_TCP_ARGS:-} || { echo "run_replay_tcp: '$bin $args' failed" >&2; status=1; }
done
exit $status
