"""Fetch the vendored Graphviz (WebAssembly) build again from the npm registry into
reportgen/static/vendor/hpcc-js-wasm/.

    python scripts/vendor/refresh_hpcc_js_wasm.py [--version X.Y.Z]

Downloads `@hpcc-js/wasm@<version>` with `npm pack` (which checks the
tarball against the registry's integrity hash), copies `dist/graphviz.umd.js`
(Graphviz compiled to WebAssembly, the wasm inlined, exposed as the global
`@hpcc-js/wasm/graphviz`: a classic script that loads from file://) and the
package's LICENSE there, and writes the version and the file's SHA-256 to
VERSION. Without --version it fetches the version VERSION pins (so running it
on a clean checkout leaves `git status` clean); with it, it moves the pin.
tests/test_graph_viewer_page.py checks the file against VERSION.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[2] / "reportgen" / "static" / "vendor" / "hpcc-js-wasm"
PACKAGE = "@hpcc-js/wasm"
FILES = {"package/dist/graphviz.umd.js": "graphviz.umd.js", "package/LICENSE": "LICENSE"}


def pinned() -> dict[str, str]:
    fields = {}
    for line in (HERE / "VERSION").read_text().splitlines():
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip()
    return fields


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default=None, help="the version to pin (default: the one VERSION pins)")
    version = parser.parse_args().version or pinned()["version"]
    with tempfile.TemporaryDirectory() as scratch:
        result = subprocess.run(["npm", "pack", f"{PACKAGE}@{version}", "--silent"], cwd=scratch, check=True,
                                capture_output=True, text=True)
        tarball = Path(scratch) / result.stdout.strip().splitlines()[-1]
        with tarfile.open(tarball) as tar:
            for member, target in FILES.items():
                source = tar.extractfile(member)
                if source is None:
                    raise SystemExit(f"{tarball.name} has no {member}")
                with source, open(HERE / target, "wb") as out:
                    shutil.copyfileobj(source, out)
    digest = hashlib.sha256((HERE / "graphviz.umd.js").read_bytes()).hexdigest()
    (HERE / "VERSION").write_text(f"package = {PACKAGE}\nversion = {version}\nfile = graphviz.umd.js\n"
                                  f"sha256 = {digest}\n")
    print(f"{PACKAGE}@{version}: graphviz.umd.js sha256 {digest}")


if __name__ == "__main__":
    main()
