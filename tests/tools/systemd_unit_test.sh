#!/usr/bin/env bash
# `cmake --install` puts weft-agent.service under the prefix, and
# `systemd-analyze verify` accepts it without a word (it exits 0 even for a
# directive it ignores, so any output fails the test). The unit names the
# binary at the configured prefix; verify checks that it is executable, so it
# is pointed at the build's binary here.
#   systemd_unit_test.sh BUILD_DIR
set -euo pipefail
build=$1
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze is not installed (Debian package systemd)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" --component systemd >/dev/null
unit="$tmp/prefix/lib/systemd/system/weft-agent.service"
[[ -f $unit ]] || { echo "FAIL: cmake --install did not install $unit"; exit 1; }
grep -q '^ExecStart=/.*/weft agent --config /etc/weft/agent.toml' "$unit" || { echo "FAIL: ExecStart"; exit 1; }
sed "s|^ExecStart=[^ ]*/weft |ExecStart=$build/weft |" "$unit" > "$tmp/weft-agent.service"
out=$(systemd-analyze verify "$tmp/weft-agent.service" 2>&1) && rc=0 || rc=$?
if [[ $rc != 0 || -n $out ]]; then
  echo "FAIL: systemd-analyze verify (exit $rc):"
  echo "$out"
  exit 1
fi
# The exposure score systemd computes from the sandboxing (0 = most confined, 10 = none).
if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
  systemd-analyze security --offline=true --threshold=20 "$tmp/weft-agent.service" | tail -1
fi
echo "PASS: weft-agent.service installed and verified"
