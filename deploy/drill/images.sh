#!/usr/bin/env bash
# Builds every image the compose deployment needs, from Debian packages, on
# a machine that can pull no image: a Debian base image (debootstrap, then
# docker import), stand-ins for the upstream images compose names (redis,
# postgres, prom/prometheus) that keep the same contract, and the hongbao
# image. Installs the compose v2 CLI plugin (built from the Go module proxy)
# when `docker compose` is missing. Writes images.env beside this script,
# for `docker compose --env-file`.
#
# Idempotent and cached: an existing base image is kept, docker build
# reuses its layers, the compose plugin is built only when missing.
# Run from the repository's root: make drill-images.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# Names are distinct from the upstream ones: a machine that can pull the
# real images keeps them untouched.
BASE_IMAGE="${BASE_IMAGE:-hongbao-drill/debian:bookworm}"
REDIS_IMAGE="${REDIS_IMAGE:-hongbao-drill/redis:7.0}"
POSTGRES_IMAGE="${POSTGRES_IMAGE:-hongbao-drill/postgres:15}"
PROMETHEUS_IMAGE="${PROMETHEUS_IMAGE:-hongbao-drill/prometheus:2.42}"
HONGBAO_IMAGE="${HONGBAO_IMAGE:-hongbao:dev}"
COMPOSE_VERSION="${COMPOSE_VERSION:-v2.40.3}"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

say() { printf '== %s\n' "$*"; }
die() { printf 'drill-images: %s\n' "$*" >&2; exit 1; }

apt_install() {
  say "installing $*"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# The container engine: Debian's docker.io, and its daemon when none answers.
command -v docker >/dev/null 2>&1 || apt_install docker.io
if ! docker info >/dev/null 2>&1; then
  command -v dockerd >/dev/null 2>&1 || apt_install docker.io
  say "starting dockerd (log: /tmp/hongbao-drill-dockerd.log)"
  $SUDO sh -c 'nohup dockerd >/tmp/hongbao-drill-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || die "dockerd did not answer within 60 s: see /tmp/hongbao-drill-dockerd.log"
fi

# The compose v2 CLI plugin. `go install module@version` refuses this module
# (its go.mod has exclude directives), so it is built as the main module
# from a writable copy of the proxy's download.
if ! docker compose version >/dev/null 2>&1; then
  plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  say "building the compose CLI plugin $COMPOSE_VERSION into $plugins (a few minutes)"
  src="$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [ -n "$src" ] || die "go mod download gave no directory for github.com/docker/compose/v2@$COMPOSE_VERSION"
  work="$(mktemp -d)"
  trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  mkdir -p "$plugins"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
    -o "$plugins/docker-compose" ./cmd)
  docker compose version >/dev/null 2>&1 || die "docker compose does not answer after the build"
fi
say "$(docker compose version)"

# The base image: a minimal Debian bookworm from the archive apt already uses.
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
  mirror="${DEBIAN_MIRROR:-}"
  if [ -z "$mirror" ]; then
    mirror="$(sed -n 's/^URIs:[[:space:]]*\(\S*\).*/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | grep -v security | head -1 || true)"
  fi
  if [ -z "$mirror" ]; then
    mirror="$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)"
  fi
  [ -n "$mirror" ] || die "no Debian mirror found in apt's sources; set DEBIAN_MIRROR"
  rootfs="$(mktemp -d)"
  say "debootstrap bookworm from $mirror (about a minute)"
  $SUDO debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/tmp/hongbao-drill-debootstrap.log 2>&1 ||
    die "debootstrap failed: see /tmp/hongbao-drill-debootstrap.log"
  $SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  $SUDO tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
  $SUDO rm -rf "$rootfs"
fi
say "base image $BASE_IMAGE"

# The stand-ins, each from its directory here, FROM the base image.
build() {
  local tag=$1 dir=$2
  say "image $tag"
  docker build -q --build-arg "BASE=$BASE_IMAGE" -t "$tag" "$here/images/$dir" >/dev/null
}
build "$REDIS_IMAGE" redis
build "$POSTGRES_IMAGE" postgres
build "$PROMETHEUS_IMAGE" prometheus

say "image $HONGBAO_IMAGE"
make -s -C "$root" image HONGBAO_IMAGE="$HONGBAO_IMAGE" >/dev/null

cat >"$here/images.env" <<ENV
# Written by make drill-images: the images this machine built, for
# docker compose --env-file. Without this file compose names the upstream images.
HONGBAO_IMAGE=$HONGBAO_IMAGE
REDIS_IMAGE=$REDIS_IMAGE
POSTGRES_IMAGE=$POSTGRES_IMAGE
PROMETHEUS_IMAGE=$PROMETHEUS_IMAGE
ENV
say "wrote deploy/drill/images.env"
