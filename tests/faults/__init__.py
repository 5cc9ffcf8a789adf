"""Fault suite: real processes, real faults, the same report as an undisturbed run."""
