#!/usr/bin/env bash
# test/lab/build-initramfs.sh WORK PACKAGES — the guest's root: static
# busybox, the kernel modules the lab loads (with their modules.dep closure),
# the Debian tools the checks compare against with the libraries ldd finds
# for them, test/lab/init, and every .deb of PACKAGES unpacked as dpkg -i
# unpacks it (dpkg-deb -x; unpacking them in the guest took 30-60 s of TCG
# time). The maintainer scripts' part, the plexporter user, is guest.sh's.
# Output: WORK/initramfs.cpio (uncompressed: gunzip under TCG costs more
# boot time than the larger read costs).
set -euo pipefail
WORK=$(cd "${1:?usage: build-initramfs.sh WORK PACKAGES}" && pwd)
PACKAGES=$(cd "${2:?usage: build-initramfs.sh WORK PACKAGES}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
KV=$(ls "$WORK/kern/lib/modules")
R=$WORK/initramfs
STAGE=$WORK/stage
rm -rf "$R"
mkdir -p "$R"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} "$R"/{proc,sys,dev,run,tmp,mnt/host,srv,etc,root,var/lib/nfs/{sm,sm.bak,v4recovery},var/run}
ln -s usr/bin "$R/bin"; ln -s usr/sbin "$R/sbin"; ln -s usr/lib "$R/lib"; ln -s usr/lib64 "$R/lib64"
cp "$(command -v busybox)" "$R/usr/bin/busybox"

# crc32_generic: rdma_rxe asks the crypto API for "crc32" by name, so
# modules.dep does not pull it in and `rdma link add` fails without it.
# dummy: the netdevs of the rxe devices beyond rxe0 (guest.sh, LAB_RXE).
MODS="dummy crc32_generic crc32-pclmul virtio_pci virtio_net e1000e nvme rdma_rxe ib_uverbs rdma_ucm ib_umad nfsd nfsv4 nfsv3 nfs rpcsec_gss_krb5 9pnet_virtio 9p"
python3 - "$WORK/kern/lib/modules/$KV" "$R/usr/lib/modules/$KV" $MODS <<'PY'
import os, shutil, sys
src, dst, mods = sys.argv[1], sys.argv[2], sys.argv[3:]
dep = {}
for line in open(os.path.join(src, "modules.dep")):
    k, v = line.split(":", 1)
    dep[os.path.basename(k).split(".ko")[0].replace("-", "_")] = (k, v.split())
want = set()
for m in mods:
    if m.replace("-", "_") not in dep:
        sys.exit(f"build-initramfs: module {m} is not in this kernel's modules.dep")
    k, deps = dep[m.replace("-", "_")]
    want.add(k); want.update(deps)
for p in sorted(want):
    os.makedirs(os.path.dirname(os.path.join(dst, p)), exist_ok=True)
    shutil.copy2(os.path.join(src, p), os.path.join(dst, p))
for f in ("modules.builtin", "modules.order", "modules.builtin.modinfo"):
    shutil.copy2(os.path.join(src, f), os.path.join(dst, f))
PY
busybox depmod -b "$R" "$KV"

