#!/usr/bin/env bash
# Builds the .deb and the wheel (scripts/package.sh) and installs them the way
# users do, then checks what they put in place:
#   .deb   dpkg -i; rootcause demo, man rootcause, the completions; the
#          systemd units pass `systemd-analyze verify`, and their commands,
#          run as systemd would run them, capture this host into a bundle and
#          export its findings to the textfile directory; dpkg --purge after.
#   wheel  pip install into a fresh venv: rootcause on its PATH, demo;
#          uvx --from the wheel, offline.
# Run by scripts/test.sh after the test suite; package.sh installs the
# packagers when missing. Needs root (or sudo) for dpkg.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
step() { printf '\n== package-test: %s\n' "$*"; }
fail() { printf 'package-test: FAILED: %s\n' "$*" >&2; exit 1; }
# package.sh puts maturin and uv there.
export PATH="$root/target/package-tools/bin:$PATH"

step "build"
bash scripts/package.sh
deb=$(ls target/debian/rootcause_*.deb)
wheel=$(ls target/wheels/rootcause_gpu-*.whl)
echo "built $deb ($(du -k "$deb" | cut -f1) KiB), $wheel ($(du -k "$wheel" | cut -f1) KiB)"

scratch=$(mktemp -d)
installed=0
# The units write under /var/lib/rootcause: removed after if made here.
made_state=0
[ -e /var/lib/rootcause ] || made_state=1
cleanup() {
  if [ "$installed" -eq 1 ]; then
    "${sudo[@]}" dpkg --purge rootcause >/dev/null || true
  fi
  "${sudo[@]}" rm -f /var/lib/rootcause/last-bundle /var/lib/prometheus/node-exporter/rootcause.prom
  "${sudo[@]}" rm -f /var/lib/rootcause/bundles/package-test.service-*.tar
  if [ "$made_state" -eq 1 ]; then "${sudo[@]}" rm -rf /var/lib/rootcause; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

step ".deb: dpkg -i"
if dpkg -s rootcause >/dev/null 2>&1; then
  fail "a rootcause package is already installed; remove it first (dpkg --purge rootcause)"
fi
"${sudo[@]}" dpkg -i "$deb"
installed=1
[ "$(command -v rootcause)" = /usr/bin/rootcause ] || fail "rootcause is not /usr/bin/rootcause"
demo=$(rootcause demo)
grep -q '^Root cause: GPU 0 is held by PID 20629 (ddtree-qwen.service)' <<<"$demo" ||
  fail "rootcause demo did not report the seed incident: $demo"
echo "rootcause demo: $(head -1 <<<"$demo")"

step ".deb: man rootcause"
[ -e /usr/share/man/man1/rootcause.1.gz ] || fail "no /usr/share/man/man1/rootcause.1.gz"
page=$(MANPAGER=cat MANWIDTH=100 man rootcause 2>&1) || fail "man rootcause: $page"
if ! grep -q '^NAME' <<<"$page" || ! grep -q 'rootcause - Find the root cause' <<<"$page"; then
  fail "man rootcause shows no NAME section: $page"
fi
echo "man rootcause: $(grep -A1 '^NAME' <<<"$page" | tail -1 | sed 's/^ *//')"

step ".deb: shell completions"
bash -c 'source /usr/share/bash-completion/completions/rootcause && complete -p rootcause' ||
  fail "the bash completion does not register"
[ -s /usr/share/zsh/vendor-completions/_rootcause ] || fail "no zsh completion"
[ -s /usr/share/fish/vendor_completions.d/rootcause.fish ] || fail "no fish completion"

step ".deb: systemd units"
units=/lib/systemd/system
for unit in rootcause-capture@.service rootcause-textfile.path rootcause-textfile.service; do
  [ -s "$units/$unit" ] || fail "no $units/$unit"
  cmp -s "$units/$unit" "contrib/systemd/$unit" || fail "$units/$unit differs from contrib/systemd/$unit"
done
# An instance of the template, as OnFailure= would start it.
verify_dir="$scratch/units"
mkdir -p "$verify_dir"
cp "$units"/rootcause-* "$verify_dir/"
verify=$(SYSTEMD_UNIT_PATH="$verify_dir:" systemd-analyze verify \
  rootcause-capture@sglang.service rootcause-textfile.path rootcause-textfile.service 2>&1) ||
  fail "systemd-analyze verify: $verify"
# Anything verify says about our units is a defect (it also warns about
# units of the host it does not know).
if grep -i 'rootcause' <<<"$verify"; then fail "systemd-analyze verify complains"; fi
echo "systemd-analyze verify: ok"

# The commands of both services, as systemd runs them: `$$` is `$`, `%%` is
# `%`, `%i` the instance. No systemd runs here, so the .path trigger itself
# is not exercised; what it starts is.
exec_start() {
  sed -n 's/^ExecStart=//p' "$units/$1" | sed -e 's/\$\$/$/g' -e 's/%%/%/g' -e "s/%i/$2/g"
}
[ -d /var/lib/prometheus/node-exporter ] ||
  fail "/var/lib/prometheus/node-exporter is missing: is prometheus-node-exporter installed?"
"${sudo[@]}" mkdir -p /var/lib/rootcause/bundles
eval "${sudo[*]} $(exec_start rootcause-capture@.service package-test.service)"
bundle=$(cat /var/lib/rootcause/last-bundle)
case "$bundle" in
  /var/lib/rootcause/bundles/package-test.service-*.tar) ;;
  *) fail "the capture unit recorded '$bundle'" ;;
