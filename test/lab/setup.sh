#!/usr/bin/env bash
# test/lab/setup.sh WORK — fetch what the lab guest is made of, from the
# Debian archive through apt, into WORK (never into the host's /boot or /usr):
#   WORK/kern   the Debian kernel package, unpacked (dpkg-deb -x), depmod'ed
#   WORK/stage  the userland packages the guest's tools come from, unpacked
#   WORK/vmlinux the kernel as an uncompressed ELF, which QEMU boots directly
#               (PVH): the guest does not spend 5-10 s of TCG time in the
#               bzImage's xz decompressor
# The kernel package is resolved now, from whatever linux-image-amd64 depends
# on today: its ABI name changes with every Debian point release.
# qemu-system-x86 and busybox-static are the host's tools; .ci/run installs
# them, make lab expects them (run.sh says which is missing).
set -euo pipefail
WORK=${1:?usage: setup.sh WORK}
mkdir -p "$WORK/debs"
WORK=$(cd "$WORK" && pwd)

kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
if [ -z "$kpkg" ]; then
	echo "setup.sh: apt-cache depends linux-image-amd64 names no linux-image-<abi> package (run apt-get update?)" >&2
	exit 1
fi
# libgcc-s1: glibc dlopens libgcc_s for pthread_exit (rping aborts without it).
# libsqlite3-0: nfsdcltrack, the kernel nfsd's client tracker, which lets a
# fresh server skip the NFSv4 grace period (90 s, or 10 s as the lab sets it).
userland="nvme-cli libnvme1 libjson-c5 nfs-kernel-server nfs-common rpcbind libwrap0 libtirpc3 libsqlite3-0
	ibverbs-utils rdmacm-utils ibverbs-providers libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
	ethtool libmnl0 iproute2 libelf1 libbpf1 libcap2 libbsd0 libmd0 libdb5.3 libxtables12 libgcc-s1 zlib1g
	libkeyutils1 libevent-core-2.1-7 libblkid1 libmount1 libuuid1 libselinux1 libpcre2-8-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libcrypt1 libcap-ng0 libudev1"
# make lab-bench (LAB_BENCH=1): Debian's node_exporter, which the guest's
# rdma measurement compares the rdma plugin with (test/lab/README.md).
[ "${LAB_BENCH:-}" = 1 ] && userland="$userland prometheus-node-exporter"
have_all=1
for p in $kpkg $userland; do
	ls "$WORK/debs/${p}_"*.deb >/dev/null 2>&1 || { have_all=0; break; }
done
if [ "$have_all" = 0 ]; then
	# apt's sandbox user downloads; it needs to write here.
	chown _apt "$WORK/debs" 2>/dev/null || true
	# shellcheck disable=SC2086
	(cd "$WORK/debs" && apt-get download -qq "$kpkg" $userland)
fi

if [ ! -f "$WORK/kern/.done-$kpkg" ]; then
	rm -rf "$WORK/kern"
	dpkg-deb -x "$WORK/debs/${kpkg}_"*.deb "$WORK/kern"
	kv=$(ls "$WORK/kern/lib/modules")
	busybox depmod -b "$WORK/kern" "$kv"
	# The PVH entry point is in the ELF, not in the bzImage: unpack the xz
	# payload (python3's lzma: the host has no extract-vmlinux).
	python3 - "$WORK/kern/boot/vmlinuz-$kv" "$WORK/vmlinux" <<'PY'
import lzma, sys
d = open(sys.argv[1], "rb").read()
i = d.find(b"\xfd7zXZ\x00")
if i < 0:
    sys.exit(f"{sys.argv[1]}: no xz stream; the lab expects Debian's xz-compressed bzImage")
open(sys.argv[2], "wb").write(lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(d[i:]))
PY
	touch "$WORK/kern/.done-$kpkg"
fi
rm -rf "$WORK/stage"
for d in "$WORK"/debs/*.deb; do
	case $(basename "$d") in linux-image-*) ;; *) dpkg-deb -x "$d" "$WORK/stage" ;; esac
done
echo "setup: $kpkg ($(ls "$WORK/kern/lib/modules")), $(ls "$WORK"/debs | wc -l) packages in $WORK/debs"
