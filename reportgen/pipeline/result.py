"""The per-host result as declared data: typed values to Arrow tables and back, the one format of a host's result.

A host's result (`HostOutcome`: its summary and every section's part) goes to the building process
from a worker (pickled through `HostOutcome.__reduce__`, so processes and Dask carry these bytes) and
into the rebuild cache, in one format: Arrow IPC streams (pyarrow). Arrow gives every table a schema
that is read before the data, strings and nested lists without pickles, and reads without running
anything the file names.

The schema of a part is its declared type: the dataclass a section's `host_part` returns (`Section
.part_type`), its fields' annotations, recursively. Nothing in a file names a class; the reader knows
what it expects and checks that the file says exactly that:

- every dataclass type is one table, a row per instance; its columns are its fields, typed from the
  annotations (`int` int64, `float` float64, `str`, `bool`, `bytes`, `X | None` nullable, `list[X]`
  a list, `tuple[A, B]` a struct, `dict[K, V]` a list of key/value structs), and a field of a
  dataclass type is the row number of that value in its type's table (so a value met twice, as the
  overview's, TF-stats' and pod-viewer's `HostOpStats`, is stored once and read back as one object,
  and recursive types such as a fusion's `HloOp`s need nothing special);
- a `pandas.DataFrame` or `numpy.ndarray` field is the number of a table of its own (a frame's
  columns with their dtypes; an array as one column with its dtype and shape);
- a bare `dict` or `list[dict]` (a few small mappings of names to numbers) is JSON text, checked to be
  plain JSON both ways.

`SCHEMA_VERSION` numbers the rules above; `schema_fingerprint()` hashes every declared type reachable
from the parts (field names and annotations), so adding a field changes the rebuild cache's key
without anyone remembering to. Reading checks the magic, each table's name and schema against the
declared one, nulls where no `None` is declared, every row number: anything else raises `ResultError`,
and the cache ignores the entry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import struct
import types
import typing
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from reportgen.sections.registry import SECTIONS

SCHEMA_VERSION = 1
MAGIC = b"reportgen-result\x00"
_LENGTH = struct.Struct("<Q")
_KIND = b"reportgen.kind"  # schema metadata: "type", "frame" or "array"
_NAME = b"reportgen.name"
_LAYOUT = b"reportgen.layout"  # a frame's dtypes and index, an array's dtype and shape (JSON)


class ResultError(ValueError):
    """Bytes that are not a result this version of reportgen writes for the declared type."""


class _Json:
    """Annotation of a value kept as JSON text: a bare `dict` (or a list of them)."""


# --- declared types -------------------------------------------------------------------------------


def _optional(tp: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(args) < len(typing.get_args(tp)):
            return args[0], True
        raise TypeError(f"cannot store a value of type {tp}: declare one type (or it | None)")
    return tp, False


def _plain(tp: Any) -> Any:
    """The annotation as the codec reads it: a bare `dict`, a `list[dict]` or `Any` is plain JSON."""
    if tp is dict or tp is typing.Any:
        return _Json
    origin = typing.get_origin(tp)
    if origin is list and typing.get_args(tp) in ((dict,), ()):
        return _Json
    return tp


@cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, annotation) of each field of a dataclass, annotations resolved."""
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    return tuple((f.name, _plain(hints[f.name])) for f in dataclasses.fields(cls))


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _children(tp: Any) -> Iterator[Any]:
    tp, _ = _optional(_plain(tp))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        yield tp
        return
    for arg in typing.get_args(tp):
        if arg is not Ellipsis:
            yield from _children(arg)


@cache
def declared_types(roots: tuple[Any, ...]) -> dict[str, type]:
    """Every dataclass type reachable from `roots`, by name, in a stable order."""
    found: dict[str, type] = {}
    pending = [c for root in roots for c in _children(root)]
    while pending:
        cls = pending.pop(0)
        if _name(cls) in found:
            continue
        found[_name(cls)] = cls
        for _, tp in _fields(cls):
            pending.extend(_children(tp))
    return found


def _type_text(tp: Any) -> str:
    if tp is _Json:
        return "json"
    if isinstance(tp, type):
        return _name(tp)
    return repr(tp)


