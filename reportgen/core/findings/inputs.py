"""What the rules read: the tools' results for one run (hosts combined as each tool combines them), and the
hosts' findings facts. Built once per run by the findings section from the other sections' combined data.

Each field is None (or empty) when the run has no data for that tool; a rule that needs it stays silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.core.findings.facts import HostFacts
from reportgen.core.findings.model import Evidence, summary_source
from reportgen.core.steps.ledger import RunLedger
from reportgen.core.tools.hlo_stats import HloStatsData
from reportgen.core.tools.input_pipeline import InputPipelineData
from reportgen.core.tools.kernel_stats import KernelStatsData
from reportgen.core.tools.memory_profile import HostMemoryProfile
from reportgen.core.tools.op_profile import OpProfileData
from reportgen.core.tools.overview import OverviewView
from reportgen.core.tools.tf_stats import TfStatsView


@dataclass
class RunInputs:
    run: str
    hosts: list[str]
    pages: set[str] = field(default_factory=set)  # slugs of the run's tool pages (links go only to these)
    overview: OverviewView | None = None  # the run's view (all hosts combined, or the only host)
    host_views: dict[str, OverviewView] = field(default_factory=dict)  # each host alone (several hosts only)
    input_pipeline: InputPipelineData | None = None
    tf_stats: TfStatsView | None = None  # the run's view
    kernel_stats: KernelStatsData | None = None
    op_profile: OpProfileData | None = None
    hlo_stats: HloStatsData | None = None
    memory_profile: dict[str, HostMemoryProfile] = field(default_factory=dict)  # by host
    memory_viewer: dict | None = None  # core.tools.memory_viewer.memory_viewer_data()
    facts: dict[str, HostFacts] = field(default_factory=dict)  # by host, in host order
    ledger: RunLedger | None = None  # each analysed (or inferred) step's time, cause by cause

    # --- what many rules ask ---------------------------------------------------------------------

    @property
    def steps(self) -> int:
        return int(len(self.overview.analysis.steps)) if self.overview is not None else 0

    @property
    def step_ms(self) -> float:
        """The run's average step time (ms), 0 without steps."""
        return float(self.overview.analysis.step_time.average) if self.steps else 0.0

    @property
    def hardware(self) -> str:
        return self.overview.environment["hardware_type"] if self.overview is not None else ""

    @property
    def framework(self) -> str:
        """"tensorflow", "jax", or "" when the capture does not say (advice then covers both)."""
        found = {f.framework for f in self.facts.values()} - {""}
        return "tensorflow" if "tensorflow" in found else "jax" if "jax" in found else ""

    def page(self, slug: str, anchor: str = "") -> str:
        """`<slug>.html#anchor` when the run has that page, else ""."""
        if slug not in self.pages:
            return ""
        return f"{slug}.html" + (f"#{anchor}" if anchor else "")

    def step_time_evidence(self) -> Evidence:
        return Evidence("Average step time", self.step_ms, "ms", summary_source("overview", "step_time_ms", "average"),
                        self.page("overview"))

    def steps_evidence(self) -> Evidence:
        return Evidence("Steps analysed", self.steps, "count", summary_source("overview", "steps"),
                        self.page("overview"))


def pick(framework: str, tensorflow: str, jax: str) -> str:
    """Advice for the capture's framework, or both (labelled) when it is not known."""
    if framework == "tensorflow":
        return tensorflow
    if framework == "jax":
        return jax
    return f"TensorFlow: {tensorflow} JAX: {jax}"


__all__ = ["RunInputs", "pick"]
