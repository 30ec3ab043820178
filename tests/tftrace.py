"""Cloud TPU `.trace` files (TensorFlow's `Trace` proto) as the Chrome events they should become."""

from __future__ import annotations

from reportgen.loaders.proto import trace_events_pb2 as tpb


def chrome_events_of(trace: tpb.Trace) -> list[dict]:
    """The conversion one event at a time, as TensorBoard wrote it but with exact integer division
    (its `/ 1e6` rounds twice past 2^53 ps)."""
    out = []
    for e in trace.trace_events:
        event = {"pid": e.device_id, "tid": e.resource_id, "name": e.name, "ts": e.timestamp_ps / 1_000_000}
        if e.duration_ps:
            event.update(ph="X", dur=e.duration_ps / 1_000_000)
        else:
            event.update(ph="i", s="t")
        if e.args:
            event["args"] = dict(e.args)
        out.append(event)
    return out