esac
[ -s "$bundle" ] || fail "no bundle at $bundle"
set +e
eval "${sudo[*]} $(exec_start rootcause-textfile.service x)"
status=$?
set -e
[ "$status" -le 1 ] || fail "the textfile unit's command exited $status"
prom=/var/lib/prometheus/node-exporter/rootcause.prom
[ -s "$prom" ] || fail "no $prom"
grep -q '^rootcause_report_timestamp_seconds{host="[^"]*",source="capture"} [0-9]*$' "$prom" ||
  fail "$prom has no capture time: $(cat "$prom")"
promtool check metrics <"$prom" || fail "promtool check metrics rejects $prom"
echo "capture unit -> $bundle; textfile unit -> $prom ($(grep -c '^rootcause_' "$prom") samples, gaps: $(sed -n 's/^rootcause_analysis_gaps.* //p' "$prom"))"

step ".deb: dpkg --purge"
"${sudo[@]}" dpkg --purge rootcause
installed=0
[ ! -e /usr/bin/rootcause ] || fail "/usr/bin/rootcause is still there after --purge"

step "wheel: pip install into a fresh venv"
python3 -m venv "$scratch/venv"
# --no-index: the wheel needs nothing else, and the name must never resolve
# to another project on an index.
"$scratch/venv/bin/pip" install -q --no-index "$wheel"
(
  export PATH="$scratch/venv/bin:$PATH"
  [ "$(command -v rootcause)" = "$scratch/venv/bin/rootcause" ] || fail "rootcause is not on the venv's PATH"
  demo=$(rootcause demo)
  grep -q '^Root cause: GPU 0 is held by PID 20629 (ddtree-qwen.service)' <<<"$demo" ||
    fail "the wheel's rootcause demo: $demo"
  echo "venv rootcause demo: $(head -1 <<<"$demo")"
)

step "wheel: uvx --from the wheel, offline"
demo=$(UV_CACHE_DIR="$scratch/uv-cache" UV_NO_CONFIG=1 uvx --offline --from "$root/$wheel" rootcause demo)
grep -q '^Root cause: GPU 0 is held by PID 20629 (ddtree-qwen.service)' <<<"$demo" ||
  fail "uvx rootcause demo: $demo"
echo "uvx rootcause demo: $(head -1 <<<"$demo")"

printf '\npackage-test: all passed\n'
