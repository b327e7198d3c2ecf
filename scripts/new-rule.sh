#!/usr/bin/env bash
# Scaffold a built-in rule (CONTRIBUTING.md, "Add a rule"):
#
#   bash scripts/new-rule.sh <rule-id> <catalog> <row-id>
#   bash scripts/new-rule.sh vllm-example-failure stacks-vllm vllm.example-failure
#
# writes, from the compiled template src/rules/catalog/new_rule_template.rs:
#   src/rules/catalog/<rule_id>.rs        the rule, asking for the row by id
#   src/rules/catalog/mod.rs              its `mod` line and its RULES entry, in id order
#   fixtures/rules/<rule-id>/pos-TODO.txt a positive fixture to replace with real lines
#   fixtures/rules/<rule-id>/neg-TODO.txt a near miss to replace with real lines
#   catalogs/<catalog>.toml               a row stub <row-id> naming the rule (when the
#                                         row does not exist yet)
# and prints what to do next. Nothing it writes is a real line: the tests
# fail until the TODOs are replaced by lines copied from public pages.
# ROOT overrides the repository (the scaffold's test runs it in a copy).
set -euo pipefail
usage() {
    echo "usage: new-rule.sh <rule-id> <catalog> <row-id>   (e.g. vllm-example-failure stacks-vllm vllm.example-failure)" >&2
    exit 2
}
[ $# -eq 3 ] || usage
id=$1
catalog=$2
row=$3
root=${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
[[ $id =~ ^[a-z][a-z0-9]*(-[a-z0-9]+)+$ ]] || { echo "rule id must be kebab-case: $id" >&2; exit 2; }
[[ $row =~ ^[a-z0-9-]+\.[a-z0-9-]+$ ]] || { echo "row id must be <catalog>.<kebab-case>: $row" >&2; exit 2; }
snake=${id//-/_}
camel=$(echo "$id" | sed -E 's/(^|-)([a-z0-9])/\U\2/g')
catalogs=$root/src/rules/catalog
template=$catalogs/new_rule_template.rs
rule=$catalogs/$snake.rs
toml=$root/catalogs/$catalog.toml
fixtures=$root/fixtures/rules/$id
[ -f "$template" ] || { echo "no template at $template" >&2; exit 2; }
[ -f "$toml" ] || { echo "no catalog $toml (ls catalogs/)" >&2; exit 2; }
[ -e "$rule" ] && { echo "$rule exists" >&2; exit 1; }

# The rule: the template named, its tests (about the template) dropped.
sed -e '/^#\[cfg(test)\]/,$d' \
    -e "s/NewRuleTemplate/$camel/g" \
    -e "s/new-rule-template/$id/g" \
    -e "s/template\.row-id/$row/g" \
    -e '/^\/\/! (scaffold)/d' \
    "$template" | sed -e '${/^$/d}' >"$rule"

# Registration, in id order: `mod x;` among the mods, `&x::RULE,` in RULES.
python3 - "$catalogs/mod.rs" "$snake" <<'EOF'
import re, sys
path, snake = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
def insert(is_item, new):
    idx = [i for i, l in enumerate(lines) if is_item(l)]
    at = next((i for i in idx if lines[i] > new), idx[-1] + 1)
    lines.insert(at, new)
insert(lambda l: re.fullmatch(r"mod [a-z0-9_]+;", l) is not None, f"mod {snake};")
insert(lambda l: re.fullmatch(r"    &[a-z0-9_]+::RULE,", l) is not None, f"    &{snake}::RULE,")
open(path, "w").write("\n".join(lines))
EOF

# Fixtures: one positive, one near miss; the rules test reads both.
mkdir -p "$fixtures"
cat >"$fixtures/pos-TODO.txt" <<EOF
TODO: lines copied verbatim from a public page where $id happened, the rule's
row among them (a bundle folder with a NOTES.md naming the URL, like
fixtures/rules/torch-cuda-oom/pos-*/). Rename the file pos-<what-it-shows>.txt;
add a second positive (another version or variant of the message).
EOF
cat >"$fixtures/neg-TODO.txt" <<EOF
TODO: a real paste that looks like $id but is not (the near miss the rule must
stay quiet on). Rename the file neg-<what-it-shows>.txt.
EOF

# The wording stub: the row the rule asks for, unless it exists.
if ! grep -q "^id = \"$row\"" "$toml"; then
    cat >>"$toml" <<EOF

[[row]]
id = "$row"
title = "TODO"
headline = "TODO"
meaning = "TODO"
category = "none"
severity = "error"
confidence = 0.5
fix = "TODO"
rule = "$id"

[[row.wording]]
text = "TODO: the message, <placeholders> for what varies"
versions = "TODO"
upstream = "TODO: repo path function() that prints it"

[[row.sample]]
line = "TODO: a real line"
source = "TODO: its URL"
EOF
fi

cat <<EOF
wrote src/rules/catalog/$snake.rs, its registration in src/rules/catalog/mod.rs,
fixtures/rules/$id/{pos,neg}-TODO.txt and the row $row in catalogs/$catalog.toml.
Next (CONTRIBUTING.md, "Add a rule"):
  1. fill the row and its real samples:   cargo test --release --test it catalogs
  2. write the check and the doc:         cargo test --release -p rootcause-rule-catalog catalog::$snake
  3. real fixtures, positive and near:    cargo test --release --test it rules
  4. the generated page docs/rules/$id.md: cargo test --release --test it catalog (commit it)
  5. snapshots and scores:                INSTA_UPDATE=always cargo test --release --test it; git diff tests/it/snapshots
EOF
