"""The registered units, one module per paper (each a tuple ``SPECS`` of
:class:`gen.spec.UnitSpec`), gathered in :data:`gen.registry.UNITS` in this order: ``kllm``,
``oaken``, ``p3``, ``baselines``, ``accllm``."""
