#!/usr/bin/env bash
# Fetch flame-chart-js from the npm registry and rebuild reportgen/static/vendor/flame-chart-js/.
#
#   scripts/vendor/refresh_flame_chart_js.sh [VERSION]
#
# Without VERSION, the pinned one (the VERSION file beside the vendored bundle) is fetched again, so
# running it on a clean checkout must leave `git status` clean. `npm pack` checks the tarball against
# the registry's integrity hash. What is vendored: the package's own UMD build (dist/index.min.js,
# global `flameChartJs`, its two dependencies `color` and `events` bundled in), its LICENSE, and the
# version with the tarball's integrity hash.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=reportgen/static/vendor/flame-chart-js
version="${1:-$(sed -n 's/^version=//p' "$dest/VERSION")}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "flame-chart-js@$version" >/dev/null)
tarball="$work/flame-chart-js-$version.tgz"
tar -xzf "$tarball" -C "$work"
header="$(head -c 200 "$work/package/dist/index.min.js")"
case "$header" in
  *"flame-chart-js v$version"*) ;;
  *) echo "dist/index.min.js of flame-chart-js $version does not name that version" >&2; exit 1 ;;
esac
mkdir -p "$dest"
cp "$work/package/dist/index.min.js" "$dest/flame-chart.min.js"
cp "$work/package/LICENSE" "$dest/LICENSE"
integrity="sha512-$(openssl dgst -sha512 -binary "$tarball" | base64 -w0)"
printf 'version=%s\nintegrity=%s\nsource=npm flame-chart-js@%s dist/index.min.js\n' \
  "$version" "$integrity" "$version" > "$dest/VERSION"
echo "vendored flame-chart-js $version into $dest"
