"""Number formatting for every page (Jinja filters), the Markdown summary and the terminal.

One voice: each kind of quantity has one unit system, stated in every page's
footer (`UNITS_NOTE`) and used by `reportgen.js`'s `fmt` helper the same way:

- sizes and bandwidths in binary units (1 KiB = 1,024 bytes; GiB/s): the
  memory pages, XProf's roofline and HLO stats already speak GiB;
- FLOP rates in decimal units (1 TFLOP/s = 10^12 FLOP/s), as peak rates are
  quoted;
- times, sizes and rates in the unit that reads best for their magnitude (ns / µs / ms / s, B / KiB / MiB /
  GiB, GFLOP/s / TFLOP/s), in tables, cards and tooltips alike; a chart's axis takes the unit its data's range
  reads best in (`size_unit`, `duration_unit_us`). CSVs keep the raw numbers.
"""

from __future__ import annotations

import math
import re


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_ms(value, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f} ms"


def fmt_us(value, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f} µs"


def step_time_unit(typical_ms: float) -> tuple[str, float]:
    """The unit for step times like `typical_ms` and the factor from ms to it: ms, as XProf gives step times,
    or µs when the steps are under a millisecond (a microbenchmark's 9 µs steps would all read "0.0 ms")."""
    return ("µs", 1000.0) if 0 < abs(typical_ms) < 1 else ("ms", 1.0)


def step_time_axis(typical_ms: float) -> tuple[str, str, float]:
    """For a chart of step times like `typical_ms`: its unit (`step_time_unit`), the name of the data field
    that holds the values in it ("ms" or "us": field names stay ASCII) and the factor from ms."""
    unit, scale = step_time_unit(typical_ms)
    return unit, "ms" if unit == "ms" else "us", scale


def fmt_step_time(value, digits: int = 1, like=None) -> str:
    """A step time given in ms, in the unit of `step_time_unit(like)` (by default of the value itself). Pass
    the average as `like` for its spread and extremes, so that one sentence keeps one unit."""
    if _missing(value):
        return "–"
    typical = like if isinstance(like, (int, float)) and not _missing(like) else value  # a page without steps: none
    unit, scale = step_time_unit(typical)
    return fmt_us(value * scale, digits) if unit == "µs" else fmt_ms(value, digits)


def fmt_pct(value, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:.{digits}f}%"


def fmt_int(value) -> str:
    return "–" if _missing(value) else f"{int(value):,}"


def fmt_num(value, digits: int = 2) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f}"


def fmt_bytes(value) -> str:
    if _missing(value):
        return "–"
    value = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{value:,.1f} TiB"


BINARY_PREFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi")
DECIMAL_PREFIXES = ("", "k", "M", "G", "T", "P", "E")
UNITS_NOTE = ("Sizes and bandwidths in binary units (1 GiB = 2³⁰ bytes, GiB/s); "
              "FLOP rates in decimal units (1 TFLOP/s = 10¹² FLOP/s).")


def _scaled(value: float, prefixes: tuple[str, ...], base: int, unit: str, below: float) -> str:
    """`value` with the largest prefix that leaves it under `below`."""
    for prefix in prefixes:
        if abs(value) < below or prefix == prefixes[-1]:
            return f"{value:,.{1 if abs(value) >= 10 or value == 0 else 2}f} {prefix}{unit}"
        value /= base
    raise AssertionError("unreachable")


def fmt_bandwidth(bytes_per_second) -> str:
    """A bandwidth in bytes per second, in binary units: `1,525.5 GiB/s`."""
    if _missing(bytes_per_second):
        return "–"
    return _scaled(float(bytes_per_second), BINARY_PREFIXES, 1024, "B/s", 10 * 1024)  # 1,525.5 GiB/s


def fmt_flop_rate(flop_per_second) -> str:
    """A FLOP rate in FLOP per second, in decimal units: `918.0 TFLOP/s`."""
    if _missing(flop_per_second):
        return "–"
    return _scaled(float(flop_per_second), DECIMAL_PREFIXES, 1000, "FLOP/s", 1000)


def fmt_gflops(value) -> str:
    """A rate given in GFLOP/s (XProf's unit in its tables), in the unit that reads best."""
    return "–" if _missing(value) else fmt_flop_rate(float(value) * 1e9)


def fmt_gib_per_s(value) -> str:
    """A bandwidth given in GiB/s (XProf's unit in its tables), in the unit that reads best."""
    return "–" if _missing(value) else fmt_bandwidth(float(value) * 2**30)


def fmt_duration_ps(value, digits: int = 1) -> str:
    """A picosecond duration in the unit that reads best (s, ms, µs, ns); reportgen.js's `fmt.durationPs` alike."""
    if _missing(value):
        return "–"
    for scale, unit in ((1e12, "s"), (1e9, "ms"), (1e6, "µs")):
        if abs(value) >= scale:
            return f"{value / scale:,.{digits}f} {unit}"
    return f"{value / 1e3:,.{digits}f} ns"


def fmt_duration_us(value, digits: int = 2) -> str:
    """A duration given in µs (XProf's unit in its op tables), in the unit that reads best: `155.55 s`, not
    `155,546,431.463 µs`."""
    return "–" if _missing(value) else fmt_duration_ps(float(value) * 1e6, digits)


