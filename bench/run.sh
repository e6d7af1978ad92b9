#!/usr/bin/env bash
# Fleet audit benchmark: the cost of `audit.yml` against Ansible's own floor
# (`ansible -m ping`) and against a naive per-file audit, over real SSH, for
# fleets of N simulated hosts; plus a micro-benchmark of the facts module on a
# large synthetic host.  Results: bench/results/latest.{json,png}.
#
#   bench/run.sh                      # full run (N = 1 8 32 64), ~13 min on an idle 2-core machine
#   BENCH_NS="1 8" BENCH_REPEATS=3 bench/run.sh    # quick run
#   bench/run.sh tune                 # tuning experiments (bench/tune.py), same sshd and fleet
#   bench/run.sh batch                # fix.yml serial 1 against pvetune_batch (bench/rollout_batch.py), no sshd
#   bench/run.sh waves                # fix.yml one at a time against reboot waves, simulated reboots (rollout_waves.py)
#
# Environment:
#   BENCH_NS           fleet sizes (default "1 8 32 64")
#   BENCH_REPEATS      repetitions of ping and audit per N (default 7/5/5/5 for N = 1/8/32/64)
#   BENCH_NAIVE_NS     fleet sizes for the naive audit (default "1 8 32"; it makes ~35 module
#                      calls per host, 10-20x the audit: ~5 min at N=32 and ~10 min at N=64 on
#                      2 cores, so N=64 only on request: BENCH_NAIVE_NS="1 8 32 64")
#   BENCH_NAIVE_REPEATS  repetitions of the naive audit (default 3 at N<=8, 1 above)
#   BENCH_FACTS_CALLS  in-process facts-module calls (default 30, minimum 20)
#   BENCH_SKIP         comma list of parts to skip: fleet, naive, facts
#   BENCH_HISTORY      also time audit.yml with this many earlier runs in its report directory (e.g. 100), each
#                      repetition beside the plain audit; 0 (default) skips it
#   BENCH_MAX_LOAD     wait (up to BENCH_LOAD_WAIT s, default 120) for the 1-minute load
#                      average to drop below this before measuring (default 1.5)
#   BENCH_SSH_PORT     port of the benchmark's own sshd (default: a free high port)
#   BENCH_OUT          result file stem (default bench/results/latest)
#   BENCH_KEEP=1       keep bench/work/ (fleet trees, ssh keys) after the run
#
# One private sshd (own config, host key and authorized_keys under bench/work/ssh,
# 127.0.0.1 only) serves every simulated host; it is stopped by PID on exit.
# The system sshd and its configuration are never touched.
set -euo pipefail

TOP="$(cd "$(dirname "$0")/.." && pwd)"
cd "$TOP"
VENV="${PVETUNE_VENV:-$TOP/.venv}"
WORK="$TOP/bench/work"
SSHD_PID=""

"$TOP/scripts/bootstrap.sh" bench
export PATH="$VENV/bin:$PATH"
export ANSIBLE_CONFIG="$TOP/ansible.cfg"
# The bench's sshd gets a fresh host key every run (below) and its inventory passes
# UserKnownHostsFile=/dev/null: host key checking off for the bench only (ansible.cfg keeps Ansible's
# default), which also keeps the ssh command line the earlier results were measured with.
export ANSIBLE_HOST_KEY_CHECKING=False
export PYTHONDONTWRITEBYTECODE=1
if ! "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  echo "bench: installing bench/requirements.txt into $VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$TOP/bench/requirements.txt"
fi

if [[ "${1:-}" == batch ]]; then
  exec "$VENV/bin/python" "$TOP/bench/rollout_batch.py"
fi
if [[ "${1:-}" == waves ]]; then
  exec "$VENV/bin/python" "$TOP/bench/rollout_waves.py"
fi

