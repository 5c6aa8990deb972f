#!/usr/bin/env bash
# A real test node by hand: up, status, down (testkit/node.py does the work).
#
#   tools/node/node.sh up       # build what is missing, start the node; prints how to reach it
#   tools/node/node.sh status   # each part running or not
#   tools/node/node.sh down     # stop it and remove every trace
#   tools/node/node.sh exec CMD # run CMD inside the node's network namespace,
#                               # with KUBECONFIG set (e.g. `exec kubectl get pods -A`)
# --folder DIR picks the node's folder (default /tmp/tfjob-node), for more than one.
# Needs root (network namespaces, cgroups, mounts).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PYTHONPATH="${root}:${root}/src${PYTHONPATH:+:${PYTHONPATH}}"
folder=/tmp/tfjob-node
if [[ "${1:-}" == "exec" ]]; then
    shift
    if [[ "${1:-}" == "--folder" ]]; then folder="$2"; shift 2; fi
    netns="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["netns"])' "${folder}/node.json")"
    assets="$(bash "${root}/tools/envtest/build.sh" --no-build 2>/dev/null | tail -n 1)"
    export KUBECONFIG="${folder}/kubeconfig" PATH="${assets}:${PATH}"
    exec ip netns exec "${netns}" "$@"
fi
exec python3 -m testkit.node "$@"