def schema_fingerprint(roots: tuple[Any, ...]) -> str:
    """A hash of the declared schema: every reachable type's fields and their annotations."""
    digest = hashlib.sha256(f"{SCHEMA_VERSION}".encode())
    for name, cls in sorted(declared_types(roots).items()):
        digest.update(name.encode() + b"\0")
        for field_name, tp in _fields(cls):
            digest.update(f"{field_name}:{_type_text(tp)}\0".encode())
    return digest.hexdigest()


# --- Arrow types ------------------------------------------------------------------------------------

_SCALARS: dict[Any, pa.DataType] = {int: pa.int64(), float: pa.float64(), str: pa.large_string(),
                                    bool: pa.bool_(), bytes: pa.large_binary()}


def _is_ref(tp: Any) -> bool:
    return tp is pd.DataFrame or tp is np.ndarray or (dataclasses.is_dataclass(tp) and isinstance(tp, type))


def _arrow(tp: Any) -> pa.DataType:
    tp, _ = _optional(tp)
    if tp in _SCALARS:
        return _SCALARS[tp]
    if tp is _Json:
        return pa.large_string()
    if _is_ref(tp):
        return pa.int64()  # a row of a type's table, or the number of a frame's or array's table
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        return pa.large_list(_item_field(args[0]))
    if origin is tuple:
        return pa.struct([_item_field(a, f"f{i}") for i, a in enumerate(args)])
    if origin is dict:
        return pa.large_list(pa.field("item", pa.struct([_item_field(args[0], "key"), _item_field(args[1], "value")]),
                                      nullable=False))
    raise TypeError(f"cannot store a value of type {tp}")


def _item_field(tp: Any, name: str = "item") -> pa.Field:
    return pa.field(name, _arrow(_plain(tp)), nullable=_optional(_plain(tp))[1])


def _retyped(tp: pa.DataType, old: pa.DataType, new: pa.DataType) -> pa.DataType:
    """`tp` with every `old` in it made `new` (a list's items, a struct's fields)."""
    if tp == old:
        return new
    if pa.types.is_large_list(tp):
        return pa.large_list(tp.value_field.with_type(_retyped(tp.value_type, old, new)))
    if pa.types.is_struct(tp):
        return pa.struct([tp.field(i).with_type(_retyped(tp.field(i).type, old, new)) for i in range(tp.num_fields)])
    return tp


def _same_schema(actual: pa.Schema, expected: pa.Schema) -> bool:
    """The declared schema, where a column of ints may be unsigned (it held ints beyond int64)."""
    if len(actual) != len(expected) or actual.metadata != expected.metadata:
        return False
    return all(a.name == e.name and a.nullable == e.nullable
               and _retyped(a.type, pa.uint64(), pa.int64()) == e.type for a, e in zip(actual, expected))


@cache
def _schema(cls: type) -> pa.Schema:
    fields = [pa.field(name, _arrow(tp), nullable=_optional(tp)[1]) for name, tp in _fields(cls)]
    return pa.schema(fields, metadata={_KIND: b"type", _NAME: _name(cls).encode()})


# --- writing ----------------------------------------------------------------------------------------


def _check_json(value: Any) -> None:
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        return
    if isinstance(value, list):
        for item in value:
            _check_json(item)
        return
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        for item in value.values():
            _check_json(item)
        return
    raise TypeError(f"a {type(value).__name__} in a value declared as plain JSON")


_Encode = Callable[["_Writer", Any], Any]


@cache
def _field_encoders(cls: type) -> tuple[tuple[str, _Encode], ...]:
    return tuple((name, _encoder(tp)) for name, tp in _fields(cls))


@cache
def _encoder(tp: Any) -> _Encode:
    """How a value of the declared type `tp` becomes what `pa.array` takes for its Arrow type (made once
    per type: a host's result has some 100,000 values)."""
    base, optional = _optional(tp)
    inner = _base_encoder(base)
    if optional:
        return lambda w, v: None if v is None else inner(w, v)

    def required(w: _Writer, v: Any) -> Any:
        if v is None:
            raise TypeError(f"None where a {_type_text(base)} is declared")
        return inner(w, v)
    return required


def _scalar_check(tp: Any) -> Callable[[Any], bool]:
    """Whether a value reads back as itself from the Arrow type of `tp` (an int in a float column would
    come back a float, a numpy float32 a float64)."""
    if tp is int:
        return lambda v: (type(v) is int or isinstance(v, np.integer))
    if tp is float:
        return lambda v: isinstance(v, float)  # Python's float and numpy's float64
    if tp is bool:
        return lambda v: isinstance(v, (bool, np.bool_))
    return lambda v: type(v) is tp


