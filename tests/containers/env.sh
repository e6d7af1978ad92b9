# Source this from any pvetune script (or a shell) that runs podman, molecule or testinfra:
#
#   . "$TOP/tests/containers/env.sh"
#
# It only sets environment variables; nothing under /etc is touched.
#  - CONTAINERS_CONF: scripts/containers.conf (runc, explicit ulimits, cgroupfs). Without it every
#    container fails on these hosts ("error setting rlimits ... operation not permitted").
#    A value already set by the caller wins.
#  - PATH: the project venv's bin first (molecule needs ansible-config etc. on PATH) and the sbin
#    directories (debootstrap, lxc-*, mknod when running from a non-login root shell).
#  - PVETUNE_HOST_PYTHON: /usr/bin/python3, for ansible_python_interpreter on local connections
#    (pyenv shims on PATH break interpreter discovery).
_pvetune_top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export PVETUNE_TOP="$_pvetune_top"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$_pvetune_top/scripts/containers.conf}"
export PVETUNE_VENV="${PVETUNE_VENV:-$_pvetune_top/.venv}"
case ":$PATH:" in
  *":$PVETUNE_VENV/bin:"*) ;;
  *) PATH="$PVETUNE_VENV/bin:$PATH" ;;
esac
for _d in /usr/local/sbin /usr/sbin /sbin; do
  case ":$PATH:" in *":$_d:"*) ;; *) PATH="$PATH:$_d" ;; esac
done
export PATH
export PVETUNE_HOST_PYTHON="${PVETUNE_HOST_PYTHON:-/usr/bin/python3}"
unset _pvetune_top _d
