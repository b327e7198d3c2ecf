//! The fixed part of every remediation script: argument parsing, logging,
//! the run-time guards (process identity, GPU identity) and one shell
//! function per action type. Only the call sites after it vary
//! (`script.rs`); this text contains nothing from any log.
//!
//! Conventions the functions keep: dry run (`APPLY=0`) reads `/proc` at
//! most and never calls systemctl, nvidia-smi, ss or kill; a failure exits
//! with the current step's code (`STEP_CODE`, set by `begin_step`); a
//! needs-confirmation step asks (`confirm`) only after its guards passed;
//! nothing is signalled or stopped unless the live host shows it holding
//! the GPU now. `@PROTECTED_UNITS@` and `@CONTAINER_SCOPES@` are filled in
//! from `rules::PROTECTED_UNITS` and `rules::CONTAINER_SCOPES` (script.rs),
//! so the script refuses the same units the rules do.

pub const PRELUDE: &str = r#"set -euo pipefail
export LC_ALL=C

# Where the guards read the process table. Only the sandbox tests point it
# elsewhere (a tree of real /proc entries with a simulated cgroup file).
PROC=/proc

APPLY=0
ASSUME_YES=0
for arg in "$@"; do
  case "$arg" in
    --apply) APPLY=1 ;;
    --yes) ASSUME_YES=1 ;;
    -h|--help) sed -n '2,/^set -euo pipefail$/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) printf 'unknown argument: %s (try --help)\n' "$arg" >&2; exit 2 ;;
  esac
done

STEP_CODE=1
STEP_SAFETY=safe
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
if ! [[ "$CLK_TCK" =~ ^[1-9][0-9]*$ ]]; then CLK_TCK=100; fi

log() { printf '%s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }
fail() { log "FAILED (exit $STEP_CODE): $*"; exit "$STEP_CODE"; }
# Text read from the live system (a command line) with anything a terminal
# could interpret replaced.
shown() { local s=$1; printf '%s' "${s//[^[:print:]]/?}"; }

begin_step() { # number total safety description
  STEP_CODE=$((10 + $1))
  STEP_SAFETY=$3
  log "step $1/$2 [$3]: $4"
}

# Asks before the action of a needs-confirmation step; declining stops the
# script (exit 3). No terminal means no.
confirm() {
  if [ "$STEP_SAFETY" != needs-confirmation ] || [ "$ASSUME_YES" -eq 1 ]; then return 0; fi
  local answer=""
  if (exec </dev/tty) 2>/dev/null; then read -r -p "$1 [y/N] " answer </dev/tty || answer=""; fi
  case "$answer" in
    y|Y|yes|YES) return 0 ;;
    *) log "declined: $1 (run with --yes to skip questions)"; exit 3 ;;
  esac
}

# The fields of /proc/PID/stat after the command name, which may itself
# hold spaces and parentheses: state is field 0, flags 6, starttime 19.
proc_stat() {
  local line
  { read -r line <"$PROC/$1/stat"; } 2>/dev/null || return 1
  printf '%s\n' "${line##*) }"
}

# Succeeds while PID $1 exists and is not a zombie (a zombie holds nothing).
pid_alive() {
  local st
  st=$(proc_stat "$1") || return 1
  case "${st%% *}" in Z|X|x) return 1 ;; esac
  return 0
}

# When PID $1 started, in seconds since the epoch: boot time plus the
# kernel's clock ticks since boot, as ps computes lstart.
pid_start_epoch() {
  local st btime
  local -a f
  st=$(proc_stat "$1") || return 1
  read -r -a f <<<"$st"
  btime=$(awk '$1 == "btime" { print $2 }' "$PROC/stat" 2>/dev/null) || return 1
  if ! [[ "${f[19]:-}" =~ ^[0-9]+$ && "$btime" =~ ^[0-9]+$ ]]; then return 1; fi
  echo $((btime + f[19] / CLK_TCK))
}

