"""Every command over a built site whose files were tampered with answers in one line, never a traceback.

A small seeded fuzz: each case takes a copy of the session's built site and spoils its summary.json or one
of its CSVs (wrong types, missing keys, huge numbers, NaN, deep nesting, bytes that are not UTF-8, a
truncated file, a symlink out of the site or to a folder), then runs `summary`, `compare`, `check`, `trend`
`publish` (against the storage emulator) and `serve`'s refusals over it, in process, as the command line does.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path

import pytest

from reportgen.cli.main import main
from tests.builtsite import built_site
from tests.comparesite import BASELINE, CANDIDATE

SEED = 4417
CASES = 24
HOSTILE_VALUES = [None, True, "", "x", -1, 0, 1e308, -1e308, 10**40, math.nan, math.inf, [], {}, [1, "a"],
                  {"a": {"b": None}}, "\u202e\x1b[31m\n::error::x", "1e999"]


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _hostile_json(rng: random.Random, data: object) -> str:
    """`data` (summary.json) with a few values replaced, keys dropped or subtrees nested deep."""
    def spoil(node: object, level: int) -> object:
        if isinstance(node, dict) and node:
            node = dict(node)
            for key in rng.sample(sorted(node), k=min(len(node), rng.randint(1, 3))):
                roll = rng.random()
                if roll < 0.2:
                    del node[key]
                elif roll < 0.6 and level < 6:
                    node[key] = spoil(node[key], level + 1)
                else:
                    node[key] = rng.choice(HOSTILE_VALUES)
            return node
        if isinstance(node, list) and node:
            node = list(node)
            i = rng.randrange(len(node))
            node[i] = spoil(node[i], level + 1) if rng.random() < 0.6 else rng.choice(HOSTILE_VALUES)
            return node
        return rng.choice(HOSTILE_VALUES)

    text = json.dumps(spoil(data, 0))  # NaN and Infinity as Python writes them, which JSON forbids
    if rng.random() < 0.15:
        text = text.replace('"runs"', f'"runs": {_deep(100_000)}, "x"', 1)
    return text


def _spoil_csv(rng: random.Random, path: Path) -> None:
    text = path.read_text(errors="replace").splitlines()
    roll = rng.random()
    path.unlink()  # the site's files are hard links to the pristine copy's: never written through
    if roll < 0.2:
        path.write_bytes(b"\xff\xfe\x00garbage,\x80\n1,2\n")
    elif roll < 0.4:
        path.write_text(text[0] + "\n" if text else "")
    elif roll < 0.6:
        path.write_text("\n".join([text[0] if text else "a"] + [",".join(["NaN", "1e999", "-1", "99999999999999999999"
                                                                           ] * 4)] * 3) + "\n")
    elif roll < 0.8:
        path.write_text("\n".join(line[: len(line) // 2] for line in text))
    else:
        path.write_text('"unclosed,' + "x" * 100_000 + "\n")


def _case(rng: random.Random, pristine: Path, dest: Path) -> str:
    shutil.copytree(pristine, dest, copy_function=os.link)
    summary = dest / "summary.json"
    roll = rng.random()
    summary.unlink()
    if roll < 0.55:
        summary.write_text(_hostile_json(rng, json.loads((pristine / "summary.json").read_text())))
        what = "summary.json spoiled"
    elif roll < 0.65:
        summary.write_bytes((pristine / "summary.json").read_bytes()[: rng.randrange(1, 200)])
        what = "summary.json truncated"
    elif roll < 0.72:
        summary.write_bytes(b'{"runs": {"\xff\xfe": {}}, "version": "\x80"}')
        what = "summary.json not UTF-8"
    elif roll < 0.79:
        summary.symlink_to("/etc/passwd")
        what = "summary.json a symlink out of the site"
    elif roll < 0.84:
        summary.mkdir()
        what = "summary.json a folder"
    else:
        shutil.copyfile(pristine / "summary.json", summary)
        csvs = sorted(p for p in dest.rglob("*.csv") if p.is_file())
        target = rng.choice(csvs)
        if rng.random() < 0.2:
            target.unlink()
            target.symlink_to("/etc/passwd")
        else:
            _spoil_csv(rng, target)
        what = f"{target.relative_to(dest)} spoiled"
    return what


def _commands(site: Path, out: Path, bucket: str | None) -> list[list[str]]:
    commands = [
        ["summary", str(site)],
        ["summary", str(site), "--compare", BASELINE, CANDIDATE, "--format", "json", "-o", str(out / "pr.json")],
        ["compare", f"{site}:{BASELINE}", f"{site}:{CANDIDATE}", "-o", str(out / "compare"), "-q"],
        ["check", str(site), "--max-step-ms", "100", "--max-input-percent", "20"],
        ["check", str(site), "--max-regression", "5%", "--baseline", BASELINE, "--runs", CANDIDATE],
        ["trend", str(site), "-o", str(out / "trend"), "-q"],
        # `serve` over a site it accepts serves until stopped: its refusals are what is run here.
        ["serve", str(site / "summary.json")],
        ["serve", str(site), "--port", "70000"],
    ]
    if bucket is not None:
        commands.append(["publish", str(site), f"gs://{bucket}/fuzz-{out.name}", "-q"])
    return commands


@pytest.fixture(scope="module")
def emulated_bucket(request):
    """The storage emulator's bucket, or None where the emulator is not installed (publish is left out)."""
    from tests.conftest import GCS_BUCKET

    try:
        emulator = request.getfixturevalue("gcs_emulator")
    except pytest.skip.Exception:
        return None
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = emulator.removeprefix("http://")
    yield GCS_BUCKET
    if previous is None:
        os.environ.pop("STORAGE_EMULATOR_HOST", None)
    else:
        os.environ["STORAGE_EMULATOR_HOST"] = previous


def test_commands_over_hostile_sites_answer_in_one_line(tmp_path, capsys, emulated_bucket):
    pristine = built_site().site
    failures = []
    for number in range(CASES):
        rng = random.Random(SEED * 1000 + number)
        site = tmp_path / f"site{number}"
        what = _case(rng, pristine, site)
        for args in _commands(site, tmp_path / f"out{number}", emulated_bucket):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse's usage errors leave this way, as on the command line
                code = exc.code
            except BaseException as exc:  # noqa: BLE001 - any exception here is the failure being looked for
                failures.append(f"case {number} ({what}): reportgen {args[0]} raised {type(exc).__name__}: {exc}")
                continue
            err = capsys.readouterr().err
            if code not in (0, 1, 2, 3) or "Traceback" in err:
                failures.append(f"case {number} ({what}): reportgen {args[0]} exit {code}: {err[-300:]}")
    assert not failures, "\n".join(failures)
