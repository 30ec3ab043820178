"""reportgen: TensorFlow / JAX profiler captures to a static web site."""

__version__ = "0.1.0"
