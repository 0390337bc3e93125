#!/usr/bin/env bash
# Runs a headless-Chromium test of tests/browser: by default svg_test.mjs on one flame graph SVG,
# or the test script named first (page_test.mjs, the web page of --listen) with its arguments.
# Installs the tests' npm dependency (playwright-core, no browser download) with `npm ci` first
# when node_modules is missing or was installed from another package-lock.json; otherwise needs
# no network.
# Usage: tests/browser/run.sh SVG ARTIFACT_DIR     (CHROMIUM=path overrides /usr/bin/chromium)
#        tests/browser/run.sh page_test.mjs URL ARTIFACT_DIR [OPTIONS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
script=svg_test.mjs
if [[ $# -ge 1 && $1 == *_test.mjs ]]; then
  script=$1
  shift
  if [[ $script == */* || ! -f $here/$script ]]; then
    echo "$0: no test script $script in $here" >&2
    exit 2
  fi
elif [[ $# -ne 2 ]]; then
  echo "usage: $0 SVG ARTIFACT_DIR, or $0 TEST_SCRIPT.mjs ARGS..." >&2
  exit 2
fi
browser=${CHROMIUM:-/usr/bin/chromium}
if [[ ! -x $browser ]]; then
  echo "tests/browser: no browser at $browser; install Debian's chromium (apt-get install chromium)" >&2
  exit 1
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "tests/browser: $tool not found; install Debian's nodejs and npm" >&2
    exit 1
  fi
done
node_major=$(node -p 'process.versions.node.split(".")[0]')
if ((node_major < 20)); then
  echo "tests/browser: playwright-core needs Node.js 20 or later, found $(node --version)" >&2
  exit 1
fi

# One installer at a time: CTest may start several of these tests together.
exec 9<"$here"
flock 9
stamp=$here/node_modules/.flamebpf-package-lock
wanted=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [[ ! -f $stamp || $(<"$stamp") != "$wanted" ]]; then
  echo "tests/browser: npm ci" >&2
  (cd "$here" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error >&2)
  echo "$wanted" >"$stamp"
fi
exec 9<&-

exec node "$here/$script" "$@"
