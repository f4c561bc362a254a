#!/bin/sh
# test/lab/guest.sh — runs in the guest from the 9p share (/mnt/host, which
# run.sh fills): create the plexporter user, make the kernel objects the
# plugins report on, start the installed host as its systemd unit would, run
# guestcheck. Its TAP output (out/results.tap) is the lab's result; the rest
# of out/ is for reading when a check fails.
set -u
H=/mnt/host
O=$H/out
step() { echo "LAB: $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
fail() { echo "guest.sh: $*" >&2; exit 1; }

# What run.sh asked for: LAB_RXE rxe devices, LAB_BENCH=1 the rdma measurement.
LAB_RXE=4 LAB_BENCH=0
[ -f "$H/lab.env" ] && . "$H/lab.env"

step install
# build-initramfs.sh unpacked every package (dpkg-deb -x, what dpkg -i
# unpacks); what the maintainer scripts would do is here.
[ -x /usr/bin/plexporter ] || fail "no /usr/bin/plexporter: the packages were not unpacked into the initramfs"
# The package's sysusers.d entry, as systemd-sysusers would apply it: a
# system user and group of the same name, from the top of the system range
# (there is no sysusers or adduser in busybox; the postinst runs one of them).
set -- $(awk '$1 == "u" { print $2 }' /usr/lib/sysusers.d/plexporter.conf)
[ "${1:-}" = plexporter ] || fail "/usr/lib/sysusers.d/plexporter.conf names no plexporter user"
echo "plexporter:x:999:" >>/etc/group
echo "plexporter:x:999:999:plexporter plugins:/nonexistent:/usr/sbin/nologin" >>/etc/passwd
mkdir -p /etc/plexporter /run/plexporter && chmod 0755 /run/plexporter
cp "$H/plexporter.yml" /etc/plexporter/plexporter.yml
[ -f /etc/default/plexporter ] || fail "the host package installed no /etc/default/plexporter"

step rdma
modprobe -a crc32_generic rdma_rxe rdma_ucm ib_uverbs || fail modprobe rdma
rdma link add rxe0 type rxe netdev eth0 || fail "rdma link add rxe0"
# rxe1 ... on dummy netdevs (one rxe device per netdev): the soft-RoCE
# devices rdma/rxe-devices checks and make lab-bench measures. A dummy's
# carrier is up once the link is, so each port is ACTIVE; rping runs over
# rxe0 only.
# numdummies=0: the module makes no dummy0 of its own.
[ "$LAB_RXE" -gt 1 ] && { modprobe dummy numdummies=0 || fail "modprobe dummy"; }
i=1
while [ "$i" -lt "$LAB_RXE" ]; do
	ip link add "dummy$((i - 1))" type dummy && ip link set "dummy$((i - 1))" up || fail "ip link add dummy$((i - 1)) type dummy"
	rdma link add "rxe$i" type rxe netdev "dummy$((i - 1))" || fail "rdma link add rxe$i type rxe netdev dummy$((i - 1))"
	i=$((i + 1))
done
rdma link show

step nvme
# I/O before the host starts: the nvme plugin reads SMART when it starts
# (then every smart_interval), and the check compares that with nvme-cli.
dd if=/dev/nvme0n1 of=/dev/null bs=1M count=32 2>&1 | tail -1
dd if=/dev/zero of=/dev/nvme0n1 bs=1M count=16 oflag=direct 2>&1 | tail -1

step nfs
for d in v42 v3; do
	mkdir -p /srv/$d /mnt/$d && mount -t tmpfs -o size=32m tmpfs /srv/$d || fail "tmpfs /srv/$d"
done
mount -t nfsd nfsd /proc/fs/nfsd
mkdir -p /run/rpcbind /var/lib/nfs/rpc_pipefs
mount -t rpc_pipefs rpc_pipefs /var/lib/nfs/rpc_pipefs
# Before rpc.nfsd: a fresh server's grace period is 90 s by default.
echo 10 >/proc/fs/nfsd/nfsv4gracetime
echo 10 >/proc/fs/nfsd/nfsv4leasetime
rpcbind || fail rpcbind
exportfs -ra || fail exportfs
rpc.mountd || fail rpc.mountd
rpc.nfsd 4 || fail rpc.nfsd
mount -t nfs -o vers=4.2,nconnect=2 127.0.0.1:/srv/v42 /mnt/v42 || fail "mount v4.2"
mount -t nfs -o vers=3,nconnect=2,nolock 127.0.0.1:/srv/v3 /mnt/v3 || fail "mount v3"
for d in v42 v3; do echo hello >/mnt/$d/hello && cat /mnt/$d/hello >/dev/null || fail "I/O on /mnt/$d"; done
grep nfs /proc/mounts

step httpd
mkdir -p /srv/www && echo lab >/srv/www/index.html
httpd -p 127.0.0.1:8080 -h /srv/www || fail httpd

step host
# As plexporter.service runs it: ExecStart with the packaged config file and
# /etc/default/plexporter's ARGS, RuntimeDirectory=/run/plexporter. Under
# TCG nine Go plugins starting at once miss the default 10 s start timeout
# and restart in a loop for minutes: 60 s.
. /etc/default/plexporter
export RUNTIME_DIRECTORY=/run/plexporter
# shellcheck disable=SC2086
/usr/bin/plexporter --config.file=/etc/plexporter/plexporter.yml --web.listen-address=127.0.0.1:9880 --plugin.start-timeout=60s $ARGS >"$O/plexporter.log" 2>&1 &
host=$!
plugins=$(cd /usr/lib/plexporter/plugins && ls plexporter-* | grep -v '\.yaml$' | sed 's/^plexporter-//' | paste -sd, -)
step "checks (plugins $plugins)"
"$H/guestcheck" -plugins "$plugins" -rxe "$LAB_RXE" -out "$O/results.tap" >/dev/null
rc=$?
step "checks done rc=$rc"
wget -q -O "$O/metrics.txt" http://127.0.0.1:9880/metrics
ps -o pid,user,args >"$O/ps.txt" 2>&1
# SIGTERM, as systemd stops it; a host that has not exited 60 s later is a
# failure that says so (the guest once hung here), not a hang until the
# lab's timeout.
kill "$host"
for _ in $(seq 60); do kill -0 "$host" 2>/dev/null || break; sleep 1; done
if kill -0 "$host" 2>/dev/null; then
	step "FAIL: the host did not exit within 60 s of SIGTERM"
	ps -o pid,user,stat,args >"$O/ps-at-stop.txt" 2>&1
	kill -9 "$host"
	rc=1
fi
wait "$host"

if [ "$LAB_BENCH" = 1 ]; then
	# make lab-bench: with the installed host stopped, the rdma plugin
	# (installed, sandboxed under its shipped manifest) under a host of its
	# own against Debian's node_exporter on the rxe devices, at three paces.
	step bench
	"$H/guestcheck" -bench -out "$O/bench.md" >"$O/bench.log" 2>&1 || step "bench failed: see out/bench.log"
	step "bench done"
fi

cat /proc/self/mountstats >"$O/mountstats.txt"
dmesg >"$O/dmesg.txt"
umount /mnt/v42 /mnt/v3
exit $rc
