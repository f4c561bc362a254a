#!/usr/bin/env bash
# deploy/build.sh OUTDIR — the release binaries, reproducibly: OUTDIR/plexporter
# and OUTDIR/plexporter-<name> for every plugin, static (CGO_ENABLED=0) but
# for those in deploy/cgo-plugins (dynamic against libc),
# built with -trimpath, -buildvcs=false and -ldflags=-buildid=, stamped with
# VERSION, REVISION and SOURCE_DATE_EPOCH (defaults from git). Shared by
# package.sh (the .debs) and image-rootfs.sh (the container image), so both
# ship the same bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: deploy/build.sh OUTDIR}

: "${GO:=go}"
: "${VERSION:=$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
: "${REVISION:=$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || true)}"
if [ -z "$SOURCE_DATE_EPOCH" ]; then
	echo "build.sh: no SOURCE_DATE_EPOCH and no git history to take it from; set it (seconds since 1970) for a reproducible build" >&2
	exit 1
fi
export GOOS=linux CGO_ENABLED=0

pkg=github.com/prometheus/common/version
ldflags="-buildid= -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION -X $pkg.Branch=main"
ldflags+=" -X $pkg.BuildDate=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
build() { # build <output name> <package dir> [CGO_ENABLED]
	CGO_ENABLED=${3:-0} "$GO" build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out/$1" "./$2"
}
build plexporter host
for m in plugins/*/main.go; do
	p=$(basename "$(dirname "$m")")
	if grep -qx "$p" deploy/cgo-plugins; then
		build "plexporter-$p" "plugins/$p" 1
	else
		build "plexporter-$p" "plugins/$p"
	fi
done
