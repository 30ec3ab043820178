"""HLO modules as core reads them: plain dataclasses mirroring XLA's protos (`model`, filled by
`reportgen.loaders.hlo`), instructions and shapes printed as XLA prints them (`text`, `shapes`), and device
ops looked up in the modules for the op tools (`ops.HloOpIndex`)."""
