#!/usr/bin/env bash
# deploy/image-rootfs.sh — the container image's whole file tree, for
# deploy/Dockerfile (FROM scratch, COPY . /) to copy as it is:
#
#   /usr/bin/plexporter                          the host (static)
#   /usr/lib/plexporter/plugins/plexporter-<p>   every plugin (static), 0755
#   /usr/lib/plexporter/plugins/plexporter-<p>.yaml  its manifest, 0644
#   /etc/plexporter/plugins.d/                   the second default plugin dir
#   /etc/plexporter/plexporter.yml               the shipped config (its opt-ins
#                                                to the privileged plugins'
#                                                capabilities); a pod's
#                                                ConfigMap replaces it
#   /etc/passwd, /etc/group                      root, plexporter, nobody/nogroup
#   /run/plexporter/                             the host's runtime directory
#                                                (plugin sockets; a volume in a pod)
#
# No shell, libc or CA certificates: the binaries are static, and the
# exporter makes no outgoing TLS connection. deploy/image_test.go checks
# the tree. Output: $IMAGE_ROOTFS (default bin/image-rootfs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=${IMAGE_ROOTFS:-bin/image-rootfs}

rm -rf "$root"
mkdir -p "$root/usr/bin" "$root/usr/lib/plexporter/plugins" "$root/etc/plexporter/plugins.d" "$root/run/plexporter"
chmod 0755 "$root/run" "$root/run/plexporter"
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
deploy/build.sh "$build"

install -m 0755 "$build/plexporter" "$root/usr/bin/plexporter"
for m in plugins/*/main.go; do
	p=$(basename "$(dirname "$m")")
	# FROM scratch: no dynamic loader, no libc for the cgo plugins
	# (deploy/cgo-plugins); they ship in the .debs only.
	if grep -qx "$p" deploy/cgo-plugins; then
		continue
	fi
	install -m 0755 "$build/plexporter-$p" "$root/usr/lib/plexporter/plugins/plexporter-$p"
	install -m 0644 "plugins/$p/plexporter-$p.yaml" "$root/usr/lib/plexporter/plugins/plexporter-$p.yaml"
done
install -m 0644 deploy/etc/plexporter.yml "$root/etc/plexporter/plexporter.yml"
install -m 0644 deploy/image/passwd "$root/etc/passwd"
install -m 0644 deploy/image/group "$root/etc/group"
echo "image file tree in $root (build with: docker build -f deploy/Dockerfile $root)"
