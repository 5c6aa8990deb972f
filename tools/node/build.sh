#!/usr/bin/env bash
# Provide the real test node's parts; print the folder that holds them all last.
#
# Built from Go modules and cached beside the control plane's binaries
# (tools/envtest/build.sh), each keyed by its version:
#   kubelet, kube-proxy      from the same k8s.io/kubernetes wrapper module as the
#                            API server (tools/envtest/apiserver), same ldflags, into
#                            <cache>/<k8s>-<etcd>/
#   containerd, ctr, containerd-shim-runc-v2
#                            `go install github.com/containerd/containerd/v2/cmd/...`
#                            at ${containerd_version}, CGO off, tags
#                            no_btrfs no_devmapper no_zfs urfave_cli_no_docs,
#                            into <cache>/containerd-<v>/
#   coredns                  tools/node/coredns (a minimal main: kubernetes, cache,
#                            loadbalance; no forward), into <cache>/coredns-<v>/
#   pause                    tools/node/pause/pause.c, static, and an OCI archive of
#                            an image holding only it (the pinned sandbox image),
#                            into <cache>/pause-<hash of pause.c>/
# From Debian (apt-get install when missing, under CI=true or
# TFJOB_INSTALL_NODE_TOOLS=1; otherwise a missing one is exit code 2): runc,
# containernetworking-plugins (bridge, host-local, loopback), iptables, iproute2.
#
# <cache> is ${TFJOB_ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tfjob/envtest}.
# The last stdout line is <cache>/node-<k8s>-<containerd>-<coredns>/, a folder of
# symlinks naming every part (testkit/node.py reads it).
#
# Exit codes: 0 ok, 2 Go or a Debian package is missing and may not be installed,
# 3 --no-build and a part is missing, 1 anything else (see stderr).
#
# Usage: tools/node/build.sh [--force | --no-build]
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
envtest="$(cd "${here}/../envtest" && pwd)"
force=0 no_build=0
for arg in "$@"; do
    case "${arg}" in
        --force) force=1 ;;
        --no-build) no_build=1 ;;
        *) printf 'node: unknown argument %s\n' "${arg}" >&2; exit 1 ;;
    esac
done

