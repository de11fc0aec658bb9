#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages apex needs to build, test and benchmark.
# Does nothing when they are all present; uses sudo when not root.
set -euo pipefail

PKGS=(
  build-essential pkg-config
  libzmq3-dev libprotobuf-c-dev protobuf-c-compiler libopenblas-dev check libinih-dev
  python3 python3-numpy python3-zmq   # test fixtures, the hostile-peer scripts, scripts/apex-experiment
  python3-protobuf                    # tests/tb_read.py, the independent TensorBoard event reader
  gnuplot-nox                         # learning_curve.png, apex-experiment's iqm_<x>.png
  procps                              # pgrep/pkill in the smoke tests
  clang-format-14                     # make format-check (part of make test)
  libopenmpi-dev openmpi-bin          # the learner group (mpirun -np N apex-learner)
  libmujoco-dev                       # the MuJoCo tasks of the env library (envs/mjenv.c)
  libmujoco-samples                   # MuJoCo's own models, which tests/check_mujoco.c loads
  liblz4-dev libzstd-dev              # frame compression ([replay] compress, common/fcodec.c)
  libdnnl-dev                         # oneDNN's header (model/dnnconv.c); the library itself is
                                      # loaded with dlopen for [run] blas_library = onednn
  curl ca-certificates                # scripts/fetch-mujoco-models downloads Gymnasium's models
)
if [ "${APEX_FUZZ_DEPS:-0}" = 1 ]; then
  PKGS+=(clang libclang-rt-dev) # libFuzzer, for make fuzz
fi
if [ "${APEX_SLURM_DEPS:-0}" = 1 ]; then
  PKGS+=(slurm-wlm munge iproute2) # tests/smoke/slurm*.sh start a Slurm cluster of their own
fi
if [ "${APEX_BENCH_DEPS:-0}" = 1 ]; then
  PKGS+=(python3-torch)            # the PyTorch peer, only for make bench
  PKGS+=(libblis-dev)              # the other BLAS library bench_gemm measures (dlopen)
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo"
  else
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