# Dynamic tools: their libraries from the staged packages first, then the
# host's. A library ldd cannot find is a build failure, not a guest that
# fails later with a confusing error.
export LD_LIBRARY_PATH=$STAGE/usr/lib/x86_64-linux-gnu:$STAGE/lib/x86_64-linux-gnu
copy_bin() { # copy_bin SRC DESTDIR
	install -D -m 0755 "$1" "$R$2/$(basename "$1")"
	if ldd "$1" | grep -q 'not found'; then
		echo "build-initramfs: $1 needs a library that is neither staged nor on the host:" >&2
		ldd "$1" | grep 'not found' >&2
		exit 1
	fi
	ldd "$1" | awk '/=>/ {print $3} /ld-linux/ {print $1}' | while read -r lib; do
		[ -n "$lib" ] || continue
		case $lib in
		*/ld-linux-x86-64.so.2) [ -e "$R/usr/lib64/ld-linux-x86-64.so.2" ] || cp -L "$lib" "$R/usr/lib64/" ;;
		*) [ -e "$R/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ] || cp -L "$lib" "$R/usr/lib/x86_64-linux-gnu/" ;;
		esac
	done
}
copy_bin "$STAGE/usr/bin/rdma" /usr/bin
copy_bin "$STAGE/usr/sbin/nvme" /usr/sbin
copy_bin "$STAGE/usr/sbin/rpc.nfsd" /usr/sbin
copy_bin "$STAGE/usr/sbin/rpc.mountd" /usr/sbin
copy_bin "$STAGE/usr/sbin/exportfs" /usr/sbin
copy_bin "$STAGE/sbin/rpcbind" /usr/sbin
# nfsdcltrack: the kernel nfsd's client tracker (usermode helper); without
# it a fresh server holds every NFSv4 OPEN until the grace period ends.
copy_bin "$STAGE/sbin/nfsdcltrack" /usr/sbin
copy_bin "$STAGE/sbin/mount.nfs" /usr/sbin
ln -sf mount.nfs "$R/usr/sbin/mount.nfs4"
copy_bin "$STAGE/sbin/ethtool" /usr/sbin
copy_bin "$STAGE/usr/bin/rping" /usr/bin
# make lab-bench only: Debian's node_exporter (setup.sh stages it then).
if [ "${LAB_BENCH:-}" = 1 ]; then
	[ -x "$STAGE/usr/bin/prometheus-node-exporter" ] || { echo "build-initramfs: LAB_BENCH=1 but setup.sh staged no prometheus-node-exporter" >&2; exit 1; }
	copy_bin "$STAGE/usr/bin/prometheus-node-exporter" /usr/bin
fi
# The rxe verbs provider, dlopened by libibverbs; libgcc_s, dlopened by
# glibc for pthread_exit (rping aborts without it).
mkdir -p "$R/usr/lib/x86_64-linux-gnu/libibverbs" "$R/etc/libibverbs.d"
cp -L "$STAGE"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav*.so "$R/usr/lib/x86_64-linux-gnu/libibverbs/"
cp "$STAGE/etc/libibverbs.d/rxe.driver" "$R/etc/libibverbs.d/"
cp -L "$STAGE/lib/x86_64-linux-gnu/libgcc_s.so.1" "$R/usr/lib/x86_64-linux-gnu/" 2>/dev/null ||
	cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$R/usr/lib/x86_64-linux-gnu/"

cp /etc/services /etc/protocols "$R/etc/"
cp "$STAGE/etc/netconfig" "$R/etc/" 2>/dev/null || cp /etc/netconfig "$R/etc/"
[ -f /etc/rpc ] && cp /etc/rpc "$R/etc/" || cp "$STAGE/etc/rpc" "$R/etc/" 2>/dev/null || true
cat >"$R/etc/passwd" <<'PW'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
_rpc:x:100:65534::/run/rpcbind:/usr/sbin/nologin
statd:x:101:65534::/var/lib/nfs:/usr/sbin/nologin
PW
printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
printf '127.0.0.1 localhost\n10.0.2.15 labguest\n' >"$R/etc/hosts"
printf 'passwd: files\ngroup: files\nhosts: files\n' >"$R/etc/nsswitch.conf"
cat >"$R/etc/exports" <<'EX'
/srv/v42 127.0.0.1(rw,no_root_squash,insecure,no_subtree_check,fsid=1)
/srv/v3 127.0.0.1(rw,no_root_squash,insecure,no_subtree_check,fsid=2)
EX
: >"$R/var/lib/nfs/etab"; : >"$R/var/lib/nfs/rmtab"
printf '/usr/lib/x86_64-linux-gnu\n' >"$R/etc/ld.so.conf"
ldconfig -r "$R"
mkdir -p "$R/boot" && cp "$WORK/kern/boot/config-$KV" "$R/boot/"
for deb in "$PACKAGES"/*.deb; do
	dpkg-deb -x "$deb" "$R"
done
install -m 0755 "$HERE/init" "$R/init"
(cd "$R" && find . | busybox cpio -o -H newc 2>/dev/null) >"$WORK/initramfs.cpio"
echo "initramfs: $(du -sh "$R" | cut -f1), $(find "$R/usr/lib/modules" -name '*.ko*' | wc -l) modules, $(ls "$PACKAGES"/*.deb | wc -l) packages"
