"""Pieces every unit shares: stream stages (`stream_stage`), arithmetic helpers (`arith`,
`compressor`, `fp32_steps`), number formats (`fp16`), lane splitting (`lanes`), parameter checks
(`params`), formal invariants (`invariants`), modules emitted once per design
(`shared_modules`) and the AXI4-Stream wrapper (`axis`)."""
