"""Errors that name the input they are about."""

from __future__ import annotations


class CaptureError(Exception):
    """A capture file that cannot be read; the message names the file."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class NoCapturesError(Exception):
    """A logdir in which no capture was found."""


class SchedulerError(Exception):
    """The Dask scheduler given with --scheduler cannot be used."""
