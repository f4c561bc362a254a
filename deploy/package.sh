#!/usr/bin/env bash
# deploy/package.sh — build the .deb packages: `plexporter` (the host) and
# one `plexporter-plugin-<name>` per directory under plugins/ (a renamed one
# replacing its former package, deploy/renamed-plugins), each with a
# CycloneDX SBOM inside (/usr/share/doc/<package>/sbom.cdx.json) and beside
# it (<package>_<version>_<arch>.cdx.json), plus SHA256SUMS.
#
# Run through `make package`, which installs the pinned nfpm and
# cyclonedx-gomod into bin/tools and passes them in NFPM and CYCLONEDX.
#
# Reproducible: the same commit gives byte-identical packages wherever and
# whenever it is built (deploy/reproducible_test.go builds twice, in two
# directories with two build caches, and compares sha256). What makes it so:
#   - the binaries come from deploy/build.sh: -trimpath (no build directory
#     in the binary), -buildvcs=false (the revision comes from ldflags, not
#     from the state of .git), -ldflags=-buildid=, CGO_ENABLED=0;
#   - SOURCE_DATE_EPOCH, the last commit's date, is every file's mtime in
#     the packages (nfpm) and the binaries' build date;
#   - SBOMs without serial number or timestamp.
#
# Inputs (environment; defaults from git):
#   VERSION, REVISION     git describe / commit, as in the Makefile
#   SOURCE_DATE_EPOCH     default: committer date of HEAD
#   PKG_VERSION           Debian version; default derived from VERSION
#   GOARCH                target architecture (amd64, arm64); default the Go default
#   PKG_OUT, PKG_BUILD    output and scratch directories
#   PKG_MAINTAINER        the Maintainer field
set -euo pipefail
cd "$(dirname "$0")/.."

: "${GO:=go}"
: "${NFPM:?set NFPM to the nfpm binary (make package does)}"
: "${CYCLONEDX:?set CYCLONEDX to the cyclonedx-gomod binary (make package does)}"
: "${PKG_OUT:=bin/packages}"
: "${PKG_BUILD:=bin/package-build}"
: "${VERSION:=$(git describe --tags --always --dirty 2>/dev/null || echo dev)}"
: "${REVISION:=$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
: "${SOURCE_DATE_EPOCH:=$(git log -1 --format=%ct 2>/dev/null || true)}"
: "${PKG_MAINTAINER:=plexporter developers <noreply@plexporter.invalid>}"
if [ -z "$SOURCE_DATE_EPOCH" ]; then
	echo "package.sh: no SOURCE_DATE_EPOCH and no git history to take it from; set it (seconds since 1970) for a reproducible build" >&2
	exit 1
fi
GOARCH=$("$GO" env GOARCH)
export GOOS=linux GOARCH CGO_ENABLED=0 SOURCE_DATE_EPOCH

