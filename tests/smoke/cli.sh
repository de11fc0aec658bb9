#!/usr/bin/env bash
# Every apex binary: --help, --help-config, --print-config exit 0; a bad config, an unknown
# key, a bad --set and a missing file exit 2 with a file:line message.
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

cat >"$TMP/typo.ini" <<'INI'
[replay]
capacity = 1000
capacit = 5
INI
shopt -s nullglob
for b in "$APEX_BIN"/apex-*; do
  n=$(basename "$b")
  # common/pidcache.c: libzmq's getpid calls must bind to the binary's cached one.
  nm -D --defined-only "$b" | grep -qw getpid && ok "$n exports its cached getpid" || bad "$n does not export getpid (pidcache.o not linked?)"
  [ "$n" = apex-keygen ] && continue # no config: tested below
  extra=()
  [ "$n" = apex-actor ] && extra=(--index 0)
  [ "$n" = apex-eval ] && extra=(--checkpoint /nonexistent)
  expect_rc 0 "$n --help" "$b" --help
  expect_rc 0 "$n --help-config" "$b" --help-config
  expect_rc 0 "$n --print-config" "$b" -c configs/cartpole.ini "${extra[@]}" --set replay.capacity=12345 --print-config
  grep -q '^capacity = 12345$' "$TMP/out" && grep -q '^id = CartPole-v1$' "$TMP/out" \
    && ok "$n --print-config shows resolved values" || bad "$n --print-config output"
  expect_rc 2 "$n unknown key" "$b" -c "$TMP/typo.ini" "${extra[@]}"
  grep -q "typo.ini:3: \[replay\] capacit: unknown key" "$TMP/err" && ok "$n names file:line:key" || bad "$n error message: $(cat "$TMP/err")"
  expect_rc 2 "$n bad --set" "$b" -c configs/cartpole.ini "${extra[@]}" --set replay.alpha=2
  expect_rc 2 "$n missing config" "$b" -c /nonexistent.ini "${extra[@]}"
  expect_rc 2 "$n bad flag" "$b" --frobnicate
done
# A MuJoCo id's [env] model_xml: required by every daemon's config check, and loaded by
# apex-actor and apex-eval at start-up: a missing or wrong file is one line and exit 2.
mj=(--set env.id=Hopper-v4)
expect_rc 2 "apex-replay: a MuJoCo id without model_xml" "$APEX_BIN/apex-replay" -c configs/cartpole.ini "${mj[@]}"
grep -q "\[env\] model_xml: Hopper-v4 is a MuJoCo task" "$TMP/err" && ok "model_xml required" || bad "model_xml message: $(cat "$TMP/err")"
expect_rc 2 "apex-replay: model_xml for CartPole" "$APEX_BIN/apex-replay" -c configs/cartpole.ini --set env.model_xml=x.xml
for b in apex-actor apex-eval; do
  extra=(--index 0)
  [ "$b" = apex-eval ] && extra=(--trace 1 5)
  expect_rc 2 "$b: a missing model_xml file" "$APEX_BIN/$b" -c configs/cartpole.ini "${extra[@]}" "${mj[@]}" --set env.model_xml="$TMP/none.xml"
  grep -q "Hopper-v4: cannot load model_xml '$TMP/none.xml': XML" "$TMP/err" && ok "$b names the model file" || bad "$b model_xml message: $(cat "$TMP/err")"
  expect_rc 2 "$b: another task's model" "$APEX_BIN/$b" -c configs/cartpole.ini "${extra[@]}" "${mj[@]}" --set env.model_xml=tests/fixtures/mujoco/pendulum.xml
  grep -q "has nq 2, nv 2, nu 1; Hopper-v4's model (hopper.xml) has nq 6" "$TMP/err" && ok "$b refuses another task's model" || bad "$b wrong model message: $(cat "$TMP/err")"