cleanup() {
  local rc=$?
  if [[ -n "$SSHD_PID" ]] && kill -0 "$SSHD_PID" 2>/dev/null; then
    kill "$SSHD_PID" 2>/dev/null || true
    wait "$SSHD_PID" 2>/dev/null || true
  fi
  # ControlPersist masters left by an interrupted run (bench_fleet.py closes them after each run).
  if [[ -d "$WORK/cp" ]]; then
    for sock in "$WORK"/cp/*/*; do
      [[ -S "$sock" ]] && ssh -o ControlPath="$sock" -O exit bench 2>/dev/null || true
    done
  fi
  if [[ "${BENCH_KEEP:-0}" != 1 ]]; then
    rm -rf "$WORK/fleet" "$WORK/reports-history" "$WORK/synth" "$WORK/ssh" "$WORK/cp" "$WORK/inventory" \
      "$WORK"/ansible-*.cfg "$WORK/audit-without-reports.yml"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK" "$TOP/bench/results"
rm -rf "$WORK/ssh" "$WORK/cp"
mkdir -p "$WORK/ssh" "$WORK/cp"
chmod 700 "$WORK/ssh" "$WORK/cp"

# --- a private sshd on 127.0.0.1 ------------------------------------------------
PORT="${BENCH_SSH_PORT:-$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
ssh-keygen -q -t ed25519 -N '' -C bench-host -f "$WORK/ssh/host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C bench-client -f "$WORK/ssh/client_key"
cp "$WORK/ssh/client_key.pub" "$WORK/ssh/authorized_keys"
cat > "$WORK/ssh/sshd_config" <<EOF
# pvetune benchmark sshd (bench/run.sh); loopback only, key auth only.
Port $PORT
ListenAddress 127.0.0.1
HostKey $WORK/ssh/host_ed25519_key
PidFile $WORK/ssh/sshd.pid
AuthorizedKeysFile $WORK/ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
# One TCP connection per simulated host, up to 64 opening at once (forks).
MaxStartups 256
MaxSessions 64
Subsystem sftp internal-sftp
LogLevel ERROR
EOF
# Privilege separation directory (created at boot by the openssh-server package's tmpfiles).
[[ -d /run/sshd ]] || mkdir -p -m 0755 /run/sshd
/usr/sbin/sshd -t -f "$WORK/ssh/sshd_config"
/usr/sbin/sshd -D -e -f "$WORK/ssh/sshd_config" 2>"$WORK/ssh/sshd.log" &
SSHD_PID=$!
ssh_ok=0
for _ in $(seq 1 50); do
  if ssh -p "$PORT" -i "$WORK/ssh/client_key" -o BatchMode=yes -o StrictHostKeyChecking=no \
       -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR root@127.0.0.1 true 2>/dev/null; then
    ssh_ok=1; break
  fi
  kill -0 "$SSHD_PID" 2>/dev/null || break
  sleep 0.2
done
if [[ $ssh_ok != 1 ]]; then
  echo "bench: sshd on 127.0.0.1:$PORT did not accept the benchmark key" >&2
  cat "$WORK/ssh/sshd.log" >&2 || true
  exit 1
fi
echo "bench: sshd pid $SSHD_PID on 127.0.0.1:$PORT"

if [[ "${1:-}" == tune ]]; then
  # Tuning experiments (bench/tune.py): BENCH_TUNE="callbacks forks interp modutils" BENCH_TUNE_N BENCH_TUNE_REPEATS
  "$VENV/bin/python" "$TOP/bench/tune.py" --work "$WORK" --port "$PORT" --key "$WORK/ssh/client_key" \
    --sshd-pid "$SSHD_PID" --results "$TOP/bench/results"
  exit 0
fi
"$VENV/bin/python" "$TOP/bench/bench_fleet.py" --work "$WORK" --port "$PORT" \
  --key "$WORK/ssh/client_key" --sshd-pid "$SSHD_PID" --out "${BENCH_OUT:-$TOP/bench/results/latest}"
"$VENV/bin/python" "$TOP/bench/plot.py" "${BENCH_OUT:-$TOP/bench/results/latest}.json"
"$VENV/bin/python" "$TOP/bench/summarize.py" "${BENCH_OUT:-$TOP/bench/results/latest}.json"
