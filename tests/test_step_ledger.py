"""The step ledger: every moment of a step given to the first busy cause in its precedence, on captures built in
code (exact numbers) and on the shared GPU capture (recomputed here from the exported trace, independently)."""

from __future__ import annotations

import pytest

from reportgen.core.steps.ledger import LEDGER_KEYS
from tests.findings_run import by_id, run_findings
from tests.test_findings_rules import US, cpu_steps, gpu_steps
from tests.xspace import Space


def _ledger(tmp_path, *spaces: Space, names=None):
    hosts = dict(zip(names or [s.host for s in spaces], spaces))
    found, ctx = run_findings(tmp_path, hosts)
    return ctx.sections["step_ledger"], by_id(found)


def test_each_moment_goes_to_the_first_busy_cause(tmp_path):
    # One GPU; in each step (100–1000 µs of device activity): a kernel 100–300, an all-reduce 300–400, a copy
    # 400–450, then the GPU idles until its last kernel at 990 while the host waits for input (450–600, with a
    # host op under it that must not count), compiles (600–650), synchronises (650–700), launches (700–720), runs
    # a host op (720–800) and Python (800–850); 850–990 nothing but the step marker.
    space = gpu_steps(kernels=((100, 200), (990, 10)), nccl=((300, 100),),
                      copies=((400, 50, "kind_src:pinned kind_dst:device size:64 dest:0 async:1"),),
                      launches=((700, 20),), syncs=((650, 50),), host_ops=((720, 80),))
    worker = space.host_plane().line(2, "tf_Compute/7")
    for k in range(3):
        base = k * 1200 * US
        worker.event("IteratorGetNextOp::DoCompute", base + 450 * US, 150 * US)
        worker.event("model/cast_1:Cast", base + 500 * US, 50 * US)
        worker.event("backend_compile", base + 600 * US, 50 * US)
        worker.event("$train.py:12 log_metrics", base + 800 * US, 50 * US)
    ledger, _ = _ledger(tmp_path, space)
    assert ledger.step_count == 3
    step = ledger.hosts[0].steps[1]
    ms = {k: v / 1e6 for k, v in step.ps.items()}  # µs
    # The kernels' own launches (0.5 µs, 1 µs before each kernel) fall in the idle time once per step: at 989.
    assert ms == pytest.approx({
        "device_compute": 210.0, "device_collectives": 100.0, "device_copies": 50.0, "compiled_program": 0.0,
        "input": 150.0, "compilation": 50.0, "synchronization": 50.0, "kernel_launch": 20.5, "host_compute": 80.0,
        "python": 50.0, "other": 139.5})
    assert sum(step.ps.values()) == step.duration_ps == 900 * US
    assert [k for k in ledger.hosts[0].steps[0].ps] == list(LEDGER_KEYS)
    top = dict((name, ms) for name, _, ms in ledger.top("input"))
    assert top == {"IteratorGetNextOp::DoCompute": pytest.approx(0.150)}


def test_tf_data_threads_run_ahead_and_cost_the_step_nothing(tmp_path):
    # A map function's op on tf.data's own thread while the GPU idles is the pipeline running ahead, not the step's
    # host compute: only the consumer's wait would be input.
    space = gpu_steps(kernels=((100, 300), (600, 300)))
    producer = space.host_plane().line(3, "tf_data_private_threadpool/1")
    for k in range(3):
        producer.event("resize:ResizeBilinear", k * 1200 * US + 420 * US, 150 * US)
    ledger, found = _ledger(tmp_path, space)
    assert ledger.percent("host_compute") == 0.0 and ledger.percent("input") == 0.0
    assert "host.compute_in_step" not in found


def test_compiled_program_on_a_cpu_host_is_compute_not_unattributed(tmp_path):
    # JAX on CPU: the step's Python thread waits while XLA:CPU's threads run the program (60 µs of each 100; a
    # 5 µs op before it, from 1 µs in).
    space = cpu_steps(input_us=0, compute_us=5)
    xla = space.host_plane().line(5, "tf_XLAEigen/1")
    for k in range(5):
        xla.event("ThunkExecutor::Execute", (k * 110 + 10) * US, 60 * US)
    ledger, found = _ledger(tmp_path, space)
    assert ledger.percent("compiled_program") == pytest.approx(60.0)
    assert ledger.percent("host_compute") == pytest.approx(5.0)
    assert ledger.percent("other") == pytest.approx(35.0)
    assert found["host.unattributed_step_time"].percent_of_step == pytest.approx(35.0)
    # The program's own time is claimed by no finding: it is the work.
    assert not any("compiled_program" in f.claims for f in found.values())


