#!/usr/bin/env bash
# Runs every check rootcause has: installs the system tools the tests need
# when they are missing, then formatting, lints, the test suite and the
# packages (scripts/package-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests need, as "command:package" (or "file:package").
needed=(
  shellcheck:shellcheck
  journalctl:systemd
  /lib/systemd/systemd-journal-remote:systemd-journal-remote
  gzip:gzip
  zstd:zstd
  ps:procps
  setsid:util-linux
  script:bsdutils
  chromium:chromium
  /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
  prometheus:prometheus
  promtool:prometheus
  prometheus-node-exporter:prometheus-node-exporter
  man:man-db
  systemd-analyze:systemd
)
missing=()
for pair in "${needed[@]}"; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || [ -e "${pair%%:*}" ] || missing+=("${pair#*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# The benchmark's input generator (its own workspace, no dependencies).
cargo fmt --manifest-path bench/gen/Cargo.toml -- --check
cargo test --quiet --manifest-path bench/gen/Cargo.toml
# The .deb and the wheel, built and installed as users install them (slow:
# an optimised build; cargo-deb, maturin and uv are installed when missing).
bash scripts/package-test.sh
