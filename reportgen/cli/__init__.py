"""The command line: `main.py` builds the parser from one module per command (`build`, `publish`, `serve`,
`compare`, `summary`, `check`; each has `add_parser(sub)` and `run(args) -> exit status`) and dispatches to it;
`common.py` holds what they share. Commands only translate arguments and messages: the work is done by
`reportgen.pipeline` (build), `reportgen.compare` (compare, summary, check), `reportgen.ci` (what CI systems
read from summary and check) and `reportgen.output` (publish, serve).
Heavy imports (pandas, numba, Altair) happen inside `run`, so that `--help` and `--version` answer at once."""
