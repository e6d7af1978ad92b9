# shellcheck shell=bash
# Assertions shared by tests/lab/lab-test.sh and tests/lab/smoke.sh (sourced). Each prints one line and
# counts into the caller's PASS / FAIL; none aborts, so a run reports every failed assertion. At the end, what
# their teardown check reads (qemus_before_down, qemus_left).
result() {  # result OK? DESCRIPTION ACTUAL WANT
  if (($1)); then
    PASS=$((PASS + 1))
    local shown=${3//$'\t'/ | }
    printf '  ok    %-62s %s\n' "$2" "${shown:0:110}"
  else
    FAIL=$((FAIL + 1))
    printf '  FAIL  %-62s got [%s], want %s\n' "$2" "$3" "$4"
  fi
}
check() {     # check DESCRIPTION ACTUAL REGEX: the whole of ACTUAL matches
  local ok=0
  [[ $2 =~ ^($3)$ ]] && ok=1
  result "$ok" "$1" "$2" "/$3/"
}
check_eq() {  # check_eq DESCRIPTION ACTUAL EXPECTED (literal)
  local ok=0
  [[ $2 == "$3" ]] && ok=1
  result "$ok" "$1" "$2" "'$3'"
}
check_has() { # check_has DESCRIPTION ACTUAL FRAGMENT (literal substring)
  local ok=0
  [[ $2 == *"$3"* ]] && ok=1
  result "$ok" "$1" "$2" "to contain '$3'"
}
check_no() {  # check_no DESCRIPTION ACTUAL REGEX: ACTUAL contains no match
  local ok=1
  [[ $2 =~ $3 ]] && ok=0
  result "$ok" "$1" "$2" "no /$3/"
}

# qemus_before_down, then `lab.sh down`, then qemus_left: which of the lab QEMUs running before still run after
# ("none"). A PID counts only while it is still a QEMU started with that pidfile (as lab.sh's pid_alive): one
# reused since by another process, or a zombie waiting to be reaped, has stopped. QEMU deletes its pidfile when
# it exits, so a pidfile gone before it could be read is a VM that had stopped.
LAB_QEMUS=()
qemus_before_down() {
  local f pid
  LAB_QEMUS=()
  for f in "${LAB_WORK:-$LAB_DIR/work}"/vms/vm*.pid; do
    { pid=$(<"$f"); } 2>/dev/null || continue
    if [[ $pid =~ ^[0-9]+$ ]]; then LAB_QEMUS+=("$pid:$f"); fi
  done
}
qemus_left() {
  local q cmdline left=()
  for q in "${LAB_QEMUS[@]}"; do
    { cmdline=$(tr '\0' '\n' <"/proc/${q%%:*}/cmdline"); } 2>/dev/null || continue
    if grep -qxF -- "${q#*:}" <<<"$cmdline"; then left+=("${q%%:*}"); fi
  done
  echo "${left[*]:-none}"
}
