#!/usr/bin/env bash
# Checks the installed systemd unit of the agent: systemd's own verifier accepts it, its offline
# security analysis rates it at most MAX_EXPOSURE, it holds the settings flamebpf's defences rely
# on (docs/security.md), and its SystemCallFilter allows what the seccomp profile PROFILE does.
# Usage: check_unit.sh UNIT_FILE [PROFILE]
set -euo pipefail
unit=${1:?usage: check_unit.sh UNIT_FILE [PROFILE]}
profile=${2:-}
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
  "NoNewPrivileges=yes" "SystemCallFilter=" "SystemCallErrorNumber=EPERM"
)
for setting in "${required[@]}"; do
  grep -q "^$setting" "$unit" || { echo "check_unit: $unit lacks $setting" >&2; exit 1; }
done
if [[ -n $profile ]]; then
  in_unit=$(sed -n 's/^SystemCallFilter=//p' "$unit" | tr ' ' '\n' | sort)
  in_profile=$(python3 -c 'import json, sys
for rule in json.load(open(sys.argv[1]))["syscalls"]:
    print("\n".join(rule["names"]))' "$profile" | sort)
  [[ $in_unit == "$in_profile" ]] || {
    echo "check_unit: the calls $unit allows are not those of $profile:" >&2
    diff <(echo "$in_unit") <(echo "$in_profile") >&2
    exit 1
  }
fi
echo "check_unit: $unit verified, exposure $exposure"
