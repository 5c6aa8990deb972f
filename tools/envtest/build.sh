#!/usr/bin/env bash
# Provide the test cluster's binaries; print the folder that holds them all last.
#
# kube-apiserver and etcd (the control plane), and beside them, built from the same
# k8s.io/kubernetes wrapper module so every part is the same version: kubectl,
# kube-scheduler and kube-controller-manager; kwok (sigs.k8s.io/kwok, simulated nodes
# and pod lifecycle), Kubeflow's training-operator (the reference operator the tests
# swap with and the benchmarks race) and Kueue's manager (sigs.k8s.io/kueue, the job
# queueing the Kueue tests run against) and Prometheus (the server the monitoring tests
# scrape the operator with and query through PromQL; its web UI's assets are not
# built in, its HTTP API needs none) and helm (the chart tests render and install
# charts/tfjob with it), each `go install`ed at a pinned version.
# Kueue's CRDs and webhook manifests are copied from the same module version into
# kueue-<v>/config/ beside its binary (testkit/kueue.py installs them).
# JobSet's controller manager (sigs.k8s.io/jobset: a TrainJob becomes a JobSet) and
# Kubeflow Trainer's trainer-controller-manager (github.com/kubeflow/trainer/v2, the
# reference operator for TrainJob) are built from wrapper modules (jobset/, trainer/
# next to this script: the proxy answers 403 to JobSet's version list, which `go
# install pkg@version` reads for deprecation notices), with the same module version's
# manifests in config/ beside each
# binary: JobSet's CRD and webhooks, Trainer's CRDs, shipped runtimes and webhooks
# (testkit/jobset.py and testkit/trainer.py install them).
#
# Order of preference (the envtest convention first, so CI can hand in prebuilt
# binaries and skip the Go build entirely):
#   1. TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD (one file each),
#   2. KUBEBUILDER_ASSETS (a folder holding the binaries under their usual names),
#   3. a version-keyed cache outside git, built from the wrapper Go modules next to
#      this script when a binary is missing or reports the wrong version:
#      ${TFJOB_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfjob/envtest}/<k8s>-<etcd>/
#      (kwok, training-operator, kueue, prometheus, helm, JobSet and Trainer in kwok-<v>/,
#      training-operator-<v>/, kueue-<v>/, prometheus-<v>/, helm-<v>/, jobset-<v>/ and
#      trainer-<v>/ beside it).
#
# Idempotent: a second run with the binaries in place only checks their versions (or,
# in a version-keyed folder, their presence). Atomic: binaries are written under a
# temporary name and renamed into place; a config/ folder counts once it holds its
# .complete marker.
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
# (Outputs are read whole, not piped into head/grep -q: with pipefail an early exit of
# the reader can SIGPIPE the binary and fail the check at random.)
etcd_ok() { [[ -x "$1" ]] && [[ "$("$1" --version 2>/dev/null)" == "etcd Version: ${etcd_version#v}"* ]]; }
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

# The other parts of the test cluster. KUBEBUILDER_ASSETS may hold any of them; the
# rest are built into the cache. The k8s.io/kubernetes ones share the API server's
# wrapper module (its go.mod lists them as tools), hence its version and Go cache.
kwok_version="v0.8.0"
kubeflow_version="v1.9.4"
# Kueue v0.19.0 still builds in the Kubeflow v1 (kubeflow.org) integration,
# pkg/controller/jobs/kubeflow/, but no longer enables it by default (deprecated;
# removal tentatively v0.20): testkit/kueue.py lists its kinds in the configuration.
kueue_version="v0.19.0"
# Prometheus 3.16.0: its Go module tags release 3.x.y as v0.3xx.y.
prometheus_version="v0.316.0"
helm_version="v4.3.2"
k8s_ld() {
    local minor="${k8s_version#v1.}" ld="-s -w" pkgpath
    minor="${minor%%.*}"
    for pkgpath in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ld+=" -X ${pkgpath}.gitVersion=${k8s_version}"
        ld+=" -X ${pkgpath}.gitMajor=1 -X ${pkgpath}.gitMinor=${minor}"
        ld+=" -X ${pkgpath}.gitTreeState=clean"
    done
    printf '%s' "${ld}"
}
k8s_tool_ok() {
    [[ -x "$1" ]] || return 1
    case "$(basename "$1")" in
        kubectl) [[ "$("$1" version --client 2>/dev/null)" == *"Client Version: ${k8s_version}"* ]] ;;
        *) [[ "$("$1" --version 2>/dev/null)" == "Kubernetes ${k8s_version}" ]] ;;
    esac
}

