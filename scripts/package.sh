#!/usr/bin/env bash
# Builds the desktop packages for Linux with the Tauri CLI (pinned in deploy/desktop):
# the release binary with the dashboard embedded, then the .deb, the .rpm and, where its
# tools can be had, the AppImage. Bundles land in $CARGO_TARGET_DIR/release/bundle/ (default
# target/). `package.sh deb` (or rpm, appimage; comma-separated) builds only those.
# macOS (.dmg) and Windows (.msi) are configured in src-tauri/tauri.{macos,windows}.conf.json
# and built on those systems; see src-tauri/macos/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bundles=${1:-deb,rpm,appimage}
target_dir=${CARGO_TARGET_DIR:-$root/target}
bundle_dir=$target_dir/release/bundle
start=$(date +%s)

# Build dependencies (WebKitGTK, the tray's libraries) and the dashboard (ui/dist).
scripts/setup.sh --build
if [ ! -x deploy/desktop/node_modules/.bin/tauri ] || \
   [ deploy/desktop/package-lock.json -nt deploy/desktop/node_modules/.package-lock.json ]; then
  echo "package: installing the Tauri CLI (npm ci in deploy/desktop)"
  (cd deploy/desktop && npm ci --no-audit --no-fund --loglevel=error)
fi
tauri=$root/deploy/desktop/node_modules/.bin/tauri

# The release binary and the packages that need nothing from outside the registries.
native=$(echo "$bundles" | tr ',' '\n' | grep -v '^appimage$' | paste -sd, || true)
rm -rf "$bundle_dir"
cd src-tauri
echo "package: tauri build (release, with the dashboard in ui/dist embedded)"
"$tauri" build --ci --no-bundle -- --locked
build_done=$(date +%s)
# Claude Code's status line command, a small binary without the GUI libraries (it starts
# in milliseconds); the packages install it beside gatehouse (tauri.linux.conf.json).
(cd "$root" && cargo build --release --locked -p gatehouse-statusline)
mkdir -p "$root/deploy/desktop/staged"
install -m 0755 "$target_dir/release/gatehouse-statusline" "$root/deploy/desktop/staged/gatehouse-statusline"
# Symbols are a fifth of the binary and of no use to a user.
strip --strip-unneeded "$target_dir/release/gatehouse" "$root/deploy/desktop/staged/gatehouse-statusline"
if [ -n "$native" ]; then
  echo "package: tauri bundle --bundles $native"
  "$tauri" bundle --ci --bundles "$native"
fi
bundled=$(date +%s)

# The AppImage bundler downloads linuxdeploy and its plugins from GitHub releases; where that
# is not reachable the AppImage is reported missing, the other packages stand.
appimage_status=skipped
if echo "$bundles" | tr ',' '\n' | grep -qx appimage; then
  echo "package: tauri bundle --bundles appimage"
  if "$tauri" bundle --ci --bundles appimage; then
    appimage_status=built
  else
    appimage_status="FAILED (the Tauri CLI downloads the AppImage tools, AppRun and linuxdeploy, from GitHub)"
  fi
fi
cd "$root"

end=$(date +%s)
echo "package: setup and compile $((build_done - start)) s, bundles $((bundled - build_done)) s, total $((end - start)) s"
echo "package: appimage: $appimage_status"
found=$(find "$bundle_dir" -maxdepth 2 -type f \( -name '*.deb' -o -name '*.rpm' -o -name '*.AppImage' \) 2>/dev/null || true)
[ -n "$found" ] || { echo "package: no package was built" >&2; exit 1; }
for f in $found; do
  printf 'package: %s (%s)\n' "$f" "$(du -h "$f" | cut -f1)"
done
ls -l "$target_dir/release/gatehouse" | awk '{print "package: binary " $5 " bytes"}'
case $appimage_status in FAILED*) exit 2 ;; esac
