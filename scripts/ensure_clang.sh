#!/usr/bin/env bash
# Installs clang (Debian's package) when it is not on PATH. Called by test.sh only:
# tests/runtime/test_metal_shim.py type-checks csrc/metal_shim.m with clang's Objective-C
# front end. When clang cannot be installed (no apt-get, not root, no network) this
# only warns; that test then fails under CI=true and skips elsewhere.
set -uo pipefail
command -v clang >/dev/null 2>&1 && exit 0
if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
  echo "ensure_clang.sh: clang is not installed and cannot be (needs apt-get as root)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq && apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends clang >/dev/null; }; then
  echo "ensure_clang.sh: apt-get install clang failed" >&2
fi
exit 0
