"""reportgen: TensorFlow / JAX profiler captures to a static web site, every number computed as XProf does.

Data flows one way: `loaders` (files to plain data) → `core` (the numbers) → `sections` (charts, CSVs,
template data) → `templates` and `output` (the site). `pipeline` runs that flow per host and per run,
`cli` is the command line, `compare` reads built sites back, `export` writes the trace export and `legacy`
holds older profilers' formats from file to page. `capture.py` is the decoded capture every layer reads,
`kernels.py` declares the compiled (numba) kernels, `errors.py` the errors that name a file, `timebins.py`
the time slices of every busy heatmap.
See ARCHITECTURE.md.
"""

import time as _time

__version__ = "0.1.0"

# When the command began, as far as it can know: the package is the first thing its entry point imports, so this
# leaves out only the interpreter's own start (tens of ms). The process's start time is no measure: `bash -c
# "pip install . && reportgen build"` execs reportgen in the shell's process, whose clock began with pip.
STARTED_AT = _time.time()

import pandas as _pd  # noqa: E402

# pyarrow is installed (the per-host result's format, pipeline/result.py), and pandas 3 then backs its default
# string dtype with Arrow arrays: a different implementation of every string operation (an outer merge of an
# empty frame fails in it). Text columns keep the Python-backed storage reportgen's numbers were made with.
_pd.set_option("mode.string_storage", "python")