done
# apex-keygen: usage, key files with owner-only secrets, the allow-list.
expect_rc 2 "apex-keygen without arguments" "$APEX_BIN/apex-keygen"
expect_rc 0 "apex-keygen --help" "$APEX_BIN/apex-keygen" --help
expect_rc 0 "apex-keygen DIR" "$APEX_BIN/apex-keygen" "$TMP/keys"
[ "$(stat -c %a "$TMP/keys/replay.key")" = 600 ] && ok "secret keys are mode 600" || bad "replay.key mode $(stat -c %a "$TMP/keys/replay.key")"
[ "$(grep -c . "$TMP/keys/authorized_keys")" = 2 ] && ok "learner and actor keys authorized" || bad "authorized_keys: $(cat "$TMP/keys/authorized_keys")"
grep -q 'public-key = "' "$TMP/keys/actor.pub" && ! grep -q secret "$TMP/keys/actor.pub" && ok ".pub holds only the public key" || bad "actor.pub content"
# A Python env worker is a client of its actor's bridge: its key goes to the allow-list. (A
# Z85 key may start with '-': hence grep's "--".)
expect_rc 0 "apex-keygen DIR envworker" "$APEX_BIN/apex-keygen" "$TMP/keys" envworker
wpub=$(sed -n 's/.*public-key = "\(.*\)".*/\1/p' "$TMP/keys/envworker.pub")
grep -qxF -- "$wpub envworker" "$TMP/keys/authorized_keys" && [ "$(grep -c . "$TMP/keys/authorized_keys")" = 3 ] \
  && ok "envworker's key authorized" || bad "authorized_keys after envworker: $(cat "$TMP/keys/authorized_keys")"

# Continuous actions (issue #28): the replay server takes them; the learner trains on them
# (tests/smoke/dpg_learner.sh) and the actor acts on the built-in continuous envs
# (tests/smoke/dpg_actor.sh) and on Python envs (tests/smoke/python_continuous.sh); not yet
# supported, and refused at start-up saying why: a continuous learner group of ZeRO stage
# 2. A Python env
# whose Box bounds differ from the run's is refused naming both.
cont=(-c configs/smoke.ini --set env.id=external --set env.obs_dim=3 --set env.action_dim=1 --set env.action_low=-2
      --set env.action_high=2 --set run.out_dir="$TMP/cont")
expect_rc 0 "a continuous external env's config is valid" "$APEX_BIN/apex-replay" "${cont[@]}" --print-config
grep -q '^action_dim = 1$' "$TMP/out" && ok "--print-config shows action_dim" || bad "--print-config: no action_dim = 1"
# apex-learner trains continuous actions with DPG (tests/smoke/dpg_learner.sh), also as a
# learner group in every ZeRO stage (tests/smoke/dpg_group.sh runs stage 2): the config takes it.
expect_rc 0 "a continuous learner group of ZeRO stage 2 is a valid config" "$APEX_BIN/apex-learner" "${cont[@]}" \
  --set learner.ranks=2 --set learner.zero_stage=2 --print-config
grep -q '^zero_stage = 2$' "$TMP/out" && ok "--print-config shows zero_stage = 2" || bad "--print-config: $(grep zero_stage "$TMP/out")"
expect_rc 2 "apex-actor refuses a Python env whose Box bounds are not the run's" "$APEX_BIN/apex-actor" -c configs/smoke.ini \
  --index 0 --set env.id=python --set env.make=tests/pyenv_pendulum.py:pendulum --set env.obs_dim=3 \
  --set env.action_dim=1 --set env.action_low=-1 --set env.action_high=2 --set python.interpreter="$PY"
grep -qF "the run has [env] action_low = [-1] and action_high = [2]" "$TMP/err" && ok "apex-actor says why" || bad "apex-actor: $(cat "$TMP/err")"

# configs/README.md's table is generated from the schema and must be current.
"$APEX_BIN/apex-replay" --help-config-markdown >"$TMP/ref.md"
if sed -n '/^| section | key/,$p' configs/README.md | diff -q - "$TMP/ref.md" >/dev/null; then
  ok "configs/README.md matches the schema"
else
  bad "configs/README.md is out of date: run scripts/gen-config-reference"
fi
# Every shipped config loads.
for c in configs/*.ini; do
  expect_rc 0 "$c is valid" "$APEX_BIN/apex-replay" -c "$c" --print-config
done
finish
