#!/usr/bin/env python3
"""Collects the real line families of bench/run.sh's family benchmark from
fixtures/real/ into bench/families/<family>.txt.

Each family is what one program prints (a server's chatter, the kernel, PID 1,
nvidia-smi's table, a traceback). A line joins a family when, with the
transport's framing peeled (a journal or syslog head, a container's prefix, a
dmesg time), its message matches the family's shape. Chatter must be chatter:
a line that alone gives a finding is left out (run through rootcause, a few
hundred lines at a time). The incident blocks buried in the family's inputs
are real failure lines of the same program, kept with the rule they fire.

Usage: python3 bench/families/extract.py [ROOTCAUSE_BIN]   (from the repository root)
The output files are committed; rerun after fixtures/real grows."""

import collections, json, os, re, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.path.join(ROOT, "fixtures", "real")
OUT = os.path.join(ROOT, "bench", "families")
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target", "release", "rootcause")

# Heads a transport puts before a message, peeled in this order (outer first).
HEADS = [
    re.compile(r"^\^@"),
    re.compile(r"^[\w.-]+-\d+\s+\| "),  # docker compose
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (stdout|stderr) [FP] "),  # CRI
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w.@/-]+(\[\d+\])?: "),  # short journal
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d{2}:?\d{2} [\w.-]+ [\w.@/-]+(\[\d+\])?: "),  # short-iso
    re.compile(r"^\d+\s*月 \d+ \d\d:\d\d:\d\d [\w.-]+ [\w.@/-]+(\[\d+\])?: "),
]
DMESG = re.compile(r"^\[ *\d+\.\d+\] ")
KERNEL_IDENT = re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) [\w.-]+ kernel: ")
PID1 = re.compile(r"^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) [\w.-]+ systemd\[1\]: ")

FAMILIES = collections.OrderedDict([
    ("sglang", re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [DT]P\d+)*(?: TP\d+)?\] |^\[\d\d:\d\d:\d\d(?: [DT]P\d+)*(?: TP\d+)?\] ")),
    ("vllm", re.compile(r"^(?:\(\w+ pid=\d+\) )?(?:INFO|WARNING|DEBUG|ERROR) \d\d-\d\d \d\d:\d\d:\d\d |^INFO:\s+\d+\.\d+\.\d+\.\d+:\d+ - \"")),
    ("ollama", re.compile(r"^time=\S+ level=(?:INFO|WARN|DEBUG|ERROR) source=\S+ msg=|^\[GIN\] ")),
    ("llamacpp", re.compile(r"^(?:slot [a-z_]+: |srv +[a-z_]+: |llama_[a-z_]+: |load_tensors: |print_info: |llm_load_[a-z_]+: |main: )")),
    ("tgi", re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z +(?:INFO|WARN|DEBUG|ERROR) ")),
])


def peel(line):
    for h in HEADS:
        m = h.match(line)
        if m:
            line = line[m.end():]
    return line


# Where real lines live: the corpus (each case's source.md has its URL), the
# format samples (fixtures/formats/SOURCES.md) and healthy servers' chatter
# (fixtures/chatter/SOURCES.md).
SOURCES = ["fixtures/real", "fixtures/formats", "fixtures/chatter"]


def catalog_samples():
    """The catalogs' real sample lines (each row cites its URL)."""
    import tomllib
    for name in sorted(os.listdir(os.path.join(ROOT, "catalogs"))):
        if not name.endswith(".toml"):
            continue
        with open(os.path.join(ROOT, "catalogs", name), "rb") as f:
            data = tomllib.load(f)
        lines = []
        for row in data.get("row", []):
            for sample in row.get("sample", []):
                lines += [x for x in sample.get("before", []) if isinstance(x, str)]
                if isinstance(sample.get("line"), str):
                    lines.append(sample["line"])
                lines += [x for x in sample.get("after", []) if isinstance(x, str)]
        yield "catalogs/" + name, lines


def read_cases():
    yield from catalog_samples()
    for top in SOURCES:
        for dirpath, _, files in sorted(os.walk(os.path.join(ROOT, top))):
            for name in sorted(files):
                if name.endswith((".md", ".json", ".tsv")):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    yield os.path.relpath(path, ROOT), f.read().split("\n")


# Rules that a line alone fires only because the paste ends after it: a
# start-up stage with nothing after it, an nvidia-smi table cut short.
AT_THE_END = {"startup-stage-stalled", "gpu-fell-off-bus-no-xid"}


def rules_of(blocks):
    """For each block (a list of lines), the rule of the first finding it
    gives alone, or None."""
    out = []
    for block in blocks:
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as t:
            t.write("\n".join(block) + "\n")
        r = subprocess.run([BIN, "analyze", "--output", "json", t.name], capture_output=True)
        os.unlink(t.name)
        try:
            findings = json.loads(r.stdout).get("findings") or []
        except ValueError:
            findings = [{"rule": "?"}]
        # A start-up milestone alone reads as a stall (the paste ends there):
        # among the rest of the chatter it is chatter.
        rules = [f["rule"] for f in findings if f["rule"] not in AT_THE_END]
        out.append(rules[0] if rules else None)
    return out


