#!/usr/bin/env bash
# The one test command (README quick start; .ci/run calls it with CI=true).
# Installs what the tests need, builds or reuses the control-plane binaries, runs the
# linters, the type checker, the layer contracts and the whole test suite.
# Extra arguments go to pytest, e.g. `scripts/test.sh tests/core -x`.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test,tensorflow,pytorch,jax,xgboost,paddle,mpi]'

# The MPI tests (tests/mpi) run Open MPI's mpirun: in CI (or with TFJOB_INSTALL_MPI=1)
# install openmpi-bin when missing (~13 s, docs/decisions/0025). Elsewhere, without it,
# they skip with a one-line reason.
if ! command -v mpirun >/dev/null 2>&1 \
    && { [ "${CI:-}" = "true" ] || [ "${TFJOB_INSTALL_MPI:-}" = "1" ]; }; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo -n)
    echo "installing openmpi-bin"
    "${sudo[@]}" apt-get update -q
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q openmpi-bin
fi

# kube-apiserver and etcd, and the cluster's other binaries (kwok, Kueue, Prometheus
# for the monitoring tests, JobSet and Kubeflow Trainer for the TrainJob tests...), built
# from Go modules and cached (or KUBEBUILDER_ASSETS).
# Without Go, outside CI, the Kubernetes tests skip with a one-line reason.
if [ -n "${KUBEBUILDER_ASSETS:-}" ] || command -v go >/dev/null 2>&1; then
    assets=$(tools/envtest/build.sh | tail -n 1)
    export KUBEBUILDER_ASSETS="$assets"
    echo "control plane: $KUBEBUILDER_ASSETS"
elif [ "${CI:-}" = "true" ]; then
    echo "CI needs Go to build kube-apiserver and etcd (or KUBEBUILDER_ASSETS)" >&2
    exit 1
fi

# The container image tests build with buildah on a Debian base made by mmdebstrap:
# in CI (or with TFJOB_INSTALL_IMAGE_TOOLS=1) install them when missing and make the
# base now (cached in ~/.cache/tfjob/images), outside the tests' timeouts. Elsewhere,
# without them, those tests skip with a one-line reason.
if [ "${CI:-}" = "true" ] || [ "${TFJOB_INSTALL_IMAGE_TOOLS:-}" = "1" ]; then
    echo "image base: $(scripts/image.sh base | tail -n 1)"
fi

# The real node (tests/node, marker `node`): kubelet, kube-proxy, containerd, CoreDNS and
# a static pause image, built from Go modules and C and cached beside the control plane
# (built after it, so kubelet reuses its Go build cache), with Debian's runc and CNI
# plugins, which CI (or TFJOB_INSTALL_NODE_TOOLS=1) installs here. Elsewhere the node
# tests build what they can at collection and skip, with the reason, what they cannot.
if [ "${CI:-}" = "true" ] || [ "${TFJOB_INSTALL_NODE_TOOLS:-}" = "1" ]; then
    echo "node parts: $(tools/node/build.sh | tail -n 1)"
fi

ruff check .
ruff format --check .
mypy
lint-imports
# Three workers (pytest-xdist) on two cores: most tests wait on a cluster, a node or
# other processes rather than compute, and with two the cores still idled ~18 % of the
# run (docs/decisions/0027); tests/conftest.py groups the tests by file (the real
# node's tests all on one worker). TFJOB_TEST_WORKERS=0 runs them in this process.
python3 -m pytest -n "${TFJOB_TEST_WORKERS:-3}" --dist loadgroup "$@"