# The units a chart's axis may use, each with its size in the unit the data arrive in.
_SIZE_UNITS = (("B", 1.0), ("KiB", 2.0**10), ("MiB", 2.0**20), ("GiB", 2.0**30), ("TiB", 2.0**40))
_DURATION_UNITS_US = (("ns", 1e-3), ("µs", 1.0), ("ms", 1e3), ("s", 1e6))


def size_unit(top_bytes) -> tuple[str, float]:
    """The unit for an axis of sizes up to `top_bytes`, and the bytes in it: the largest that leaves the top at
    1 or more (`("KiB", 1024.0)` for a chart of 300 KiB), so that ticks read "100 KiB", not "0.0005 MiB"."""
    return _unit_for(top_bytes, _SIZE_UNITS, _SIZE_UNITS[0])


def duration_unit_us(top_us) -> tuple[str, float]:
    """The unit for an axis of durations given in µs up to `top_us`, and the µs in it: ns, µs, ms or s
    (`("s", 1e6)` for 640 s, whose ticks read "600 s", not "640,000,000 µs")."""
    return _unit_for(top_us, _DURATION_UNITS_US, _DURATION_UNITS_US[1])


def _unit_for(top, units: tuple[tuple[str, float], ...], default: tuple[str, float]) -> tuple[str, float]:
    """The largest of `units` (ascending) that `top` is at least one of; `default` for nothing to show."""
    top = 0.0 if _missing(top) else abs(float(top))
    if top == 0 or math.isinf(top):
        return default
    chosen = units[0]
    for unit in units:
        if top >= unit[1]:
            chosen = unit
    return chosen


def fmt_value(value, unit: str = "") -> str:
    """A figure in its unit: ms, us, percent, bytes or count."""
    if _missing(value):
        return "–"
    if unit == "ms":
        return fmt_ms(value, 2)
    if unit == "us":
        return fmt_us(value, 1)
    if unit == "percent":
        return fmt_pct(value)
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "count":
        return fmt_int(value)
    return fmt_num(value)


def _sign(value) -> str:
    return "+" if value > 0 else "-" if value < 0 else "±"


def fmt_delta(value, unit: str = "") -> str:
    """A change, always signed; percentages change by percentage points (pp)."""
    if _missing(value):
        return "–"
    if unit == "percent":
        return f"{_sign(value)}{abs(value):.1f} pp"
    return _sign(value) + fmt_value(abs(value), unit)


def fmt_step_delta(value, digits: int = 1, like=None) -> str:
    """A change of a step time given in ms, always signed, in the unit of `fmt_step_time(…, like=like)`."""
    return "–" if _missing(value) else _sign(value) + fmt_step_time(abs(value), digits, like=like)


def fmt_change_pct(value, digits: int = 1) -> str:
    """A relative change, always signed."""
    return "–" if _missing(value) else f"{value:+.{digits}f}%"


def fmt_ratio(value) -> str:
    return "–" if _missing(value) else f"{value:,.2f}×"


def fmt_p_value(value) -> str:
    """A p-value as it is quoted: `p = 0.0123`, or `p < 0.0001`."""
    if _missing(value):
        return "p unknown"
    return "p < 0.0001" if value < 1e-4 else f"p = {value:.4f}"


# C0 and C1 controls, DEL, the Unicode line and paragraph separators and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_control(match: re.Match) -> str:
    char = match.group()
    return _NAMED_ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def terminal_text(text: str, keep_newlines: bool = False) -> str:
    """Text for the terminal and CI logs, its control characters written as escapes (`\\n`, `\\x1b`).

    Names come from captures: raw, an escape sequence would drive the terminal and a newline would
    start a line of the name's own choosing (a CI runner takes `::error::…` at a line's start as a
    command). `keep_newlines` keeps the line breaks of a message made of several lines; the names
    inside it are then escaped where they are put in (`terminal_text(name)`)."""
    if keep_newlines:
        return "\n".join(_CONTROL.sub(_escape_control, line) for line in text.split("\n"))
    return _CONTROL.sub(_escape_control, text)


def problem_text(message: str, path: str) -> str:
    """An input error's message without the file name it starts with (shown beside it)."""
    prefix = f"{path}: "
    return message[len(prefix):] if message.startswith(prefix) else message


FILTERS = {
    "ms": fmt_ms,
    "step_time": fmt_step_time,
    "us": fmt_us,
    "pct": fmt_pct,
    "int": fmt_int,
    "num": fmt_num,
    "bytes": fmt_bytes,
    "duration_ps": fmt_duration_ps,
    "duration_us": fmt_duration_us,
    "value": fmt_value,
    "delta": fmt_delta,
    "step_delta": fmt_step_delta,
    "change_pct": fmt_change_pct,
    "ratio": fmt_ratio,
    "p_value": fmt_p_value,
    "problem": problem_text,
    "bandwidth": fmt_bandwidth,
    "flop_rate": fmt_flop_rate,
    "gflops": fmt_gflops,
    "gib_per_s": fmt_gib_per_s,
}
