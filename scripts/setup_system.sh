#!/usr/bin/env bash
# System packages the whole test suite needs, installed when missing (Debian/Ubuntu):
# Mesa's software Vulkan driver (lavapipe, for the WebGPU provider through wgpu; without it
# wgpu falls back to a slower GL path) and Chromium (the browser tests, WebGPU on SwiftShader).
# Uses sudo when not root; without apt-get it says what to install and leaves the rest to the
# tests (which then skip locally, naming what is missing, and fail in CI).
set -euo pipefail
missing=()
if ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1 || \
   ! ls /usr/share/vulkan/icd.d/lvp_icd.*.json >/dev/null 2>&1; then
  missing+=(mesa-vulkan-drivers libvulkan1)
fi
[ -x /usr/bin/chromium ] || missing+=(chromium)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "setup_system.sh: please install ${missing[*]} (no apt-get here)" >&2
  exit 0
fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
echo "== installing system packages: ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
