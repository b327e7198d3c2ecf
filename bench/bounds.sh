#!/usr/bin/env bash
# The bounds of issue 18 (docs/performance.md, "Hostile inputs"): peak RSS
# and time of `rootcause` on inputs built to exhaust it, each once, from
# the page cache:
#
#   bash bench/bounds.sh
#
# - a 10 GiB gzip bomb and a 10 GiB zstd bomb (zeros: one endless line);
# - 1 GiB of lines in no known format (none strong: nothing to decide
#   their format by);
# - one 100 MB line;
# - 2 million distinct anchored error lines (`…illegal memory access… in
#   kernel <12 random letters>`), against `rg -F -c -f anchors.txt` on the
#   same file.
#
# The inputs go to bench/data/bounds/ (gitignored; about 1.4 GiB). Knobs:
# BENCH_DATA (default bench/data), NO_BUILD=1 (use the binary built), ONLY
# (an extended regex: only the inputs it matches).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DATA=${BENCH_DATA:-$ROOT/bench/data}/bounds
ONLY=${ONLY:-.}
mkdir -p "$DATA"
for tool in gzip zstd rg python3; do
    command -v "$tool" >/dev/null || { echo "bench/bounds.sh needs $tool (bash bench/setup.sh installs it)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "bench/bounds.sh needs GNU time (apt-get install time)" >&2; exit 2; }
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release --quiet
fi
RC=$ROOT/target/release/rootcause
"$RC" rules --anchors >"$DATA/anchors.txt"

make() { # file command
    [ -s "$DATA/$1" ] || { echo "generating $1" >&2; bash -c "$2" >"$DATA/$1.tmp" && mv "$DATA/$1.tmp" "$DATA/$1"; }
}
make bomb-10g.gz 'head -c 10G /dev/zero | gzip -c'
make bomb-10g.zst 'head -c 10G /dev/zero | zstd -q -3 -c'
make unknown-1g.log "yes 'an unknown line from a tool rootcause does not read, 0123 abc' | head -c 1G"
make line-100m.log "head -c 100000000 /dev/zero | tr '\\0' a; echo"
make distinct-2m.log "python3 -c '
import random, string
w = random.Random(7)
for i in range(2_000_000):
    print(\"RuntimeError: CUDA error: an illegal memory access was encountered in kernel \" + \"\".join(w.choice(string.ascii_lowercase) for _ in range(12)))
'"

measure() { # label command...
    local t
    t=$(mktemp)
    /usr/bin/time -o "$t" -f '%e s %M KiB' "${@:2}" >/dev/null 2>&1 || true
    printf '%-34s %s\n' "$1" "$(tail -1 "$t")"
    rm -f "$t"
}
printf '%-34s %s\n' "input" "wall, peak RSS"
for f in bomb-10g.gz bomb-10g.zst unknown-1g.log line-100m.log distinct-2m.log; do
    [[ "$f" =~ $ONLY ]] || continue
    cat "$DATA/$f" >/dev/null
    measure "rootcause $f" "$RC" "$DATA/$f" -q
done
if [[ distinct-2m.log =~ $ONLY ]]; then
    measure "rg -F -c -f anchors distinct-2m.log" rg -F -c -f "$DATA/anchors.txt" "$DATA/distinct-2m.log"
fi
