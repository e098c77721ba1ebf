#!/usr/bin/env bash
# Sets up and starts a single-node k1s server on a fresh Debian machine:
# installs build dependencies, builds the release binary, installs it to /usr/local/bin and
# starts `k1s server` (as a systemd service where systemd runs, otherwise in the foreground).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release --locked -p k1s
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
$sudo_cmd install -m 0755 target/release/k1s /usr/local/bin/k1s
if [ -d /run/systemd/system ]; then
  $sudo_cmd install -m 0644 deploy/k1s.service /etc/systemd/system/k1s.service
  $sudo_cmd systemctl daemon-reload
  $sudo_cmd systemctl enable --now k1s
  echo "k1s is running: systemctl status k1s; journalctl -u k1s -f"
else
  echo "no systemd here: running k1s server in the foreground (Ctrl-C stops it)"
  exec $sudo_cmd /usr/local/bin/k1s server "$@"
fi
