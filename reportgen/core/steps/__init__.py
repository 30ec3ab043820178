"""Steps: typed step events (`events`), the step database with its time breakdown (`step_db`), TPU steps
from the device's step and op lines (`tpu_steps`) and XProf's per-step TPU details (`tpu_details`)."""
