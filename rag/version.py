"""Sieve's version: recorded in every index manifest, run and artifact it writes."""

__version__ = "0.1.0"
