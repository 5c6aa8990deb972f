#!/usr/bin/env bash
# Provide kube-apiserver and etcd for the Kubernetes tests; print their folder last.
#
# Order of preference (the envtest convention first, so CI can hand in prebuilt
# binaries and skip the Go build entirely):
#   1. TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD (one file each),
#   2. KUBEBUILDER_ASSETS (a folder holding kube-apiserver and etcd),
#   3. a version-keyed cache outside git, built from the wrapper Go modules next to
#      this script when a binary is missing or reports the wrong version:
#      ${TFJOB_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfjob/envtest}/<k8s>-<etcd>/
#
# Idempotent: a second run with the binaries in place only checks their versions.
# Exit codes: 0 ok (last stdout line is the assets folder), 2 Go is not installed so
# nothing can be built, 3 --no-build and a binary is missing, 1 anything else
# (download or build failure; see stderr).
#
# Usage: tools/envtest/build.sh [--force | --no-build]
#   --force     rebuild even if the cached binaries are good
#   --no-build  only look (environment, then cache); never start a Go build
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
force=0 no_build=0
for arg in "$@"; do
    case "${arg}" in
        --force) force=1 ;;
        --no-build) no_build=1 ;;
        *) printf 'envtest: unknown argument %s\n' "${arg}" >&2; exit 1 ;;
    esac
done

log() { printf 'envtest: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The versions live in the committed go.mod files, so this script never disagrees
# with what update-modules.sh generated.
k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "${here}/apiserver/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${here}/etcd/go.mod")"
[[ -n "${k8s_version}" && -n "${etcd_version}" ]] || die "cannot read versions from ${here}/*/go.mod"

cache_root="${TFJOB_ENVTEST_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/tfjob/envtest}"
cache_dir="${cache_root}/${k8s_version}-${etcd_version}"

# `kube-apiserver --version` prints "Kubernetes v1.36.3"; `etcd --version` prints
# "etcd Version: 3.6.14" first. A binary built without the version ldflags reports
# v0.0.0 and is rebuilt rather than trusted.
apiserver_ok() { [[ -x "$1" ]] && [[ "$("$1" --version 2>/dev/null)" == "Kubernetes ${k8s_version}" ]]; }
etcd_ok() { [[ -x "$1" ]] && "$1" --version 2>/dev/null | head -n1 | grep -qx "etcd Version: ${etcd_version#v}"; }
present() { [[ -x "$1" ]]; }

apiserver="" etcd=""
# 1. Explicit files. A set-but-broken variable is a configuration error worth a
#    loud warning, but the cache can still serve, so fall through.
if [[ -n "${TEST_ASSET_KUBE_APISERVER:-}" ]]; then
    if present "${TEST_ASSET_KUBE_APISERVER}"; then apiserver="${TEST_ASSET_KUBE_APISERVER}"
    else log "TEST_ASSET_KUBE_APISERVER=${TEST_ASSET_KUBE_APISERVER} is not an executable; ignoring it"; fi
fi
if [[ -n "${TEST_ASSET_ETCD:-}" ]]; then
    if present "${TEST_ASSET_ETCD}"; then etcd="${TEST_ASSET_ETCD}"
    else log "TEST_ASSET_ETCD=${TEST_ASSET_ETCD} is not an executable; ignoring it"; fi
fi
# 2. The envtest folder. Its binaries are trusted as they are (any version the
#    caller chose), exactly like controller-runtime does.
if [[ -n "${KUBEBUILDER_ASSETS:-}" ]]; then
    if [[ -z "${apiserver}" ]] && present "${KUBEBUILDER_ASSETS}/kube-apiserver"; then
        apiserver="${KUBEBUILDER_ASSETS}/kube-apiserver"
    fi
    if [[ -z "${etcd}" ]] && present "${KUBEBUILDER_ASSETS}/etcd"; then
        etcd="${KUBEBUILDER_ASSETS}/etcd"
    fi
    [[ -n "${apiserver}" && -n "${etcd}" ]] \
        || log "KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS} lacks kube-apiserver or etcd; building what is missing"
fi

find_go() {
    if [[ -n "${GO:-}" && -x "${GO}" ]]; then printf '%s\n' "${GO}"; return 0; fi
    if command -v go >/dev/null 2>&1; then command -v go; return 0; fi
    if [[ -x /usr/local/go/bin/go ]]; then printf '%s\n' /usr/local/go/bin/go; return 0; fi
    return 1
}

