#!/usr/bin/env bash
# `npm test` runs the page's tests in Debian's chromium (no browser download works on these machines).
# Installs it when it is missing and we may; otherwise says how, and the browser tests fail loudly.
set -u
[ -x "${PV_CHROMIUM_PATH:-/usr/bin/chromium}" ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
  echo "installing Debian's chromium for the browser tests (apt-get)…" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && exit 0
fi
echo "chromium is missing: run 'sudo apt-get install -y chromium' (or set PV_CHROMIUM_PATH); the browser tests will fail until then." >&2
exit 0
