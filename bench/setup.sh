#!/usr/bin/env bash
# Installs what bench/run.sh compares rootcause with: ripgrep (the scan
# limit), lnav (the log viewer a user would otherwise open), GNU time (peak
# RSS) and python3 (the report). Debian/Ubuntu; does nothing when all are
# there.
set -euo pipefail

missing=()
command -v rg >/dev/null || missing+=(ripgrep)
command -v lnav >/dev/null || missing+=(lnav)
[ -x /usr/bin/time ] || missing+=(time)
command -v python3 >/dev/null || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