SMI_DATE = re.compile(r"^\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4}$")
FRAME_LINE = re.compile(r'^\s+File "[^"]+", line \d+, in ')


def blocks_of(lines):
    """nvidia-smi tables (a date line, then lines of | and +, naming NVIDIA-SMI)
    and Python tracebacks (the head, its frames, the exception line)."""
    i, n = 0, len(lines)
    while i < n:
        line = peel(lines[i])
        if line.startswith("+---") or (SMI_DATE.match(line) and i + 1 < n and peel(lines[i + 1]).startswith("+---")):
            j = i + 1
            while j < n and peel(lines[j])[:1] in ("|", "+"):
                j += 1
            block = [peel(x) for x in lines[i:j]]
            if any("NVIDIA-SMI" in x for x in block) and j - i < 200:
                yield "nvidia-smi", block
            i = j
            continue
        if line.startswith("Traceback (most recent call last):"):
            j = i + 1
            while j < n and (peel(lines[j]).startswith((" ", "\t")) or not peel(lines[j]).strip()):
                j += 1
            if j < n and j - i < 120:
                yield "traceback", [peel(x) for x in lines[i : j + 1]]
            i = j + 1
            continue
        i += 1


# A server's error lines are not its chatter.
ERROR = re.compile(r"\bERROR\b|level=ERROR")

# Incident blocks kept per family: real failure lines of the family, with
# the rule they fire alone, at most this many distinct rules.
INCIDENTS = 3


# How often a line's shape (digits masked) is printed across the sources:
# the generator draws chatter in these proportions, so a server's steady
# progress lines outnumber its start-up lines as they do in real logs.
SHAPES = collections.Counter()
DIGITS = re.compile(r"[0-9]+")


def shape_of(lines):
    return tuple(DIGITS.sub("0", x) for x in lines)


def note(family, key, case):
    SHAPES[shape_of(key)] += 1
    family.setdefault(key, case)


def main():
    got = {name: collections.OrderedDict() for name in FAMILIES}
    got["kernel"] = collections.OrderedDict()
    got["systemd"] = collections.OrderedDict()
    got["nvidia-smi"] = collections.OrderedDict()
    got["traceback"] = collections.OrderedDict()
    for case, lines in read_cases():
        for family, block in blocks_of(lines):
            note(got[family], tuple(block), case)
        for raw in lines:
            if len(raw) > 600 or not raw.strip():
                continue
            if DMESG.match(raw) or KERNEL_IDENT.match(raw):
                m = DMESG.match(raw) or KERNEL_IDENT.match(raw)
                note(got["kernel"], (raw[m.end():],), case)
                continue
            if PID1.match(raw):
                note(got["systemd"], (raw[PID1.match(raw).end():],), case)
                continue
            msg = peel(raw)
            for name, shape in FAMILIES.items():
                if shape.match(msg):
                    note(got[name], (msg,), case)
                    break
    for name, blocks in got.items():
        keys = list(blocks)
        rules = rules_of([list(k) for k in keys])
        quiet = incidents = 0
        seen_rules = set()
        shapes = collections.Counter(shape_of(k) for k in keys)
        with open(os.path.join(OUT, name + ".tsv"), "w") as f:
            f.write(f"# family {name}: real lines from fixtures/ and catalogs/ (each case's source.md,\n")
            f.write("# fixtures/formats/SOURCES.md or the catalog row has its URL), framing peeled.\n")
            f.write("# Columns: kind, weight (how often lines of its shape are printed), source, text.\n")
            f.write("# kind: line or block\n")
            f.write("# (chatter: gives no finding alone), incident:<rule> (buried by the generator),\n")
            f.write("# + (the block goes on). Generated by bench/families/extract.py; do not edit.\n")
            for key, rule in zip(keys, rules):
                if rule is None and ERROR.search(key[0]):
                    continue  # an error line that proves nothing alone: neither chatter nor incident
                if rule is None:
                    kind = "line" if len(key) == 1 else "block"
                    quiet += 1
                elif rule != "?" and rule not in seen_rules and len(seen_rules) < INCIDENTS:
                    kind = "incident:" + rule
                    seen_rules.add(rule)
                    incidents += 1
                else:
                    continue
                # Lines of one shape share its weight.
                weight = max(1, round(SHAPES[shape_of(key)] / shapes[shape_of(key)]))
                f.write(f"{kind}\t{weight}\t{blocks[key]}\t{key[0]}\n")
                for more in key[1:]:
                    f.write(f"+\t\t\t{more}\n")
        print(f"{name}: {quiet} chatter and {incidents} incidents of {len(keys)}", file=sys.stderr)


if __name__ == "__main__":
    main()
