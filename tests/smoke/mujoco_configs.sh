#!/usr/bin/env bash
# The MuJoCo tasks' shipped configs and scripts/fetch-mujoco-models (issue #28), without
# Gymnasium's models (apex may not ship them, and CI has no network): apex's own test models
# (tests/fixtures/mujoco/) stand in for them, renamed to Gymnasium's file names, with their
# hashes given by --sha256-file. Checks:
#   - fetch-mujoco-models refuses files whose sha256 is not the pinned one: exit 1, nothing
#     installed, no temporary directory left, the directory it created removed again;
#   - with the fixtures' hashes (--sha256-file) it installs all six from a directory, a
#     file:// URL and an HTTP server (curl or wget), writes SOURCE.txt, and a second run does
#     nothing; one bad file installs none of the missing ones; a file in the directory with
#     another hash is refused unless --force; no curl or wget, a refused connection, a
#     hash table without a file: clear errors;
#   - the six configs (configs/halfcheetah.ini ...) name exactly the six files the script
#     installs, as models/mujoco/<file>; each loads, and with its task's test model steps in
#     apex-eval --trace, and in two apex-actors that fill a real apex-replay with no bad batch;
#   - a relative model_xml is relative to the working directory (found there; not found
#     elsewhere, saying where it looked); apex-slurm makes it absolute, and leaves an empty one.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
FETCH=scripts/fetch-mujoco-models

# config file | Gymnasium's file | apex's test model with the task's dimensions
TASKS="halfcheetah half_cheetah.xml planar.xml
hopper hopper.xml pogo.xml
walker2d walker2d.xml planar.xml
ant ant.xml quadruped.xml
inverted-pendulum inverted_pendulum.xml pendulum.xml
inverted-double-pendulum inverted_double_pendulum.xml double_pendulum.xml"

# --- fetch-mujoco-models ---------------------------------------------------------------
SRC="$TMP/src"
mkdir -p "$SRC"
while read -r _ file fixture; do cp "tests/fixtures/mujoco/$fixture" "$SRC/$file"; done <<<"$TASKS"
(cd "$SRC" && sha256sum *.xml) >"$TMP/fixtures.sha256"
# leftovers DIR: temporary directories the script left in DIR.
leftovers() { find "$1" -maxdepth 1 -name '.fetch.*' 2>/dev/null | wc -l; }

# The pinned hashes are Gymnasium's, not the fixtures': refused, nothing installed.
D="$TMP/models"
expect_rc 1 "fetch: files with other hashes than the pinned ones are refused" $FETCH --dir "$D" --from "$SRC"
grep -q "6 file(s) do not match their sha256 .*: nothing installed" "$TMP/err" \
  && grep -q "half_cheetah.xml from $SRC has sha256 [0-9a-f]\{64\}, not 11797a5d" "$TMP/err" \
  && ok "fetch: says which files and hashes" || bad "fetch: hash mismatch message: $(cat "$TMP/err")"
[ ! -e "$D" ] && ok "fetch: nothing installed, and the directory it made is gone" \
  || bad "fetch: left $(ls -A "$D" | tr '\n' ' ')"

# The fixtures' own hashes: installed, from a directory; then nothing to do.
expect_rc 0 "fetch --sha256-file: installs from a directory" $FETCH --dir "$D" --from "$SRC" --sha256-file "$TMP/fixtures.sha256"
n=0
while read -r _ file _; do cmp -s "$SRC/$file" "$D/$file" && n=$((n + 1)); done <<<"$TASKS"
[ "$n" = 6 ] && [ "$(leftovers "$D")" = 0 ] && grep -q "MIT License" "$D/SOURCE.txt" \
  && ok "fetch: the 6 files installed as given, SOURCE.txt with the license, no temporary left" \
  || bad "fetch: $n of 6 installed, $(leftovers "$D") temporaries: $(ls -A "$D" | tr '\n' ' ')"
