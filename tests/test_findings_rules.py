"""Every findings rule on captures built in code: where it fires, with the numbers it must give, and where it
must stay silent. Captures go through the build's host stage and combination (tests/findings_run.py); the
shared captures' findings are in tests/test_findings_site.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reportgen.core.events.schema import DERIVED_MIN
from reportgen.core.findings.model import SEVERITIES, Finding, ordered, severity_for
from reportgen.core.findings.registry import RULE_IDS, evaluate
from tests.conftest import REPO
from tests.findings_run import by_id, evidence, run_findings
from tests.hlo_builder import F32, array, sample_module
from tests.xspace import Space, memory_event

US = 1_000_000  # ps
MS = 1_000 * US


def findings(tmp_path: Path, *spaces: Space, names: tuple[str, ...] = ()) -> dict[str, Finding]:
    hosts = {(names[i] if names else s.host): s for i, s in enumerate(spaces)}
    found, _ = run_findings(tmp_path, hosts)
    return by_id(found)


# --- captures ------------------------------------------------------------------------------------------------

def cpu_steps(steps=5, step_us=100, input_us=0, compute_us=100, durations=None, compile_us=0, eager=False,
              hostname="cpu") -> Space:
    """A CPU capture: `steps` Keras-style steps on the Python thread, each waiting `input_us` for its batch then
    computing `compute_us` (the rest of the step is unattributed), with optional compilation inside."""
    space = Space((hostname,))
    line = space.plane("/host:CPU", 0).line(1, "python")
    t = 0
    for k in range(steps):
        step = (durations[k] if durations else step_us) * US
        line.event("train", t, step, _r=1, step_num=k + 1)
        at = t + US
        if input_us:
            line.event("IteratorGetNextAsOptional", at, input_us * US)
            at += input_us * US
        if compile_us:
            line.event("backend_compile", at, compile_us * US)
            at += compile_us * US
        if compute_us:
            duration = min(compute_us * US, t + step - at)
            if eager:  # run op by op from Python: TF's EagerExecute around the op
                line.event("EagerExecute", at, duration, is_func=0)
            line.event("dense/MatMul:MatMul", at, duration)
        t += step + 10 * US
    return space


def gpu_steps(steps=3, step_us=1000, kernels=((100, 800),), kernel="volta_sgemm_128x64_nn", launches=(),
              host_ops=(), copies=(), syncs=(), gpus=1, nccl=(), tf_op="model/dense/MatMul:MatMul",
              kernel_repeat=1, host_op="model/cast:Cast") -> Space:
    """A GPU capture of `steps` steps on the Python thread: per step, kernels at (offset µs, duration µs) on
    each GPU (`kernel_repeat` times back to back, 1 µs apart), each launched from that thread 1 µs before it
    starts (correlation ids join them to the step); extra launch calls and host ops at (offset, duration);
    copies (offset, duration, memcpy_details), `nccl` kernels and synchronisation calls (offset, duration)."""
    space = Space(("gpuhost",))
    py = space.plane("/host:CPU", plane_id=0).line(1, "python")
    streams = [space.gpu(g).line(7, "Stream #7(Compute)") for g in range(gpus)]
    correlation = 0
    details = "regs:32 static_shared:0 dynamic_shared:0 grid:1,1,1 block:1,1,1 occ_pct:50"
    for k in range(steps):
        base = k * (step_us + 200) * US
        py.event("train", base, step_us * US, _r=1, step_num=k)
        device = []  # (start, duration, name, stats) on every GPU
        for offset, duration in kernels:
            for r in range(kernel_repeat):
                device.append((base + (offset + r * (duration + 1)) * US, duration * US, kernel,
                               {"tf_op": tf_op, "kernel_details": details}))
        device += [(base + offset * US, duration * US, "ncclAllReduceRingLLKernel", {}) for offset, duration in nccl]
        device += [(base + offset * US, duration * US, "MemcpyH2D", {"memcpy_details": text})
                   for offset, duration, text in copies]
        for start, duration, name, stats in sorted(device):
            for stream in streams:
                correlation += 1
                py.event("cudaLaunchKernel", start - US, US // 2, correlation_id=correlation)
                stream.event(name, start, duration, correlation_id=correlation, **stats)
        for offset, duration in launches:
            correlation += 1
            py.event("cudaLaunchKernel", base + offset * US, duration * US, correlation_id=correlation)
        for offset, duration in host_ops:
            py.event(host_op, base + offset * US, duration * US)
        for offset, duration in syncs:
            py.event("cudaStreamSynchronize", base + offset * US, duration * US)
    return space


def tpu_core(space: Space, ops, steps: int | None = 3, program_id=7, modules=(), plane_id=5) -> Space:
    """One TensorCore: per step (or per program run without steps) the ops (name, category, offset µs,
    duration µs) on its `XLA Ops` line; `modules`: program runs (name, begin µs, duration µs) on `XLA Modules`."""
    name = b"tpuhost"
    plane = space.plane(f"/device:TPU:{plane_id - 5}", plane_id, stats={
        "core_details": bytes([0x0A, len(name)]) + name, "peak_teraflops_per_second": 100.0,
        "peak_hbm_bw_gigabytes_per_second": 1000.0, "device_type_string": "TPU test"})
    step_line = plane.line(1, "Steps") if steps else None
    op_line = plane.line(2, "XLA Ops")
    for symbol, (op, category, _, _) in enumerate(ops, start=1):
        plane.metadata(op, program_id=program_id, symbol_id=symbol, hlo_category=category, flops=0,
                       bytes_accessed=100, tf_op="jit(f)/op:")
    # Each step (or each program run, or once) runs the ops from its start.
    bases = [i * 1_000 * US for i in range(steps)] if steps else [b * US for _, b, _ in modules] or [0]
    for i, base in enumerate(bases):
        if step_line is not None:
            step_line.event(str(i), base, 900 * US)
        for op, _, offset, duration in ops:
            op_line.event(op, base + offset * US, duration * US)
    if modules:
        module_line = plane.line(3, "XLA Modules")
        for module, begin, duration in modules:
            module_line.event(module, begin * US, duration * US)
    return space


def tpu_space(ops, **kwargs) -> Space:
    space = Space(("tpuhost",))
    space.plane("/host:CPU", 0).line(1, "python").event("main", 0, 10)
    return tpu_core(space, ops, **kwargs)


# --- the registry --------------------------------------------------------------------------------------------

def test_ids_are_unique_named_by_family_and_documented():
    assert len(RULE_IDS) == len(set(RULE_IDS))
    assert all(re.fullmatch(r"(input|tpu|gpu|host|device|steps|memory|capture)\.[a-z0-9_]+", i) for i in RULE_IDS)
    doc = (REPO / "docs" / "findings.md").read_text()
    missing = [i for i in RULE_IDS if f"`{i}`" not in doc]
    assert missing == [], f"docs/findings.md does not describe {missing}"


def test_a_rule_may_only_emit_its_own_ids():
    from reportgen.core.findings import registry
    from reportgen.core.findings.inputs import RunInputs

    def rogue(inputs):
        return [Finding("steps.variance", "low", "t", "e", "a")]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "RULES", [registry.Rule(("input.bound",), rogue)])
        with pytest.raises(ValueError, match="rogue emitted 'steps.variance'"):
            evaluate(RunInputs(run="r", hosts=[]))


def test_order_is_severity_then_cost_then_id_and_severity_follows_the_share():
    a = Finding("b.x", "medium", "", "", "", percent_of_step=12.0)
    b = Finding("a.x", "medium", "", "", "", percent_of_device_time=20.0)
    c = Finding("c.x", "high", "", "", "", percent_of_step=30.0)
    d = Finding("d.x", "info", "", "", "")
    assert [f.id for f in ordered([d, a, b, c])] == ["c.x", "a.x", "b.x", "d.x"]
    assert [severity_for(p) for p in (30, 25, 24.9, 10, 3, 2.9, None)] == \
        ["high", "high", "medium", "medium", "low", "info", "info"]
    with pytest.raises(ValueError):
        Finding("x.y", "urgent", "", "", "")
    assert SEVERITIES == ("high", "medium", "low", "info")


# --- the step's time --------------------------------------------------------------------------------------

def test_input_bound_without_tf_data(tmp_path):
    found = findings(tmp_path, cpu_steps(input_us=60, compute_us=38))
    f = found["input.bound"]
    assert f.severity == "high" and "input.tf_data_bottleneck" not in found
    # Each 100 µs step waits 60 µs for input (from 1 µs in).
    assert f.ms_per_step == pytest.approx(0.060) and f.percent_of_step == pytest.approx(60.0)
    assert evidence(f, "Share of the step time waiting for input").value == pytest.approx(60.0)
    assert "prefetch" in f.action and "JAX" not in f.action  # TensorFlow-only advice: the capture has TF ops
    assert [link.href for link in f.links] == ["input_pipeline.html#summary"]


def test_input_below_xprof_threshold_is_silent(tmp_path):
    assert not {"input.bound", "input.tf_data_bottleneck"} & set(findings(tmp_path, cpu_steps(input_us=3,
                                                                                              compute_us=95)))


def test_unattributed_step_time(tmp_path):
    f = findings(tmp_path, cpu_steps(compute_us=40))["host.unattributed_step_time"]
    # 100 µs steps: 40 µs of MatMul, the rest nothing XProf can name.
    assert f.ms_per_step == pytest.approx(0.060) and f.percent_of_step == pytest.approx(60.0)
    assert f.severity == "high" and "steps_per_execution" in f.action
    assert "host.unattributed_step_time" not in findings(tmp_path / "b", cpu_steps(compute_us=98))


def test_step_variance(tmp_path):
    f = findings(tmp_path, cpu_steps(durations=[1000, 1000, 1000, 1000, 3000], compute_us=3000))["steps.variance"]
    # XProf's overview keeps 5 steps (it drops first and last only above five): average 1.4 ms, fastest 1 ms.
    # Its 0.4 ms lie inside the causes the ledger gives them to: the finding adds no share of its own. The slow step
    # ran the same work slower (contention): medium, a reason to profile again, not the top of what to fix.
    assert f.ms_per_step is None and f.percent_of_step is None and f.severity == "medium"
    assert "the slowest step took 3.0× the fastest's time for the same work (contention on the machine)" in f.title
    assert "0.4 ms, 29% of the average" in f.estimate
    # The slow step ran the same op longer, with no input, compilation or Python in it: contention.
    assert "contention" in f.action and "idle machine" in f.action
    assert evidence(f, "Host compute (framework ops): the 3 slowest steps").value == pytest.approx(2.000 / 3)
    assert evidence(f, "Train 5").value == pytest.approx(3.000)
    assert any(link.href.startswith("trace.html#host=cpu&t0=") for link in f.links)
    assert "steps.variance" not in findings(tmp_path / "b", cpu_steps(durations=[100, 102, 98, 100, 101]))
    # The same spread on sub-millisecond steps is scheduling jitter as much as load: low, not called contention.
    jitter = findings(tmp_path / "c", cpu_steps(durations=[100, 100, 100, 100, 300], compute_us=300))["steps.variance"]
    assert jitter.severity == "low" and "sub-millisecond" in jitter.title and "contention" not in jitter.title


def test_compilation_inside_steps(tmp_path):
    f = findings(tmp_path, cpu_steps(compile_us=20, compute_us=70))["host.compilation_in_steps"]
    assert f.ms_per_step == pytest.approx(0.020) and f.percent_of_step == pytest.approx(20.0)
    assert evidence(f, "Compilation per step (step ledger)").value == pytest.approx(0.020)
    assert evidence(f, "backend_compile: its part of that per step (5 events)").value == pytest.approx(0.020)
    assert f.claims == ["compilation"]
    assert "host.compilation_in_steps" not in findings(tmp_path / "b", cpu_steps())


def test_eager_ops(tmp_path):
    f = findings(tmp_path, cpu_steps(eager=True))["host.eager_ops"]
    assert f.title.startswith("100.0% of host op time runs eagerly") and "tf.function" in f.action
    assert "host.eager_ops" not in findings(tmp_path / "b", cpu_steps())


def test_straggler_host_needs_three_hosts(tmp_path):
    fast = [cpu_steps(hostname=f"w{i}") for i in range(3)]
    slow = cpu_steps(step_us=300, compute_us=300, hostname="w3")
    f = findings(tmp_path, *fast, slow, names=("w0", "w1", "w2", "w3"))["steps.straggler_host"]
    assert "w3" in f.title and f.ms_per_step == pytest.approx(0.200)
    assert evidence(f, "Average step time on w3").value == pytest.approx(0.300)
    even = [cpu_steps(hostname=f"w{i}") for i in range(3)]
    assert "steps.straggler_host" not in findings(tmp_path / "b", *even, names=("w0", "w1", "w2"))
    # Two hosts: XProf's rule needs three to tell which one straggles.
    assert "steps.straggler_host" not in findings(tmp_path / "c", fast[0], slow, names=("w0", "w3"))


# --- capture health ------------------------------------------------------------------------------------------

def test_too_few_steps(tmp_path):
    f = findings(tmp_path, cpu_steps(steps=2))["capture.too_few_steps"]
    assert f.title.startswith("Only 2 steps analysed") and f.severity == "low"
    assert "capture.too_few_steps" not in findings(tmp_path / "b", cpu_steps(steps=3))


def test_too_few_steady_steps_name_the_one_that_holds_the_spread(tmp_path):
    # A start-up step, then 3 steady steps of which one is 4.5× the others: the spread is that one step.
    f = findings(tmp_path, cpu_steps(steps=4, durations=[1000, 100, 450, 100]))["capture.too_few_steps"]
    assert "one step, train 3 (0.45 ms), holds most of the spread: 0.349 ms more nothing identified" in f.title
    assert evidence(f, "Train 3: nothing identified beyond the other steps' median").value == pytest.approx(0.349)
    even = findings(tmp_path / "b", cpu_steps(steps=4, durations=[1000, 100, 150, 100]))["capture.too_few_steps"]
    assert "holds most of the spread" not in even.title


def test_duplicate_hosts(tmp_path):
    # One profile under two host names: the same events at the same picoseconds.
    f = findings(tmp_path, cpu_steps(hostname="a"), cpu_steps(hostname="b"), names=("a", "b"))
    assert "b repeats a" in f["capture.duplicate_hosts"].title
    # The same program on two machines: the same events, at other times.
    other = findings(tmp_path / "b", cpu_steps(hostname="a"), _shifted(cpu_steps(hostname="b"), 1_000),
                     names=("a", "b"))
    assert "capture.duplicate_hosts" not in other


def test_no_steps(tmp_path):
    space = Space(("cpu",))
    space.plane("/host:CPU", 0).line(1, "python").event("dense/MatMul:MatMul", 0, 50 * US)
    f = findings(tmp_path, space)["capture.no_steps"]
    assert evidence(f, "Steps").value == 0 and "StepTraceAnnotation" not in f.action  # a TF capture
    assert "Inferred" not in " ".join(e.label for e in f.evidence)  # no device programs to infer steps from
    assert "capture.no_steps" not in findings(tmp_path / "b", cpu_steps())


def test_dropped_events(tmp_path):
    space = cpu_steps()
    space.proto.warnings.append("Dropped 1200 events: the host tracer's buffer is full")
    f = findings(tmp_path, space)["capture.dropped_events"]
    assert evidence(f, "Profiler message").value == "Dropped 1200 events: the host tracer's buffer is full"
    quiet = cpu_steps()
    quiet.proto.warnings.append("Some unrelated warning")
    assert "capture.dropped_events" not in findings(tmp_path / "b", quiet)


def _shifted(space: Space, ns: int) -> Space:
    for plane in space.proto.planes:  # the same steps, later on this host's clock
        for line in plane.lines:
            line.timestamp_ns += ns
    return space


def test_clock_skew(tmp_path):
    # Two machines whose GPUs all-reduce together: their steps must line up.
    a = gpu_steps(nccl=((850, 40),))
    b = _shifted(gpu_steps(nccl=((850, 40),)), 500_000_000)
    f = findings(tmp_path, a, b, names=("10.0.0.1_6009", "10.0.0.2_6009"))["capture.clock_skew"]
    assert evidence(f, "Median offset of 10.0.0.2_6009's steps from 10.0.0.1_6009's").value == pytest.approx(500.0)
    assert "after" in f.title
    assert "capture.clock_skew" not in findings(tmp_path / "b", gpu_steps(nccl=((850, 40),)),
                                                gpu_steps(nccl=((850, 40),)), names=("10.0.0.1_6009", "10.0.0.2_6009"))


def test_no_clock_skew_between_processes_of_one_machine_or_hosts_that_never_synchronise(tmp_path):
    # Two profiler processes of one machine share its clock, however far apart their steps are.
    same = findings(tmp_path / "a", gpu_steps(nccl=((850, 40),)), _shifted(gpu_steps(nccl=((850, 40),)), 500_000_000),
                    names=("localhost_6110", "localhost_6111"))
    assert "capture.clock_skew" not in same
    # Two machines with no collective between them: nothing says their steps should line up.
    apart = findings(tmp_path / "b", cpu_steps(hostname="a"), _shifted(cpu_steps(hostname="b"), 500_000_000),
                     names=("a", "b"))
    assert "capture.clock_skew" not in apart


# --- GPUs ------------------------------------------------------------------------------------------------------

# With a GPU, XProf's step is the span of the step's device activity (here 100–900 µs of each step).
TWO_KERNELS = ((100, 300), (600, 300))


def test_kernel_launch_bound(tmp_path):
    # 150 µs of launch calls while the GPU has nothing to run (between 400 and 600 µs), and the second kernel's
    # own 0.5 µs launch just before it starts.
    f = findings(tmp_path, gpu_steps(kernels=TWO_KERNELS, launches=((420, 150),)))["gpu.kernel_launch_bound"]
    assert f.ms_per_step == pytest.approx(0.1505) and f.percent_of_step == pytest.approx(100 * 150.5 / 800)
    assert evidence(f, "Op dispatch and kernel launch per step (step ledger)").value == pytest.approx(0.1505)
    assert f.claims == ["kernel_launch"]
    assert "jit_compile=True" in f.action and "gpu_private" not in f.action  # no tf.data on this host
    # Launch calls while a kernel runs cost the step nothing.
    quiet = findings(tmp_path / "b", gpu_steps(kernels=TWO_KERNELS, launches=((200, 150),)))
    assert "gpu.kernel_launch_bound" not in quiet


def test_host_ops_while_the_gpu_idles(tmp_path):
    f = findings(tmp_path, gpu_steps(kernels=TWO_KERNELS, host_ops=((420, 150),)))["host.compute_in_step"]
    assert f.ms_per_step == pytest.approx(0.150) and f.percent_of_step == pytest.approx(100 * 150 / 800)
    quiet = findings(tmp_path / "b", gpu_steps(kernels=TWO_KERNELS, host_ops=((200, 150),)))
    assert "host.compute_in_step" not in quiet


def test_low_gpu_utilization_and_idle_gaps(tmp_path):
    low = findings(tmp_path, gpu_steps(kernels=((100, 100), (800, 100))))
    f = low["gpu.low_utilization"]
    # 200 µs of kernels in each 800 µs step: busy 25%, idle 600 µs per step.
    assert evidence(f, "/device:GPU:0 busy").value == pytest.approx(25.0)
    # The idle 600 µs per step are the step ledger's: nothing on the host explains them here, so the idle-gaps
    # finding carries them; low utilisation says so without counting them again.
    assert f.ms_per_step is None and f.percent_of_step is None and f.severity == "info"
    # (Less the second kernel's 0.5 µs launch, which the ledger gives to kernel launch.)
    assert evidence(f, "Nothing identified (step ledger)").value == pytest.approx(100 * 599.5 / 800)
    idle = low["gpu.idle_gaps"]
    assert idle.percent_of_step == pytest.approx(100 * 599.5 / 800) and idle.claims == ["other"]
    gaps = findings(tmp_path / "b", gpu_steps(steps=3, step_us=10_000, kernels=((10, 4000), (6010, 4000))))
    g = gaps["gpu.idle_gaps"]
    # 2 ms idle per step, less the second kernel's 0.5 µs launch just before it (kernel launch's).
    assert g.ms_per_step == pytest.approx(1.9995) and g.percent_of_step == pytest.approx(19.995)
    # Idle while the host waits for input: the input finding's time, not this one's.
    fed = gpu_steps(steps=3, step_us=10_000, kernels=((10, 4000), (6010, 4000)),
                    host_ops=((4020, 1980),), host_op="IteratorGetNext:IteratorGetNext")
    explained = findings(tmp_path / "d", fed)
    assert "gpu.idle_gaps" not in explained
    assert explained["input.bound"].percent_of_step == pytest.approx(19.8)
    assert evidence(g, "/device:GPU:0 idle").value == pytest.approx(2.0)
    assert g.links[0].href.startswith("trace.html#host=gpuhost&t0=4.01&t1=6.01")
    busy = findings(tmp_path / "c", gpu_steps(kernels=((10, 980),)))
    assert not {"gpu.low_utilization", "gpu.idle_gaps"} & set(busy)


def test_a_gpu_that_only_copies_is_not_judged_idle(tmp_path):
    space = gpu_steps(kernels=((100, 780),))
    copies = space.gpu(1).line(9, "Stream #9(MemcpyH2D)")
    for k in range(3):
        copies.event("MemcpyH2D", (k * 1200 + 400) * US, 5 * US, memcpy_details="size:4 dest:1 async:1")
    assert not {"gpu.low_utilization", "gpu.idle_gaps"} & set(findings(tmp_path, space))


def test_synchronous_and_pageable_copies(tmp_path):
    copies = ((850, 50, "kind_src:pageable kind_dst:device size:4096 dest:0 async:0"),)
    found = findings(tmp_path, gpu_steps(copies=copies))
    sync, pageable = found["gpu.synchronous_copies"], found["gpu.pageable_copies"]
    assert evidence(sync, "Copies on gpuhost").value == 3 and evidence(sync, "Their bytes").value == 3 * 4096
    assert "pinned" in pageable.action
    # The same copies: one finding carries their time, the other says where it is counted.
    carried = [f for f in (sync, pageable) if f.percent_of_step is not None]
    assert len(carried) == 1 and carried[0].percent_of_step == pytest.approx(100 * 50 / 800)
    other = pageable if carried[0] is sync else sync
    assert other.severity == "info" and f"counted under {carried[0].id}" in other.estimate
    fine = ((850, 50, "kind_src:pinned kind_dst:device size:4096 dest:0 async:1"),)
    assert not {"gpu.synchronous_copies", "gpu.pageable_copies"} & set(findings(tmp_path / "b",
                                                                               gpu_steps(copies=fine)))


def test_stream_synchronization(tmp_path):
    # Kernels at 100–200 and 700–800 µs; the host waits in the call from 150 to 650 µs: 450 µs of it (200–650)
    # keep the GPU idle.
    f = findings(tmp_path, gpu_steps(kernels=((100, 100), (700, 100)), syncs=((150, 500),)))[
        "gpu.stream_synchronization"]
    assert f.ms_per_step == pytest.approx(0.450) and f.percent_of_step == pytest.approx(100 * 450 / 700)
    assert evidence(f, "Synchronisation calls on gpuhost").value == 3 and f.claims == ["synchronization"]
    assert "gpu.stream_synchronization" not in findings(tmp_path / "b", gpu_steps(syncs=((100, 20),)))
    # Waiting while the GPU computes costs the step nothing.
    assert "gpu.stream_synchronization" not in findings(tmp_path / "c", gpu_steps(syncs=((150, 600),)))


def test_collectives_not_overlapped(tmp_path):
    # Two GPUs, each step: compute 100–500 µs, then a 300 µs all-reduce alone (600–900).
    f = findings(tmp_path, gpu_steps(kernels=((100, 400),), nccl=((600, 300),), gpus=2))
    c = f["gpu.collectives_not_overlapped"]
    assert evidence(c, "Of it, overlapped by compute kernels").value == pytest.approx(0.0)
    # Both say it; one carries the time (XProf's communication share and the overlap measure are one 300 µs).
    carried = [x for x in (c, f["device.communication"]) if x.percent_of_step is not None]
    assert len(carried) == 1 and carried[0].percent_of_step == pytest.approx(100 * 300 / 800)
    assert carried[0].ms_per_step == pytest.approx(0.300)
    hidden = findings(tmp_path / "b", gpu_steps(kernels=((100, 800),), nccl=((400, 300),), gpus=2))
    # Hidden under compute, the all-reduce is compute time in XProf's breakdown too.
    assert not {"gpu.collectives_not_overlapped", "device.communication"} & set(hidden)


def test_tensor_cores_unused_and_fp32_compute(tmp_path):
    found = findings(tmp_path, gpu_steps())
    f = found["gpu.tensor_cores_unused"]
    assert f.percent_of_device_time == pytest.approx(100.0)
    assert evidence(f, "model/dense/MatMul: volta_sgemm_128x64_nn").value == pytest.approx(2400.0)
    fp32 = found["device.fp32_compute"]
    assert evidence(fp32, "Device compute in 16-bit").value == 0.0
    # Half of the 800 µs of 32-bit compute per (800 µs) step.
    assert fp32.ms_per_step == pytest.approx(0.400) and fp32.percent_of_step == pytest.approx(50.0)
    half = findings(tmp_path / "b", gpu_steps(kernel="volta_h884gemm_fp16_128x128_nn"))
    assert not {"gpu.tensor_cores_unused", "device.fp32_compute"} & set(half)
    # Hopper's TF32 and cuBLAS kernels run on TensorCores though XProf's list (the kernel stats' column) misses them.
    for kernel in ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x64x32",
                   "nvjet_sm90_tst_128x128_64x6_1x2_h_bz_NTT", "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn"):
        hopper = findings(tmp_path / kernel[:12], gpu_steps(kernel=kernel))
        assert "gpu.tensor_cores_unused" not in hopper, kernel


def test_tiny_kernels(tmp_path):
    tiny = gpu_steps(kernels=((100, 2),), kernel_repeat=150, kernel="elementwise_kernel", tf_op="model/add:AddV2")
    f = findings(tmp_path, tiny)["gpu.tiny_kernels"]
    # 150 launches of 2 µs per step: 5 µs of launch overhead each.
    assert evidence(f, "Tiny kernel launches per step").value == pytest.approx(150)
    # 0.75 ms of launches at best, but the GPU waited on them only 74.5 µs per step (the other launches ran while
    # it was busy): that exposed time is the kernel-launch finding's, so this one points there.
    assert "0.75 ms per step" in f.estimate and "waited on kernel launches 0.0745 ms" in f.estimate
    assert f.ms_per_step is None and f.severity == "info" and "counted under gpu.kernel_launch_bound" in f.estimate
    assert findings(tmp_path / "c", tiny)["gpu.kernel_launch_bound"].ms_per_step == pytest.approx(0.0745)
    few = gpu_steps(kernels=((100, 2),), kernel_repeat=20, kernel="elementwise_kernel", tf_op="model/add:AddV2")
    assert "gpu.tiny_kernels" not in findings(tmp_path / "b", few)


# --- TPUs ------------------------------------------------------------------------------------------------------

def test_async_copies_dominate(tmp_path):
    ops = [("copy-start.1", "copy-start", 10, 5), ("copy-done.1", "copy-done", 20, 600), ("fusion.1", "loop fusion",
                                                                                       700, 100)]
    f = findings(tmp_path, tpu_space(ops))["tpu.async_copies_dominate"]
    # 605 µs of the 3 × … device time: the op profile's shares, as summary.json rounds them.
    copy_done = evidence(f, "'copy-done' share of device time").value
    assert f.percent_of_device_time == pytest.approx(copy_done + evidence(f, "'copy-start' share").value)
    assert copy_done > 50 and f.severity == "high"
    assert evidence(f, "copy-done.1 (copy-done, 3 runs)").href == "hlo_stats.html#hlo-op-1"
    quiet = [("copy-done.1", "copy-done", 20, 30), ("fusion.1", "convolution", 60, 700)]
    assert "tpu.async_copies_dominate" not in findings(tmp_path / "b", tpu_space(quiet))


def test_non_matrix_ops_and_data_formatting(tmp_path):
    ops = [("fusion.1", "loop fusion", 10, 500), ("transpose.2", "data formatting", 600, 200)]
    found = findings(tmp_path, tpu_space(ops))
    non_matrix = found["tpu.non_matrix_ops_dominate"]
    assert "loop fusion" in non_matrix.title and non_matrix.percent_of_device_time > 40
    formatting = found["device.data_formatting"]
    assert formatting.percent_of_device_time == pytest.approx(evidence(formatting, "'data formatting'").value)
    assert formatting.percent_of_device_time > 15
    matmuls = findings(tmp_path / "b", tpu_space([("convolution.1", "convolution", 10, 800)]))
    assert not {"tpu.non_matrix_ops_dominate", "device.data_formatting"} & set(matmuls)


def test_host_round_trips_between_tpu_steps(tmp_path):
    # 900 µs steps with 500 µs of ops: the TensorCore idles the rest, waiting for the host.
    f = findings(tmp_path, tpu_space([("fusion.1", "convolution", 10, 500)]))["tpu.host_round_trips"]
    assert f.ms_per_step == pytest.approx(0.400) and f.percent_of_step == pytest.approx(100 * 400 / 900)
    # The capture does not say which framework ran: the advice covers both.
    assert "steps_per_execution" in f.action and "lax.scan" in f.action
    busy = findings(tmp_path / "b", tpu_space([("fusion.1", "convolution", 0, 880)]))
    assert "tpu.host_round_trips" not in busy


def _hlo_module(program_id: int, op: str, dims: list[int], tiles) -> bytes:
    proto = sample_module("jit_f")
    ins = proto.hlo_module.computations[0].instructions.add()
    ins.id, ins.name, ins.opcode = 99, op, "fusion"
    array(ins.shape, F32, dims, tiles=tiles)
    return proto.SerializeToString()


def test_layout_padding_and_missing_hlo(tmp_path):
    space = tpu_space([("fusion.9", "loop fusion", 10, 800)])
    space.plane("/host:metadata").metadata("jit_f(7)", md_id=7, **{"Hlo Proto": _hlo_module(7, "fusion.9", [3, 100],
                                                                                             [(8, 128)]),
                                                                     "program_id": 7})
    found = findings(tmp_path, space)
    f = found["tpu.layout_padding"]
    # f32[3,100] tiled (8,128): 1024 elements for 300, so 1 - 300/1024 of the op's time is padding.
    assert "3→8, 100→128" in f.evidence[0].label
    share = evidence(f, "fusion.9").value
    assert f.percent_of_device_time == pytest.approx(share * (1 - 300 / 1024), rel=1e-6)
    assert "capture.missing_hlo_metadata" not in found
    unpadded = tpu_space([("fusion.9", "loop fusion", 10, 800)])
    unpadded.plane("/host:metadata").metadata("jit_f(7)", md_id=7, **{
        "Hlo Proto": _hlo_module(7, "fusion.9", [8, 128], [(8, 128)]), "program_id": 7})
    assert "tpu.layout_padding" not in findings(tmp_path / "b", unpadded)
    # Without the module, the ops of program 7 cannot be attributed.
    bare = tpu_space([("fusion.9", "loop fusion", 10, 800)])
    missing = findings(tmp_path / "c", bare)["capture.missing_hlo_metadata"]
    assert evidence(missing, "Program ids without HLO").value == "7"
    assert missing.percent_of_device_time == pytest.approx(evidence(missing, "Device time in ops").value)


def test_tpu_idle_and_inferred_steps_without_step_markers(tmp_path):
    # No Steps line: 10 runs of jit_f every 100 ms, the 6th after a 300 ms wait.
    runs = [("jit_f(7)", 100_000 * k + (300_000 if k >= 5 else 0), 90_000) for k in range(10)]
    f = findings(tmp_path, tpu_space([("fusion.1", "convolution", 10, 80_000)], steps=None, modules=runs))
    idle = f["device.idle"]
    # From the first run (0) to the last end (1,290 ms): 900 ms of runs.
    assert evidence(idle, "Idle from the first run of its most run program").value == pytest.approx(
        100 * (1290 - 900) / 1290)
    assert evidence(idle, "No program running").value == pytest.approx(310.0)
    no_steps = f["capture.no_steps"]
    assert "steps inferred from 10 runs of jit_f(7)" in no_steps.title
    assert evidence(no_steps, "Device time per run of jit_f(7)").value == pytest.approx(90.0)
    steady = [("jit_f(7)", 100_000 * k, 99_000) for k in range(10)]
    quiet = findings(tmp_path / "b", tpu_space([("fusion.1", "convolution", 0, 99_000)], steps=None, modules=steady))
    assert quiet.get("device.idle") is None or quiet["device.idle"].severity == "info"


def test_outside_compilation(tmp_path):
    space = tpu_space([("recv.1", "send", 10, 400), ("fusion.1", "convolution", 500, 300)])
    plane = space.planes[-1]
    plane.proto.event_metadata[plane.metadata("recv.1")].stats[-1].str_value = "model/x:XlaRecvFromHost"
    f = findings(tmp_path, space)["device.outside_compilation"]
    assert f.percent_of_device_time == pytest.approx(evidence(f, "Device op time outside compilation").value)
    assert "device.outside_compilation" not in findings(tmp_path / "b", tpu_space([("f", "convolution", 0, 800)]))


# --- memory ------------------------------------------------------------------------------------------------------

def _risky(peak: int, capacity: int, module: bytes | None = None) -> Space:
    space = Space(("host",))
    line = space.plane("/host:CPU", 0).line(name="tf_Compute")
    memory_event(line, "MemoryAllocation", 100, allocator="GPU_0_bfc", heap=peak, free=capacity - peak,
                 requested=peak, allocated=peak, address=0x10, peak=peak, tf_op="model/big:Conv2D",
                 region_type="output", data_type=1, shape="[24000]")
    memory_event(line, "MemoryDeallocation", 200, allocator="GPU_0_bfc", heap=0, free=capacity, requested=peak,
                 allocated=peak, address=0x10, peak=peak)
    if module is not None:
        space.plane("/host:metadata").metadata("jit_sample(7)", md_id=7, **{"Hlo Proto": module})
    return space


def test_memory_near_capacity(tmp_path):
    found = findings(tmp_path, _risky(96_000, 100_000, sample_module().SerializeToString()))
    f = found["memory.near_capacity"]
    assert f.bytes == 96_000 and f.severity == "high" and "96.0% of its capacity" in f.title
    assert evidence(f, "Live at the peak: model/big:Conv2D").value == 96_000
    program = found["memory.program_near_capacity"]  # its 196,624-byte peak does not fit in 100,000
    assert program.bytes == 196_624 and evidence(program, "Buffer live at the peak").href.startswith(
        "memory_viewer.html#module-jit_sample")
    assert not {"memory.near_capacity", "memory.program_near_capacity"} & set(
        findings(tmp_path / "b", _risky(50_000, 1_000_000, sample_module().SerializeToString())))


def test_memory_padding(tmp_path):
    proto = sample_module()
    for ins in proto.hlo_module.computations[0].instructions:
        if ins.name == "copy.2":  # a 64 KiB buffer holding f32[3,100] tiled (8,128): 1,200 bytes of data
            del ins.shape.dimensions[:]
            ins.shape.dimensions.extend([3, 100])
    proto.buffer_assignment.logical_buffers[2].size = 4 << 20  # copy.2's buffer: 4 MiB
    proto.buffer_assignment.buffer_allocations[1].size = 5 << 20
    found = findings(tmp_path, _risky(50_000, 100 << 20, proto.SerializeToString()))
    f = found["memory.padding"]
    peak = evidence(f, "Peak heap of jit_sample(7)").value
    unpadded = evidence(f, "The same without padding").value
    assert f.bytes == peak - unpadded and f.bytes > (4 << 20) - 2000
    assert "memory.padding" not in findings(tmp_path / "b", _risky(50_000, 100 << 20,
                                                                    sample_module().SerializeToString()))


def test_unfused_elementwise_ops_and_a_partial_gpu_trace(tmp_path):
    # A TF model named like a transformer whose GPU ran 150 casts a step and no GEMM: XLA would fuse them, and the
    # capture holds part of the work.
    space = gpu_steps(kernels=((100, 2),), kernel_repeat=150, kernel="void Eigen::internal::EigenMetaKernel<cast>",
                      tf_op="model/transformer/attention/Cast:Cast")
    ops = space.planes[1].line(DERIVED_MIN + 3, "TensorFlow Ops")  # one of XProf's derived lines, as captures have
    for k in range(3):
        for j in range(150):
            ops.event("model/transformer/attention/Cast:Cast", (k * 1200 + 100 + 3 * j) * US, 2 * US)
    found = findings(tmp_path, space)
    f = found["gpu.unfused_elementwise"]
    assert f.percent_of_device_time == pytest.approx(100.0) and "Cast 100%" in f.title and "jit_compile" in f.action
    partial = found["capture.partial_gpu_trace"]
    assert "'transformer'" in partial.title and partial.severity == "medium"
    # With a GEMM kernel among them, the capture holds the matrix work: no partial-capture finding.
    gemm = gpu_steps(kernels=((100, 2), (800, 50)), kernel_repeat=150, kernel="volta_sgemm_128x64_nn",
                     tf_op="model/transformer/attention/MatMul:MatMul")
    assert "capture.partial_gpu_trace" not in findings(tmp_path / "b", gemm)


def test_compilation_between_steps_is_a_one_off(tmp_path):
    # Five 1 ms steps, 3 ms apart; a function compiled for 1.5 ms in the gap after the second step.
    space = Space(("cpu",))
    line = space.plane("/host:CPU", 0).line(1, "python")
    for k in range(5):
        t = k * 4000 * US
        line.event("train", t, 1000 * US, _r=1, step_num=k + 1)
        line.event("dense/MatMul:MatMul", t + US, 990 * US)
    line.event("backend_compile", 5500 * US, 1500 * US)
    found = findings(tmp_path, space)
    f = found["host.compilation_between_steps"]
    assert "1.5 ms of compilation between the analysed steps" in f.title and f.severity == "low"
    assert f.percent_of_step is None and f.claims == []
    assert evidence(f, "backend_compile on cpu").value == pytest.approx(1.5)
    assert "host.compilation_in_steps" not in found  # the steps hold none of it
    quiet = Space(("cpu",))
    line = quiet.plane("/host:CPU", 0).line(1, "python")
    for k in range(5):
        line.event("train", k * 4000 * US, 1000 * US, _r=1, step_num=k + 1)
        line.event("dense/MatMul:MatMul", k * 4000 * US + US, 990 * US)
    assert "host.compilation_between_steps" not in findings(tmp_path / "b", quiet)


# --- start-up, a positive finding, one cause said once ---------------------------------------------------------

def _first_step_compiles(first_us: int = 300, compile_us: int = 200, steps: int = 5) -> Space:
    """A CPU capture whose first step compiles (`compile_us`) then runs as the others: 100 µs of an op each."""
    space = Space(("cpu",))
    line = space.plane("/host:CPU", 0).line(1, "python")
    t = 0
    for k in range(steps):
        step = (first_us if k == 0 else 100) * US
        line.event("train", t, step, _r=1, step_num=k + 1)
        at = t + US
        if k == 0:
            line.event("PjitFunction(step)", at, compile_us * US + US)
            line.event("backend_compile", at + US // 2, compile_us * US)
            at += compile_us * US + 2 * US
        line.event("dense/MatMul:MatMul", at, min(98 * US, t + step - at))
        t += step + 10 * US
    return space


def test_startup_step_is_reported_once_and_left_out_of_the_shares(tmp_path):
    found, ctx = run_findings(tmp_path, {"cpu": _first_step_compiles()})
    f = by_id(found)["steps.startup"]
    ledger = ctx.sections["step_ledger"]
    # The first step (300 µs, 200 µs of it compiling) is set aside: the shares are over the 4 steps after it.
    assert ledger.step_count == 4 and len(ledger.startup) == 1 and ledger.percent("compilation") == 0.0
    assert f.severity == "info" and f.percent_of_step is None and f.claims == []
    # The dispatch that compiled (a jit cache miss) is compilation as a whole: its 1 µs around the compile too.
    assert "(train 1) is start-up: 0.3 ms against 0.1 ms for a steady step; of it compilation 0.201 ms" in f.title
    assert evidence(f, "Start-up step (train 1)").value == pytest.approx(0.300)
    assert evidence(f, "Compilation in the start-up step").value == pytest.approx(0.201)
    assert evidence(f, "backend_compile: longer in the start-up step").value == pytest.approx(0.200)
    assert "recompile" in f.action or "compiled in the first step" in f.action
    ids = {x.id for x in found}
    assert "host.compilation_in_steps" not in ids and "steps.variance" not in ids
    # A first step like the others is no start-up.
    assert "steps.startup" not in findings(tmp_path / "b", _first_step_compiles(first_us=100, compile_us=0))
    # Without two steady steps after it, a slow first step cannot be told from variation: kept as a step.
    short, ctx = run_findings(tmp_path / "c", {"cpu": _first_step_compiles(steps=2)})
    assert "steps.startup" not in by_id(short) and ctx.sections["step_ledger"].step_count == 2


def test_compute_bound_is_said_and_silent_when_input_waits(tmp_path):
    f = findings(tmp_path, cpu_steps(compute_us=95))["steps.compute_bound"]
    assert f.severity == "info" and f.percent_of_step is None and f.claims == []
    assert "95.0% of the step" in f.title and "nothing to fix on the input side" in f.title
    assert "steps.compute_bound" not in findings(tmp_path / "b", cpu_steps(input_us=10, compute_us=85))
    assert "steps.compute_bound" not in findings(tmp_path / "c", cpu_steps(compute_us=60))


def _jax_loop(transfer: str = "$array_constructors.py:374 asarray") -> Space:
    """A JAX loop on a GPU. XProf's GPU steps span the step's device work, so per step the GPU runs two kernels
    (400 µs each) and in the gap between them, with the GPU idle, the host transfers a batch (60 µs) and dispatches
    the next program (60 µs, its launch inside)."""
    space = Space(("gpuhost",))
    py = space.plane("/host:CPU", plane_id=0).line(1, "python")
    stream = space.gpu(0).line(7, "Stream #7(Compute)")
    correlation = 0
    for k in range(4):
        base = k * 1_100 * US
        py.event("train", base, 1_000 * US, _r=1, step_num=k)
        for offset in (100, 580):
            correlation += 1
            launch_at = base + (offset - 2 if offset == 100 else 565) * US
            py.event("cudaLaunchKernel", launch_at, US, correlation_id=correlation)
            stream.event("sm90_xmma_gemm", base + offset * US, 400 * US, correlation_id=correlation)
        py.event(transfer, base + 501 * US, 60 * US)
        py.event("PjitFunction(train_step)", base + 510 * US + 52 * US, 16 * US)
    return space


def test_a_blocking_jax_loop_is_one_finding(tmp_path):
    found = findings(tmp_path, _jax_loop())
    f = found["host.blocking_loop"]
    assert sorted(f.claims) == ["input", "kernel_launch"]
    assert f.percent_of_step == pytest.approx(100 * 79 / 880, abs=1.0) and f.severity == "low"
    assert "asarray (array_constructors.py:374)" in f.title and "PjitFunction(train_step)" in f.title
    assert "block_until_ready" in f.action
    assert "gpu.kernel_launch_bound" not in found and "input.bound" not in found
    # A batch made in Python inside the step is input of its own: the two findings stay apart.
    apart = findings(tmp_path / "b", _jax_loop(transfer="$capture.py:45 batch"))
    assert "host.blocking_loop" not in apart and "input.bound" in apart


def _concurrent_map() -> Space:
    """Steps that wait 80 µs for tf.data: the consumer takes three elements of a parallel map at once (each
    `ParallelMapConsume` matched to the `ParallelMapProduce` of its element), which three threads computed at the
    same time (74 µs each). XProf sums the map function's self time over the calls: about three times the
    execution's wall time."""
    space = cpu_steps(input_us=80, compute_us=15)
    plane = space.host_plane()
    consumer = plane.line(2, "tf_data_iterator_get_next")
    workers = [plane.line(3 + k, f"tf_data_private_threadpool/{k}") for k in range(3)]
    element = 0
    for k in range(5):
        t = k * 110 * US
        consumer.event("Iterator::Root", t + 2 * US, 78 * US, id=1)
        consumer.event("Iterator::Root::ParallelMapV2", t + 3 * US, 77 * US, id=2, parent_id=1)
        for n, w in enumerate(workers):
            element += 1
            consumer.event("ParallelMapConsume", t + (77 + n) * US, US // 2, element_id=element)
            w.event("ParallelMapProduce", t + 3 * US, 75 * US, element_id=element)
            w.event("Iterator::Root::ParallelMapV2::TensorSlice", t + 4 * US, 74 * US, id=3, parent_id=2)
    return space


def test_a_tf_data_share_of_calls_at_once_is_stated_as_busy_threads(tmp_path):
    f = findings(tmp_path, _concurrent_map())["input.tf_data_bottleneck"]
    assert "TensorSlice" in f.title
    busy = evidence(f, "TensorSlice: threads its calls kept busy on average")
    assert busy.value == pytest.approx(3 * 74 / 78, abs=0.01)
    # No share of the execution past 100% is cited.
    assert not any(e.unit == "percent" and e.value > 100 for e in f.evidence)


def _placed(name: str, devices: int, sharded_parameter: bool):
    from reportgen.core.hlo.model import HloModule
    from reportgen.loaders.hlo import plain_hlo

    proto = sample_module(name)
    module = proto.hlo_module
    module.device_assignment.replica_count = 1
    module.device_assignment.computation_count = devices
    for d in range(devices):
        module.device_assignment.computation_devices.add().replica_device_ids.append(d)
    for k in range(2):  # two parameters: replicated (type 0), or the second tiled over the devices (type 2)
        sharding = module.spmd_parameters_shardings.add()
        if sharded_parameter and k == 1:
            sharding.type = 2
            sharding.tile_assignment_dimensions.extend([devices, 1])
    return HloModule(7, name, plain_hlo(proto))


def test_programs_replicated_over_their_devices_are_told_from_sharded_ones():
    from reportgen.core.findings.facts import _program_placement

    devices, replicated = _program_placement([_placed("jit_f", 8, False), _placed("jit_g", 8, True),
                                              _placed("jit_h", 1, False)])
    f, g = _placed("jit_f", 8, False).display_name, _placed("jit_g", 8, True).display_name
    # One device is no placement to judge; a tiled parameter makes the program sharded.
    assert devices == {f: 8, g: 8} and replicated == [f]


def test_copy_kernels_inside_the_program(tmp_path):
    # Per step, 20 copy kernels of 5 µs each and nothing else: all of the kernel time, every launch small.
    space = gpu_steps(kernels=((100, 5),), kernel="memcpy128", kernel_repeat=20)
    f = findings(tmp_path, space)["gpu.copy_kernels"]
    assert f.title.startswith("Copy kernels inside the program take 100.0% of GPU kernel time (memcpy128): 60 "
                              "launches, 60 of them under 10 µs")
    assert f.percent_of_device_time == pytest.approx(100.0) and f.claims == []
    assert "donate_argnums" in f.action or "jit_compile=True" in f.action
    assert "gpu.copy_kernels" not in findings(tmp_path / "b", gpu_steps())


def _gemm_module(trip_count: int | None, convolve: bool = False):
    """A module whose entry runs a while loop whose body holds one dot of [64,128]·[128,32]."""
    import json

    from reportgen.core.hlo.model import HloModule
    from reportgen.loaders.hlo import plain_hlo
    from tests.hlo_builder import hlo_pb2

    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_id = "jit_step", 1
    entry, body = module.computations.add(id=1, name="main"), module.computations.add(id=2, name="body")
    loop = entry.instructions.add(id=10, name="while.1", opcode="while")
    loop.called_computation_ids.append(2)
    if trip_count is not None:
        loop.backend_config = json.dumps({"known_trip_count": {"n": str(trip_count)}}).encode()
    lhs = body.instructions.add(id=20, name="p", opcode="parameter")
    array(lhs.shape, F32, [64, 128])
    dot = body.instructions.add(id=21, name="dot.1", opcode="dot")
    array(dot.shape, F32, [64, 32])
    dot.operand_ids.extend([20, 20])
    dot.dot_dimension_numbers.lhs_contracting_dimensions.append(1)
    if convolve:
        body.instructions.add(id=22, name="conv.1", opcode="convolution")
    return HloModule(3, "jit_step", plain_hlo(proto))


def test_matmul_flops_count_loops_and_stay_unknown_where_they_cannot():
    from reportgen.core.findings.facts import _matmul_flops

    # 2·M·N·K = 2·64·32·128 per iteration, 4 iterations.
    assert _matmul_flops(_gemm_module(4)) == pytest.approx(4 * 2 * 64 * 32 * 128)
    assert _matmul_flops(_gemm_module(None)) is None  # a loop of unknown length: no number
    assert _matmul_flops(_gemm_module(4, convolve=True)) is None  # convolutions are not counted: no number