# Debian versions must start with a digit and sort like releases:
# v1.2.3 -> 1.2.3, v1.2.3-4-gabc -> 1.2.3+git4.abc, v1.2.3-rc1 -> 1.2.3~rc1;
# without a tag: 0.0.0~git<date of the last commit>.<hash>.
deb_version() {
	local v=${VERSION#v}
	if [[ $v =~ ^[0-9]+\.[0-9]+ ]]; then
		echo "$v" | sed -E 's/-([0-9]+)-g([0-9a-f]+)/+git\1.\2/; s/-dirty$/+dirty/; s/-/~/g'
	else
		echo "0.0.0~git$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d).${v//-/.}"
	fi
}
: "${PKG_VERSION:=$(deb_version)}"
# Go and Debian agree on amd64 and arm64, the architectures the project builds for.
PKG_ARCH=$GOARCH
export PKG_VERSION PKG_ARCH PKG_MAINTAINER PKG_BUILD

plugins=()
for m in plugins/*/main.go; do
	plugins+=("$(basename "$(dirname "$m")")")
done

rm -rf "$PKG_BUILD"
mkdir -p "$PKG_BUILD/bin" "$PKG_BUILD/sbom" "$PKG_OUT"
rm -f "$PKG_OUT"/*.deb "$PKG_OUT"/*.cdx.json "$PKG_OUT/SHA256SUMS"

# sbom <package name> <binary>: what went into the binary, read from its
# build information (modules with their go.sum hashes, the Go version and
# standard library, build settings).
# The main component's license (LICENSE) is added here: cyclonedx-gomod
# detects licenses only by downloading every module, the project's own
# included, which is slow and needs the network; the project's license is
# known.
sbom() {
	"$CYCLONEDX" bin -json -std -noserial -notimestamp -version "$VERSION" \
		-output "$PKG_BUILD/sbom/$1.cdx.json" "$2"
	sed -i '0,/^      "name": "github.com\/plexporter\/plexporter",$/s//&\n      "licenses": [{"license": {"id": "Apache-2.0"}}],/' \
		"$PKG_BUILD/sbom/$1.cdx.json"
	grep -q '"licenses": \[{"license": {"id": "Apache-2.0"}}\]' "$PKG_BUILD/sbom/$1.cdx.json" || {
		echo "package.sh: could not add the license to $1's SBOM (cyclonedx-gomod's output changed?)" >&2
		exit 1
	}
}
deb() { # deb <package name> <nfpm config>
	"$NFPM" package --config "$2" --packager deb --target "$PKG_OUT/" >/dev/null
	cp "$PKG_BUILD/sbom/$1.cdx.json" "$PKG_OUT/${1}_${PKG_VERSION}_${PKG_ARCH}.cdx.json"
}

echo "package plexporter $PKG_VERSION ($PKG_ARCH, SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH)"
GO=$GO VERSION=$VERSION REVISION=$REVISION deploy/build.sh "$PKG_BUILD/bin"
sbom plexporter "$PKG_BUILD/bin/plexporter"
deb plexporter deploy/nfpm/plexporter.yaml

for p in "${plugins[@]}"; do
	manifest=plugins/$p/plexporter-$p.yaml
	if [ ! -f "$manifest" ]; then
		echo "package.sh: plugin $p has no sandbox manifest $manifest; every shipped plugin needs one" >&2
		exit 1
	fi
	echo "package plexporter-plugin-$p"
	sbom "plexporter-plugin-$p" "$PKG_BUILD/bin/plexporter-$p"
	config=deploy/nfpm/plugin.yaml
	if grep -qx "$p" deploy/cgo-plugins; then
		# Linked against the system's libc (deploy/cgo-plugins).
		config=$PKG_BUILD/plugin-$p.yaml
		sed '/^depends:/a\  - libc6' deploy/nfpm/plugin.yaml >"$config"
	fi
	if [ "$p" = textfile ]; then
		# The plugin's default directory, root's and not writable by
		# others (plugins/textfile/README.md says how to open it to a
		# writers' group safely).
		config=$PKG_BUILD/plugin-$p.yaml
		cat deploy/nfpm/plugin.yaml deploy/nfpm/textfile-dir.yaml >"$config"
	fi
	formers=$(sed -e 's/#.*//' deploy/renamed-plugins | awk -v p="$p" '$1 == p { print $2 }')
	if [ -n "$formers" ]; then
		# A renamed plugin (deploy/renamed-plugins): installing it removes
		# the package of its former name, and what depended on that name
		# is satisfied by it.
		renamed=$PKG_BUILD/plugin-$p-renamed.yaml
		cp "$config" "$renamed"
		for field in conflicts replaces provides; do
			echo "$field:"
			for f in $formers; do
				echo "  - plexporter-plugin-$f"
			done
		done >>"$renamed"
		config=$renamed
	fi
	PLUGIN=$p PLUGIN_DESCRIPTION=$(sed -n 's/^description: *//p' "$manifest") \
		deb "plexporter-plugin-$p" "$config"
done

(cd "$PKG_OUT" && sha256sum -- *.deb *.cdx.json >SHA256SUMS)
echo "packages in $PKG_OUT:"
ls -1 "$PKG_OUT"
