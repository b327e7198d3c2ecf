#!/usr/bin/env bash
# Byte-identity harness for refactors: runs a rootcause binary over every
# input the tests use (fixtures/real, fixtures/incidents, fixtures/rules,
# fixtures/formats, fixtures/hostile, fixtures/pastes, fixtures/journal,
# fixtures/user-rules) and writes each report (text, verbose text, JSON,
# Markdown, HTML, NDJSON), each remediation script and each replay's output
# under OUT, one file per case and output. Run it before and after a change
# that must not change what users see, then compare the two folders:
#
#   cargo build --release && bash scripts/compare-outputs.sh /tmp/before
#   … the refactor …
#   cargo build --release && bash scripts/compare-outputs.sh /tmp/after
#   diff -r /tmp/before /tmp/after && echo identical
#
# Or in one step, comparing with a saved folder:
#
#   bash scripts/compare-outputs.sh /tmp/after /tmp/before
#
# BIN overrides the binary (default target/release/rootcause). Exit codes are
# recorded too (`<case>.rc`), so a changed exit status is a difference.
set -u
out=${1:?usage: compare-outputs.sh OUT [BEFORE]}
before=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/target/release/rootcause}
[ -x "$bin" ] || { echo "no binary at $bin (cargo build --release)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"
cd "$root"

# One case: a name (a path under fixtures/, slashes made '__') and its
# arguments to `analyze`.
run_case() {
    local name=$1
    shift
    local dir=$out/$name
    mkdir -p "$dir"
    for o in text json markdown html ndjson; do
        "$bin" analyze --color never -o "$o" "$@" >"$dir/$o" 2>"$dir/$o.err"
        echo $? >"$dir/$o.rc"
    done
    "$bin" analyze --color never -v "$@" >"$dir/text-verbose" 2>/dev/null
    "$bin" analyze --color never -o text --script "$dir/script" "$@" >/dev/null 2>&1
    echo $? >"$dir/script.rc"
}

case_name() { echo "${1#fixtures/}" | sed 's#/$##; s#/#__#g'; }

for f in fixtures/real/*/input.log fixtures/pastes/* fixtures/journal/*.export \
    fixtures/user-rules/*.log; do
    run_case "$(case_name "$f")" "$f"
done
for d in fixtures/incidents/*/ fixtures/hostile/*/; do
    run_case "$(case_name "$d")" "$d"
done
for f in fixtures/rules/*/* fixtures/formats/*/*; do
    [ "${f##*.}" = md ] && continue
    run_case "$(case_name "$f")" "$f"
done
run_case user-rules-good fixtures/user-rules/disk-full.log --rules fixtures/user-rules/good

# Replay: every recorded bundle against its approved reports (read only).
"$bin" replay --color never fixtures/incidents/*/ >"$out/replay" 2>&1
echo $? >"$out/replay.rc"

echo "$(find "$out" -type f | wc -l) files under $out"
if [ -n "$before" ]; then
    if diff -r "$before" "$out" >"$out.diff"; then
        echo "identical to $before"
        rm -f "$out.diff"
    else
        echo "DIFFERENT from $before: $(grep -c '^diff\|^Only' "$out.diff") files (see $out.diff)"
        exit 1
    fi
fi
