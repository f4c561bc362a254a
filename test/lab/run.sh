#!/usr/bin/env bash
# test/lab/run.sh — the real-kernel lab (make lab; test/lab/README.md):
# fetch a Debian kernel and tools, build the project's packages, boot the
# kernel under QEMU (TCG) with the guest's devices, let the guest install the
# packages and run guestcheck, and fail with the names of the failed checks.
#
# Environment:
#   LAB_WORK                 work directory (default bin/lab)
#   LAB_PACKAGES             a directory of already built .debs (default: make package)
#   LAB_TIMEOUT              seconds the guest may run (default 600; 1200 with LAB_BENCH=1)
#   LAB_RXE                  rxe devices in the guest: rxe0 on eth0, the others on dummy netdevs (default 4)
#   LAB_BENCH=1              after the checks, measure the rdma plugin against Debian's node_exporter
#                            on the guest's rxe devices (make lab-bench; never in CI): out/bench.md
#   PLEXPORTER_REQUIRE_LAB=1 QEMU that cannot start is a failure, not a skip (CI)
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=test/lab
WORK=${LAB_WORK:-bin/lab}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
T0=$(date +%s)
elapsed() { echo "$(($(date +%s) - T0))s"; }
step() { echo "lab [$(elapsed)]: $*"; }
cannot() { # the lab cannot run here: a skip, or a failure where it must run
	if [ "${PLEXPORTER_REQUIRE_LAB:-}" = 1 ]; then
		echo "lab: FAILED: $* (PLEXPORTER_REQUIRE_LAB=1)" >&2
		exit 1
	fi
	echo "lab: SKIPPED: $* (install qemu-system-x86 and busybox-static; CI sets PLEXPORTER_REQUIRE_LAB=1)"
	exit 0
}
for tool in qemu-system-x86_64 busybox apt-cache apt-get dpkg-deb python3 ldd; do
	command -v "$tool" >/dev/null || cannot "no $tool on PATH"
done

step "setup (Debian kernel and tools)"
"$HERE/setup.sh" "$WORK"
if [ -n "${LAB_PACKAGES:-}" ]; then
	PKGS=$(cd "$LAB_PACKAGES" && pwd)
else
	step "make package"
	make --no-print-directory package PKG_OUT="$WORK/packages" PKG_BUILD="$WORK/package-build" >"$WORK/package.log" 2>&1 ||
		{ tail -20 "$WORK/package.log"; echo "lab: make package failed (log: $WORK/package.log)" >&2; exit 1; }
	PKGS=$WORK/packages
fi
ls "$PKGS"/plexporter_*.deb >/dev/null 2>&1 || { echo "lab: no plexporter_*.deb in $PKGS" >&2; exit 1; }
step "guestcheck and initramfs"
CGO_ENABLED=0 ${GO:-go} build -trimpath -o "$WORK/guestcheck" ./test/lab/guestcheck
# The test-only probe plugin (never packaged): the limits/* checks run it
# as hostile plugins under a second host in the guest.
CGO_ENABLED=0 ${GO:-go} build -trimpath -o "$WORK/probe" ./internal/testkit/testplugins/probe
"$HERE/build-initramfs.sh" "$WORK" "$PKGS"

SHARE=$WORK/share
rm -rf "$SHARE"
mkdir -p "$SHARE/out"
RXE=${LAB_RXE:-4}
case $RXE in '' | *[!0-9]*) echo "lab: LAB_RXE=$RXE: want a number of rxe devices from 1 to 64" >&2; exit 1 ;; esac
[ "$RXE" -ge 1 ] && [ "$RXE" -le 64 ] || { echo "lab: LAB_RXE=$RXE: want a number of rxe devices from 1 to 64" >&2; exit 1; }
BENCH=0
[ "${LAB_BENCH:-}" = 1 ] && BENCH=1
# guest.sh reads what the guest is to do from the share.
printf 'LAB_RXE=%s\nLAB_BENCH=%s\n' "$RXE" "$BENCH" >"$SHARE/lab.env"
TIMEOUT=${LAB_TIMEOUT:-600}
[ -z "${LAB_TIMEOUT:-}" ] && [ "$BENCH" = 1 ] && TIMEOUT=1200
cp "$HERE/guest.sh" "$WORK/guestcheck" "$WORK/probe" "$HERE/plexporter.yml" "$SHARE/"
rm -f "$WORK/nvme.img"
truncate -s 256M "$WORK/nvme.img"