def test_keras3_profiled_batches_become_inferred_steps_with_their_input_wait(tmp_path):
    # Keras 3's TensorBoard callback marks batches as `Profiled batch <n>`, which XProf does not take as steps:
    # the ledger infers them, and the 76% input wait inside them is found.
    space = Space(("k3",))
    line = space.plane("/host:CPU", 0).line(1, "python")
    for k in range(4):
        t = k * 110 * US
        line.event(f"Profiled batch {k + 3}", t, 100 * US)
        line.event("IteratorGetNext:IteratorGetNext", t + US, 76 * US)
        line.event("dense/MatMul:MatMul", t + 77 * US, 20 * US)
    ledger, found = _ledger(tmp_path, space)
    assert ledger.step_count == 4 and "Profiled batch" in ledger.inferred_from
    assert ledger.percent("input") == pytest.approx(76.0)
    f = found["input.bound"]
    assert f.percent_of_step == pytest.approx(76.0) and "inferred" in f.estimate
    assert "capture.no_steps" in found and "Keras does it" not in found["capture.no_steps"].action
    assert "Profiled batch" in found["capture.no_steps"].action


def test_repeated_programs_become_inferred_steps(tmp_path):
    space = Space(("tpu",))
    plane = space.plane("/device:TPU:0", 1)
    modules, ops = plane.line(1, "XLA Modules"), plane.line(2, "XLA Ops")
    for k in range(5):
        t = k * 1000 * US
        modules.event("jit_step(123)", t, 800 * US)
        ops.event("fusion.1", t + 10 * US, 700 * US)
    ledger, _ = _ledger(tmp_path, space)
    assert ledger.step_count == 5 and "jit_step(123)" in ledger.inferred_from
    # From one run's start to the next: 700 of each 1000 µs on the device (the last run ends at 800).
    assert ledger.hosts[0].steps[0].ps["device_compute"] == 700 * US


def test_input_advice_sees_the_threads_tf_data_already_keeps_busy(tmp_path):
    # While the step waits 60 µs for its batch, two of tf.data's threads run the map the whole time: more
    # parallelism needs idle cores the capture cannot promise, and the advice says so.
    space = cpu_steps(input_us=60, compute_us=38)
    for thread in (1, 2):
        pool = space.host_plane().line(10 + thread, f"tf_data_private_threadpool/{thread}")
        for k in range(5):
            pool.event("resize:ResizeBilinear", (k * 110 + 1) * US, 60 * US)
    ledger, found = _ledger(tmp_path, space)
    assert ledger.producer_threads_busy == pytest.approx(2.0)
    assert "2.0 of them on average" in found["input.bound"].action
    # One thread busy: nothing to say about saturation.
    alone = cpu_steps(input_us=60, compute_us=38)
    pool = alone.host_plane().line(11, "tf_data_private_threadpool/1")
    for k in range(5):
        pool.event("resize:ResizeBilinear", (k * 110 + 1) * US, 60 * US)
    _, quiet = _ledger(tmp_path / "b", alone)
    assert "on average" not in quiet["input.bound"].action


def test_a_python_function_inside_tf_data_is_named(tmp_path):
    # 45 of the 60 µs the step waits for its batch, a tf.py_function (EagerPyFunc) runs on tf.data's thread.
    space = cpu_steps(input_us=60, compute_us=38)
    pool = space.host_plane().line(11, "tf_data_private_threadpool/1")
    for k in range(5):
        pool.event("EagerPyFunc:EagerPyFunc", (k * 110 + 10) * US, 45 * US)
    ledger, found = _ledger(tmp_path, space)
    assert ledger.input_python_percent == pytest.approx(75.0)
    f = found["input.bound"]
    assert "a Python function inside tf.data runs 75% of the wait" in f.title and "GIL" in f.action
    _, plain = _ledger(tmp_path / "b", cpu_steps(input_us=60, compute_us=38))
    assert "Python function" not in plain["input.bound"].title


def test_step_markers_xprof_did_not_take_are_the_inferred_steps():
    # Where XProf's grouping finds no steps, a capture's own `Trace('train', step_num=…, _r=1)` markers are them.
    from reportgen.core.events.table import EventTable
    from reportgen.core.steps.ledger import inferred_steps

    steps, how = inferred_steps(EventTable(cpu_steps(steps=4).capture("cpu", sort_lines=True)))
    assert how == "the program's `Trace(..., step_num=…, _r=1)` markers"
    assert [name for name, _, _ in steps] == ["train 1", "train 2", "train 3", "train 4"]
    assert all(end - begin == 100 * US for _, begin, end in steps)
