#!/usr/bin/env bash
# generate-check.sh (make ebpf-generate-check): compile the BPF programs
# again with the pinned clang into a temporary directory and fail when the
# result differs from the committed *_bpfel.{go,o}.
# A developer check, not part of make test: objects are byte-identical only
# with the clang that made them (bpf/CLANG_VERSION), and CI builds without
# clang. With another clang it says so and fails instead of comparing.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(awk '{print $2}' bpf/CLANG_VERSION)
have=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9.]*\).*/\1/p' | head -1 || true)
if [ -z "$have" ]; then
	echo "ebpf-generate-check: clang not found; install clang $want (Debian 12: apt-get install clang llvm libbpf-dev)" >&2
	exit 1
fi
if [ "$have" != "$want" ]; then
	echo "ebpf-generate-check: clang $have is not the pinned $want (bpf/CLANG_VERSION): its objects would differ for reasons other than the sources. Use clang $want, or regenerate with 'go generate ./plugins/ebpf', review and record the new version there." >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The same commands as gen.go's go:generate lines, into $tmp.
# (go generate sets GOPACKAGE; bpf2go is given -go-package instead.)
while read -r cmd; do
	eval "${cmd/bpf2go /bpf2go -output-dir $tmp }" </dev/null
done < <(sed -n 's|^//go:generate ||p' gen.go)
status=0
for f in *_bpfel.go *_bpfel.o; do
	if ! cmp -s "$f" "$tmp/$f"; then
		echo "ebpf-generate-check: $f is stale: run 'go generate ./plugins/ebpf' and commit" >&2
		status=1
	fi
done
[ $status -eq 0 ] && echo "ebpf-generate-check: generated BPF code is up to date (clang $have)"
exit $status
