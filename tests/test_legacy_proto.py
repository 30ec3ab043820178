"""`legacy_tools.proto` and the committed `legacy_tools_pb2.py` describe the
same schema, and its field numbers are XProf's (overview_page.proto,
input_pipeline.proto, tf_stats.proto): the older per-tool files were written
with those numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from reportgen.loaders.proto import legacy_tools_pb2
from tests.conftest import REPO

PROTO_DIR = REPO / "reportgen" / "loaders" / "proto"
REGENERATE = (
    "python -m grpc_tools.protoc -I reportgen/loaders/proto --python_out=reportgen/loaders/proto "
    "reportgen/loaders/proto/legacy_tools.proto"
)


def test_generated_module_matches_proto_file(tmp_path):
    protoc = pytest.importorskip("grpc_tools.protoc", reason="grpcio-tools is a test dependency")
    descriptor_set = tmp_path / "legacy.desc"
    # any.proto ships with grpcio-tools; `python -m grpc_tools.protoc` adds this path itself.
    well_known = Path(protoc.__file__).parent / "_proto"
    status = protoc.main(["grpc_tools.protoc", f"-I{PROTO_DIR}", f"-I{well_known}",
                          f"--descriptor_set_out={descriptor_set}",
                          str(PROTO_DIR / "legacy_tools.proto")])
    assert status == 0
    (regenerated,) = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set.read_bytes()).file
    for message in regenerated.message_type:
        for nested in [message, *message.nested_type]:
            for f in nested.field:
                f.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(legacy_tools_pb2.DESCRIPTOR.serialized_pb)
    assert committed == regenerated, f"legacy_tools_pb2.py is stale; regenerate it: {REGENERATE}"


# (message, field) → XProf's field number.
XPROF_NUMBERS = {
    ("OverviewPage", "input_analysis"): 2, ("OverviewPage", "analysis"): 3,
    ("OverviewPage", "recommendation"): 4, ("OverviewPage", "run_environment"): 6,
    ("OverviewPage", "diagnostics"): 8,
    ("OverviewPageAnalysis", "device_idle_time_percent"): 2, ("OverviewPageAnalysis", "host_idle_time_percent"): 3,
    ("OverviewPageAnalysis", "top_device_ops"): 4, ("OverviewPageAnalysis", "device_duty_cycle_percent"): 17,
    ("OverviewPageRecommendation", "statement"): 2, ("OverviewPageRecommendation", "input_tips"): 11,
    ("OverviewPageRunEnvironment", "device_type"): 4, ("OverviewPageRunEnvironment", "device_core_count"): 5,
    ("OverviewPageRunEnvironment", "replica_count"): 9,
    ("InputPipelineAnalysisResult", "step_time_summary"): 2, ("InputPipelineAnalysisResult", "step_details"): 4,
    ("InputPipelineAnalysisResult", "input_time_breakdown"): 5,
    ("InputPipelineAnalysisResult", "input_op_details"): 6, ("InputPipelineAnalysisResult", "hardware_type"): 9,
    ("InputPipelineAnalysisResult", "input_percent"): 11, ("InputPipelineAnalysisResult", "tag"): 16,
    ("PerGenericStepDetails", "host_wait_input_ms"): 11, ("PerGenericStepDetails", "step_name"): 14,
    ("PerGenericStepDetails", "host_prepare_ms"): 9, ("PerGenericStepDetails", "device_collectives_ms"): 13,
    ("GenericStepTimeBreakdown", "input_ms_summary"): 11, ("GenericStepTimeBreakdown", "host_prepare_ms_summary"): 7,
    ("BottleneckAnalysis", "input_statement"): 2, ("BottleneckAnalysis", "input_percent"): 7,
    ("InputTimeBreakdown", "unclassified_non_enqueue_us"): 5, ("InputOpDetails", "category"): 7,
    ("TfStatsDatabase", "without_idle"): 5, ("TfStatsDatabase", "device_type"): 6,
    ("TfStatsRecord", "total_self_time_in_us"): 8, ("TfStatsRecord", "bound_by"): 17,
    ("TfStatsRecord", "host_cumulative_total_self_time_as_fraction"): 13,
    ("KernelStatsDb", "reports"): 1, ("KernelReport", "total_duration_ns"): 7,
    ("KernelReport", "is_kernel_using_tensor_core"): 10, ("KernelReport", "op_name"): 12,
    ("KernelReport", "occurrences"): 13,
}


def test_field_numbers_are_xprofs():
    fields = {
        (m.name, f.name): f.number
        for m in descriptor_pb2.FileDescriptorProto.FromString(legacy_tools_pb2.DESCRIPTOR.serialized_pb).message_type
        for f in m.field
    }
    assert {key: fields.get(key) for key in XPROF_NUMBERS} == XPROF_NUMBERS


def test_own_package_name():
    assert legacy_tools_pb2.DESCRIPTOR.package == "reportgen.legacy"
