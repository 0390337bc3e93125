#!/usr/bin/env bash
# Checks the installed systemd unit of the agent: systemd's own verifier accepts it, its offline
# security analysis rates it at most MAX_EXPOSURE, and it holds the settings flamebpf's
# defences rely on (README, "Security").
# Usage: check_unit.sh UNIT_FILE
set -euo pipefail
unit=${1:?usage: check_unit.sh UNIT_FILE}
max_exposure=4.5

systemd-analyze verify --man=no "$unit"

exposure=$(systemd-analyze security --offline=true "$unit" 2>/dev/null |
  sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
[[ -n $exposure ]] || { echo "check_unit: no exposure level from systemd-analyze security" >&2; exit 1; }
awk -v e="$exposure" -v m="$max_exposure" 'BEGIN { exit !(e <= m) }' ||
  { echo "check_unit: exposure $exposure is above $max_exposure" >&2; exit 1; }

required=(
  "Type=notify" "WatchdogSec=" "Restart=always" "UMask=0027" "MemoryMax=" "LimitNOFILE="
  "DevicePolicy=closed" "ProtectSystem=strict" "ReadWritePaths=/var/lib/flamebpf"
  "NoNewPrivileges=yes"
)
for setting in "${required[@]}"; do
  grep -q "^$setting" "$unit" || { echo "check_unit: $unit lacks $setting" >&2; exit 1; }
done
echo "check_unit: $unit verified, exposure $exposure"
