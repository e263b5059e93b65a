"""Amaranth 0.5 components for the key units of the qllm-cores papers.

One unit per module; shared arithmetic and stream plumbing live beside them. Nothing here imports
``golden``: the RTL stands on the papers and ``SPEC.md`` alone.
"""