def _base_encoder(tp: Any) -> _Encode:
    if tp in _SCALARS:
        check = _scalar_check(tp)

        def scalar(w: _Writer, v: Any) -> Any:
            if not check(v):
                raise TypeError(f"a {type(v).__name__} where a {tp.__name__} is declared")
            return v
        return scalar
    if tp is _Json:
        return lambda w, v: _json_text(v)
    if _is_ref(tp):
        return lambda w, v: w.ref(v, tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
        item_tp = _plain(args[0])
        container = tuple if origin is tuple else list
        if item_tp in _SCALARS:  # a list of numbers or names: checked in one pass, handed over as it is
            check = _scalar_check(item_tp)

            def scalars(w: _Writer, v: Any) -> Any:
                if type(v) is not container or not all(map(check, v)):
                    raise TypeError(f"a {type(v).__name__} where a {container.__name__} of {item_tp.__name__} "
                                    "is declared")
                return v
            return scalars
        item = _encoder(item_tp)

        def items(w: _Writer, v: Any) -> Any:
            if type(v) is not container:
                raise TypeError(f"a {type(v).__name__} where a {container.__name__} is declared")
            return [item(w, x) for x in v]
        return items
    if origin is tuple:
        encoders = [(f"f{i}", _encoder(_plain(a))) for i, a in enumerate(args)]

        def fixed(w: _Writer, v: Any) -> Any:
            if type(v) is not tuple or len(v) != len(encoders):
                raise TypeError(f"a {type(v).__name__} where a tuple of {len(encoders)} is declared")
            return {name: enc(w, x) for (name, enc), x in zip(encoders, v)}
        return fixed
    if origin is dict:
        key, value = _encoder(_plain(args[0])), _encoder(_plain(args[1]))

        def mapping(w: _Writer, v: Any) -> Any:
            if not isinstance(v, dict):
                raise TypeError(f"a {type(v).__name__} where a dict is declared")
            return [{"key": key(w, k), "value": value(w, x)} for k, x in v.items()]
        return mapping
    raise TypeError(f"cannot store a value of type {tp}")


def _json_text(value: Any) -> str:
    _check_json(value)
    text = json.dumps(value, allow_nan=True)
    if json.loads(text) != value and not _has_nan(value):
        raise TypeError("a value declared as plain JSON does not read back as itself")
    return text


class _Writer:
    def __init__(self) -> None:
        self.rows: dict[type, list[Any]] = {}
        self.seen: dict[int, int] = {}  # id of a dataclass, frame or array written → its row or number
        self.keep: list[Any] = []  # what `seen` refers to stays alive while writing
        self.tables: list[pa.Table] = []

    def ref(self, value: Any, tp: Any) -> int:
        number = self.seen.get(id(value))
        if number is not None:
            return number
        if tp is pd.DataFrame:
            if not isinstance(value, pd.DataFrame):
                raise TypeError(f"a {type(value).__name__} where a DataFrame is declared")
            number = len(self.tables)
            self.tables.append(None)  # type: ignore[arg-type]  # its place, filled below
            self.tables[number] = _frame_table(value)
        elif tp is np.ndarray:
            if not isinstance(value, np.ndarray):
                raise TypeError(f"a {type(value).__name__} where an array is declared")
            number = len(self.tables)
            self.tables.append(_array_table(value))
        else:
            if type(value) is not tp:
                raise TypeError(f"a {type(value).__name__} where a {tp.__name__} is declared")
            rows = self.rows.setdefault(tp, [])
            number = len(rows)
            rows.append(None)  # its row number is taken before its fields (they may refer back)
            self.seen[id(value)] = number
            self.keep.append(value)
            rows[number] = [encode(self, getattr(value, name)) for name, encode in _field_encoders(tp)]
            return number
        self.seen[id(value)] = number
        self.keep.append(value)
        return number

    def cell(self, value: Any, tp: Any) -> Any:
        return _encoder(tp)(self, value)

    def type_tables(self) -> list[pa.Table]:
        out = []
        for cls, rows in self.rows.items():
            schema = _schema(cls)
            columns = list(zip(*rows)) if rows else [[] for _ in schema]
            arrays = []
            fields = []
            for col, f in zip(columns, schema):
                try:
                    array = pa.array(list(col), type=f.type)
                except OverflowError:
                    # Python ints beyond int64: XLA's program ids are unsigned 64-bit fingerprints.
                    f = f.with_type(_retyped(f.type, pa.int64(), pa.uint64()))
                    try:
                        array = pa.array(list(col), type=f.type)
                    except (pa.ArrowException, OverflowError) as exc:
                        raise TypeError(f"{cls.__name__}.{f.name} holds integers beyond 64 bits ({exc})") from exc
                arrays.append(array)
                fields.append(f)
            schema = pa.schema(fields, metadata=schema.metadata)
            out.append(pa.Table.from_arrays(arrays, schema=schema))
        return out


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value)
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    return False


