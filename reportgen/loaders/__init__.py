"""Files to data: everything that reads bytes, so that nothing downstream touches protobuf.

`logdir.py` finds runs and host files under a logdir (local or fsspec URL) and reads them; `xspace.py` decodes
an `.xplane.pb` into a `reportgen.capture.HostCapture` (columns, interned strings) with the compiled wire
walker of `wire.py`; `stat_protos.py` decodes the stats that hold serialized XProf protos; `hlo.py` parses the
capture's HLO modules once and converts them into the plain dataclasses of `reportgen.core.hlo.model`.
`proto/` holds the schema subsets and their generated modules. Older formats are read by `reportgen.legacy`;
`older_formats.py` names their files, for discovery and for that package alike.
"""
