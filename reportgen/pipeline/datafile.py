"""Python values as data files and back, without ever running code: the rebuild cache's format.

A cache entry written by one build is read by a later one (`--cache-dir`:
possibly of another output folder). A pickle runs whatever its bytes
say when loaded; these files only describe values:

- `<stem>.json`: the value as a JSON tree. Plain JSON values stand for
  themselves; everything else is an object with a `"$"` key saying what it
  is: a dataclass of reportgen's own (by module and name, nothing else can be
  named), a tuple, a set, a dict with keys that are not strings, a float that
  JSON cannot write, bytes, a numpy scalar, a pandas DataFrame, Series or
  Index, an array;
- `<stem>.npz`: the numeric arrays the tree refers to, concatenated per
  dtype (a few members instead of one per column: each member costs a header
  to parse), read with `allow_pickle=False` (an array of objects cannot be
  stored there: those are JSON lists).

Loading checks every node: an unknown tag, a class outside reportgen or not
a dataclass, fields that do not match the class, a missing array, anything
malformed raises `DataFileError`, so that a corrupt, truncated or foreign
entry is ignored, never trusted. Dataclasses are rebuilt field by field
without calling their `__init__`.

A dataclass or frame met twice (the overview, TF-stats and pod-viewer parts
of a host are one object) is written once and referred to after (`"$":
"ref"`), so it is read back as one object too.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

FORMAT = "reportgen-data/1"
OWN_MODULES = "reportgen."
_INT_LOW, _INT_HIGH = -(1 << 63), 1 << 64  # what JSON integers may hold here (orjson: int64 and uint64)


class DataFileError(ValueError):
    """A data file that does not describe a value this version of reportgen writes."""


# --- writing --------------------------------------------------------------------------------------------


def _frame_columns(frame: pd.DataFrame) -> list:
    """Each column's values (a numpy or extension array). pandas' own accessor is 30 times faster than
    `iloc` per column, which costs more than the rest of the encoding on the small frames of a host."""
    get = getattr(frame, "_get_column_array", None)
    if get is None:  # pragma: no cover - other pandas versions
        return [frame.iloc[:, i].array for i in range(frame.shape[1])]
    return [get(i) for i in range(frame.shape[1])]


class _Encoder:
    def __init__(self) -> None:
        self.arrays: dict[str, list[np.ndarray]] = {}  # dtype → arrays, raveled
        self.sizes: dict[str, int] = {}
        self.seen: dict[int, int] = {}  # id of a dataclass or frame written → its number
        self.keep: list[Any] = []  # what `seen` refers to stays alive while encoding

    def shared(self, x: Any) -> dict | None:
        """A reference to `x` when it was written before; else None, and `x` gets the next number."""
        number = self.seen.get(id(x))
        if number is not None:
            return {"$": "ref", "i": number}
        self.seen[id(x)] = len(self.seen)
        self.keep.append(x)
        return None

    def array(self, values: np.ndarray) -> dict:
        dtype = values.dtype.str
        offset = self.sizes.get(dtype, 0)
        self.arrays.setdefault(dtype, []).append(values.ravel())
        self.sizes[dtype] = offset + values.size
        return {"$": "nd", "d": dtype, "o": offset, "s": list(values.shape)}

    def buffers(self) -> tuple[list[str], list[np.ndarray]]:
        dtypes = sorted(self.arrays)
        return dtypes, [np.concatenate(self.arrays[d]) for d in dtypes]

    def value(self, x: Any) -> Any:  # noqa: C901 (one branch per kind of value, in one place)
        if x is None or type(x) in (bool, str):
            return x
        if isinstance(x, enum.Enum):  # before int: an IntEnum is an int
            return {"$": "enum", "t": _class_name(type(x)), "v": self.value(x.value)}
        if isinstance(x, np.generic):
            if x.dtype.kind in "OV":
                raise DataFileError(f"cannot store a numpy {x.dtype} scalar")
            return {"$": "np", "d": x.dtype.str, "v": self.value(x.item())}
        if isinstance(x, str):
            return str(x)
        if isinstance(x, int):
            x = int(x)
            return x if _INT_LOW <= x < _INT_HIGH else {"$": "int", "v": str(x)}
        if isinstance(x, float):
            return x if math.isfinite(x) else {"$": "float", "v": repr(x)}
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return self.shared(x) or {"$": "dc", "t": _class_name(type(x)),
                                      "f": {f.name: self.value(getattr(x, f.name)) for f in dataclasses.fields(x)}}
        if isinstance(x, list):
            return [self.value(v) for v in x]
        if isinstance(x, tuple):
            return {"$": "tuple", "v": [self.value(v) for v in x]}
        if isinstance(x, (set, frozenset)):
            kind = "set" if isinstance(x, set) else "frozenset"
            return {"$": kind, "v": [self.value(v) for v in sorted(x, key=repr)]}
        if isinstance(x, dict):
            if all(type(k) is str for k in x) and "$" not in x:
                return {k: self.value(v) for k, v in x.items()}
            return {"$": "dict", "v": [[self.value(k), self.value(v)] for k, v in x.items()]}
        if isinstance(x, (bytes, bytearray)):
            return {"$": "bytes", "v": base64.b64encode(bytes(x)).decode("ascii")}
        if isinstance(x, np.ndarray):
            return self.column(x)
        if isinstance(x, pd.DataFrame):
            return self.shared(x) or {
                "$": "frame", "c": [[self.value(name), self.column(values)]
                                    for name, values in zip(x.columns, _frame_columns(x))],
                "i": self.index(x.index), "n": len(x), "ci": self.index(x.columns, labels_only=True)}
        if isinstance(x, pd.Series):
            return {"$": "series", "v": self.column(x), "i": self.index(x.index), "n": self.value(x.name)}
        if isinstance(x, pd.Index):
            return self.index(x)
        if isinstance(x, Path):
            return {"$": "path", "v": str(x)}
        raise DataFileError(f"cannot store a {type(x).__module__}.{type(x).__qualname__}")

    def column(self, values) -> dict:
        """An array-like of one dtype: numpy arrays to the .npz, the rest as JSON lists."""
        if isinstance(values, (pd.Series, pd.Index)):
            values = values.to_numpy() if isinstance(values.dtype, np.dtype) else values.array
        dtype = values.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            return {"$": "cat", "codes": self.column(np.asarray(values.codes)),
                    "cats": self.index(values.categories), "o": bool(dtype.ordered)}
        if isinstance(dtype, np.dtype) or isinstance(values, np.ndarray):
            values = np.asarray(values)
            if values.dtype.kind == "O":
                items = values.ravel().tolist()
                plain = all(type(v) is str for v in items)
                return {"$": "obj", "s": list(values.shape),
                        "v": items if plain else [self.value(v) for v in items], "p": plain}
            if values.dtype.kind == "V" or values.dtype.hasobject:
                raise DataFileError(f"cannot store a numpy {values.dtype} array")
            return self.array(values)
        # A pandas extension array (strings, nullable integers, …): its dtype by name, values and holes.
        mask = np.asarray(pd.isna(values), dtype=bool)
        items = [None if m else v for v, m in zip(values.tolist(), mask.tolist())]
        plain = all(type(v) is str or v is None for v in items)
        return {"$": "ext", "d": str(dtype), "v": items if plain else [self.value(v) for v in items], "p": plain}

    def index(self, index: pd.Index, labels_only: bool = False) -> dict:
        if isinstance(index, pd.RangeIndex):
            return {"$": "range", "a": index.start, "b": index.stop, "s": index.step, "n": self.value(index.name)}
        if isinstance(index, pd.MultiIndex):
            return {"$": "multi", "l": [self.column(index.get_level_values(i)) for i in range(index.nlevels)],
                    "n": [self.value(n) for n in index.names]}
        if labels_only and index.dtype == object:
            return {"$": "labels", "n": self.value(index.name)}  # the column names are stored with the columns
        return {"$": "index", "v": self.column(index), "n": self.value(index.name)}


def _class_name(cls: type) -> str:
    if not cls.__module__.startswith(OWN_MODULES):
        raise DataFileError(f"cannot store a {cls.__module__}.{cls.__qualname__}: not one of reportgen's types")
    return f"{cls.__module__}:{cls.__qualname__}"


def dump(value: Any, folder: Path, stem: str) -> list[Path]:
    """Write `value` as `<stem>.json` (and `<stem>.npz` when it holds arrays); returns the files written."""
    encoder = _Encoder()
    tree = {"format": FORMAT, "value": encoder.value(value)}
    dtypes, buffers = encoder.buffers()
    tree["arrays"] = dtypes
    written = []
    if buffers:
        path = folder / f"{stem}.npz"
        with open(path, "wb") as handle:
            np.savez(handle, *buffers)
        written.append(path)
    path = folder / f"{stem}.json"
    path.write_bytes(orjson.dumps(tree))
    written.append(path)
    return written


# --- reading --------------------------------------------------------------------------------------------


def _own_class(name: Any, kind: str) -> type:
    if not isinstance(name, str) or ":" not in name or not name.startswith(OWN_MODULES):
        raise DataFileError(f"names a type outside reportgen: {name!r}")
    module_name, qualname = name.split(":", 1)
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise DataFileError(f"names a type this reportgen does not have: {name!r}") from exc
    if not isinstance(target, type):
        raise DataFileError(f"{name!r} is not a type")
    if kind == "dc" and not dataclasses.is_dataclass(target):
        raise DataFileError(f"{name!r} is not a dataclass")
    if kind == "enum" and not issubclass(target, enum.Enum):
        raise DataFileError(f"{name!r} is not an enumeration")
    return target


class _Decoder:
    def __init__(self, buffers: dict[str, np.ndarray]):
        self.buffers = buffers  # dtype → the concatenated arrays of that dtype
        self.shared: list[Any] = []  # dataclasses and frames by number, as `_Encoder.shared` numbered them

    def numbered(self) -> int:
        """Reserve the next number for a dataclass or frame being read (filled in once it is)."""
        self.shared.append(None)
        return len(self.shared) - 1

    def array(self, node: dict) -> np.ndarray:
        buffer = self.buffers.get(_str(node.get("d")))
        if buffer is None:
            raise DataFileError(f"refers to arrays of a type it does not hold: {node.get('d')!r}")
        shape = [_int(n) for n in _list(node.get("s"))]
        offset, size = _int(node.get("o")), int(np.prod(shape, dtype=np.int64))
        if offset < 0 or size < 0 or offset + size > len(buffer) or any(n < 0 for n in shape):
            raise DataFileError("refers to values past the end of its arrays")
        return buffer[offset:offset + size].reshape(shape)

    def value(self, node: Any) -> Any:  # noqa: C901 (one branch per tag)
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.value(v) for v in node]
        if not isinstance(node, dict):
            raise DataFileError(f"holds a {type(node).__name__} where a value was expected")
        tag = node.get("$")
        if tag is None:
            return {k: self.value(v) for k, v in node.items()}
        if tag == "np":
            try:
                dtype = np.dtype(node["d"])
            except (TypeError, KeyError) as exc:
                raise DataFileError(f"bad numpy scalar type {node.get('d')!r}") from exc
            if dtype.kind in "OV":
                raise DataFileError(f"bad numpy scalar type {dtype}")
            return dtype.type(self.value(node.get("v")))
        if tag == "int":
            return int(_str(node.get("v")))
        if tag == "float":
            text = _str(node.get("v"))
            if text not in ("nan", "inf", "-inf"):
                raise DataFileError(f"bad float {text!r}")
            return float(text)
        if tag == "enum":
            return _own_class(node.get("t"), "enum")(self.value(node.get("v")))
        if tag == "dc":
            return self.dataclass(node)
        if tag == "ref":
            number = _int(node.get("i"))
            if not 0 <= number < len(self.shared) or self.shared[number] is None:
                raise DataFileError(f"refers to an object not read before it: {number}")
            return self.shared[number]
        if tag in ("tuple", "set", "frozenset"):
            items = [self.value(v) for v in _list(node.get("v"))]
            return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
        if tag == "dict":
            out = {}
            for pair in _list(node.get("v")):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise DataFileError("a dict entry is not a pair")
                out[self.value(pair[0])] = self.value(pair[1])
            return out
        if tag == "bytes":
            try:
                return base64.b64decode(_str(node.get("v")), validate=True)
            except ValueError as exc:
                raise DataFileError("bad base64 bytes") from exc
        if tag == "path":
            return Path(_str(node.get("v")))
        if tag in ("nd", "obj", "ext", "cat"):
            return self.column(node)
        if tag == "frame":
            return self.frame(node)
        if tag == "series":
            values = self.column(node.get("v"))
            return pd.Series(values, index=self.index(node.get("i"), len(values)), name=self.value(node.get("n")),
                             dtype=values.dtype, copy=False)
        if tag in ("range", "multi", "index"):
            return self.index(node, None)
        raise DataFileError(f"unknown tag {tag!r}")

    def dataclass(self, node: dict) -> Any:
        cls = _own_class(node.get("t"), "dc")
        fields = node.get("f")
        if not isinstance(fields, dict):
            raise DataFileError(f"{cls.__qualname__} has no fields")
        expected = {f.name for f in dataclasses.fields(cls)}
        if set(fields) != expected:
            raise DataFileError(f"{cls.__qualname__}'s fields do not match: {sorted(set(fields) ^ expected)}")
        number = self.numbered()
        obj = cls.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(obj, name, self.value(value))
        self.shared[number] = obj
        return obj

    def column(self, node: Any):
        if not isinstance(node, dict):
            raise DataFileError("a column is not described")
        tag = node.get("$")
        if tag == "nd":
            return self.array(node)
        if tag == "obj":
            items = _list(node.get("v"))
            if not node.get("p"):
                items = [self.value(v) for v in items]
            elif not all(type(v) is str for v in items):
                raise DataFileError("a column of strings holds something else")
            out = np.empty(len(items), dtype=object)
            out[:] = items
            shape = [_int(n) for n in _list(node.get("s"))]
            try:
                return out.reshape(shape)
            except ValueError as exc:
                raise DataFileError(f"bad shape {shape}") from exc
        if tag == "ext":
            try:
                dtype = pd.api.types.pandas_dtype(_str(node.get("d")))
            except TypeError as exc:
                raise DataFileError(f"unknown column type {node.get('d')!r}") from exc
            if not isinstance(dtype, pd.api.extensions.ExtensionDtype) or isinstance(dtype, pd.CategoricalDtype):
                raise DataFileError(f"unexpected column type {dtype}")
            items = _list(node.get("v"))
            if not node.get("p"):
                items = [self.value(v) for v in items]
            elif not all(type(v) is str or v is None for v in items):
                raise DataFileError("a column of strings holds something else")
            try:
                return pd.array(items, dtype=dtype)
            except (TypeError, ValueError) as exc:
                raise DataFileError(f"bad {dtype} column ({exc})") from exc
        if tag == "cat":
            codes = self.column(node.get("codes"))
            categories = self.index(node.get("cats"), None)
            try:
                return pd.Categorical.from_codes(codes, categories=categories, ordered=bool(node.get("o")))
            except (TypeError, ValueError) as exc:
                raise DataFileError(f"bad categorical column ({exc})") from exc
        raise DataFileError(f"unknown column tag {tag!r}")

    def index(self, node: Any, length: int | None) -> pd.Index | None:
        if not isinstance(node, dict):
            raise DataFileError("an index is not described")
        tag = node.get("$")
        if tag == "range":
            index = pd.RangeIndex(_int(node.get("a")), _int(node.get("b")), _int(node.get("s")),
                                  name=self.value(node.get("n")))
        elif tag == "multi":
            levels = [self.column(level) for level in _list(node.get("l"))]
            names = [self.value(n) for n in _list(node.get("n"))]
            try:
                index = pd.MultiIndex.from_arrays(levels, names=names)
            except (TypeError, ValueError) as exc:
                raise DataFileError(f"bad multi-index ({exc})") from exc
        elif tag == "index":
            values = self.column(node.get("v"))
            index = pd.Index(values, name=self.value(node.get("n")), dtype=values.dtype, copy=False)
        elif tag == "labels":
            return None
        else:
            raise DataFileError(f"unknown index tag {tag!r}")
        if length is not None and len(index) != length:
            raise DataFileError("an index does not match its values")
        return index

    def frame(self, node: dict) -> pd.DataFrame:
        number = self.numbered()
        length = _int(node.get("n"))
        names, columns = [], []
        for pair in _list(node.get("c")):
            if not isinstance(pair, list) or len(pair) != 2:
                raise DataFileError("a frame column is not a (name, values) pair")
            values = self.column(pair[1])
            if len(values) != length:
                raise DataFileError("a frame column does not have the frame's length")
            names.append(self.value(pair[0]))
            columns.append(values)
        index = self.index(node.get("i"), length)
        # pandas infers a string type for a column of Python strings: columns of objects are put in as
        # Series of objects, after the others (one Series per column costs 5 times as much).
        objects = [i for i, values in enumerate(columns) if isinstance(values, np.ndarray) and values.dtype == object]
        placeholder = np.zeros(length, dtype=np.int8)
        frame = pd.DataFrame({i: placeholder if i in objects else values for i, values in enumerate(columns)},
                             index=index, copy=False)
        for i in objects:
            frame.isetitem(i, pd.Series(columns[i], index=index, dtype=object, copy=False))
        labels = self.index(node.get("ci"), len(columns))
        frame.columns = labels if labels is not None else pd.Index(names, dtype=object if not names else None)
        self.shared[number] = frame
        return frame


def _int(value: Any) -> int:
    if type(value) is not int:
        raise DataFileError(f"expected an integer, found {value!r:.40}")
    return value


def _str(value: Any) -> str:
    if type(value) is not str:
        raise DataFileError(f"expected a string, found {value!r:.40}")
    return value


def _list(value: Any) -> list:
    if type(value) is not list:
        raise DataFileError(f"expected a list, found {type(value).__name__}")
    return value


def load(folder: Path, stem: str) -> Any:
    """The value written by `dump`; DataFileError when the files are not such a value."""
    try:
        tree = orjson.loads((folder / f"{stem}.json").read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DataFileError(f"{stem}.json is not JSON ({exc})") from exc
    if not isinstance(tree, dict) or tree.get("format") != FORMAT:
        raise DataFileError(f"{stem}.json is not a {FORMAT} file")
    dtypes = [_str(d) for d in _list(tree.get("arrays"))]
    buffers: dict[str, np.ndarray] = {}
    if dtypes:
        try:
            with np.load(folder / f"{stem}.npz", allow_pickle=False) as npz:
                for i, dtype in enumerate(dtypes):
                    buffers[dtype] = npz[f"arr_{i}"]
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as exc:
            raise DataFileError(f"{stem}.npz cannot be read as arrays ({exc})") from exc
        for dtype, buffer in buffers.items():
            if buffer.dtype.str != dtype or buffer.ndim != 1:
                raise DataFileError(f"{stem}.npz holds {buffer.dtype} where {dtype} was written")
    try:
        return _Decoder(buffers).value(tree.get("value"))
    except RecursionError as exc:
        raise DataFileError("nests too deeply") from exc
