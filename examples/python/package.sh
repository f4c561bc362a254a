#!/bin/sh
# package.sh OUT: packs plexporter-pyexample and its generated stubs into one
# executable file, a Python zip application (PEP 441) that starts with the
# same #!/usr/bin/python3 line. One file is what the host's sandbox grants
# (a plugin may always read its own executable) and what a manifest's sha256
# pins, stubs included; a script importing stubs from a directory beside it
# would need that directory granted, and the pin would not cover it.
set -eu
out=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$here/plexporter-pyexample" "$tmp/__main__.py"
mkdir -p "$tmp/plexporter/plugin/v1"
cp "$here"/plexporter/plugin/v1/*_pb2*.py "$tmp/plexporter/plugin/v1/"
# One fixed time stamp (zip's epoch is 1980): the same sources make the same
# bytes, so a manifest's sha256 pin can be written down once per release.
TZ=UTC find "$tmp" -exec touch -h -t 198001010000 {} +
/usr/bin/python3 -m zipapp "$tmp" --python=/usr/bin/python3 --output="$out"
chmod 755 "$out"