def _string_dtype(dtype: Any) -> dict | None:
    if isinstance(dtype, pd.StringDtype):
        return {"kind": "string", "storage": dtype.storage, "nan": dtype.na_value is not pd.NA}
    return None


def _all_strings(values: np.ndarray, none: bool) -> bool:
    """Whether an array of objects holds strings only (and None where `none`), in one pass of pandas' C."""
    if pd.api.types.infer_dtype(values, skipna=none) not in ("string", "empty"):
        return False
    missing = values[pd.isna(values)] if len(values) else values
    return all(v is None for v in missing) if none else not len(missing)  # a NaN would come back None


def _frame_table(frame: pd.DataFrame) -> pa.Table:
    index = frame.index
    if not isinstance(index, pd.RangeIndex):
        raise TypeError(f"cannot store a frame indexed by a {type(index).__name__}")
    names = list(frame.columns)
    if not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
        raise TypeError("cannot store a frame whose column names are not distinct strings")
    dtypes, arrays = [], []
    for i, name in enumerate(names):
        values = frame.iloc[:, i]
        dtype = values.dtype
        string = _string_dtype(dtype)
        if string is not None:
            dtypes.append(string)
            arrays.append(pa.array(values.array, type=pa.large_string(), from_pandas=True))
        elif isinstance(dtype, np.dtype) and dtype.kind in "biuf":
            dtypes.append({"kind": "numpy", "dtype": dtype.str})
            arrays.append(pa.array(values.to_numpy()))
        elif isinstance(dtype, np.dtype) and dtype.kind == "O":
            items = values.to_numpy()
            if not _all_strings(items, none=True):
                raise TypeError(f"cannot store column {name!r}: objects other than strings")
            dtypes.append({"kind": "object"})
            arrays.append(pa.array(items, type=pa.large_string()))
        else:
            raise TypeError(f"cannot store column {name!r} of type {dtype}")
    layout = {"columns": str(frame.columns.dtype), "dtypes": dtypes,
              "index": [index.start, index.stop, index.step, index.name], "rows": len(frame)}
    schema = pa.schema([pa.field(f"c{i}", a.type) for i, a in enumerate(arrays)],
                       metadata={_KIND: b"frame", _NAME: json.dumps(names).encode(),
                                 _LAYOUT: json.dumps(layout).encode()})
    return pa.Table.from_arrays(arrays, schema=schema) if arrays else schema.empty_table()


def _array_type(dtype: np.dtype) -> pa.DataType:
    """An array's column: numbers as themselves, an array of objects only when they are strings."""
    return pa.large_string() if dtype.kind == "O" else pa.from_numpy_dtype(dtype)


def _array_table(values: np.ndarray) -> pa.Table:
    if values.dtype.kind not in "biufO":
        raise TypeError(f"cannot store a numpy {values.dtype} array")
    flat = np.ascontiguousarray(values).reshape(-1)
    if values.dtype.kind == "O" and not _all_strings(flat, none=False):
        raise TypeError("cannot store an array of objects other than strings")
    layout = {"dtype": values.dtype.str, "shape": list(values.shape)}
    schema = pa.schema([pa.field("values", _array_type(values.dtype), nullable=False)],
                       metadata={_KIND: b"array", _NAME: b"", _LAYOUT: json.dumps(layout).encode()})
    return pa.Table.from_arrays([pa.array(flat, type=schema.field(0).type)], schema=schema)


