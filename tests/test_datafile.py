"""The rebuild cache's data files: every kind of value a host part holds comes back equal (dtypes
included), and nothing but data is ever read: foreign types, pickles and malformed trees are refused."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from reportgen.capture import StatTable
from reportgen.core.hlo.model import PrimitiveType
from reportgen.pipeline import datafile
from reportgen.pipeline.datafile import DataFileError
from reportgen.sections.base import HostSummary


def _assert_same(a, b):
    assert type(a) is type(b)
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    elif isinstance(a, (pd.Series, pd.Index)):
        (pd.testing.assert_series_equal if isinstance(a, pd.Series) else pd.testing.assert_index_equal)(a, b)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _assert_same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def test_values_come_back_equal_with_their_types(tmp_path):
    objects = np.empty(3, dtype=object)
    objects[:] = ["a", None, ("t", 1)]
    frame = pd.DataFrame({
        "i": np.array([1, -2, 3], dtype=np.int64), "u": np.array([0, 2**64 - 1, 5], dtype=np.uint64),
        "f": [0.5, math.nan, -math.inf], "b": [True, False, True], "o": objects,
        "plain": pd.Series(["x", "y", "z"], dtype=object), "s": pd.array(["p", None, "q"], dtype="str"),
        "n": pd.array([1, None, 3], dtype="Int64"), "c": pd.Categorical(["u", "v", "u"]),
    })
    frame.index = pd.Index([10, 20, 30], name="row")
    summary = HostSummary("h", "run/h.xplane.pb", 1, 2, 3, 4, 5, "GPU", 8)
    value = {
        "frame": frame, "same_frame": frame, "empty": pd.DataFrame({"a": pd.Series([], dtype=np.int32)}),
        "series": pd.Series([1.5, 2.5], index=["a", "b"], name="x"),
        "multi": pd.Series([1, 2], index=pd.MultiIndex.from_tuples([("a", 1), ("b", 2)])),
        "array": np.arange(12, dtype=np.int16).reshape(3, 4), "strings": np.array(["ab", "c"]),
        "scalar": np.float32(1.25), "big": 2**70, "neg": -(2**70), "nan": math.nan, "inf": math.inf,
        "bytes": b"\x00\xff", "tuple": (1, "a", None), "set": {3, 1}, "frozen": frozenset({"x"}),
        (1, 2): "tuple key", "$": "dollar key", "enum": next(iter(PrimitiveType)), "summary": summary,
        "again": summary,
        "stats": StatTable(*(np.arange(2, dtype=t) for t in (np.int32, np.int32, np.int8, np.int64, np.int32))),
    }
    datafile.dump(value, tmp_path, "v")
    back = datafile.load(tmp_path, "v")
    _assert_same(value, back)
    assert back["frame"] is back["same_frame"] and back["summary"] is back["again"]  # shared, as written


@pytest.mark.parametrize("tree, problem", [
    ({"$": "dc", "t": "os:system", "f": {}}, "outside reportgen"),
    ({"$": "dc", "t": "reportgen.pipeline.cache:HostCache", "f": {}}, "not a dataclass"),
    ({"$": "dc", "t": "reportgen.sections.base:HostSummary", "f": {"host": "h"}}, "fields do not match"),
    ({"$": "dc", "t": "reportgen.nothing:Here", "f": {}}, "does not have"),
    ({"$": "enum", "t": "builtins:object", "v": 1}, "outside reportgen"),
    ({"$": "eval", "v": "1"}, "unknown tag"),
    ({"$": "nd", "d": "<i8", "o": 0, "s": [4]}, "does not hold"),
    ({"$": "ref", "i": 0}, "not read before"),
    ({"$": "np", "d": "|O", "v": 1}, "bad numpy scalar"),
    ({"$": "ext", "d": "category", "v": [], "p": True}, "unexpected column type"),
    ({"$": "frame", "c": [["a", {"$": "obj", "s": [1], "v": ["x"], "p": True}]], "i": {"$": "range", "a": 0,
      "b": 2, "s": 1, "n": None}, "n": 2, "ci": {"$": "labels", "n": None}}, "frame's length"),
])
def test_foreign_and_malformed_trees_are_refused(tmp_path, tree, problem):
    (tmp_path / "v.json").write_text(json.dumps({"format": datafile.FORMAT, "value": tree, "arrays": []}))
    with pytest.raises(DataFileError, match=problem):
        datafile.load(tmp_path, "v")


def test_arrays_are_read_without_pickle(tmp_path):
    datafile.dump({"a": np.arange(3)}, tmp_path, "v")
    objects = np.empty(2, dtype=object)
    objects[:] = [print, "x"]
    with open(tmp_path / "v.npz", "wb") as handle:  # an array of objects needs pickle: refused
        np.savez(handle, objects)
    tree = json.loads((tmp_path / "v.json").read_text())
    tree["arrays"] = ["|O"]
    (tmp_path / "v.json").write_text(json.dumps(tree))
    with pytest.raises(DataFileError, match="cannot be read as arrays"):
        datafile.load(tmp_path, "v")
    for content in (b"", b"{", b'{"format": "other"}', b"[]"):
        (tmp_path / "v.json").write_bytes(content)
        with pytest.raises(DataFileError):
            datafile.load(tmp_path, "v")


def test_values_outside_reportgen_are_not_written(tmp_path):
    @dataclasses.dataclass
    class Foreign:
        x: int = 1

    Foreign.__module__ = "elsewhere"
    with pytest.raises(DataFileError, match="not one of reportgen's types"):
        datafile.dump(Foreign(), tmp_path, "v")
    with pytest.raises(DataFileError, match="cannot store"):
        datafile.dump(object(), tmp_path, "v")
