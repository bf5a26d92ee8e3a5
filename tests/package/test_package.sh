#!/usr/bin/env bash
# The Debian package: cpack builds it, lintian (Debian's own checker) finds no error, and a real
# `apt-get install ./fabperf_*.deb` into a throw-away copy of this system (an overlay over / in a
# private mount namespace, so the host is untouched) installs it, runs the maintainer scripts
# (the fabperf user), and the installed binary, man page, unit and agent work.
# Usage: test_package.sh BUILD_DIR
set -uo pipefail
BUILD=$(readlink -f "$1")
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root (mount namespace and chroot for the install)"; exit 77; fi
for p in cpack dpkg-deb lintian unshare chroot; do
  command -v "$p" >/dev/null || { echo "SKIP: $p missing (apt-get install lintian dpkg-dev)"; exit 77; }
done
T=$(mktemp -d /tmp/fabperf-pkg.XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
t0=$(date +%s.%N)
lap() { echo "  ($(echo "$(date +%s.%N) - $t0" | bc) s) $*"; }

(cd "$T" && cpack --config "$BUILD/CPackConfig.cmake" -B "$T/out" >"$T/cpack.log" 2>&1) ||
  { echo "FAIL: cpack: $(tail -5 "$T/cpack.log")"; exit 1; }
deb=$(ls "$T"/out/fabperf_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "FAIL: cpack wrote no fabperf_*.deb: $(tail -5 "$T/cpack.log")"; exit 1; }
lap "built $(basename "$deb") ($(stat -c %s "$deb") bytes)"
dpkg-deb -c "$deb" > "$T/contents"
for f in ./usr/bin/fabperf ./usr/share/man/man1/fabperf.1.gz ./usr/lib/systemd/system/fabperf-agent.service \
         ./usr/share/bash-completion/completions/fabperf ./usr/share/doc/fabperf/copyright; do
  grep -q " $f\$" "$T/contents" || fail "package lacks $f"
done

# lintian: errors fail the test; warnings are printed (docs/launch.md lists the known ones).
lintian --tag-display-limit 0 --allow-root "$deb" > "$T/lintian" 2>&1
grep -v '^N:' "$T/lintian" | sed 's/^/  lintian: /'
if grep -q '^E:' "$T/lintian"; then fail "lintian reports errors"; fi
lap "lintian: $(grep -c '^E:' "$T/lintian") errors, $(grep -c '^W:' "$T/lintian") warnings, $(grep -c '^I:' "$T/lintian") info"

# A real apt-get install into an overlay of / (upper layer on a tmpfs), inside a new mount namespace.
cp "$deb" "$T/$(basename "$deb")"
cat > "$T/inside.sh" <<'IN'
set -e
M=$1
mount -t tmpfs tmpfs "$M.rw"
mkdir -p "$M.rw/upper" "$M.rw/work"
mount -t overlay overlay -o "lowerdir=/,upperdir=$M.rw/upper,workdir=$M.rw/work" "$M"
mount --bind /proc "$M/proc"
mount --bind /dev "$M/dev"
mount -t tmpfs tmpfs "$M/tmp"
mount -t tmpfs tmpfs "$M/run"
cp "$2" "$M/tmp/"
chroot "$M" /bin/bash -ec '
  export DEBIAN_FRONTEND=noninteractive
  # The man-db trigger rebuilds the whole index (tens of seconds): not what this test checks.
  echo "man-db man-db/auto-update boolean false" | debconf-set-selections
  if dpkg-query -W fabperf >/dev/null 2>&1; then dpkg --purge fabperf >/dev/null; fi
  cd /tmp && apt-get install -y -o Dpkg::Use-Pty=0 /tmp/fabperf_*.deb > /tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 10; }
  tail -2 /tmp/apt.log
  command -v fabperf
  fabperf version
  getent passwd fabperf | grep -q nologin || { echo "no fabperf system user"; exit 11; }
  stat -c "%a %U:%G" /etc/fabperf
  man -l /usr/share/man/man1/fabperf.1.gz 2>&1 >/dev/null | head -3
  MANWIDTH=100 man -l /usr/share/man/man1/fabperf.1.gz 2>/dev/null | grep -q -- "--launch" || { echo "man page lacks --launch"; exit 12; }
  c=$(bash -c "source /usr/share/bash-completion/completions/fabperf; COMP_WORDS=(fabperf run --lau); COMP_CWORD=2; _fabperf; echo \${COMPREPLY[*]}")
  echo "completion of run --lau: $c"
  case "$c" in *--launch-timeout*) ;; *) echo "bash completion does not complete run options"; exit 16 ;; esac
  systemd-analyze verify /usr/lib/systemd/system/fabperf-agent.service 2>&1 | grep -v "^$" | head -5 || true
  # The agent starts as the service would: its user, its key file.
  fabperf keygen /etc/fabperf/key >/dev/null && chown fabperf:fabperf /etc/fabperf/key
  exec 3>/tmp/ready
  setpriv --reuid=fabperf --regid=fabperf --clear-groups --inh-caps=-all \
    env FABPERF_KEY_FILE=/etc/fabperf/key fabperf agent --listen 127.0.0.1:0 --ready-fd 3 --log-level warn &
  pid=$!
  exec 3>&-
  for i in $(seq 50); do grep -q LISTENING /tmp/ready && break; sleep 0.1; done
  echo "agent as user fabperf: $(cat /tmp/ready)"
  grep -q LISTENING /tmp/ready || exit 13
  kill $pid; wait $pid || true
  apt-get remove -y -o Dpkg::Use-Pty=0 fabperf >/dev/null 2>&1 || { echo "apt-get remove failed"; exit 14; }
  test ! -e /usr/bin/fabperf || { echo "binary left after remove"; exit 15; }
'
IN
mkdir -p "$T/root" "$T/root.rw"
unshare -m --propagation private bash "$T/inside.sh" "$T/root" "$T/$(basename "$deb")" > "$T/install.log" 2>&1
rc=$?
sed 's/^/  install: /' "$T/install.log"
[ "$rc" -eq 0 ] || fail "install in a scratch root failed (exit $rc)"
lap "installed, agent started, removed"
[ "$fails" -eq 0 ] || exit 1
echo "PASS"
