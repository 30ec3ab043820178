"""Fetch the vendored Vega, Vega-Lite and vega-embed builds again from the npm registry into
reportgen/static/vendor/vega/.

    python scripts/vendor/refresh_vega.py [--vega X.Y.Z] [--vega-lite X.Y.Z] [--vega-embed X.Y.Z]

Downloads each package with `npm pack` (which checks the tarball against the registry's integrity
hash) and copies its minified UMD build (`build/<name>.min.js`, byte for byte as the registry serves
it) and its LICENSE. The builds bundle their own dependencies (d3 modules, vega-themes,
vega-tooltip, …): `npm install` of the three into a scratch folder gives that dependency tree, whose
names, versions, licence fields and licence texts go to THIRD_PARTY_NOTICES.txt (the tree may hold a
few packages a build leaves out, such as vega-lite's command-line helpers; none is missing). VERSION
records the versions and each file's SHA-256.

Without options it fetches the versions VERSION pins (so running it on a clean checkout leaves
`git status` clean); an option moves that pin. Vega-Lite's major.minor must stay the one
`reportgen.output.site.VEGA_LITE_VERSION` names (the schema Altair writes, and what vl-convert
renders the Markdown summary's PNGs with); tests/test_vega_vendor.py checks that and the hashes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2] / "reportgen" / "static" / "vendor" / "vega"
# npm package → its build file, in the order a page must run them (vega-lite needs vega; vega-embed both).
PACKAGES = {"vega": "vega.min.js", "vega-lite": "vega-lite.min.js", "vega-embed": "vega-embed.min.js"}


def pinned() -> dict[str, str]:
    fields = {}
    for line in (HERE / "VERSION").read_text().splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip()
    return fields


def _npm(args: list[str], cwd: str) -> str:
    return subprocess.run(["npm", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _fetch(package: str, version: str, scratch: str) -> None:
    tarball = Path(scratch) / _npm(["pack", f"{package}@{version}", "--silent"], scratch).strip().splitlines()[-1]
    build = PACKAGES[package]
    with tarfile.open(tarball) as tar:
        for member, target in ((f"package/build/{build}", build), ("package/LICENSE", f"LICENSE-{package}")):
            source = tar.extractfile(member)
            if source is None:
                raise SystemExit(f"{tarball.name} has no {member}")
            with source, open(HERE / target, "wb") as out:
                shutil.copyfileobj(source, out)


def _notices(versions: dict[str, str], scratch: str) -> str:
    """Every package in the three packages' installed dependency tree: name, version, licence, text."""
    tree = Path(scratch) / "tree"
    tree.mkdir()
    (tree / "package.json").write_text("{}")
    _npm(["install", "--no-save", "--ignore-scripts", "--no-audit", "--no-fund",
          *(f"{name}@{version}" for name, version in versions.items())], str(tree))
    parts = ["Third-party software in vega.min.js, vega-lite.min.js and vega-embed.min.js",
             "(the dependency tree of the three npm packages; see NOTICE.md)", ""]
    for manifest in sorted((tree / "node_modules").glob("**/package.json")):
        folder = manifest.parent
        scoped = folder.parent.name.startswith("@") and folder.parent.parent.name == "node_modules"
        if folder.parent.name != "node_modules" and not scoped:
            continue  # a package's own nested package.json files (dist/, esm/), not a package
        meta = json.loads(manifest.read_text(encoding="utf-8"))
        if "name" not in meta or "version" not in meta or meta["name"] in PACKAGES:
            continue
        licence = meta.get("license") or "see the text below"
        text = next((path for path in sorted(folder.iterdir())
                     if path.is_file() and path.name.upper().startswith(("LICENSE", "LICENCE", "COPYING"))), None)
        parts += ["=" * 78, f"{meta['name']} {meta['version']} — {licence}", "=" * 78,
                  text.read_text(encoding="utf-8", errors="replace").strip() if text else "(no licence file)", ""]
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for package in PACKAGES:
        parser.add_argument(f"--{package}", default=None, help=f"the {package} version to pin")
    args = vars(parser.parse_args())
    pins = pinned() if (HERE / "VERSION").exists() else {}
    versions = {package: args[package.replace("-", "_")] or pins[package] for package in PACKAGES}
    HERE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        for package, version in versions.items():
            _fetch(package, version, scratch)
        (HERE / "THIRD_PARTY_NOTICES.txt").write_text(_notices(versions, scratch), encoding="utf-8")
    lines = [f"{package} = {version}" for package, version in versions.items()]
    for build in PACKAGES.values():
        lines.append(f"sha256 {build} = {hashlib.sha256((HERE / build).read_bytes()).hexdigest()}")
    (HERE / "VERSION").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
