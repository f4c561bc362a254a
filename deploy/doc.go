// Package deploy holds what operators install plexporter with — Debian
// packages (package.sh, nfpm/), the systemd unit (systemd/), role examples
// (roles/), Kubernetes manifests (kubernetes/) and the container image
// (Dockerfile, image-rootfs.sh) — and the tests that check them: package
// contents, reproducible builds, the unit under systemd-analyze and under
// its own restrictions, strict decoding of every manifest into the
// Kubernetes API types, and the image's file tree. See README.md.
//
// The package has no Go API; it exists for its tests.
package deploy