pid_cmdline() {
  local cmd
  cmd=$({ tr '\0' ' ' <"$PROC/$1/cmdline"; } 2>/dev/null) || return 1
  printf '%s' "${cmd%"${cmd##*[! ]}"}"
}

# Succeeds when PID $1 is in the cgroup of system unit $2: the unit below
# slices only (/system.slice/UNIT), never a user's unit of the same name
# (/user.slice/.../user@1000.service/app.slice/UNIT).
in_unit_cgroup() {
  local line path above
  [ -r "$PROC/$1/cgroup" ] || return 1
  while IFS= read -r line; do
    path=${line#*:}; path=${path#*:}
    case "$path" in */"$2"|*/"$2"/*) ;; *) continue ;; esac
    above=${path%%/"$2"*}
    if [[ "$above" =~ ^(/[^/]+\.slice)*$ ]]; then return 0; fi
  done <"$PROC/$1/cgroup"
  return 1
}

# Succeeds when a script may stop, disable or restart unit $1: a service or
# a container's scope, and none of the units no script touches.
unit_may_be_touched() {
  case "$1" in
    @PROTECTED_UNITS@) return 1 ;;
    *.service|@CONTAINER_SCOPES@) return 0 ;;
    *) return 1 ;;
  esac
}

# Succeeds when PID $1 is this script, one of its ancestors or the leader of
# its session. Run through sudo or timeout, the shell that started the
# script is a grandparent: it must never be signalled. Reads the real /proc.
is_ancestor() {
  local pid=$1 p=$$ n=0 line
  local -a f
  if { read -r line <"/proc/$$/stat"; } 2>/dev/null; then
    read -r -a f <<<"${line##*) }"
    if [ "${f[3]:-}" = "$pid" ]; then return 0; fi
  fi
  while [ "$p" -gt 1 ] && [ "$n" -lt 4096 ]; do
    if [ "$p" -eq "$pid" ]; then return 0; fi
    { read -r line <"/proc/$p/stat"; } 2>/dev/null || return 1
    read -r -a f <<<"${line##*) }"
    p=${f[1]:-1}
    if ! [[ "$p" =~ ^[0-9]+$ ]]; then return 1; fi
    n=$((n + 1))
  done
  return 1
}

# The GPU of a guard argument, for people: "GPU 0 (GPU-...)" or "any GPU".
gpu_text() {
  case "$1" in
    '*') printf 'any GPU' ;;
    *:) printf 'GPU %s (no UUID recorded: any GPU)' "${1%%:*}" ;;
    *) printf 'GPU %s (%s)' "${1%%:*}" "${1#*:}" ;;
  esac
}

# Succeeds when nvidia-smi lists PID $1 holding memory now, on the GPU of
# guard argument $2 (INDEX:UUID; no UUID, or '*': any GPU). What the logs
# said is not enough: only a process the live host shows on the GPU is
# stopped or signalled.
holds_gpu() {
  local uuid=${2#*:} apps
  if [ "$2" = '*' ]; then uuid=""; fi
  apps=$(nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader) \
    || fail "nvidia-smi --query-compute-apps failed: what holds the GPUs now cannot be checked"
  awk -F', *' -v p="$1" -v u="$uuid" '$2 == p && (u == "" || $1 == u) { found = 1 } END { exit !found }' <<<"$apps"
}

# Succeeds when PID $1 still is the process the report names: started at $4
# (ps lstart), running command line $3, in the cgroup of unit $2; each
# check only when the report recorded it. Prints why not otherwise, and
# returns 2 rather than 1 when the process is exiting (gone, a zombie, its
# command line already released). Never accepts init, this script, its
# ancestors, its session's leader or a kernel thread.
pid_is_expected() {
  local pid=$1 unit=$2 cmd=$3 start=$4 st expected actual
  local -a f
  if [ "$pid" -le 1 ] || is_ancestor "$pid"; then
    echo "PID $pid is init, this script, one of its ancestors or its session's leader"; return 1
  fi
  if ! st=$(proc_stat "$pid"); then echo "PID $pid is gone"; return 2; fi
  read -r -a f <<<"$st"
  if ! [[ "${f[6]:-}" =~ ^[0-9]+$ ]] || (( f[6] & 0x200000 )); then
    echo "PID $pid is a kernel thread"; return 1
  fi
  if [ "${f[0]}" = Z ]; then echo "PID $pid is a zombie"; return 2; fi
  if [ -n "$start" ]; then
    if ! expected=$(date -d "$start" +%s 2>/dev/null); then
      echo "the recorded start time '$start' cannot be read by date -d (GNU date is needed)"; return 1
    fi
    if ! actual=$(pid_start_epoch "$pid"); then echo "the start time of PID $pid cannot be read"; return 1; fi
    # The kernel's boot time drifts by a second or so over days.
    if (( actual - expected > 2 || expected - actual > 2 )); then
      echo "PID $pid started $(date -d "@$actual" '+%a %b %e %H:%M:%S %Y'), not $start as recorded: the PID was reused (or this shell's time zone, TZ=${TZ:-unset}, is not the capture's)"
      return 1
    fi
  fi
  actual=$(pid_cmdline "$pid") || actual=""
  if [ -z "$actual" ]; then echo "PID $pid has no command line (it is exiting)"; return 2; fi
  if [ -n "$cmd" ] && [ "$actual" != "$cmd" ] && [[ "$actual" != "$cmd "* ]]; then
    echo "PID $pid now runs: $(shown "$actual")"; return 1
  fi
  if [ -n "$unit" ] && ! in_unit_cgroup "$pid" "$unit"; then
    echo "PID $pid is not in the cgroup of $unit"; return 1
  fi
  return 0
}

# Says which guards the report could not provide for PID $1.
guard_notes() { # pid unit cmdline start
  if [ -z "$4" ]; then log "guard not available: the report has no start time for PID $1 (PID reuse is checked by command line and cgroup only)"; fi
  if [ -z "$2" ] && [ -z "$3" ]; then log "guard not available: the report has neither a unit nor a command line for PID $1"; fi
  return 0
}

# Sends signal $2 to PID $1; failing to signal a live process is fatal.
send_signal() {
  if ! kill "-$2" "$1" 2>/dev/null && pid_alive "$1"; then
    fail "could not send SIG$2 to PID $1 (run as root?)"
  fi
}

wait_gone() { # pid seconds
  local waited=0
  while pid_alive "$1" && [ "$waited" -lt "$2" ]; do sleep 1; waited=$((waited + 1)); done
  ! pid_alive "$1"
}

# Stops unit $1 only while it still owns PID $2 and that PID still holds
# memory on the GPU of guard argument $3 (no PID: the unit alone).
stop_unit() { # unit pid gpu
  local unit=$1 pid=$2 gpu=$3 state
  unit_may_be_touched "$unit" || fail "refusing to stop $unit: only a service or a container's scope is ever stopped, and never a protected unit"
  if [ -n "$pid" ]; then
    if ! pid_alive "$pid"; then log "PID $pid is gone: $unit no longer holds what the report names; not stopping it"; return 0; fi
    if ! in_unit_cgroup "$pid" "$unit"; then
      fail "refusing to stop $unit: PID $pid is not in its cgroup now, so $unit does not own the process the report names"
    fi
  fi
  if [ "$APPLY" -ne 1 ]; then
    if [ -n "$pid" ] && [ -n "$gpu" ]; then log "dry run: would check that nvidia-smi lists PID $pid on $(gpu_text "$gpu")"; fi
    log "dry run: would run: systemctl stop -- $unit"; return 0
  fi
  state=$(systemctl is-active -- "$unit" 2>/dev/null) || true
  case "$state" in
    inactive|failed) log "$unit is already $state: nothing to stop"; return 0 ;;
  esac
  if [ -n "$pid" ] && [ -n "$gpu" ] && ! holds_gpu "$pid" "$gpu"; then
    log "PID $pid holds no memory on $(gpu_text "$gpu") now (nvidia-smi): not stopping $unit"; return 0
  fi
  confirm "Stop $unit?"
  log "running: systemctl stop -- $unit"
  systemctl stop -- "$unit" || fail "systemctl stop $unit failed"
  if systemctl is-active --quiet -- "$unit"; then fail "$unit is still active after stop"; fi
  log "$unit is stopped"
}

disable_unit() { # unit
  local unit=$1
  unit_may_be_touched "$unit" || fail "refusing to disable $unit: a protected unit, or not a service"
  if [ "$APPLY" -ne 1 ]; then log "dry run: would run: systemctl disable -- $unit"; return 0; fi
  confirm "Disable $unit, so it does not start at boot?"
  log "running: systemctl disable -- $unit"
  systemctl disable -- "$unit" || fail "systemctl disable $unit failed"
  log "$unit is disabled"
}

# Signals PID $1 only on a strong identity (start time $4 and full command
# line $3), in the cgroup of unit $2 when recorded, and while nvidia-smi
# lists it on the GPU of guard argument $5 ('' for a port's listener).
terminate_process() { # pid unit cmdline start gpu grace-seconds
  local pid=$1 unit=$2 cmd=$3 start=$4 gpu=$5 grace=$6 why rc=0
  guard_notes "$pid" "$unit" "$cmd" "$start"
  if ! pid_alive "$pid"; then log "PID $pid is gone: nothing to terminate"; return 0; fi
  if [ -z "$start" ] || [ -z "$cmd" ]; then
    fail "refusing to signal PID $pid: the report has no start time and full command line for it, and nothing less identifies a process"
  fi
  why=$(pid_is_expected "$pid" "$unit" "$cmd" "$start") || rc=$?
  # A process exiting after the stop of its unit has already released its
  # command line: give it a moment before calling it a stranger.
  if [ "$rc" -eq 2 ] && wait_gone "$pid" 5; then log "PID $pid exited: nothing to terminate"; return 0; fi
  if [ "$rc" -ne 0 ]; then
    fail "refusing to signal PID $pid: it is not the process the report names ($why)"
  fi
  if [ "$APPLY" -ne 1 ]; then
    if [ -n "$gpu" ]; then log "dry run: would check that nvidia-smi lists PID $pid on $(gpu_text "$gpu")"; fi
    log "dry run: would send SIGTERM to PID $pid, then SIGKILL after ${grace}s if it survives"; return 0
  fi
  if [ -n "$gpu" ] && ! holds_gpu "$pid" "$gpu"; then
    log "PID $pid holds no memory on $(gpu_text "$gpu") now (nvidia-smi): not signalling it"; return 0
  fi
  confirm "Send SIGTERM to PID $pid?"
  log "sending SIGTERM to PID $pid"
  send_signal "$pid" TERM
  if ! wait_gone "$pid" "$grace"; then
    rc=0
    why=$(pid_is_expected "$pid" "$unit" "$cmd" "$start") || rc=$?
    if [ "$rc" -eq 2 ] && wait_gone "$pid" 5; then log "PID $pid is gone"; return 0; fi
    if [ "$rc" -ne 0 ]; then
      fail "PID $pid changed identity during the grace period ($why); not sending SIGKILL"
    fi
    log "PID $pid survived SIGTERM for ${grace}s: sending SIGKILL"
    send_signal "$pid" KILL
    if ! wait_gone "$pid" 10; then
      fail "PID $pid survived SIGKILL: it is stuck in the kernel (D state); a GPU reset or a reboot is needed"
    fi
  fi
  log "PID $pid is gone"
}

wait_process_exit() { # pid start timeout-seconds
  local pid=$1 start=$2 timeout=$3 deadline why rc
  if [ "$APPLY" -ne 1 ]; then log "dry run: would wait up to ${timeout}s for PID $pid to exit"; return 0; fi
  deadline=$((SECONDS + timeout))
  while pid_alive "$pid"; do
    rc=0
    if [ -n "$start" ]; then why=$(pid_is_expected "$pid" "" "" "$start") || rc=$?; fi
    if [ "$rc" -eq 1 ]; then
      log "PID $pid is another process now ($why): the recorded one has exited"; return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then fail "PID $pid is still running after ${timeout}s"; fi
    sleep 1
  done
  log "PID $pid has exited"
}

# Fails unless each index:uuid pair still names the same GPU.
check_gpu_identity() { # index:uuid...
  local out spec index uuid actual
  out=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader) || fail "nvidia-smi --query-gpu=index,uuid failed"
  for spec in "$@"; do
    index=${spec%%:*}
    uuid=${spec#*:}
    if [ -z "$uuid" ]; then log "guard not available: the report has no UUID for GPU $index"; continue; fi
    actual=$(awk -F', *' -v g="$index" '$1 == g { print $2 }' <<<"$out")
    if [ "$actual" != "$uuid" ]; then
      fail "GPU $index is $(shown "${actual:-absent}") now, not $uuid as recorded: GPU indices changed (reboot, or a GPU fell off the bus); not continuing"
    fi
  done
  log "GPU identity confirmed: $*"
}

wait_gpu_memory_free() { # max-used-mib timeout-seconds index:uuid...
  local max=$1 timeout=$2 deadline out spec gpu used busy list=""
  shift 2
  for spec in "$@"; do list="$list ${spec%%:*}"; done
  list=${list# }
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would check GPU $list against the recorded UUIDs, then poll nvidia-smi until at most $max MiB is used (timeout ${timeout}s)"; return 0
  fi
  check_gpu_identity "$@"
  deadline=$((SECONDS + timeout))
  while :; do
    out=$(nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits) \
      || fail "nvidia-smi --query-gpu failed"
    busy=""
    for spec in "$@"; do
      gpu=${spec%%:*}
      used=$(awk -F', *' -v g="$gpu" '$1 == g { print $2 }' <<<"$out")
      if ! [[ "$used" =~ ^[0-9]+$ ]]; then fail "nvidia-smi reports no memory value for GPU $gpu"; fi
      if [ "$used" -gt "$max" ]; then busy="$busy GPU $gpu: $used MiB;"; fi
    done
    if [ -z "$busy" ]; then log "GPU $list memory released (at most $max MiB used)"; return 0; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      fail "memory still in use after ${timeout}s:$busy not continuing"
    fi
    sleep 2
  done
}

restart_unit() { # unit
  local unit=$1
  unit_may_be_touched "$unit" || fail "refusing to restart $unit: a protected unit, or not a service"
  if [ "$APPLY" -ne 1 ]; then log "dry run: would run: systemctl restart -- $unit"; return 0; fi
  log "running: systemctl restart -- $unit"
  systemctl restart -- "$unit" || fail "systemctl restart $unit failed"
}

verify_unit_active() { # unit timeout-seconds
  local unit=$1 timeout=$2 deadline state
  if [ "$APPLY" -ne 1 ]; then log "dry run: would wait up to ${timeout}s for $unit to be active"; return 0; fi
  deadline=$((SECONDS + timeout))
  while :; do
    state=$(systemctl is-active -- "$unit" 2>/dev/null) || true
    case "$state" in
      active) log "$unit is active"; return 0 ;;
      failed) fail "$unit failed again: see journalctl -u $unit" ;;
    esac
    if [ "$SECONDS" -ge "$deadline" ]; then fail "$unit is '$(shown "$state")', not active, after ${timeout}s"; fi
    sleep 2
  done
}

# Ends the processes left in the cgroup of stopped unit $1 whose command
# line starts with $2 and that nvidia-smi lists on a GPU now.
kill_orphans() { # unit name grace-seconds
  local unit=$1 name=$2 grace=$3 state dir pid cmd start i alive holding=""
  local -a pids=() starts=()
  unit_may_be_touched "$unit" || fail "refusing to end processes of $unit: a protected unit, or not a service"
  if [ "$APPLY" -eq 1 ]; then
    state=$(systemctl is-active -- "$unit" 2>/dev/null) || true
    case "$state" in
      active|activating|deactivating|reloading|refreshing)
        fail "$unit is $(shown "$state"): its processes are not orphans; stop it first" ;;
    esac
    holding=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader) \
      || fail "nvidia-smi --query-compute-apps failed: what holds the GPUs now cannot be checked"
  fi
  for dir in "$PROC"/[0-9]*; do
    pid=${dir##*/}
    [[ "$pid" =~ ^[0-9]+$ ]] || continue
    in_unit_cgroup "$pid" "$unit" || continue
    cmd=$(pid_cmdline "$pid") || continue
    [[ "$cmd" == "$name"* ]] || continue
    pid_is_expected "$pid" "$unit" "" "" >/dev/null || continue
    if [ "$APPLY" -eq 1 ] && ! grep -qx "[[:space:]]*${pid}[[:space:]]*" <<<"$holding"; then
      log "PID $pid ($(shown "$cmd")) holds no GPU memory now: leaving it"; continue
    fi
    start=$(pid_start_epoch "$pid") || continue
    pids+=("$pid")
    starts+=("$start")
  done
  if [ "${#pids[@]}" -eq 0 ]; then log "no $name* process is left in the cgroup of $unit"; return 0; fi
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would end PID ${pids[*]} ($name*, in the cgroup of $unit) once $unit is stopped, those nvidia-smi then lists on a GPU"; return 0
  fi
  confirm "Send SIGTERM to PID ${pids[*]} ($name*, left in $unit)?"
  log "sending SIGTERM to PID ${pids[*]}"
  for pid in "${pids[@]}"; do send_signal "$pid" TERM; done
  for i in "${!pids[@]}"; do wait_gone "${pids[$i]}" "$grace" || true; done
  # A survivor is signalled again only if it still is the same process.
  alive=""
  for i in "${!pids[@]}"; do
    pid=${pids[$i]}
    if pid_alive "$pid" && [ "$(pid_start_epoch "$pid" || true)" = "${starts[$i]}" ]; then
      log "PID $pid survived SIGTERM for ${grace}s: sending SIGKILL"
      send_signal "$pid" KILL
      alive="$alive $pid"
    fi
  done
  for pid in $alive; do
    if ! wait_gone "$pid" 10; then fail "PID $pid survived SIGKILL: it is stuck in the kernel (D state); a GPU reset or a reboot is needed"; fi
  done
  log "the $name* processes left in $unit are gone"
}

# PIDs listening on TCP port $1, one per line; fails when a listener exists
# whose owner ss cannot show (another user's, without root).
port_listeners() {
  local out
  out=$(ss -H -l -t -n -p "sport = :$1") || return 1
  if [ -z "$out" ]; then return 0; fi
  if ! grep -q 'pid=' <<<"$out"; then return 2; fi
  grep -o 'pid=[0-9]*' <<<"$out" | cut -d= -f2 | sort -u
}

free_port() { # port pid unit cmdline start gpu grace-seconds
  local port=$1 pid=$2 unit=$3 cmd=$4 start=$5 gpu=$6 grace=$7 listeners rc l
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would identify the listener on port $port (ss) and end it only if it is ${pid:+PID }${pid:-the process the report names}"
    return 0
  fi
  command -v ss >/dev/null || fail "ss (iproute2) is needed to identify the listener on port $port"
  rc=0
  listeners=$(port_listeners "$port") || rc=$?
  if [ "$rc" -eq 2 ]; then fail "something listens on port $port but its owner is not visible (run as root)"; fi
  if [ "$rc" -ne 0 ]; then fail "ss failed to list the listeners of port $port"; fi
  if [ -z "$listeners" ]; then log "nothing listens on port $port"; return 0; fi
  for l in $listeners; do
    if [ "$l" != "$pid" ]; then
      fail "port $port is held by PID $l ($(shown "$(pid_cmdline "$l" || true)")), not by the process the report names: not touching it"
    fi
  done
  log "port $port is held by PID $pid"
  terminate_process "$pid" "$unit" "$cmd" "$start" "$gpu" "$grace"
  rc=0
  listeners=$(port_listeners "$port") || rc=$?
  if [ "$rc" -ne 0 ] || [ -n "$listeners" ]; then fail "port $port is still in use"; fi
  log "port $port is free"
}

reset_gpu() { # index uuid
  local index=$1 uuid=$2 apps users
  if [ "$APPLY" -ne 1 ]; then
    log "dry run: would check that GPU $index is $uuid and that no process uses it, then run nvidia-smi --gpu-reset -i $index"
    return 0
  fi
  check_gpu_identity "$index:$uuid"
  apps=$(nvidia-smi --query-compute-apps=gpu_uuid,pid --format=csv,noheader) || fail "nvidia-smi --query-compute-apps failed"
  users=$(awk -F', *' -v u="$uuid" '$1 == u { print $2 }' <<<"$apps" | tr '\n' ' ')
  if [ -n "$users" ]; then fail "GPU $index is in use by PID $(shown "$users")- not resetting"; fi
  confirm "Reset GPU $index ($uuid)?"
  log "running: nvidia-smi --gpu-reset -i $index"
  nvidia-smi --gpu-reset -i "$index" || fail "nvidia-smi --gpu-reset -i $index failed: something still holds the GPU, or only a reboot helps"
  log "GPU $index was reset"
}

advice() { # text command [detail...]
  local line
  log "advice (not executed): $1"
  if [ -n "$2" ]; then log "  suggested command: $2"; fi
  shift 2
  for line in "$@"; do log "  $line"; done
}

if [ "$APPLY" -eq 1 ] && [ "$(id -u)" -ne 0 ]; then
  log "warning: not running as root: systemctl, kill and nvidia-smi may be refused"
fi
"#;