stamp() { stat -c '%i %Y' "$D"/*.xml | md5sum; }
before=$(stamp)
expect_rc 0 "fetch: a second run succeeds" $FETCH --dir "$D" --from /nonexistent --sha256-file "$TMP/fixtures.sha256"
grep -q "the 6 models in $D match .*: nothing to do" "$TMP/out" && [ "$(stamp)" = "$before" ] \
  && ok "fetch: a second run does nothing (not even looking at --from)" || bad "fetch: second run: $(cat "$TMP/out" "$TMP/err")"

# One file missing, and the source's copy of another damaged: none installed.
rm "$D/hopper.xml" "$D/ant.xml"
cp "$SRC/ant.xml" "$TMP/ant.good"
echo "<!-- -->" >>"$SRC/ant.xml"
expect_rc 1 "fetch: a damaged source file is refused" $FETCH --dir "$D" --from "$SRC" --sha256-file "$TMP/fixtures.sha256"
[ ! -e "$D/hopper.xml" ] && [ ! -e "$D/ant.xml" ] && [ "$(leftovers "$D")" = 0 ] \
  && grep -q "ant.xml from $SRC has sha256" "$TMP/err" && grep -q "1 file(s) do not match" "$TMP/err" \
  && ok "fetch: one bad file: neither missing file installed, the temporary removed" \
  || bad "fetch: after a bad file: $(ls -A "$D" | tr '\n' ' '): $(cat "$TMP/err")"
mv "$TMP/ant.good" "$SRC/ant.xml"

# A file:// URL.
expect_rc 0 "fetch: installs from a file:// URL" $FETCH --dir "$D" --from "file://$SRC" --sha256-file "$TMP/fixtures.sha256"
grep -c "installed $D/" "$TMP/out" | grep -qx 2 && ok "fetch: only the 2 missing files fetched" || bad "fetch: file://: $(cat "$TMP/out")"

# A file someone changed in the directory: refused, unless --force.
echo "<!-- an edit -->" >>"$D/walker2d.xml"
expect_rc 1 "fetch: a changed file in the directory is refused" $FETCH --dir "$D" --from "$SRC" --sha256-file "$TMP/fixtures.sha256"
grep -q "walker2d.xml is there with sha256 .*run with --force to replace it" "$TMP/err" && grep -q "an edit" "$D/walker2d.xml" \
  && ok "fetch: says so and keeps it" || bad "fetch: changed file: $(cat "$TMP/err")"
expect_rc 0 "fetch --force replaces it" $FETCH --dir "$D" --from "$SRC" --sha256-file "$TMP/fixtures.sha256" --force
cmp -s "$SRC/walker2d.xml" "$D/walker2d.xml" && ok "fetch --force: the file is the source's again" || bad "fetch --force: walker2d.xml differs"

# Over HTTP (curl, else wget), from a server on a free port; a refused connection.
if command -v curl >/dev/null || command -v wget >/dev/null; then
  port=$(free_port)
  (cd "$SRC" && exec "$PY" -m http.server --bind 127.0.0.1 "$port") >"$TMP/http.log" 2>&1 &
  hp=$!
  PIDS+=("$hp")
  if wait_for 20 "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/ant.xml')"; then
    expect_rc 0 "fetch: installs over HTTP" $FETCH --dir "$TMP/http" --from "http://127.0.0.1:$port/" --sha256-file "$TMP/fixtures.sha256"
    [ "$(ls "$TMP/http"/*.xml | wc -l)" = 6 ] && ok "fetch: the 6 files downloaded" || bad "fetch: over HTTP: $(ls -A "$TMP/http")"
    expect_rc 1 "fetch: a file the server does not have" $FETCH --dir "$TMP/http404" --from "http://127.0.0.1:$port/nothing/" --sha256-file "$TMP/fixtures.sha256"
    grep -q "cannot download http://127.0.0.1:$port/nothing/half_cheetah.xml: .*nothing installed" "$TMP/err" && [ ! -e "$TMP/http404" ] \
      && ok "fetch: a failed download names the URL, installs nothing" || bad "fetch: 404: $(cat "$TMP/err")"
  else
    bad "python3 -m http.server did not start: $(cat "$TMP/http.log")"
  fi
  kill "$hp" 2>/dev/null || true
  wait "$hp" 2>/dev/null || true
  closed=$(free_port)
  expect_rc 1 "fetch: a refused connection" $FETCH --dir "$TMP/refused" --from "http://127.0.0.1:$closed" --sha256-file "$TMP/fixtures.sha256"
  grep -q "cannot download .*(no network? a proxy? --from DIR works offline); nothing installed" "$TMP/err" && [ ! -e "$TMP/refused" ] \
    && ok "fetch: a network failure says what to do" || bad "fetch: refused: $(cat "$TMP/err")"
elif [ "${CI:-}" = true ]; then
  bad "neither curl nor wget under CI (scripts/install-deps.sh installs curl)"
else
  echo "  .... SKIPPED the HTTP checks: neither curl nor wget (scripts/install-deps.sh installs curl)"
fi
# No curl and no wget: a PATH of everything else the script uses.
mkdir "$TMP/nodl"
for t in bash env dirname cat awk sha256sum cut mkdir mktemp rm rmdir cp mv tail sed; do
  ln -s "$(command -v "$t")" "$TMP/nodl/$t"
done
expect_rc 1 "fetch: no curl and no wget" env PATH="$TMP/nodl" bash $FETCH --dir "$TMP/nodl-models" --sha256-file "$TMP/fixtures.sha256"
grep -q "neither curl nor wget is installed: .*--from DIR" "$TMP/err" && ok "fetch: says to install one or use --from" \
  || bad "fetch: no downloader: $(cat "$TMP/err")"
# A hash table without one of the six files; an unknown option.
grep -v hopper.xml "$TMP/fixtures.sha256" >"$TMP/five.sha256"
expect_rc 2 "fetch: a --sha256-file without hopper.xml is a usage error" $FETCH --dir "$TMP/five" --from "$SRC" --sha256-file "$TMP/five.sha256"
grep -q "no sha256 for hopper.xml" "$TMP/err" && ok "fetch: names the file without a hash" || bad "fetch: five hashes: $(cat "$TMP/err")"
expect_rc 2 "fetch: an unknown option" $FETCH --frobnicate

# --- the configs -----------------------------------------------------------------------
# The six configs and the script's six files are the same six.
script_files=$(sed -n 's/^FILES="\(.*\)"$/\1/p' $FETCH | tr ' ' '\n' | sort)
config_files=$(sed -n 's|^model_xml = models/mujoco/||p' $(while read -r c _; do echo "configs/$c.ini"; done <<<"$TASKS") | sort)
task_files=$(while read -r _ file _; do echo "$file"; done <<<"$TASKS" | sort)
[ -n "$script_files" ] && [ "$script_files" = "$config_files" ] && [ "$script_files" = "$task_files" ] \
  && ok "the configs' model_xml are models/mujoco/<the 6 files fetch-mujoco-models installs>" \
  || bad "configs name: $(echo $config_files); the script installs: $(echo $script_files)"

RUNS="$TMP/runs"
SETS=($(endpoint_sets) --set run.out_dir="$RUNS" --set replay.stats_interval_ms=200 --set replay.capacity=20000
      --set replay.min_size_to_sample=1000 --set actor.max_steps_per_s=200 --set actor.stats_interval_ms=200)
# size_ge LOG N: the replay's last stats line in LOG shows at least N transitions held.
size_ge() {
  local n
  n=$(sed -n 's/.* size \([0-9]*\)\/[0-9]*  inserts.*/\1/p' "$1" | tail -1)
  [ -n "$n" ] && [ "$n" -ge "$2" ]
}
exited() { [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }
stop() {
  kill -TERM "$1" 2>/dev/null || true
  wait_for 30 exited "$1" || kill -9 "$1" 2>/dev/null || true
  RC=0; wait "$1" 2>/dev/null || RC=$?
}
while read -r c file fixture; do
  cfg=(-c "configs/$c.ini" --set env.model_xml="tests/fixtures/mujoco/$fixture")
  expect_rc 0 "$c.ini loads" "$APEX_BIN/apex-replay" -c "configs/$c.ini" --print-config
  id=$(sed -n 's/^id = //p' "configs/$c.ini")
  # apex-eval steps the task on the test model with seeded random actions (resets included).
  expect_rc 0 "$c.ini: apex-eval --trace on $fixture" "$APEX_BIN/apex-eval" "${cfg[@]}" --trace 1 20
  [ "$(grep -c '^t=[0-9]* a=[-0-9]' "$TMP/out")" = 20 ] && grep -q "$id: model tests/fixtures/mujoco/$fixture" "$TMP/err" \
    && ok "$c.ini: $id steps 20 times" || bad "$c.ini trace: $(tail -n 2 "$TMP/out") $(tail -n 2 "$TMP/err")"
  # Two actors with the config's envs and noise schedule fill a real replay.
  "$APEX_BIN/apex-replay" "${cfg[@]}" "${SETS[@]}" --set run.name="$c" 2>"$TMP/$c.replay.log" &
  rp=$!
  PIDS+=("$rp")
  aps=()
  for i in 0 1; do
    "$APEX_BIN/apex-actor" "${cfg[@]}" "${SETS[@]}" --set run.name="$c" --index "$i" 2>"$TMP/$c.actor$i.log" &
    aps+=($!)
    PIDS+=($!)
  done
  if wait_for 60 size_ge "$TMP/$c.replay.log" 1000; then
    ok "$c.ini: 2 actors filled the replay past 1 000 transitions"
  else
    bad "$c.ini: replay: $(grep ' size ' "$TMP/$c.replay.log" | tail -1) actor0: $(tail -2 "$TMP/$c.actor0.log")"
  fi
  for i in 0 1; do stop "${aps[$i]}"; [ "$RC" = 0 ] || bad "$c.ini: actor $i exit $RC: $(tail -2 "$TMP/$c.actor$i.log")"; done
  stop "$rp"
  [ "$RC" = 0 ] && grep -q "stopping: .* 0 bad messages" "$TMP/$c.replay.log" \
    && ok "$c.ini: actors and replay stopped cleanly, no bad batch" || bad "$c.ini: replay exit $RC: $(tail -2 "$TMP/$c.replay.log")"
done <<<"$TASKS"

# --- where a relative model_xml is looked for --------------------------------------------
mkdir -p "$TMP/cwd/models/mujoco" "$TMP/elsewhere"
cp tests/fixtures/mujoco/pogo.xml "$TMP/cwd/models/mujoco/hopper.xml"
(cd "$TMP/cwd" && "$APEX_BIN/apex-eval" -c "$ROOT/configs/hopper.ini" --trace 1 2) >"$TMP/out" 2>"$TMP/err" \
  && grep -q "Hopper-v4: model models/mujoco/hopper.xml" "$TMP/err" \
  && ok "models/mujoco/hopper.xml is found in the working directory" || bad "relative model_xml: $(tail -2 "$TMP/err")"
rc=0
(cd "$TMP/elsewhere" && "$APEX_BIN/apex-eval" -c "$ROOT/configs/hopper.ini" --trace 1 2) >"$TMP/out" 2>"$TMP/err" || rc=$?
[ "$rc" = 2 ] && grep -q "cannot load model_xml 'models/mujoco/hopper.xml': .*(no such file in the working directory $TMP/elsewhere; scripts/fetch-mujoco-models installs" "$TMP/err" \
  && ok "elsewhere: exit 2, naming the directory it looked in and the script" || bad "relative model_xml elsewhere (exit $rc): $(tail -2 "$TMP/err")"
# apex-slurm writes the run's config.ini with model_xml absolute (a fake sbatch takes the
# job); an empty one (CartPole) stays empty, or the config would not load.
mkdir "$TMP/fakebin"
printf '#!/bin/sh\necho 4242\n' >"$TMP/fakebin/sbatch"
chmod +x "$TMP/fakebin/sbatch"
for c in hopper cartpole; do
  rc=0
  PATH="$TMP/fakebin:$PATH" scripts/apex-slurm "configs/$c.ini" --bin "$APEX_BIN" --set run.out_dir="$TMP/slurm" \
    >"$TMP/out" 2>"$TMP/err" || rc=$?
  want="model_xml = $ROOT/models/mujoco/hopper.xml"
  [ "$c" = cartpole ] && want="model_xml = "
  [ "$rc" = 0 ] && grep -qx "$want" "$TMP/slurm/$c/config.ini" \
    && ok "apex-slurm $c.ini: config.ini has '$want'" || bad "apex-slurm $c.ini (exit $rc): $(grep model_xml "$TMP/slurm/$c/config.ini" 2>/dev/null) $(tail -2 "$TMP/err")"
done
finish
