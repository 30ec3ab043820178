"""Imported once by the fork server that starts a build's worker processes.

Workers are forked from that server, a fresh single-threaded interpreter,
never from the building process (which may run threads: the asset bundler,
fsspec's I/O loop, the progress bar), so they inherit no half-held lock. The
server imports the host stage and warms the compiled decoder here, once, so
each worker starts ready.
"""

from reportgen.pipeline.host_stage import warm_up

warm_up()
