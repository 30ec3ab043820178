"""A capture's events as core reads them: columns, names, nesting and the step each event belongs to.

`table.EventTable` (per-event columns and stat lookup, shared per host), `schema` (XSpace plane, line and stat
names), `tf_op` (framework op names: TensorFlow, JAX, tf.data), `nesting` (the compiled per-line kernels:
nesting, self time, op-stack replay, graph walks) and `grouping` (XProf's event grouping into steps).
"""
