#!/usr/bin/env bash
# Regenerate the wrapper Go modules (apiserver/, etcd/, jobset/, trainer/) from scratch.
#
# Why this exists: k8s.io/kubernetes cannot be built with `go install pkg@version`,
# because its go.mod points the staging modules (k8s.io/api, k8s.io/apiserver, ...)
# at ./staging folders with `replace`, and Go ignores replaces in dependencies. The
# wrapper module requires k8s.io/kubernetes and replaces every staging module with
# its published v0.X.Y twin. The replace list is *generated* from the tag's own go.mod
# so it never drifts from what upstream builds with.
#
# Run this only to move to another version; the generated go.mod/go.sum are committed
# and build.sh uses them as they are.
#
# jobset/ and trainer/ have no replaces to generate: they exist because the proxy
# answers 403 to JobSet's version list, which `go install pkg@version` reads; a wrapper
# with a committed go.sum needs no list. `go mod tidy` resolves the same versions as the
# tool's own go.mod (it lists every module it builds with).
#
# Usage: tools/envtest/update-modules.sh [k8s-version ...]  (default: v1.36.3 v1.36.1 v1.35.4)
#        ETCD_VERSION=v3.6.14, JOBSET_VERSION=v0.12.0 and TRAINER_VERSION=v2.3.0
#        override those versions.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PATH="/usr/local/go/bin:${PATH}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
etcd_version="${ETCD_VERSION:-v3.6.14}"
jobset_version="${JOBSET_VERSION:-v0.12.0}"
trainer_version="${TRAINER_VERSION:-v2.3.0}"
if [[ $# -gt 0 ]]; then candidates=("$@"); else candidates=(v1.36.3 v1.36.1 v1.35.4); fi

log() { printf 'update-modules: %s\n' "$*" >&2; }

gen_apiserver() {
    local k8s="$1" dir="${here}/apiserver" modfile staging
    # The proxy serves the tag's go.mod on its own; -json names the cached file.
    modfile="$(go mod download -json "k8s.io/kubernetes@${k8s}" \
        | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -n "${modfile}" && -f "${modfile}" ]] || { log "no go.mod for k8s.io/kubernetes@${k8s}"; return 1; }
    # v1.36.3 -> v0.36.3: the staging modules are published with major version 0.
    staging="v0.${k8s#v1.}"
    local go_directive
    go_directive="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "${modfile}" | head -n1)"

    rm -f "${dir}/go.mod" "${dir}/go.sum"
    (
        cd "${dir}"
        go mod init tfjob.local/envtest/apiserver >/dev/null 2>&1
        go mod edit -go="${go_directive}"
        # Keep upstream's GODEBUG defaults, which apply only in the main module.
        while read -r line; do
            go mod edit -godebug="${line}"
        done < <(sed -n 's/^godebug \(.*\)$/\1/p' "${modfile}")
        local n=0
        while read -r name; do
            go mod edit -replace="${name}=${name}@${staging}"
            n=$((n + 1))
        done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[A-Za-z0-9._-]*\)[[:space:]]*=>[[:space:]]*\./staging/src/.*#\1#p' "${modfile}")
        log "k8s.io/kubernetes ${k8s}: ${n} staging modules -> ${staging}"
        # A tool directive keeps the requirement alive through `go mod tidy`.
        go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@${k8s}"
        go mod tidy
    )
}

gen_etcd() {
    local dir="${here}/etcd"
    rm -f "${dir}/go.mod" "${dir}/go.sum"
    (
        cd "${dir}"
        go mod init tfjob.local/envtest/etcd >/dev/null 2>&1
        # Start from etcd's own minimum Go version, not the local toolchain's, so any
        # Go new enough for etcd can build it; `go get` raises it if a dependency needs.
        local etcd_mod
        etcd_mod="$(go mod download -json "go.etcd.io/etcd/server/v3@${etcd_version}" \
            | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
        go mod edit -go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "${etcd_mod}" | head -n1)"
        # go.etcd.io/etcd/server/v3 is itself package main (server/main.go).
        go get -tool "go.etcd.io/etcd/server/v3@${etcd_version}"
        go mod tidy
    )
    log "etcd ${etcd_version}"
}

# A wrapper module whose one tool is `pkg` of `module` at `version`, starting from that
# module's own go directive.
gen_tool() {
    local dir="${here}/$1" module="$2" version="$3" pkg="$4" modfile
    mkdir -p "${dir}"
    rm -f "${dir}/go.mod" "${dir}/go.sum"
    (
        cd "${dir}"
        go mod init "tfjob.local/envtest/$1" >/dev/null 2>&1
        modfile="$(go mod download -json "${module}@${version}" \
            | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
        go mod edit -go="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "${modfile}" | head -n1)"
        go get -tool "${pkg}@${version}"
        go mod tidy
    )
    log "$1: ${module} ${version}"
}

ok=""
for k8s in "${candidates[@]}"; do
    if gen_apiserver "${k8s}"; then ok="${k8s}"; break; fi
    log "k8s.io/kubernetes ${k8s} failed, trying the next fallback"
done
[[ -n "${ok}" ]] || { log "no candidate version could be resolved: ${candidates[*]}"; exit 1; }
gen_etcd
gen_tool jobset sigs.k8s.io/jobset "${jobset_version}" sigs.k8s.io/jobset
gen_tool trainer github.com/kubeflow/trainer/v2 "${trainer_version}" \
    github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
log "done: kube-apiserver ${ok}, etcd ${etcd_version}, jobset ${jobset_version}, trainer ${trainer_version}"
