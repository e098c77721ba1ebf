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
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  cargo test --workspace --locked --no-fail-fast
fi
