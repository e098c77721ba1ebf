#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every unit and integration test (the store
# conformance suite on redb and on a real etcd, the crash test, the end-to-end binary tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo fmt --all -- --check
# Generated files are marked and regenerate unchanged; the dependency graph passes deny.toml.
scripts/check-generated.sh
# No import cycle spans more than one module's files, in any crate.
python3 scripts/check-cycles.py
cargo deny --locked check bans licenses sources
cargo clippy --workspace --all-targets --locked -- -D warnings
# The node-only build (`k1s agent` without the control plane's crates) must keep compiling.
cargo clippy -p k1s --no-default-features --locked -- -D warnings
# CI shows only the tail of a failing test's output: keep the panic message in it rather
# than a backtrace (set RUST_BACKTRACE=1 yourself to get one).
export RUST_BACKTRACE="${RUST_BACKTRACE_TESTS:-0}"
# The end-to-end tests' agents run the node-only build, as a worker would (built first, then
# set aside: the tests' own `cargo build -p k1s` puts the full binary back in its place).
cargo build -p k1s --no-default-features --locked
cp target/debug/k1s target/debug/k1s-node
export K1S_AGENT_BIN="$PWD/target/debug/k1s-node"
# The tests' kubelets share the pod network's iptables chains (kubelet/src/network/firewall.rs);
# each test removes its own rules, and once no test runs the chains they leave empty go too.
remove_empty_chains() {
  command -v iptables >/dev/null 2>&1 || return 0
  local table parent chain
  for spec in filter:FORWARD:K1S-FORWARD nat:POSTROUTING:K1S-POSTROUTING; do
    IFS=: read -r table parent chain <<<"$spec"
    if [ "$(iptables -t "$table" -S "$chain" 2>/dev/null | wc -l)" = 1 ]; then
      iptables -t "$table" -D "$parent" -j "$chain" 2>/dev/null || true
      iptables -t "$table" -X "$chain" 2>/dev/null || true
    fi
  done
}
trap remove_empty_chains EXIT
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