def write_tables(tables: list[pa.Table]) -> bytes:
    out = io.BytesIO()
    out.write(MAGIC)
    out.write(_LENGTH.pack(len(tables)))
    for table in tables:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        data = sink.getvalue()
        out.write(_LENGTH.pack(data.size))
        out.write(data)
    return out.getvalue()


def to_tables(value: Any, tp: type) -> list[pa.Table]:
    """`value`, of the declared dataclass type `tp`, as Arrow tables: the value's type's table first
    (the value its row 0), then the other types', then the frames and arrays they refer to by number."""
    writer = _Writer()
    if writer.ref(value, tp) != 0:  # pragma: no cover - the first value written is row 0
        raise AssertionError("the root is not the first row")
    own = writer.type_tables()
    root = next(i for i, t in enumerate(own) if t.schema.metadata[_NAME] == _name(tp).encode())
    own.insert(0, own.pop(root))
    return own + writer.tables


def dumps(value: Any, tp: type) -> bytes:
    """`to_tables` as bytes: the tables' Arrow IPC streams, each after its length."""
    return write_tables(to_tables(value, tp))


# --- reading ----------------------------------------------------------------------------------------


def read_tables(data: bytes | memoryview) -> list[pa.Table]:
    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise ResultError("is not a reportgen result (no magic)")
    at = len(MAGIC)
    try:
        (count,) = _LENGTH.unpack_from(view, at)
        at += _LENGTH.size
        tables = []
        for _ in range(count):
            (size,) = _LENGTH.unpack_from(view, at)
            at += _LENGTH.size
            if at + size > len(view):
                raise ResultError("is truncated")
            tables.append(pa.ipc.open_stream(pa.py_buffer(view[at:at + size])).read_all())
            at += size
    except (struct.error, pa.ArrowException, OSError) as exc:
        raise ResultError(f"is not readable Arrow ({exc})") from exc
    if at != len(view):
        raise ResultError("has bytes after its tables")
    return tables


def _frame(table: pa.Table) -> pd.DataFrame:
    meta = table.schema.metadata or {}
    try:
        names = json.loads(meta[_NAME])
        layout = json.loads(meta[_LAYOUT])
        start, stop, step, index_name = layout["index"]
        dtypes = layout["dtypes"]
        if not (isinstance(names, list) and all(isinstance(n, str) for n in names)
                and len(names) == len(dtypes) == table.num_columns and table.num_rows == layout["rows"]):
            raise ResultError("holds a frame whose layout does not match its columns")
        index = pd.RangeIndex(start, stop, step, name=index_name)
        if len(index) != table.num_rows:
            raise ResultError("holds a frame whose index does not match its rows")
        columns = {}
        for name, dtype, column in zip(names, dtypes, table.columns):
            kind = dtype["kind"]
            if kind == "numpy":
                np_dtype = np.dtype(dtype["dtype"])
                if np_dtype.kind not in "biuf" or column.null_count or column.type != pa.from_numpy_dtype(np_dtype):
                    raise ResultError(f"holds a bad {np_dtype} column")
                columns[name] = column.to_numpy().astype(np_dtype, copy=True)
            elif kind == "object":
                if column.type != pa.large_string():
                    raise ResultError("holds a bad text column")
                items = _strings(column)
                # As a Series of objects: a frame made of an object array would infer strings (pandas 3).
                columns[name] = pd.Series(items, index=index, dtype=object, copy=False)
            elif kind == "string":
                if column.type != pa.large_string():
                    raise ResultError("holds a bad text column")
                string = pd.StringDtype(storage=dtype["storage"], na_value=np.nan if dtype["nan"] else pd.NA)
                columns[name] = string.__from_arrow__(column)  # pandas' own reader of Arrow strings
            else:
                raise ResultError(f"holds a column of unknown kind {kind!r}")
        frame = pd.DataFrame(columns, index=index, columns=pd.Index(names, dtype=layout["columns"]))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, ResultError):
            raise
        raise ResultError(f"holds a malformed frame ({type(exc).__name__}: {exc})") from exc
    return frame


def _strings(column: pa.ChunkedArray) -> np.ndarray:
    """An Arrow text column as numpy objects: str, None where null."""
    items = column.to_numpy(zero_copy_only=False)
    if items.dtype != object:  # pragma: no cover - pyarrow gives objects for text
        raise ResultError("holds a text column that is not text")
    return items