log() { printf 'node: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "${envtest}/apiserver/go.mod")"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "${envtest}/etcd/go.mod")"
coredns_version="$(awk '$1 == "github.com/coredns/coredns" { print $2; exit } $1 == "require" && $2 == "github.com/coredns/coredns" { print $3; exit }' "${here}/coredns/go.mod")"
containerd_version="v2.4.2"
containerd_tags="no_btrfs no_devmapper no_zfs urfave_cli_no_docs"
[[ -n "${k8s_version}" && -n "${etcd_version}" && -n "${coredns_version}" ]] \
    || die "cannot read versions from the go.mod files"

cache_root="${TFJOB_ENVTEST_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/tfjob/envtest}"
k8s_dir="${cache_root}/${k8s_version}-${etcd_version}"
containerd_dir="${cache_root}/containerd-${containerd_version}"
coredns_dir="${cache_root}/coredns-${coredns_version}"
pause_key="$(cat "${here}/pause/pause.c" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-12)"
pause_dir="${cache_root}/pause-${pause_key}"
assets="${cache_root}/node-${k8s_version}-${containerd_version}-${coredns_version}"
mkdir -p "${k8s_dir}" "${containerd_dir}" "${coredns_dir}" "${pause_dir}" "${assets}"

# One builder at a time per cache (parallel test sessions); the lock is the same file
# tools/envtest/build.sh takes for the k8s folder.
exec 9>"${k8s_dir}/.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

# -- Debian packages ---------------------------------------------------------------
# command -> package
declare -A debian=(
    [/usr/sbin/runc]=runc
    [/usr/lib/cni/bridge]=containernetworking-plugins
    [/usr/sbin/iptables]=iptables
    [/usr/sbin/ip]=iproute2
    [/usr/bin/gcc]=gcc
)
missing=()
for path in "${!debian[@]}"; do
    [[ -x "${path}" ]] || missing+=("${debian[${path}]}")
done
# The static pause needs glibc's static library.
[[ -f /usr/lib/x86_64-linux-gnu/libc.a || -f /usr/lib/aarch64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ "${CI:-}" != "true" && "${TFJOB_INSTALL_NODE_TOOLS:-}" != "1" ]]; then
        log "${missing[*]} not installed (apt-get install ${missing[*]}, or TFJOB_INSTALL_NODE_TOOLS=1)"
        exit 2
    fi
    command -v apt-get >/dev/null 2>&1 || { log "${missing[*]} missing and no apt-get"; exit 2; }
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
    log "installing ${missing[*]}"
    "${sudo[@]}" apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >&2
fi

# -- Go builds ---------------------------------------------------------------------
find_go() {
    if [[ -n "${GO:-}" && -x "${GO}" ]]; then printf '%s\n' "${GO}"; return 0; fi
    if command -v go >/dev/null 2>&1; then command -v go; return 0; fi
    if [[ -x /usr/local/go/bin/go ]]; then printf '%s\n' /usr/local/go/bin/go; return 0; fi
    return 1
}
need_build() {
    if [[ ${no_build} -eq 1 ]]; then
        log "$1 is not built yet and --no-build was given (run tools/node/build.sh)"
        exit 3
    fi
    gobin="$(find_go)" || { log "Go is not installed; cannot build $1"; exit 2; }
}

# A binary built from a module folder with a committed go.sum; atomically moved in.
build_in() {
    local module_dir="$1" pkg="$2" out="$3" ldflags="$4" tags="${5:-}"
    need_build "$(basename "${out}")"
    (
        cd "${module_dir}"
        export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
        "${gobin}" mod download || { log "go mod download failed in ${module_dir}"; exit 1; }
        log "building ${pkg} -> ${out}"
        local started=${SECONDS}
        "${gobin}" build -trimpath -tags "${tags}" -ldflags "${ldflags}" -o "${out}.tmp.$$" "${pkg}" \
            || { rm -f "${out}.tmp.$$"; log "go build ${pkg} failed"; exit 1; }
        mv -f "${out}.tmp.$$" "${out}"
        log "built $(basename "${out}") in $((SECONDS - started)) s"
    )
}

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
# (Outputs are read whole, not piped into grep -q: see tools/envtest/build.sh.)
k8s_ok() { [[ -x "$1" ]] && [[ "$("$1" --version 2>/dev/null)" == "Kubernetes ${k8s_version}" ]]; }
for name in kubelet kube-proxy; do
    out="${k8s_dir}/${name}"
    if [[ ${force} -eq 1 ]] || ! k8s_ok "${out}"; then
        build_in "${envtest}/apiserver" "k8s.io/kubernetes/cmd/${name}" "${out}" "$(k8s_ld)"
        k8s_ok "${out}" || die "built ${name} does not report ${k8s_version}"
    fi
done

containerd_ok() {
    [[ -x "${containerd_dir}/containerd" && -x "${containerd_dir}/ctr" \
        && -x "${containerd_dir}/containerd-shim-runc-v2" ]] \
        && [[ "$("${containerd_dir}/containerd" --version 2>/dev/null)" == *" ${containerd_version} "* ]]
}
if [[ ${force} -eq 1 ]] || ! containerd_ok; then
    need_build containerd
    tmp="$(mktemp -d "${containerd_dir}/.gobin.XXXXXX")"
    mod=github.com/containerd/containerd/v2
    log "building ${mod} ${containerd_version} (containerd, ctr, containerd-shim-runc-v2)"
    started=${SECONDS}
    GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-buildvcs=false" GOBIN="${tmp}" \
        "${gobin}" install -trimpath -tags "${containerd_tags}" \
        -ldflags "-s -w -X ${mod}/version.Version=${containerd_version}" \
        "${mod}/cmd/containerd@${containerd_version}" \
        "${mod}/cmd/ctr@${containerd_version}" \
        "${mod}/cmd/containerd-shim-runc-v2@${containerd_version}" \
        || { rm -rf "${tmp}"; die "go install ${mod}@${containerd_version} failed"; }
    for name in containerd ctr containerd-shim-runc-v2; do mv -f "${tmp}/${name}" "${containerd_dir}/${name}"; done
    rm -rf "${tmp}"
    log "built containerd in $((SECONDS - started)) s"
    containerd_ok || die "built containerd does not report ${containerd_version}"
fi

coredns_ok() { [[ -x "$1" ]] && [[ "$("$1" -version 2>/dev/null)" == *"CoreDNS-${coredns_version#v}"* ]]; }
if [[ ${force} -eq 1 ]] || ! coredns_ok "${coredns_dir}/coredns"; then
    build_in "${here}/coredns" . "${coredns_dir}/coredns" "-s -w"
    coredns_ok "${coredns_dir}/coredns" || die "built coredns does not report ${coredns_version}"
fi

# -- the sandbox image -------------------------------------------------------------
# The binary, then an OCI image archive holding only /pause, named by the
# io.containerd.image.name annotation that `ctr images import` reads. Written by
# hand (no builder needed) and byte-for-byte reproducible: fixed times and owners.
if [[ ${force} -eq 1 || ! -s "${pause_dir}/pause.tar" ]]; then
    [[ ${no_build} -eq 0 ]] || { log "the pause image is not built yet and --no-build was given"; exit 3; }
    log "building the static pause and its image"
    gcc -static -Os -Wall -o "${pause_dir}/pause.tmp.$$" "${here}/pause/pause.c"
    strip "${pause_dir}/pause.tmp.$$" 2>/dev/null || true
    mv -f "${pause_dir}/pause.tmp.$$" "${pause_dir}/pause"
    python3 - "${pause_dir}" <<'EOF'
import hashlib, io, json, sys, tarfile
from pathlib import Path

folder = Path(sys.argv[1])
NAME = "localhost/tfjob/pause:1"  # testkit/node.py pins this as the sandbox image

def entry(tar, name, data, mode):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime, info.uid, info.gid = len(data), mode, 0, 0, 0
    tar.addfile(info, io.BytesIO(data))

layer = io.BytesIO()
with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as tar:
    entry(tar, "pause", (folder / "pause").read_bytes(), 0o755)
layer_bytes = layer.getvalue()
digest = lambda b: "sha256:" + hashlib.sha256(b).hexdigest()
config = json.dumps({
    "architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(__import__("os").uname().machine, "amd64"),
    "os": "linux",
    "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
    "rootfs": {"type": "layers", "diff_ids": [digest(layer_bytes)]},
}, sort_keys=True).encode()
manifest = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer_bytes), "size": len(layer_bytes)}],
}, sort_keys=True).encode()
index = json.dumps({
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": digest(manifest), "size": len(manifest),
        "annotations": {"io.containerd.image.name": NAME, "org.opencontainers.image.ref.name": "1"},
    }],
}, sort_keys=True).encode()
out = folder / "pause.tar.tmp"
with tarfile.open(out, mode="w", format=tarfile.PAX_FORMAT) as tar:
    entry(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', 0o644)
    entry(tar, "index.json", index, 0o644)
    for blob in (layer_bytes, config, manifest):
        entry(tar, "blobs/sha256/" + digest(blob).split(":")[1], blob, 0o644)
out.rename(folder / "pause.tar")
(folder / "pause.image").write_text(NAME + "\n")
EOF
fi

# -- one folder naming every part --------------------------------------------------
ln -sfn "${k8s_dir}/kubelet" "${assets}/kubelet"
ln -sfn "${k8s_dir}/kube-proxy" "${assets}/kube-proxy"
for name in containerd ctr containerd-shim-runc-v2; do ln -sfn "${containerd_dir}/${name}" "${assets}/${name}"; done
ln -sfn "${coredns_dir}/coredns" "${assets}/coredns"
ln -sfn "${pause_dir}/pause.tar" "${assets}/pause.tar"
ln -sfn "${pause_dir}/pause.image" "${assets}/pause.image"
ln -sfn /usr/sbin/runc "${assets}/runc"
ln -sfn /usr/lib/cni "${assets}/cni"
log "node parts in ${assets}"
printf '%s\n' "${assets}"
