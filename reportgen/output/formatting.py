"""Number formatting for pages (Jinja filters), so templates never compute."""

from __future__ import annotations

import math


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt_ms(value, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f} ms"


def fmt_us(value, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f} µs"


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


def fmt_duration_ps(value) -> str:
    """A picosecond duration in the unit that reads best."""
    if _missing(value):
        return "–"
    seconds = value / 1e12
    if seconds >= 1:
        return f"{seconds:,.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds * 1e6:,.1f} µs"


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


def fmt_delta(value, unit: str = "") -> str:
    """A change, always signed; percentages change by percentage points (pp)."""
    if _missing(value):
        return "–"
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    if unit == "percent":
        return f"{sign}{abs(value):.1f} pp"
    return sign + fmt_value(abs(value), unit)


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


def problem_text(message: str, path: str) -> str:
    """An input error's message without the file name it starts with (shown beside it)."""
    prefix = f"{path}: "
    return message[len(prefix):] if message.startswith(prefix) else message


FILTERS = {
    "ms": fmt_ms,
    "us": fmt_us,
    "pct": fmt_pct,
    "int": fmt_int,
    "num": fmt_num,
    "bytes": fmt_bytes,
    "duration_ps": fmt_duration_ps,
    "value": fmt_value,
    "delta": fmt_delta,
    "change_pct": fmt_change_pct,
    "ratio": fmt_ratio,
    "p_value": fmt_p_value,
    "problem": problem_text,
}
