#!/usr/bin/env bash
# Checks that the generated files are marked and that regenerating them changes nothing.
#
# - apimachinery/src/apply/builtin.rs: regenerated from the k8s-openapi sources cargo has
#   fetched (a crates.io package, located with `cargo metadata`) and
#   scripts/apply-go-presence.txt, then compared.
# - apimachinery/src/protobuf/tables.rs: its inputs are the Go sources of k8s.io/api and
#   k8s.io/apimachinery, which no registry reachable from CI provides; only its marker is
#   checked (regenerate with scripts/gen-protobuf-tables.py and a checkout of both).
set -euo pipefail
cd "$(dirname "$0")/.."

fail=0
for f in apimachinery/src/apply/builtin.rs apimachinery/src/protobuf/tables.rs; do
    if ! head -3 "$f" | grep -q '@generated'; then
        echo "check-generated: $f has no @generated marker" >&2
        fail=1
    fi
done

openapi_dir=$(cargo metadata --format-version 1 --locked | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "k8s-openapi":
        print(os.path.dirname(p["manifest_path"]))
        break
')
if [ -z "$openapi_dir" ] || [ ! -d "$openapi_dir/src/v1_33" ]; then
    echo "check-generated: k8s-openapi sources not found (cargo fetch first)" >&2
    exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
python3 scripts/gen-apply-builtin.py "$openapi_dir/src/v1_33" "$tmp" scripts/apply-go-presence.txt 2>/dev/null
if ! diff -u apimachinery/src/apply/builtin.rs "$tmp" >&2; then
    echo "check-generated: apimachinery/src/apply/builtin.rs differs from what scripts/gen-apply-builtin.py generates" >&2
    fail=1
fi
exit $fail
