"""Input-pipeline building blocks: the host-side input ops and XProf's input time split (`input_ops`), XProf's
wording of its advice (`advice`), tf.data iterator statistics and the bottleneck analysis (`tf_data`), a
pipeline's iterator graph (`tf_data_graph`) and what to do about a bottleneck (`tf_data_advice`). The tool
itself is `core.tools.input_pipeline`."""
