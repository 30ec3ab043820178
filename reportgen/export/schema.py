"""XProf's names and numbers for the trace viewer (docs/xprof/trace_viewer.md, xspace.md).

Only constants live here, so the mapping code reads as the rules it applies.
"""

from __future__ import annotations

# --- process ids (trace_viewer@) -------------------------------------------------
# XProf numbers the hosts of a session 1, 2, …; each host's pids are offset by
# 1000 × its number. A host exported on its own is host 1, as in XProf's per-host
# output, so its pids read the same as there (host threads 1701, GPU:1 1002, …).
PID_HOST_OFFSET = 1000
HOST_THREADS_PID = 701  # kHostThreadsDeviceId
FIRST_DEVICE_PID = 1  # kFirstDeviceId (+ plane id)
LAST_DEVICE_PID = 500  # kLastDeviceId: larger pids fall back to the first one
FIRST_CUSTOM_PID = 501  # kFirstCustomPlaneDeviceId (+ plane id)

HOST_THREADS_PLANE = "/host:CPU"
GPU_PLANE_PREFIX = "/device:GPU:"
TPU_PLANE_PREFIX = "/device:TPU:"
CUSTOM_PLANE_PREFIX = "/device:CUSTOM:"

# Planes that XProf treats as host planes (IsHostPlane); every other plane is a
# device plane for the direction of GPU launch flows.
HOST_PLANE_NAMES = frozenset(
    {"/host:CPU", "/host:CPUs", "/host:tfstreamz", "/host:metadata", "/host:syscalls", "/host:python-tracer"}
)
HOST_PLANE_PREFIXES = ("/device:CUSTOM:", "/custom:")

COUNTER_LINE = "_counters_"  # its events become counter samples
SKIPPED_LINE_PREFIX = "counters_"  # lines XProf leaves out

# --- events ------------------------------------------------------------------------
# IsInternalEvent: never shown in the trace viewer.
INTERNAL_EVENTS = frozenset(
    {
        "MemoryAllocation",
        "MemoryDeallocation",
        "PrefetchProduce",
        "PrefetchConsume",
        "ParallelInterleaveProduce",
        "ParallelInterleaveConsume",
        "ParallelInterleaveInitializeInput",
        "ParallelMapProduce",
        "ParallelMapConsume",
        "MapAndBatchProduce",
        "MapAndBatchConsume",
        "ParseExampleProduce",
        "ParseExampleConsume",
    }
)
MAX_LONG_NAME = 10000
LONG_NAME_SUFFIX = "...<truncated>"

THREADPOOL_START_REGION = "ThreadpoolListener::StartRegion"
THREADPOOL_STOP_REGION = "ThreadpoolListener::StopRegion"
THREADPOOL_REGION = "ThreadpoolListener::Region"

# --- stats -------------------------------------------------------------------------
# IsInternalStat: kept out of the event's args.
INTERNAL_STATS = frozenset(
    {"kernel_details", "_pt", "_p", "_ct", "_c", "_r", "flops", "bytes_accessed", "program_id", "symbol_id"}
)
STAT_GROUP_ID = "group_id"
STAT_STEP_NAME = "step_name"
STAT_FLOW = "flow"
STAT_IS_ASYNC = "_a"
STAT_CORRELATION_ID = "correlation_id"
STAT_PRODUCER_TYPE = "_pt"
STAT_PRODUCER_ID = "_p"
STAT_CONSUMER_TYPE = "_ct"
STAT_CONSUMER_ID = "_c"
STAT_IS_ROOT = "_r"
STAT_STEP_NUM = "step_num"
STAT_ITER_NUM = "iter_num"

# Every event stat the mapping reads (selected from the capture in one pass).
TRACE_STAT_NAMES = (
    STAT_GROUP_ID, STAT_STEP_NAME, STAT_FLOW, STAT_IS_ASYNC, STAT_CORRELATION_ID, STAT_PRODUCER_TYPE,
    STAT_PRODUCER_ID, STAT_CONSUMER_TYPE, STAT_CONSUMER_ID, STAT_IS_ROOT, STAT_STEP_NUM, STAT_ITER_NUM,
    "id", "request_id", "queue_addr", "device_ordinal", "queue_id", "run_id", "core_type",
)

# --- flows -------------------------------------------------------------------------
# ContextType → the "cat" XProf writes (GetContextTypeString); generic and
# legacy write none.
CONTEXT_GENERIC = 0
CONTEXT_LEGACY = 1
CONTEXT_TF_EXECUTOR = 2
CONTEXT_TPU_STREAM = 11
CONTEXT_TPU_LAUNCH = 12
CONTEXT_GPU_LAUNCH = 9
CONTEXT_THREADPOOL_EVENT = 15
LAST_CONTEXT_TYPE = 17
CONTEXT_NAMES = {
    0: "",
    1: "",
    2: "tf_exec",
    3: "tfrt_exec",
    4: "batch_sched",
    5: "PjRt",
    6: "as_batch_sched",
    7: "tfrt_rt",
    8: "tpu_embed",
    9: "gpu_launch",
    10: "batcher",
    11: "tpu_stream",
    12: "tpu_launch",
    13: "pathways_exec",
    14: "pjrt_library_call",
    15: "threadpool_event",
    16: "jax_serving_exec",
    17: "sc_offload",
}

FLOW_NONE = 0
FLOW_IN = 1
FLOW_OUT = 2
FLOW_IN_OUT = 3

# Lines XProf derives while loading a capture (derived timeline, grouping):
# they are not in the file. Thread ids of derived lines start here.
DERIVED_TID_MIN = 3735928559  # (uint32) kThreadIdDerivedMin