# Build one binary from a wrapper module into the cache, atomically: the output goes
# to a temporary name first, so an interrupted build never leaves a half-written
# binary that a later run would take for a good one.
build_one() {
    local module_dir="$1" pkg="$2" out="$3"
    shift 3
    local ldflags="$*"
    local gobin
    if [[ ${no_build} -eq 1 ]]; then
        log "$(basename "${out}") is not built yet and --no-build was given (run tools/envtest/build.sh)"
        exit 3
    fi
    gobin="$(find_go)" || { log "Go is not installed (no 'go' on PATH, no /usr/local/go/bin/go); cannot build ${pkg}"; exit 2; }
    (
        cd "${module_dir}"
        export GOTOOLCHAIN=local CGO_ENABLED=0
        # The committed go.sum is complete; a build that would need to change it
        # fails instead of silently editing files under git.
        export GOFLAGS="-mod=readonly -buildvcs=false"
        log "downloading modules for ${pkg} (${module_dir})"
        "${gobin}" mod download \
            || { log "go mod download failed in ${module_dir}: a module is not served by ${GOPROXY:-the proxy}"; exit 1; }
        log "building ${pkg} -> ${out}"
        local started=${SECONDS}
        "${gobin}" build -trimpath -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}" \
            || { rm -f "${out}.tmp.$$"; log "go build ${pkg} failed"; exit 1; }
        mv -f "${out}.tmp.$$" "${out}"
        log "built ${pkg} in $((SECONDS - started)) s"
    )
}

if [[ -z "${apiserver}" || -z "${etcd}" ]]; then
    mkdir -p "${cache_dir}"
    # Serialise concurrent callers (parallel test sessions) on one lock per version.
    exec 9>"${cache_dir}/.lock"
    if command -v flock >/dev/null 2>&1; then flock 9; fi

    if [[ -z "${apiserver}" ]]; then
        apiserver="${cache_dir}/kube-apiserver"
        if [[ ${force} -eq 1 ]] || ! apiserver_ok "${apiserver}"; then
            minor="${k8s_version#v1.}"
            minor="${minor%%.*}"
            ld="-s -w"
            for pkgpath in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
                ld+=" -X ${pkgpath}.gitVersion=${k8s_version}"
                ld+=" -X ${pkgpath}.gitMajor=1 -X ${pkgpath}.gitMinor=${minor}"
                ld+=" -X ${pkgpath}.gitTreeState=clean"
            done
            build_one "${here}/apiserver" k8s.io/kubernetes/cmd/kube-apiserver "${apiserver}" "${ld}"
            apiserver_ok "${apiserver}" \
                || die "built kube-apiserver does not report 'Kubernetes ${k8s_version}': $("${apiserver}" --version 2>&1 || true)"
        else
            log "kube-apiserver ${k8s_version} already in ${cache_dir}"
        fi
    fi
    if [[ -z "${etcd}" ]]; then
        etcd="${cache_dir}/etcd"
        if [[ ${force} -eq 1 ]] || ! etcd_ok "${etcd}"; then
            # etcd's version is a constant in go.etcd.io/etcd/api/v3/version, so no -X.
            build_one "${here}/etcd" go.etcd.io/etcd/server/v3 "${etcd}" "-s -w"
            etcd_ok "${etcd}" \
                || die "built etcd does not report ${etcd_version}: $("${etcd}" --version 2>&1 | head -n1 || true)"
        else
            log "etcd ${etcd_version} already in ${cache_dir}"
        fi
    fi
fi

# Hand back one folder holding both binaries. When they come from different places
# (say TEST_ASSET_ETCD plus a cached apiserver), link them side by side.
apiserver_dir="$(cd "$(dirname "${apiserver}")" && pwd)"
etcd_dir="$(cd "$(dirname "${etcd}")" && pwd)"
if [[ "${apiserver_dir}" == "${etcd_dir}" && "$(basename "${apiserver}")" == kube-apiserver \
      && "$(basename "${etcd}")" == etcd ]]; then
    assets="${apiserver_dir}"
else
    key="$(printf '%s\n%s\n' "${apiserver}" "${etcd}" | sha256sum | cut -c1-12)"
    assets="${cache_root}/linked-${key}"
    mkdir -p "${assets}"
    ln -sfn "$(cd "$(dirname "${apiserver}")" && pwd)/$(basename "${apiserver}")" "${assets}/kube-apiserver"
    ln -sfn "$(cd "$(dirname "${etcd}")" && pwd)/$(basename "${etcd}")" "${assets}/etcd"
fi
log "kube-apiserver: ${apiserver}"
log "etcd: ${etcd}"
printf '%s\n' "${assets}"
