"""A host's result round-trips through its declared format exactly, and nothing but that format is read."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from reportgen.core.ops.op_stats import HostOpStats
from reportgen.loaders.logdir import HostFile
from reportgen.pipeline import result
from reportgen.pipeline.host_stage import HostOutcome, HostTask, outcome_from_bytes, process_host
from reportgen.pipeline.result import ResultError

SAMPLE = Path(__file__).resolve().parent.parent / "reportgen" / "sample" / "plugins" / "profile"
TPU = Path(__file__).resolve().parent.parent.parent / "shared" / "captures" / "logdir" / "plugins" / "profile" / \
    "tpu_inference_2" / "tpu_inference_2.xplane.pb"


def _outcome(path: Path, tmp: Path) -> HostOutcome:
    task = HostTask(index=0, run="run", host=HostFile(host=path.stem.split(".")[0], path=str(path),
                                                        size=path.stat().st_size))
    outcome = process_host(task, str(tmp))
    assert outcome.error is None, outcome.error
    return outcome


@pytest.fixture(scope="module")
def sample_outcome(tmp_path_factory) -> HostOutcome:
    return _outcome(SAMPLE / "tf_keras_input_bound" / "vm.xplane.pb", tmp_path_factory.mktemp("host"))


def assert_same(a, b, path: str = "outcome") -> None:
    """Equal values of equal types, frames with their dtypes, arrays with theirs."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} became {type(b).__name__}"
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=path)
        assert a.columns.dtype == b.columns.dtype, path
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and a != a:
        assert b != b, path
    else:
        assert a == b, f"{path}: {a!r} became {b!r}"


def test_a_host_result_round_trips_exactly_and_shared_parts_stay_one_object(sample_outcome):
    data = result.outcome_bytes(sample_outcome)
    back = outcome_from_bytes(data)
    assert_same(sample_outcome, back)
    assert list(back.parts) == list(sample_outcome.parts)
    # The overview, TF-stats and pod-viewer parts are the host's one OpStats: stored once, read back as one.
    assert sample_outcome.parts["overview"] is sample_outcome.parts["tf_stats"]
    assert back.parts["overview"] is back.parts["tf_stats"] is back.parts["pod_viewer"]
    assert isinstance(back.parts["overview"], HostOpStats)
    # What a worker sends its parent: the same bytes, through pickle's protocol.
    assert_same(sample_outcome, pickle.loads(pickle.dumps(sample_outcome)))


@pytest.mark.skipif(not TPU.is_file(), reason="the shared captures are absent")
def test_a_tpu_hosts_result_round_trips_exactly(tmp_path):
    """HLO ops (fusions nest ops of their own type), module graphs, memory viewer arrays and unsigned
    program ids: the richest result of the shared captures."""
    outcome = _outcome(TPU, tmp_path)
    assert_same(outcome, outcome_from_bytes(result.outcome_bytes(outcome)))


def _tables(data: bytes) -> list[pa.Table]:
    return result.read_tables(data)


def _named(tables: list[pa.Table], name: str) -> int:
    return next(i for i, t in enumerate(tables) if (t.schema.metadata or {}).get(b"reportgen.name") == name.encode())


def _with_column(table: pa.Table, index: int, values: pa.Array) -> pa.Table:
    field = table.schema.field(index).with_type(values.type).with_nullable(True)
    return table.set_column(index, field, values)


def _broken(data: bytes, name: str) -> list[bytes]:
    """Well-formed Arrow that is not what the declared types say, one defect each."""
    tables = _tables(data)
    summary = _named(tables, "reportgen.sections.base.HostSummary")
    table = tables[summary]
    rows = table.num_rows
    cases = []

    def case(new: pa.Table) -> None:
        changed = list(tables)
        changed[summary] = new.replace_schema_metadata(table.schema.metadata)
        cases.append(result.write_tables(changed))

    case(table.append_column("extra", pa.array([0] * rows)))  # a column the type does not declare
    case(_with_column(table, 0, pa.array([None] * rows, type=pa.large_string())))  # None in a str field
    case(_with_column(table, 2, pa.array(["1"] * rows, type=pa.large_string())))  # text in an int field
    outcome = tables[0]
    summary_column = outcome.schema.get_field_index("summary")
    bad_row = pa.array([rows + 5] * outcome.num_rows, type=pa.int64())
    changed = list(tables)
    changed[0] = outcome.set_column(summary_column, outcome.schema.field(summary_column), bad_row)
    cases.append(result.write_tables(changed))  # a reference to a row that is not there
    cases.append(result.write_tables(tables[1:]))  # the root is not first
    cases.append(result.write_tables([*tables, tables[summary]]))  # a type's table twice
    return cases


def test_anything_but_the_declared_schema_is_refused(sample_outcome):
    data = result.outcome_bytes(sample_outcome)
    defects = [b"", b"not Arrow at all", data[:len(data) // 2], data + b"\0", result.MAGIC + b"\xff" * 8,
               *_broken(data, "summary")]
    for number, bad in enumerate(defects):
        with pytest.raises(ResultError):
            outcome_from_bytes(bad)
            pytest.fail(f"defect {number} was read")


def test_a_frames_layout_is_checked(sample_outcome):
    data = result.outcome_bytes(sample_outcome)
    tables = _tables(data)
    frame = next(i for i, t in enumerate(tables) if t.schema.metadata[b"reportgen.kind"] == b"frame"
                 and b'"numpy"' in t.schema.metadata[b"reportgen.layout"])
    meta = dict(tables[frame].schema.metadata)
    for old, new in ((b'"kind": "numpy"', b'"kind": "object"'), (b'"kind": "numpy"', b'"kind": "pickle"'),
                     (b'"rows": ', b'"rows": 1')):
        changed = list(tables)
        changed[frame] = tables[frame].replace_schema_metadata(
            {**meta, b"reportgen.layout": meta[b"reportgen.layout"].replace(old, new, 1)})
        with pytest.raises(ResultError):
            outcome_from_bytes(result.write_tables(changed))


def test_values_that_would_not_read_back_as_themselves_are_not_written(sample_outcome):
    wrong_part = dataclasses.replace(sample_outcome, parts={**sample_outcome.parts, "overview": "text"})
    with pytest.raises(TypeError, match="where a HostOpStats is declared"):
        result.outcome_bytes(wrong_part)
    undeclared = dataclasses.replace(sample_outcome, parts={**sample_outcome.parts, "no_such_tool": 1})
    with pytest.raises(TypeError, match="no_such_tool"):
        result.outcome_bytes(undeclared)
    stats = sample_outcome.parts["overview"]
    as_int = dataclasses.replace(stats, mxu_utilization_percent=1)  # read back, it would be 1.0
    with pytest.raises(TypeError, match="where a float is declared"):
        result.dumps(as_int, HostOpStats)
    frame = stats.host_db.metrics.set_index("name")
    with pytest.raises(TypeError, match="indexed by"):
        result.dumps(dataclasses.replace(stats, host_db=dataclasses.replace(stats.host_db, metrics=frame)),
                     HostOpStats)
