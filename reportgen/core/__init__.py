"""Aggregates shared by every tool (XProf's OpStats layer)."""