# `go install module/cmd@version` for tools whose own go.mod builds them as published
# (no replaces to work around); the folder is keyed by version and the binary moved in
# atomically, so presence is proof enough.
go_install() {
    local pkg="$1" version="$2" dir="$3" name="$4" ldflags="${5:-}"
    if [[ ${no_build} -eq 1 ]]; then
        log "${name} is not built yet and --no-build was given (run tools/envtest/build.sh)"
        exit 3
    fi
    local gobin tmp
    gobin="$(find_go)" || { log "Go is not installed; cannot build ${pkg}"; exit 2; }
    tmp="$(mktemp -d "${dir}/.gobin.XXXXXX")"
    log "building ${pkg}@${version} -> ${dir}/${name}"
    local started=${SECONDS}
    GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false" GOBIN="${tmp}" \
        "${gobin}" install -trimpath -ldflags "-s -w ${ldflags}" "${pkg}@${version}" \
        || { rm -rf "${tmp}"; log "go install ${pkg}@${version} failed"; exit 1; }
    mv -f "${tmp}/$(basename "${pkg}")" "${dir}/${name}"
    rm -rf "${tmp}"
    log "built ${name} in $((SECONDS - started)) s"
}

declare -A tools=()
for name in kubectl kube-scheduler kube-controller-manager kwok training-operator kueue prometheus helm \
    jobset-controller-manager trainer-controller-manager; do
    if [[ -n "${KUBEBUILDER_ASSETS:-}" ]] && present "${KUBEBUILDER_ASSETS}/${name}"; then
        tools[${name}]="${KUBEBUILDER_ASSETS}/${name}"
    fi
done
mkdir -p "${cache_dir}"
exec 9>"${cache_dir}/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
for name in kubectl kube-scheduler kube-controller-manager; do
    [[ -n "${tools[${name}]:-}" ]] && continue
    out="${cache_dir}/${name}"
    if [[ ${force} -eq 1 ]] || ! k8s_tool_ok "${out}"; then
        build_one "${here}/apiserver" "k8s.io/kubernetes/cmd/${name}" "${out}" "$(k8s_ld)"
        k8s_tool_ok "${out}" || die "built ${name} does not report ${k8s_version}"
    fi
    tools[${name}]="${out}"
done
if [[ -z "${tools[kwok]:-}" ]]; then
    dir="${cache_root}/kwok-${kwok_version}"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${dir}/kwok"; then
        go_install sigs.k8s.io/kwok/cmd/kwok "${kwok_version}" "${dir}" kwok
    fi
    tools[kwok]="${dir}/kwok"
fi
if [[ -z "${tools[training-operator]:-}" ]]; then
    dir="${cache_root}/training-operator-${kubeflow_version}"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${dir}/training-operator"; then
        go_install github.com/kubeflow/training-operator/cmd/training-operator.v1 \
            "${kubeflow_version}" "${dir}" training-operator
    fi
    tools[training-operator]="${dir}/training-operator"
fi

if [[ -z "${tools[kueue]:-}" ]]; then
    dir="${cache_root}/kueue-${kueue_version}"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${dir}/kueue" || [[ ! -f "${dir}/config/.complete" ]]; then
        # The binary reports this version in its start-up log line ("gitVersion").
        go_install sigs.k8s.io/kueue/cmd/kueue "${kueue_version}" "${dir}" kueue \
            "-X sigs.k8s.io/kueue/pkg/version.GitVersion=${kueue_version}"
        # Its CRDs and webhook manifests from the same module version (the download
        # above put the module in the module cache; -json names its folder).
        gobin="$(find_go)"
        src="$(cd "${dir}" && GOTOOLCHAIN=local GOFLAGS= "${gobin}" mod download -json \
            "sigs.k8s.io/kueue@${kueue_version}" \
            | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
        [[ -d "${src}/config/components/crd" ]] || die "no config/components in sigs.k8s.io/kueue@${kueue_version} (${src})"
        rm -rf "${dir}/config"
        mkdir -p "${dir}/config"
        cp -R "${src}/config/components/crd" "${src}/config/components/webhook" "${dir}/config/"
        chmod -R u+w "${dir}/config"
        touch "${dir}/config/.complete"
    fi
    tools[kueue]="${dir}/kueue"
fi

if [[ -z "${tools[prometheus]:-}" ]]; then
    dir="${cache_root}/prometheus-${prometheus_version}"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${dir}/prometheus"; then
        # `prometheus --version` reports it (and /api/v1/status/buildinfo).
        go_install github.com/prometheus/prometheus/cmd/prometheus "${prometheus_version}" \
            "${dir}" prometheus \
            "-X github.com/prometheus/common/version.Version=3.${prometheus_version#v0.3}"
    fi
    tools[prometheus]="${dir}/prometheus"
fi

if [[ -z "${tools[helm]:-}" ]]; then
    dir="${cache_root}/helm-${helm_version}"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${dir}/helm"; then
        # `helm version` reports it (its default is the module's own, unset when
        # installed from the proxy).
        go_install helm.sh/helm/v4/cmd/helm "${helm_version}" "${dir}" helm \
            "-X helm.sh/helm/v4/internal/version.version=${helm_version}"
    fi
    tools[helm]="${dir}/helm"
fi

