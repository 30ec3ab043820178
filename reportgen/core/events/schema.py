"""Well-known names of the XSpace schema that the core reads.

Plane, line and stat names, derived line ids and the host event types are
XProf's (`docs/xprof/xspace.md` §4–7); event types are small integer codes
local to reportgen, computed once per event metadata row.
"""

from __future__ import annotations

import re

HOST_PLANE = "/host:CPU"
GPU_PLANE_PREFIX = "/device:GPU:"
TPU_PLANE_PREFIX = "/device:TPU:"
METADATA_PLANE = "/host:metadata"
TPU_CORE_RE = re.compile(r"^/device:TPU:([0-9]*)$")
SPARSE_CORE_RE = re.compile(r"^/device:TPU:[0-9]+ SparseCore(?: [a-zA-Z]+)? ([0-9]+)$")

STEP_LINE = "Steps"
SPARSE_CORE_STEP_LINE = "Sparse Core Steps"
XLA_MODULE_LINE = "XLA Modules"
SPARSE_CORE_MODULE_LINE = "Sparse Core Modules"
XLA_OP_LINE = "XLA Ops"
FRAMEWORK_OP_LINE = "Framework Ops"
SPARSE_CORE_OP_LINE = "Sparse Core Ops"
OP_LINE_NAMES = (XLA_OP_LINE, FRAMEWORK_OP_LINE, SPARSE_CORE_OP_LINE)

# Derived ("fake") line ids start at 0xdeadbeef stored as a signed 32-bit int.
DERIVED_MIN = -559038737
DERIVED_MAX = DERIVED_MIN + 389
THREAD_ID_STEP_INFO = DERIVED_MIN

# The SparseCore core ids in step data are offset by this constant.
SPARSE_CORE_INDEX_START = 1_000_000


# --- event types --------------------------------------------------------------
# Codes for the host event types the core reacts to. OTHER covers every other
# name in XProf's table as well as names outside it.
UNTYPED = 0
OTHER = 1
TRACE_CONTEXT = 2
FUNCTION_RUN = 3
SESSION_RUN = 4
RUN_GRAPH = 5
EXECUTOR_STATE_PROCESS = 6
EAGER_EXECUTE = 7
TF_OP_RUN = 8
ITERATOR = 9
ITERATOR_GET_NEXT = 10
ITERATOR_GET_NEXT_AS_OPTIONAL = 11
KERNEL_LAUNCH = 12
KERNEL_EXECUTE = 13
TF_DATA_CAPTURED_FUNCTION = 14
TF_LOOP_OP = 15

NAMED_EVENT_TYPES = {
    "TraceContext": TRACE_CONTEXT,
    "FunctionRun": FUNCTION_RUN,
    "SessionRun": SESSION_RUN,
    "RunGraph": RUN_GRAPH,
    "ExecutorState::Process": EXECUTOR_STATE_PROCESS,
    "EagerExecute": EAGER_EXECUTE,
    "TfOpRun": TF_OP_RUN,
    "Iterator": ITERATOR,
    "Iterator::Prefetch::Generator": ITERATOR,
    "IteratorGetNextOp::DoCompute": ITERATOR_GET_NEXT,
    "IteratorGetNextAsOptionalOp::DoCompute": ITERATOR_GET_NEXT_AS_OPTIONAL,
    "KernelLaunch": KERNEL_LAUNCH,
    "KernelExecute": KERNEL_EXECUTE,
    "InstantiatedCapturedFunction::Run": TF_DATA_CAPTURED_FUNCTION,
    "InstantiatedCapturedFunction::RunWithBorrowedArgs": TF_DATA_CAPTURED_FUNCTION,
    "InstantiatedCapturedFunction::RunInstantiated": TF_DATA_CAPTURED_FUNCTION,
    "InstantiatedCapturedFunction::RunAsync": TF_DATA_CAPTURED_FUNCTION,
    "ParallelForOp": TF_LOOP_OP,
    "ForeverOp": TF_LOOP_OP,
    "WhileOp-EvalCond": TF_LOOP_OP,
    "WhileOp-StartBody": TF_LOOP_OP,
    "ForOp": TF_LOOP_OP,
}

# The rest of XProf's host event type table: typed, but not specially handled.
OTHER_HOST_EVENT_NAMES = frozenset(
    """UnknownHostEventType RunGraphDone ExecutorDoneCallback MemoryAllocation MemoryDeallocation
    RemotePerfCounter PrefetchProduce PrefetchConsume ParallelInterleaveProduce ParallelInterleaveConsume
    ParallelInterleaveInitializeInput ParallelMapProduce ParallelMapConsume MapAndBatchProduce
    MapAndBatchConsume ParseExampleProduce ParseExampleConsume ParallelBatchProduce ParallelBatchConsume
    BatchingSessionRun ProcessBatch BrainSessionRun ConcatInputTensors MergeInputTensors
    ScheduleWithoutSplit ScheduleWithSplit ScheduleWithEagerSplit ASBSQueue::Schedule
    OrbaxServing::ProcessBatch OrbaxServing::ConcatInputBuffers TfrtModelRun ServingModelRun
    EnqueueRequestLocked RunProgramRequest HostCallbackRequest TransferH2DRequest
    TransferPreprocessedH2DRequest TransferD2HRequest OnDeviceSendRequest OnDeviceRecvRequest
    OnDeviceSendRecvLocalRequest CustomWait OnDeviceSendRequestMulti OnDeviceRecvRequestMulti
    PjrtAsyncWait DoEnqueueProgram DoEnqueueContinuationProgram WriteHbm ReadHbm TpuExecuteOp
    CompleteCallbacks TPUPartitionedCallOp-InitializeVarOnTPU TPUPartitionedCallOp-ExecuteRemote
    TPUPartitionedCallOp-ExecuteLocal Linearize Delinearize TransferBufferFromDevice-FastPath
    tpu::System::TransferToDevice=>IssueEvent tpu::System::TransferToDevice=>IssueEvent=>Done
    tpu::System::TransferFromDevice=>IssueEvent tpu::System::TransferFromDevice=>IssueEvent=>Done
    tpu::System::Execute""".split()
)

# Root levels XProf's preprocessing sets (`_r`, overriding any stored value) on
# serving and batching events before grouping (op_stats.md §1.1).
ROOT_MARKER_LEVELS = {"ProcessBatch": 2, "OrbaxServing::ProcessBatch": 2, "BatchingSessionRun": 1}

# Roots of these types do not name their group after themselves.
IMPLICIT_ROOT_TYPES = (FUNCTION_RUN, SESSION_RUN, RUN_GRAPH, EXECUTOR_STATE_PROCESS)
