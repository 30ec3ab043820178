"""Make docs/images/pr-comment.png: the sticky comment of the CI recipe, as a reader sees it.

The recipe's commands on the bundled sample laid out as the GitHub action lays a pull
request out (the fast run as `main`, the input-bound run as `pr-42`), the Markdown
rendered to HTML by the `markdown` package with GitHub-like styles, and a screenshot in
headless Chromium (1280 × 800; emoji need a colour emoji font, Debian's
fonts-noto-color-emoji). Run from the repository root:

    python docs/pr_comment_image.py [--html OUT.html]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import markdown

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile"
OUTPUT = REPO / "docs" / "images" / "pr-comment.png"
WIDTH, HEIGHT = 1280, 800

STYLE = """
body { margin: 0; background: #f6f8fa; font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial,
       sans-serif; color: #1f2328; }
.comment { width: 900px; margin: 16px auto; background: #fff; border: 1px solid #d1d9e0; border-radius: 6px; }
.head { padding: 8px 16px; background: #f6f8fa; border-bottom: 1px solid #d1d9e0; border-radius: 6px 6px 0 0;
        color: #59636e; } .head b { color: #1f2328; }
.body { padding: 4px 16px 12px; }
h2 { font-size: 1.5em; border-bottom: 1px solid #d1d9e0; padding-bottom: .3em; margin: 16px 0 12px; }
h3 { font-size: 1.25em; margin: 20px 0 8px; }
table { border-collapse: collapse; margin: 8px 0 12px; display: block; width: max-content; max-width: 100%;
        overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 4px 10px; } th { font-weight: 600; }
tr:nth-child(2n) td { background: #f6f8fa; }
code { font: 85% ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: .15em .35em;
       border-radius: 4px; }
img { max-width: 100%; } a { color: #0969da; text-decoration: none; } sub { color: #59636e; }
"""


def comment_markdown(folder: Path) -> Path:
    """The recipe's commands: build, compare, summary with budgets, marker and link."""
    logdir = folder / "logdir" / "plugins" / "profile"
    for run, source in (("main", "tf_keras_fast"), ("pr-42", "tf_keras_input_bound")):
        shutil.copytree(SAMPLE / source, logdir / run)
    site = folder / "site"
    reportgen = [sys.executable, "-m", "reportgen"]
    subprocess.run([*reportgen, "build", str(folder / "logdir"), "-o", str(site), "-q", "--no-cache"], check=True)
    subprocess.run([*reportgen, "compare", f"{site}:main", f"{site}:pr-42", "-q"], check=True)
    comment = site / "summary" / "summary.md"
    subprocess.run([*reportgen, "summary", str(site), "--compare", "main", "pr-42", "--budget",
                    str(REPO / "examples" / "profile-budget.toml"), "--baseline", "main", "--sticky", "reportgen",
                    "--link", "Workflow run (the site is its reportgen-site artifact)="
                    "https://github.com/OWNER/model/actions/runs/1", "-o", str(comment)], check=True)
    return comment


def comment_html(comment: Path) -> str:
    body = markdown.markdown(comment.read_text(encoding="utf-8"), extensions=["tables"])
    return (f"<!doctype html><meta charset='utf-8'><style>{STYLE}</style><div class='comment'>"
            f"<div class='head'><b>github-actions</b> bot commented</div><div class='body'>{body}</div></div>")


def screenshot(html: Path, png: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"))
    try:
        # The viewport itself, whatever room the headless window keeps for itself.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        driver.get(html.as_uri())
        driver.execute_script("return document.fonts.ready")
        png.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(png))
    finally:
        driver.quit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--html", type=Path, help="also keep the rendered HTML here")
    parser.add_argument("-o", "--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reportgen-comment-") as scratch:
        comment = comment_markdown(Path(scratch))
        html = comment.with_suffix(".html")  # beside the charts, which it shows by file name
        html.write_text(comment_html(comment), encoding="utf-8")
        screenshot(html, args.output)
        if args.html:
            shutil.copy(html, args.html)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