# JobSet and Kubeflow Trainer (the reference operator for TrainJob), each from its own
# wrapper module (tools/envtest/jobset, tools/envtest/trainer), like kube-apiserver:
# the module proxy answers 403 to JobSet's version list, which `go install
# pkg@version` reads (for deprecation notices), while the committed go.mod/go.sum pin
# every module and need no list at all.
# Their versions live in those go.mod files; the folders are keyed by them.
jobset_version="$(awk '$1 == "sigs.k8s.io/jobset" { print $2; exit }' "${here}/jobset/go.mod")"
trainer_version="$(awk '$1 == "github.com/kubeflow/trainer/v2" { print $2; exit }' "${here}/trainer/go.mod")"
[[ -n "${jobset_version}" && -n "${trainer_version}" ]] \
    || die "cannot read the JobSet and Trainer versions from ${here}/{jobset,trainer}/go.mod"

# Copy folders of the module `modpath` (the version the wrapper module in `wrapper`
# requires, so the binary's) into <dir>/config/<folder name>. The copy is made beside
# and marked complete before it replaces config/: a run cut short leaves no marked
# folder, so the next run copies again.
copy_manifests() {
    local wrapper="$1" modpath="$2" dir="$3" src tmp sub gobin
    shift 3
    gobin="$(find_go)" || { log "Go is not installed; cannot find ${modpath}"; exit 2; }
    # (-json names its folder in the module cache, downloading it if it is not there.)
    src="$(cd "${wrapper}" && GOTOOLCHAIN=local GOFLAGS="-mod=readonly" \
        "${gobin}" mod download -json "${modpath}" \
        | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
    [[ -n "${src}" ]] || die "go mod download ${modpath} in ${wrapper} named no folder"
    tmp="$(mktemp -d "${dir}/.config.XXXXXX")"
    for sub in "$@"; do
        [[ -d "${src}/${sub}" ]] || { rm -rf "${tmp}"; die "no ${sub} in ${modpath} (${src})"; }
        cp -R "${src}/${sub}" "${tmp}/"
    done
    # Writable (the module cache is read-only) and readable like any cache folder
    # (mktemp made it private).
    chmod -R u+w,go+rX "${tmp}"
    touch "${tmp}/.complete"
    rm -rf "${dir}/config"
    mv "${tmp}" "${dir}/config"
}

# A binary from a wrapper module into <cache>/<name>-<version>/ with folders of the
# same module version in config/ beside it; either is redone when missing.
operator_with_manifests() {
    local name="$1" version="$2" wrapper="$3" pkg="$4" modpath="$5" ldflags="$6"
    shift 6
    local dir="${cache_root}/${name}-${version}"
    local binary="${dir}/${name}-controller-manager"
    mkdir -p "${dir}"
    if [[ ${force} -eq 1 ]] || ! present "${binary}"; then
        build_one "${wrapper}" "${pkg}" "${binary}" "-s -w ${ldflags}"
    fi
    if [[ ${force} -eq 1 ]] || [[ ! -f "${dir}/config/.complete" ]]; then
        [[ ${no_build} -eq 0 ]] || { log "${name}'s manifests are not copied yet and --no-build was given"; exit 3; }
        copy_manifests "${wrapper}" "${modpath}" "${dir}" "$@"
    fi
    tools[${name}-controller-manager]="${binary}"
}

if [[ -z "${tools[jobset-controller-manager]:-}" ]]; then
    # Its CRD and webhook manifests; it logs the version stamped here at start-up.
    operator_with_manifests jobset "${jobset_version}" "${here}/jobset" sigs.k8s.io/jobset \
        sigs.k8s.io/jobset "-X sigs.k8s.io/jobset/pkg/version.GitVersion=${jobset_version}" \
        config/components/crd config/components/webhook
fi
if [[ -z "${tools[trainer-controller-manager]:-}" ]]; then
    # Its CRDs, the runtimes it ships (torch-distributed, ...) and its webhook
    # manifests. Trainer has no version variable to stamp.
    operator_with_manifests trainer "${trainer_version}" "${here}/trainer" \
        github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager \
        github.com/kubeflow/trainer/v2 "" \
        manifests/base/crds manifests/base/runtimes manifests/base/webhook
fi

# Hand back one folder holding every binary under its usual name: the cache folder,
# with symlinks to the parts that live elsewhere (kwok, training-operator, or binaries
# handed in through the environment).
assets="${cache_dir}"
if [[ "${apiserver}" != "${cache_dir}/kube-apiserver" || "${etcd}" != "${cache_dir}/etcd" ]]; then
    # Never put a symlink over a cached binary: binaries handed in get a folder of links.
    key="$(printf '%s\n%s\n' "${apiserver}" "${etcd}" | sha256sum | cut -c1-12)"
    assets="${cache_root}/linked-${key}"
    mkdir -p "${assets}"
fi
link_in() {
    local name="$1" target="$2" abs
    abs="$(cd "$(dirname "${target}")" && pwd)/$(basename "${target}")"
    [[ "${abs}" == "${assets}/${name}" ]] || ln -sfn "${abs}" "${assets}/${name}"
}
link_in kube-apiserver "${apiserver}"
link_in etcd "${etcd}"
for name in "${!tools[@]}"; do link_in "${name}" "${tools[${name}]}"; done
log "kube-apiserver: ${apiserver}"
log "etcd: ${etcd}"
for name in "${!tools[@]}"; do log "${name}: ${tools[${name}]}"; done
printf '%s\n' "${assets}"
