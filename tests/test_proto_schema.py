"""`xplane.proto` and the committed `xplane_pb2.py` describe the same schema.

The generated module is committed so that installing reportgen needs no
protobuf compiler; this test regenerates it from the `.proto` and fails when
the two drift apart (edit the `.proto`, then regenerate with the command in
the assertion message).
"""

from __future__ import annotations

import ast

import pytest
from google.protobuf import descriptor_pb2

from reportgen.loaders.proto import xplane_pb2
from tests.conftest import REPO

PROTO_DIR = REPO / "reportgen" / "loaders" / "proto"
REGENERATE = (
    "python -m grpc_tools.protoc -I reportgen/loaders/proto --python_out=reportgen/loaders/proto "
    "reportgen/loaders/proto/xplane.proto"
)


def _protoc(*args: str) -> None:
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is a test dependency")
    status = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", *args, str(PROTO_DIR / "xplane.proto")])
    assert status == 0, f"protoc failed on {PROTO_DIR / 'xplane.proto'}"


def test_generated_descriptor_matches_proto_file(tmp_path):
    descriptor_set = tmp_path / "xplane.desc"
    _protoc(f"--descriptor_set_out={descriptor_set}")
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes()).file
    assert [f.name for f in files] == ["xplane.proto"]
    regenerated = files[0]
    # Descriptor sets carry json_name; the copy protoc embeds in Python modules does not.
    for message in regenerated.message_type:
        for nested in [message, *message.nested_type]:
            for f in nested.field:
                f.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(xplane_pb2.DESCRIPTOR.serialized_pb)
    assert committed == regenerated, f"xplane_pb2.py is stale; regenerate it: {REGENERATE}"


def test_regenerated_module_embeds_the_same_descriptor(tmp_path):
    """The Python module protoc writes today carries the committed descriptor bytes."""
    _protoc(f"--python_out={tmp_path}")
    generated = (tmp_path / "xplane_pb2.py").read_text()
    committed = (PROTO_DIR / "xplane_pb2.py").read_text()

    def serialized(source: str) -> bytes:
        line = next(x for x in source.splitlines() if "AddSerializedFile(" in x)
        literal = line.split("AddSerializedFile(", 1)[1].rsplit(")", 1)[0]
        return ast.literal_eval(literal)

    assert serialized(committed) == serialized(generated), f"xplane_pb2.py is stale; regenerate it: {REGENERATE}"


def test_schema_field_numbers_are_the_profilers():
    """Spot-check the wire contract that the decoder's walker hard-codes."""
    fields = {
        (m.name, f.name): f.number
        for m in descriptor_pb2.FileDescriptorProto.FromString(xplane_pb2.DESCRIPTOR.serialized_pb).message_type
        for f in m.field
    }
    assert fields[("XSpace", "planes")] == 1 and fields[("XSpace", "hostnames")] == 4
    assert fields[("XPlane", "lines")] == 3 and fields[("XPlane", "stats")] == 6
    assert (fields[("XLine", "timestamp_ns")], fields[("XLine", "display_id")]) == (3, 10)
    assert (fields[("XEvent", "offset_ps")], fields[("XEvent", "num_occurrences")]) == (2, 5)
    assert (fields[("XStat", "double_value")], fields[("XStat", "ref_value")]) == (2, 7)
