"""Formats bench/run.sh's measurements as the Markdown table of
docs/performance.md, checks every buried incident was found, and says
which targets were met. Usage: python3 bench/report.py DATA_DIR"""

import csv
import datetime
import json
import os
import platform
import subprocess
import sys

data = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(data, "results.tsv")), delimiter="\t"))
by = {(r["file"], r["tool"]): r for r in rows}
files = []
for r in rows:
    if r["file"] not in files and r["file"] != "replay.list":
        files.append(r["file"])


def seconds(file, tool):
    return float(by[(file, tool)]["seconds"])


def cpu(file, tool):
    """User + system seconds of the fastest run (0 when not recorded)."""
    try:
        return float(by[(file, tool)].get("cpu_seconds") or 0)
    except ValueError:
        return 0.0


def rss_mib(file, tool):
    return int(by[(file, tool)]["maxrss_kb"]) / 1024


def size(file):
    return int(by[(file, "rootcause")]["bytes"])


def human(n):
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def incidents(file):
    """(found, buried) for one input: each buried incident's rule must be
    among the findings, citing a line within 40 of where it was buried, or
    another finding must cite the buried line itself."""
    buried = []
    for line in open(os.path.join(data, file + ".incidents")):
        rule, at = line.split()
        buried.append((rule, int(at)))
    try:
        report = json.load(open(os.path.join(data, file + ".report.json")))
    except (OSError, ValueError):
        return 0, len(buried)
    found = 0
    for rule, at in buried:
        for f in report.get("findings", []):
            lines = [e.get("line", -999) for e in f.get("evidence", [])]
            # Its rule near where it was buried, or another finding that
            # cites the buried line itself (a failed unit's line explained
            # by the crash loop around it).
            if (f.get("rule") == rule and any(abs(n - at) <= 40 for n in lines)) or at in lines:
                found += 1
                break
    return found, len(buried)


def machine():
    model = "unknown CPU"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal"):
            mem = int(line.split()[1]) // 2**20
    rev = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return (
        f"{model}, {os.cpu_count()} cores, {mem} GiB RAM, Linux {platform.release()}; "
        f"{datetime.date.today().isoformat()}; rootcause {rev or 'unknown'}"
    )


out = ["## Results", "", machine(), ""]
out.append(
    "| input | size | rootcause | throughput | `rg -F -c -f anchors` | rootcause / rg "
    "| CPU: rootcause / rg | `wc -l` | lnav (headless) | rootcause peak RSS | incidents found |"
)
out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
all_found = all_buried = 0
for f in files:
    rc, rg = seconds(f, "rootcause"), seconds(f, "rg")
    found, buried = incidents(f)
    all_found += found
    all_buried += buried
    rc_cpu, rg_cpu = cpu(f, "rootcause"), cpu(f, "rg")
    cpu_ratio = f"{rc_cpu:.2f} / {rg_cpu:.2f} s" if rg_cpu else "n/a"
    out.append(
        f"| `{f}` | {human(size(f))} | {rc:.2f} s | {size(f) / 2**20 / rc:.0f} MiB/s "
        f"| {rg:.2f} s | {rc / rg:.2f}x | {cpu_ratio} | {seconds(f, 'wc'):.2f} s "
        f"| {seconds(f, 'lnav'):.2f} s ({rss_mib(f, 'lnav'):.0f} MiB) "
        f"| {rss_mib(f, 'rootcause'):.1f} MiB | {found}/{buried} |"
    )

if ("replay.list", "replay-100") in by:
    replay, serial = seconds("replay.list", "replay-100"), seconds("replay.list", "analyze-100")
    try:
        verdict = open(os.path.join(data, "replay.out")).read().strip().splitlines()[-1]
    except (OSError, IndexError):
        verdict = "no summary"
    out += [
        "",
        f"Replay of 100 small bundles ({verdict}): {replay:.2f} s; the same 100 analysed "
        f"one `rootcause` run after another: {serial:.2f} s.",
    ]
else:
    replay = serial = None
out += ["", "### Targets", ""]


def target(ok, text):
    out.append(f"- [{'x' if ok else ' '}] {text}")


def have(*names):
    return all(n in files for n in names)


# Each family of inputs: every size within 1.5x `rg`, peak RSS under
# 64 MiB from 100 MiB to 2 GiB, 2 GiB in at most 2.1x the time of 1 GiB.
for family in ("journal-iso", "journal-chatty", "crash-loop"):
    f100, f1, f2 = (f"{family}-{s}.log" for s in ("100m", "1g", "2g"))
    sized = [f for f in (f100, f1, f2) if f in files]
    for f in sized:
        ratio = seconds(f, "rootcause") / seconds(f, "rg")
        target(ratio <= 1.5, f"`{f}` within 1.5x `rg`: {ratio:.2f}x")
    if sized:
        peak = max(rss_mib(f, "rootcause") for f in sized)
        target(
            peak <= 64,
            f"`{family}` peak RSS at most 64 MiB: "
            + " / ".join(f"{rss_mib(f, 'rootcause'):.1f}" for f in sized)
            + " MiB",
        )
    if have(f1, f2):
        growth = seconds(f2, "rootcause") / seconds(f1, "rootcause")
        target(growth <= 2.1, f"`{family}`: 2 GiB takes at most 2.1x the time of 1 GiB: {growth:.2f}x")
# The other generated inputs (one size each): the same bars.
for f in ("journal-json-1g.json", "sglang-8rank-512m.log", "kernel-128m.log"):
    if have(f):
        ratio = seconds(f, "rootcause") / seconds(f, "rg")
        target(ratio <= 1.5, f"`{f}` within 1.5x `rg`: {ratio:.2f}x")
        target(
            rss_mib(f, "rootcause") <= 64,
            f"`{f}` peak RSS at most 64 MiB: {rss_mib(f, 'rootcause'):.1f} MiB",
        )
# The real line families (fam-<family>-<framing>-<size>.log): each within
# 1.5x `rg` in wall time and 2.5x in CPU time, faster than lnav, peak RSS
# at most 64 MiB.
for f in files:
    if not f.startswith("fam-"):
        continue
    ratio = seconds(f, "rootcause") / seconds(f, "rg")
    target(ratio <= 1.5, f"`{f}` within 1.5x `rg`: {ratio:.2f}x")
    rc_cpu, rg_cpu = cpu(f, "rootcause"), cpu(f, "rg")
    if rg_cpu:
        target(rc_cpu / rg_cpu <= 2.5, f"`{f}` CPU within 2.5x `rg`: {rc_cpu / rg_cpu:.2f}x")
    target(
        seconds(f, "rootcause") < seconds(f, "lnav"),
        f"`{f}` faster than lnav: {seconds(f, 'rootcause'):.2f} / {seconds(f, 'lnav'):.2f} s",
    )
    target(rss_mib(f, "rootcause") <= 64, f"`{f}` peak RSS at most 64 MiB: {rss_mib(f, 'rootcause'):.1f} MiB")
if replay is not None:
    target(
        replay < 2 * serial,
        f"100-bundle replay under 2x 100 single analyses: {replay:.2f} s vs {serial:.2f} s",
    )
target(all_found == all_buried, f"every buried incident found: {all_found}/{all_buried}")
print("\n".join(out))
