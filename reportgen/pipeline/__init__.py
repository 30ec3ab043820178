"""The build: logdirs in, a site out (`build.build_site`).

`build.py` orchestrates: discover runs and hosts (`reportgen.loaders.logdir`), run the per-host stage for
every host, combine each run's hosts section by section, render the pages and summary.json, and commit the
site in one move. `host_stage.py` is the per-host stage (read, decode, HLO modules, then every section's
`host_part`), the unit of parallel work; `runners.py` runs it serially, in worker processes (forked after
`preload.py` warmed the decoder) or on a Dask cluster; `cache.py` is the rebuild cache that skips unchanged
hosts and runs; `progress.py` and `timings.py` report what the build does and how long each stage took.
Nothing here computes a number of a tool or draws a page: that is `reportgen.core` and `reportgen.sections`.
"""
