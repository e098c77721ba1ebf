#!/usr/bin/env bash
# Installs what building and testing k1s needs on Debian, idempotently:
#   protobuf-compiler  protoc, for the etcd client's generated gRPC code
#   libprotobuf-dev    the well-known types (google/protobuf/*.proto) that etcd's protos import
#   etcd-server        a real etcd 3.4 that the store conformance suite and the bench compare against
#   etcd-client        etcdctl, which restores etcd's own snapshots in the snapshot test
#   kubernetes-client  kubectl, where none is installed, for the end-to-end tests
#   curl               raw HTTPS requests in the end-to-end tests (bad input, headers)
#   python3-venv       a venv with the official Python client (PyPI `kubernetes`)
#   nftables           nft, which the service proxy programs its table with
#   conntrack          the tool the service proxy deletes stale UDP flows with
#   bind9-dnsutils     dig, with which the DNS tests ask the cluster DNS over UDP and TCP
#   dnsmasq-base       dnsmasq: the DNS tests' upstream resolver, the DNS bench's peer
# and, under $K1S_TEST_TOOLS (default /var/cache/k1s-test), the test clients the machine's
# package manager does not put on PATH: Debian's kubectl 1.20 (unpacked, not installed) and
# the Python venv.
set -euo pipefail
tools="${K1S_TEST_TOOLS:-/var/cache/k1s-test}"
need=()
command -v protoc >/dev/null 2>&1 || need+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || need+=(libprotobuf-dev)
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || need+=(etcd-client)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# kubectl for the end-to-end tests: Debian's kubernetes-client (1.20) where none is installed.
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
command -v curl >/dev/null 2>&1 || need+=(curl)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
# The kubelet's end-to-end tests: a local registry with busybox images built by umoci and
# pushed by skopeo; iptables for pod egress masquerade; ip/nsenter to look into pods.
command -v docker-registry >/dev/null 2>&1 || need+=(docker-registry)
command -v skopeo >/dev/null 2>&1 || need+=(skopeo)
command -v umoci >/dev/null 2>&1 || need+=(umoci)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
# The service proxy programs nftables with Debian's nft, and deletes stale UDP flows with
# conntrack; the service tests read answers with curl and probe DNS-free (nc in the pods).
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
# The cluster DNS tests: dig asks, a dnsmasq of the test's own is the upstream (and the
# bench's peer).
command -v dig >/dev/null 2>&1 || need+=(bind9-dnsutils)
command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
# k1s csi-hostpath (and its tests): ext4 images on loop devices.
command -v mkfs.ext4 >/dev/null 2>&1 || need+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || need+=(mount)
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

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd mkdir -p "$tools"
[ -w "$tools" ] || $sudo_cmd chown "$(id -u)" "$tools"
# Debian's kubectl 1.20, the oldest client the end-to-end tests drive.
if [ ! -x "$tools/kubectl-1.20" ]; then
  work="$(mktemp -d)"
  if (cd "$work" && apt-get download -qq kubernetes-client >/dev/null 2>&1); then
    dpkg -x "$work"/kubernetes-client_*.deb "$work/x"
    cp "$work/x/usr/bin/kubectl" "$tools/kubectl-1.20"
    echo "kubectl 1.20 unpacked to $tools/kubectl-1.20"
  else
    echo "warning: could not download Debian's kubernetes-client; kubectl 1.20 tests will be skipped" >&2
  fi
  rm -rf "$work"
fi
# The official Python client from PyPI, in a venv.
if [ ! -x "$tools/pyvenv/bin/python" ] || ! "$tools/pyvenv/bin/python" -c 'import kubernetes' >/dev/null 2>&1; then
  python3 -m venv "$tools/pyvenv"
  "$tools/pyvenv/bin/pip" install -q --disable-pip-version-check kubernetes
  echo "Python kubernetes client installed in $tools/pyvenv"
fi
# cargo-deny, which scripts/test.sh runs over the dependency graph (bans, licenses, sources;
# deny.toml), from crates.io, pinned.
if ! cargo deny --version 2>/dev/null | grep -q '^cargo-deny 0.20.2$'; then
  cargo install --locked --quiet cargo-deny --version 0.20.2
fi