# TCG, never KVM: on the machines this was measured on /dev/kvm cannot run
# a stock kernel (README). restrict=on keeps every guest packet inside QEMU.
step "boot (QEMU, TCG)"
TB=$(date +%s)
set +e
timeout "$TIMEOUT" qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -smp 2 -m 1G \
	-nographic -no-reboot -serial mon:stdio \
	-kernel "$WORK/vmlinux" -initrd "$WORK/initramfs.cpio" \
	-append "console=ttyS0 panic=-1 quiet loglevel=4" \
	-netdev user,id=n0,restrict=on,ipv6=off -device virtio-net-pci,netdev=n0,romfile= \
	-netdev user,id=n1,restrict=on,ipv6=off -device e1000e,netdev=n1,romfile= \
	-drive file="$WORK/nvme.img",if=none,id=nv0,format=raw -device nvme,serial=LAB123,drive=nv0 \
	-virtfs local,path="$SHARE",mount_tag=host0,security_model=none,id=fs0 \
	</dev/null >"$WORK/console.log" 2>&1
qrc=$?
set -e
step "guest off (QEMU exit $qrc, guest $(($(date +%s) - TB))s)"
grep -o 'LAB: .*' "$WORK/console.log" || true
if ! grep -q 'LAB: init done' "$WORK/console.log"; then
	tail -20 "$WORK/console.log"
	[ "$qrc" = 124 ] && { echo "lab: FAILED: the guest did not reach init within ${TIMEOUT}s" >&2; exit 1; }
	cannot "QEMU did not boot the guest (exit $qrc; $WORK/console.log)"
fi
TAP=$SHARE/out/results.tap
if [ ! -s "$TAP" ]; then
	tail -30 "$SHARE/out/guest.log" 2>/dev/null || tail -30 "$WORK/console.log"
	echo "lab: FAILED: no results from the guest (QEMU exit $qrc; logs in $SHARE/out)" >&2
	exit 1
fi
cat "$TAP"
if [ "$BENCH" = 1 ]; then
	if [ -s "$SHARE/out/bench.md" ]; then
		cp "$SHARE/out/bench.md" "$WORK/bench.md"
		echo "lab: the rdma measurement ($WORK/bench.md):"
		cat "$SHARE/out/bench.md"
	else
		tail -20 "$SHARE/out/bench.log" 2>/dev/null
		echo "lab: FAILED: LAB_BENCH=1 but the guest wrote no out/bench.md (out/bench.log)" >&2
		bench_failed=1
	fi
fi
summary=$(awk '/^# [0-9]+ passed, [0-9]+ failed$/ { line = $0 } END { print line }' "$TAP")
# awk, not grep: a grep that matches nothing fails the pipeline (set -e).
failed=$(awk '/^not ok / && !/ # TODO / { printf "%s%s", sep, $5; sep = " " }' "$TAP")
planned=$(sed -n 's/^1\.\.//p' "$TAP")
ran=$(awk '/^(ok|not ok) / { n++ } END { print n + 0 }' "$TAP")
step "done in $(elapsed): ${summary#\# }"
if [ -z "$summary" ] || [ "$ran" != "$planned" ]; then
	echo "lab: FAILED: the guest's results are incomplete ($ran of $planned checks; QEMU exit $qrc)" >&2
	exit 1
fi
if [ -n "$failed" ]; then
	echo "lab: FAILED checks: $failed (details above; logs in $SHARE/out)" >&2
	exit 1
fi
[ -z "${bench_failed:-}" ] || exit 1
