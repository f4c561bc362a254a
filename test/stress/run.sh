#!/usr/bin/env bash
# test/stress/run.sh — the timing-sensitive tests under load (`make test-stress`).
#
# Runs each package below with -count=$COUNT while stress-ng keeps the CPUs
# and the disk busy (`stress-ng --cpu 4 --io 1` by default, Debian package
# stress-ng), and prints one line per package: pass/fail and how long it
# took, then a markdown table for docs/testing.md. A test that only passes on
# an idle machine fails here; CI runs on a busy 2-core machine, so this is the
# proof that `make test` does not depend on this machine's speed. Not part of
# `make test`: it takes 30-60 minutes.
#
# Environment:
#   PACKAGES     the packages to run (default: every package whose tests wait
#                on processes, Prometheus, the kernel or the clock)
#   COUNT        -count (default 3)
#   STRESS       stress-ng's arguments (default: --cpu 4 --io 1)
#   RUN          -run pattern (default: all tests)
#   OUT          directory for each package's full log (default bin/stress)
set -uo pipefail
cd "$(dirname "$0")/../.."

: "${GO:=go}"
: "${COUNT:=3}"
: "${STRESS:=--cpu 4 --io 1}"
: "${OUT:=bin/stress}"
: "${RUN:=}"
: "${PACKAGES:=./host/ ./host/internal/supervise/ ./host/internal/scrape/ ./host/internal/launch/ \
./plugins/ebpf/ ./plugins/guest/ ./plugins/probe/ ./plugins/nvme/ ./plugins/nfs/ ./plugins/nixl/ ./plugins/attribution/ \
./plugins/so/ ./plugins/ethtool/ ./plugins/rdma/ ./plugins/ernic/ \
./deploy/prometheus/ ./deploy/grafana/ ./examples/python/}"

if ! command -v stress-ng >/dev/null; then
	echo "test-stress: stress-ng is not installed (Debian: apt-get install stress-ng)" >&2
	exit 2
fi
mkdir -p "$OUT"
# Static binaries, as `make test` builds them (the sandbox refuses cgo builds).
export CGO_ENABLED=0

# shellcheck disable=SC2086 # STRESS is a list of arguments
stress-ng $STRESS --timeout 0 --quiet &
stress=$!
trap 'kill "$stress" 2>/dev/null; wait "$stress" 2>/dev/null' EXIT
sleep 2
if ! kill -0 "$stress" 2>/dev/null; then
	echo "test-stress: stress-ng $STRESS did not start" >&2
	exit 2
fi

echo "test-stress: stress-ng $STRESS beside go test -count=$COUNT on $(nproc) CPUs, $(uname -r)"
table="| package | result | wall time | load average at the end |"$'\n'"|---|---|---:|---|"
failed=0
for p in $PACKAGES; do
	log=$OUT/$(echo "$p" | tr -c 'a-zA-Z0-9\n' '_' | sed 's/^_*//; s/_*$//').log
	start=$(date +%s)
	args=(test -count="$COUNT" -timeout 90m)
	[ -n "$RUN" ] && args+=(-run "$RUN")
	if "$GO" "${args[@]}" "$p" >"$log" 2>&1; then
		result=pass
	else
		result=FAIL
		failed=$((failed + 1))
	fi
	took=$(($(date +%s) - start))
	load=$(cut -d' ' -f1-3 /proc/loadavg)
	printf '%-28s %s  %4ds  load %s\n' "$p" "$result" "$took" "$load"
	[ "$result" = FAIL ] && grep -E '^\s*--- FAIL|^FAIL|panic:' "$log" | head -20 | sed 's/^/    /'
	table+=$'\n'"| \`$p\` | $result | ${took} s | $load |"
done
echo
echo "$table"
echo
echo "test-stress: $failed of $(echo $PACKAGES | wc -w) packages failed (logs in $OUT/)"
[ "$failed" = 0 ]
