#!/usr/bin/env bash
# frames_kill.sh with [replay] compress = zstd: the compressed frames' arena and its index
# through two kill -9 of a wal shard (snapshot and log restore), nothing acknowledged lost.
# key: replay.compress
FRAMES_COMPRESS=zstd exec bash "$(dirname "$0")/frames_kill.sh"
