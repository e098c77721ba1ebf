#!/usr/bin/env bash
# Installs what building and testing k1s needs on Debian, idempotently:
#   protobuf-compiler  protoc, for the etcd client's generated gRPC code
#   etcd-server        a real etcd 3.4 that the store conformance suite and the bench compare against
#   kubernetes-client  kubectl, where none is installed, for the end-to-end tests
set -euo pipefail
need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# kubectl for the end-to-end tests: Debian's kubernetes-client (1.20) where none is installed.
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
if [ "${#need[@]}" -gt 0 ]; then
  echo "installing: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs) and re-run" >&2
  exit 1
fi
