#!/usr/bin/env bash
# Build the operator's container image (Containerfile) with buildah, without any
# container registry: the base image is made locally from Debian's packages with
# mmdebstrap and cached, keyed by its inputs, so reruns reuse it.
#
# Usage: scripts/image.sh [build | push REF | base | tools]
#   build (default)  build localhost/tfjob:<version>; last stdout line: the image
#   push REF         push it, e.g. push registry.example.com/team/tfjob:0.1.0
#   base             only make (or reuse) the local Debian base; last line: its name
#   tools            only check for (or install) buildah and mmdebstrap
#
# Environment:
#   TFJOB_IMAGE_BASE        use this base image instead of the local Debian one
#                           (e.g. docker.io/library/python:3.11-slim-bookworm)
#   TFJOB_IMAGE_CACHE       base tarball cache (default ~/.cache/tfjob/images)
#   TFJOB_INSTALL_IMAGE_TOOLS=1 (or CI=true)  apt-get install buildah and mmdebstrap
#                           when missing; otherwise their absence is exit code 2
#   PIP_CA_BUNDLE           CA bundle for pip inside the build, mounted from the host
#                           (default: $PIP_CERT, else /etc/ssl/certs/ca-certificates.crt)
#   DEBIAN_MIRROR           default http://deb.debian.org/debian
# Exit codes: 0 ok, 2 the tools are missing (the tests skip outside CI), 1 failure.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

suite="bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# What the operator needs at run time from Debian: Python 3.11 with venv (the build
# stage makes the virtual environment with it) and the CA certificates.
packages="python3,python3-venv,ca-certificates"
# Bump when the recipe below changes: it is part of the cache key.
recipe="1"
cache="${TFJOB_IMAGE_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/tfjob/images}"
version="$(python3 -c 'import tomllib;print(tomllib.load(open("pyproject.toml","rb"))["project"]["version"])')"

ensure_tools() {
    local missing=()
    command -v buildah >/dev/null 2>&1 || missing+=(buildah)
    if [[ -z "${TFJOB_IMAGE_BASE:-}" ]]; then
        command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
    fi
    [[ ${#missing[@]} -eq 0 ]] && return 0
    if [[ "${CI:-}" != "true" && "${TFJOB_INSTALL_IMAGE_TOOLS:-}" != "1" ]]; then
        log "${missing[*]} not installed (apt-get install buildah mmdebstrap uidmap, or TFJOB_INSTALL_IMAGE_TOOLS=1)"
        exit 2
    fi
    command -v apt-get >/dev/null 2>&1 || { log "${missing[*]} missing and no apt-get to install them"; exit 2; }
    local sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo -n)
    log "installing buildah mmdebstrap uidmap"
    "${sudo[@]}" apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q --no-install-recommends \
        buildah mmdebstrap uidmap fuse-overlayfs containernetworking-plugins >&2
}

# The local base: a minimal Debian with python3, as a tarball in the cache, imported
# into buildah's storage under a name that carries the cache key.
base_image() {
    if [[ -n "${TFJOB_IMAGE_BASE:-}" ]]; then
        printf '%s\n' "${TFJOB_IMAGE_BASE}"
        return
    fi
    local key tarball name
    key="$(printf '%s\n' "${suite}" "${mirror}" "${packages}" "${recipe}" "$(uname -m)" | sha256sum | cut -c1-12)"
    tarball="${cache}/debian-${suite}-${key}.tar"
    name="localhost/tfjob-base:${suite}-${key}"
    if buildah inspect --type image "${name}" >/dev/null 2>&1; then
        printf '%s\n' "${name}"
        return
    fi
    mkdir -p "${cache}"
    if [[ ! -s "${tarball}" ]]; then
        log "making the Debian ${suite} base with mmdebstrap (${packages})"
        local started=${SECONDS}
        # Slim: no documentation, manuals or locales; no apt lists left behind.
        mmdebstrap --variant=minbase --include="${packages}" --format=tar \
            --dpkgopt='path-exclude=/usr/share/man/*' \
            --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-include=/usr/share/doc/*/copyright' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            --dpkgopt='path-exclude=/usr/share/info/*' \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
            "${suite}" "${tarball}.tmp.$$" "${mirror}" >&2 \
            || { rm -f "${tarball}.tmp.$$"; die "mmdebstrap failed"; }
        mv -f "${tarball}.tmp.$$" "${tarball}"
        log "base made in $((SECONDS - started)) s: ${tarball}"
    fi
    log "importing ${tarball} as ${name}"
    local container
    container="$(buildah from scratch)"
    buildah add --quiet "${container}" "${tarball}" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        --cmd /bin/sh "${container}"
    buildah commit --quiet --rm "${container}" "${name}" >/dev/null
    printf '%s\n' "${name}"
}

build_image() {
    local base image started=${SECONDS}
    base="$(base_image)"
    image="localhost/tfjob:${version}"
    local args=(
        --isolation chroot --layers
        --build-arg "BASE=${base}" --build-arg "VERSION=${version}"
        -f Containerfile -t "${image}"
    )
    # pip inside the build trusts the host's CA bundle (mounted, not copied): needed
    # behind a TLS-intercepting proxy, harmless elsewhere.
    local bundle="${PIP_CA_BUNDLE:-${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}}"
    if [[ -n "${bundle}" && -f "${bundle}" ]]; then
        args+=(-v "$(dirname "${bundle}"):/run/host-ca:ro"
               --build-arg "PIP_CA_BUNDLE=/run/host-ca/$(basename "${bundle}")")
    fi
    log "building ${image} on ${base}"
    buildah bud "${args[@]}" . >&2
    log "built ${image} in $((SECONDS - started)) s"
    printf '%s\n' "${image}"
}

case "${1:-build}" in
    tools) ensure_tools ;;
    push)
        [[ -n "${2:-}" ]] || die "push needs the target, e.g. registry.example.com/tfjob:${version}"
        ensure_tools
        buildah push "localhost/tfjob:${version}" "docker://${2}" >&2
        printf '%s\n' "${2}" ;;
    base) ensure_tools; base_image ;;
    build) ensure_tools; build_image ;;
    *) die "unknown command ${1} (build, base or tools)" ;;
esac