def _array(table: pa.Table) -> np.ndarray:
    try:
        layout = json.loads((table.schema.metadata or {})[_LAYOUT])
        dtype = np.dtype(layout["dtype"])
        shape = tuple(int(s) for s in layout["shape"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ResultError(f"holds a malformed array ({exc})") from exc
    if (dtype.kind not in "biufO" or table.num_columns != 1 or table.column(0).null_count
            or table.column(0).type != _array_type(dtype) or math.prod(shape) != table.num_rows):
        raise ResultError("holds an array that is not what its layout says")
    if dtype.kind == "O":
        return _strings(table.column(0)).reshape(shape)
    return table.column(0).to_numpy().astype(dtype, copy=True).reshape(shape)


class _Reader:
    def __init__(self, tables: list[pa.Table], roots: tuple[Any, ...]):
        self.known = declared_types(roots)
        self.instances: dict[type, list[Any]] = {}
        self.others: list[Any] = []  # frames and arrays, by number
        typed: list[tuple[type, pa.Table]] = []
        for table in tables:
            meta = table.schema.metadata or {}
            kind = meta.get(_KIND)
            if kind == b"type":
                cls = self.known.get(meta.get(_NAME, b"").decode("utf-8", "replace"))
                if cls is None:
                    raise ResultError(f"holds a table of an undeclared type {meta.get(_NAME)!r}")
                if not _same_schema(table.schema, _schema(cls)):
                    raise ResultError(f"holds a {cls.__name__} table of another schema")
                if cls in self.instances:
                    raise ResultError(f"holds two {cls.__name__} tables")
                self.instances[cls] = [cls.__new__(cls) for _ in range(table.num_rows)]
                typed.append((cls, table))
            elif kind == b"frame":
                self.others.append(_frame(table))
            elif kind == b"array":
                self.others.append(_array(table))
            else:
                raise ResultError(f"holds a table of unknown kind {kind!r}")
        self.typed = typed
        self.others_kind = [type(o) for o in self.others]

    def fill(self) -> None:
        """Every instance's fields, read column by column."""
        setter = object.__setattr__  # frozen dataclasses too: instances are built without __init__
        for cls, table in self.typed:
            objects = self.instances[cls]
            for (name, tp), column in zip(_fields(cls), table.columns):
                values = self.column(column, tp)
                for obj, value in zip(objects, values):
                    setter(obj, name, value)

    def column(self, column: pa.ChunkedArray, tp: Any) -> list[Any]:
        base, optional = _optional(tp)
        if not optional and column.null_count:
            raise ResultError(f"holds None where a {_type_text(base)} is declared")
        values = column.to_pylist()
        convert = self.converter(tp)
        return values if convert is None else [convert(v) for v in values]

    def converter(self, tp: Any) -> Callable[[Any], Any] | None:
        """How a value read by Arrow becomes the declared one; None when it already is."""
        base, optional = _optional(tp)
        inner = self._converter(base)
        if optional:
            if inner is None:
                return None
            return lambda v: None if v is None else inner(v)

        def required(v: Any) -> Any:
            if v is None:
                raise ResultError(f"holds None where a {_type_text(base)} is declared")
            return v if inner is None else inner(v)
        return required if not (base in _SCALARS and inner is None) else _not_none

    def _converter(self, tp: Any) -> Callable[[Any], Any] | None:
        if tp in _SCALARS:
            return None
        if tp is _Json:
            return _json_value
        if _is_ref(tp):
            if tp is pd.DataFrame or tp is np.ndarray:
                def other(v: int) -> Any:
                    if not 0 <= v < len(self.others) or self.others_kind[v] is not tp:
                        raise ResultError(f"refers to a missing {tp.__name__}")
                    return self.others[v]
                return other
            objects = self.instances.get(tp, [])

            def row(v: int) -> Any:
                if not 0 <= v < len(objects):
                    raise ResultError(f"refers to a missing {tp.__name__} row")
                return objects[v]
            return row
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is list or (origin is tuple and len(args) == 2 and args[1] is Ellipsis):
            item = self.converter(_plain(args[0]))
            make = tuple if origin is tuple else list
            if item is None:
                return make if origin is tuple else None
            return lambda v: make([item(x) for x in v])
        if origin is tuple:
            items = [self.converter(_plain(a)) for a in args]
            names = [f"f{i}" for i in range(len(args))]
            return lambda v: tuple(v[n] if c is None else c(v[n]) for n, c in zip(names, items))
        if origin is dict:
            key, item = self.converter(_plain(args[0])), self.converter(_plain(args[1]))
            return lambda v: {(e["key"] if key is None else key(e["key"])):
                              (e["value"] if item is None else item(e["value"])) for e in v}
        raise ResultError(f"cannot read a value of type {tp}")


def _not_none(v: Any) -> Any:
    if v is None:
        raise ResultError("holds None where a value is declared")
    return v


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ResultError(f"holds malformed JSON ({exc})") from exc


def from_tables(tables: list[pa.Table], tp: type) -> Any:
    """The value `to_tables` wrote for the declared type `tp`; ResultError when the tables are anything else."""
    if not tables or (tables[0].schema.metadata or {}).get(_NAME) != _name(tp).encode() or tables[0].num_rows < 1:
        raise ResultError(f"does not hold a {tp.__name__}")
    reader = _Reader(tables, (tp,))
    try:
        reader.fill()
    except (TypeError, KeyError, AttributeError) as exc:
        raise ResultError(f"holds malformed values ({type(exc).__name__}: {exc})") from exc
    return reader.instances[tp][0]


def loads(data: bytes | memoryview, tp: type) -> Any:
    """The value `dumps` wrote for the declared type `tp`; ResultError when the bytes are anything else."""
    return from_tables(read_tables(data), tp)


# --- a host's whole result ------------------------------------------------------------------------


@lru_cache(maxsize=2)
def _outcome_types(host_outcome: type) -> tuple[type, type, tuple[str, ...]]:
    """(the stored form of a host's result, its parts' stored form, the slugs): `HostOutcome.parts` holds
    each section's part under its slug, declared by the section; stored, it is a dataclass of one optional
    field per section."""

    declared = [(s.slug, s.declared_part_type()) for s in SECTIONS]
    slugs = tuple(slug for slug, tp in declared if tp is not None)
    parts = dataclasses.make_dataclass(
        "HostParts", [(slug, typing.Optional[tp], None) for slug, tp in declared if tp is not None])  # noqa: UP045
    parts.__module__ = __name__
    hints = typing.get_type_hints(host_outcome)
    fields = [(f.name, parts if f.name == "parts" else hints[f.name]) for f in dataclasses.fields(host_outcome)]
    fields.append(("part_order", list[str]))
    stored = dataclasses.make_dataclass("StoredOutcome", fields)
    stored.__module__ = __name__
    return stored, parts, slugs


def outcome_schema(host_outcome: type) -> str:
    """The schema of a host's result: `SCHEMA_VERSION`, every section's `part_version` and the hash of
    every declared type (what the rebuild cache keys its entries by, with the input's content)."""
    stored, _, _ = _outcome_types(host_outcome)
    versions = ",".join(f"{s.slug}={s.part_version}" for s in SECTIONS)
    return hashlib.sha256(f"{SCHEMA_VERSION};{versions};{schema_fingerprint((stored,))}".encode()).hexdigest()


def outcome_bytes(outcome: Any) -> bytes:
    """A `HostOutcome` as the bytes a worker sends and the cache keeps."""
    host_outcome = type(outcome)
    stored, parts_type, slugs = _outcome_types(host_outcome)
    unknown = set(outcome.parts) - set(slugs)
    if unknown:
        raise TypeError(f"parts of sections that declare no part type: {sorted(unknown)}")
    values = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(host_outcome)}
    values["parts"] = parts_type(**outcome.parts)
    values["part_order"] = list(outcome.parts)
    return dumps(stored(**values), stored)


def outcome_from_bytes(data: bytes | memoryview, host_outcome: type) -> Any:
    """The `HostOutcome` of `outcome_bytes`; ResultError when the bytes are anything else."""
    stored, _, slugs = _outcome_types(host_outcome)
    value = loads(data, stored)
    parts = value.parts
    if len(set(value.part_order)) != len(value.part_order) or set(value.part_order) != {
            slug for slug in slugs if getattr(parts, slug) is not None}:
        raise ResultError("lists other parts than it holds")
    fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(host_outcome) if f.name != "parts"}
    return host_outcome(parts={slug: getattr(parts, slug) for slug in value.part_order}, **fields)
