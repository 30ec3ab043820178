"""Write docs/summary-json.md, summary.json's keys as `reportgen/summary_blocks.py` declares them.

    python scripts/summary_contract.py

`tests/test_summary_blocks.py` fails when the file and the types differ: run this after changing a block.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from reportgen.summary_blocks import contract_markdown  # noqa: E402 (the checkout's own package)

if __name__ == "__main__":
    (REPO / "docs" / "summary-json.md").write_text(contract_markdown(), encoding="utf-8")
