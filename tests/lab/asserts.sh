# shellcheck shell=bash
# Assertions shared by tests/lab/lab-test.sh and tests/lab/smoke.sh (sourced). Each prints one line and
# counts into the caller's PASS / FAIL; none aborts, so a run reports every failed assertion.
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
