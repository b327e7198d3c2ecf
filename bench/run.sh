#!/usr/bin/env bash
# The benchmark of docs/performance.md, in one run:
#
#   bash bench/run.sh
#
# Generates (once, into bench/data/, gitignored) a busy host's journal in
# short-iso at 100 MiB, 1 GiB and 2 GiB and in JSON at 1 GiB, an 8-rank
# SGLang log and a kernel log, each with known incidents buried at random
# positions. On the same files, from the page cache, it times `rootcause`
# (JSON report), `rg -F -c -f anchors.txt` with the anchors rootcause
# searches for (the practical scan limit), `wc -l` (the read limit) and
# `lnav` loading the file headless, best of $REPEAT runs; it records peak
# RSS (GNU time), checks that every buried incident is found, times a
# replay of 100 small bundles against 100 analyses in a row, and prints
# the table (also written to bench/data/results.md) with each target met
# or not. Also a busy host's journal that is nine tenths server chatter
# (journal-chatty) and a unit crash-looping for days (crash-loop), each at
# 100 MiB, 1 GiB and 2 GiB. Then the real line families
# (bench/families/, see its extract.py): each program's real lines with
# jittered numbers, in the framings people keep them in. Knobs: REPEAT (default 3), BENCH_DATA (default
# bench/data), ONLY (an extended regex: only the inputs it matches),
# FAMILIES=0 (leave the real line families out),
# NO_REPLAY=1 (skip the replay measurement), NO_BUILD=1 (use the binaries
# already built).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
DATA=${BENCH_DATA:-$ROOT/bench/data}
REPEAT=${REPEAT:-3}

bash bench/setup.sh
if [ -z "${NO_BUILD:-}" ]; then
    cargo build --release --quiet
    cargo build --release --quiet --manifest-path bench/gen/Cargo.toml
fi
RC=$ROOT/target/release/rootcause
GEN=$ROOT/bench/gen/target/release/rootcause-bench-gen
mkdir -p "$DATA"
"$RC" rules --anchors >"$DATA/anchors.txt"

# name kind MiB
FILES=(
    "journal-iso-100m.log journal-iso 100"
    "journal-iso-1g.log journal-iso 1024"
    "journal-iso-2g.log journal-iso 2048"
    "journal-json-1g.json journal-json 1024"
    "sglang-8rank-512m.log sglang 512"
    "kernel-128m.log kernel 128"
    "journal-chatty-100m.log journal-chatty 100"
    "journal-chatty-1g.log journal-chatty 1024"
    "journal-chatty-2g.log journal-chatty 2048"
    "crash-loop-100m.log crash-loop 100"
    "crash-loop-1g.log crash-loop 1024"
    "crash-loop-2g.log crash-loop 2048"
)
# The real line families (bench/families/*.tsv, issue 23): each in the
# framing its program's logs are usually kept in at 256 MiB and 1 GiB, and
# in each other framing at 64 MiB. FAMILIES=0 leaves them out.
if [ "${FAMILIES:-1}" != 0 ]; then
    for fam in sglang vllm ollama llamacpp tgi kernel systemd nvidia-smi traceback; do
        case $fam in
        nvidia-smi) natural=raw others="" ;;
        systemd) natural=journal-iso others="journal-json" ;;
        kernel) natural=raw others="journal-iso journal-json" ;;
        *) natural=journal-iso others="raw journal-json docker cri" ;;
        esac
        FILES+=("fam-$fam-$natural-256m.log family:$fam:$natural 256")
        FILES+=("fam-$fam-$natural-1g.log family:$fam:$natural 1024")
        for framing in $others; do
            FILES+=("fam-$fam-$framing-64m.log family:$fam:$framing 64")
        done
    done
fi
if [ -n "${ONLY:-}" ]; then
    kept=()
    for f in "${FILES[@]}"; do
        if [[ ${f%% *} =~ $ONLY ]]; then kept+=("$f"); fi
    done
    FILES=("${kept[@]}")
fi
for f in "${FILES[@]}"; do
    read -r name kind mib <<<"$f"
    if [ ! -s "$DATA/$name" ] || [ ! -e "$DATA/$name.incidents" ]; then
        echo "generating $name" >&2
        "$GEN" "$kind" "$mib" "$DATA/$name"
    fi
done

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
RESULTS=$DATA/results.tsv
printf 'file\tbytes\ttool\tseconds\tmaxrss_kb\tcpu_seconds\n' >"$RESULTS"

# Runs a command REPEAT times; records the fastest run (wall clock, and the
# CPU time of that run: user + system) and the largest RSS.
measure() {
    local file=$1 tool=$2
    shift 2
    local best="" cpu="" rss=0
    for _ in $(seq "$REPEAT"); do
        # Back into the page cache before every run: on a machine whose
        # cache holds less than all the inputs, a 2 GiB file read after
        # others is partly on disk, and the time measures the disk.
        [ -f "$DATA/$file" ] && cat "$DATA/$file" >/dev/null
        /usr/bin/time -f "%e %M %U %S" -o "$TMP/time" "$@" >"$TMP/out" 2>/dev/null || true
        # GNU time puts "Command exited with non-zero status" first.
        read -r t m u s < <(tail -n 1 "$TMP/time") || true
        case $t in *[!0-9.]* | "") t=999999 ;; esac
        if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then
            best=$t
            cpu=$(awk "BEGIN{print ${u:-0} + ${s:-0}}")
        fi
        [ "${m:-0}" -gt "$rss" ] && rss=${m:-0}
    done
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$file" "$(stat -c %s "$DATA/$file")" "$tool" "$best" "$rss" "$cpu" >>"$RESULTS"
}

for f in "${FILES[@]}"; do
    read -r name _ _ <<<"$f"
    path=$DATA/$name
    echo "measuring $name" >&2
    measure "$name" wc wc -l "$path"
    measure "$name" rg rg -F -c -f "$DATA/anchors.txt" "$path"
    measure "$name" rootcause "$RC" "$path" --output json
    cp "$TMP/out" "$DATA/$name.report.json"
    # lnav indexes the whole file before it answers the query.
    measure "$name" lnav timeout 600 lnav -n -c ';SELECT count(*) FROM all_logs' "$path"
done

# Replay: 100 small bundles (the repository's incidents, over and over).
if [ -n "${NO_REPLAY:-}" ]; then
    python3 bench/report.py "$DATA" | tee "$DATA/results.md"
    exit 0
fi
echo "measuring replay" >&2
rm -rf "$DATA/replay"
mkdir -p "$DATA/replay"
i=0
while [ $i -lt 100 ]; do
    for d in fixtures/incidents/*/; do
        [ $i -lt 100 ] || break
        cp -r "$d" "$DATA/replay/case-$(printf %03d $i)"
        i=$((i + 1))
    done
done
printf '%s\n' "$DATA"/replay/case-* >"$DATA/replay.list"
# shellcheck disable=SC2016
measure replay.list replay-100 sh -c '"$0" replay $(cat "$1")' "$RC" "$DATA/replay.list"
cp "$TMP/out" "$DATA/replay.out"
# shellcheck disable=SC2016
measure replay.list analyze-100 sh -c 'for d in $(cat "$1"); do "$0" "$d" --output json >/dev/null; done' "$RC" "$DATA/replay.list"

python3 bench/report.py "$DATA" | tee "$DATA/results.md"
