"""Pieces every unit shares: stream stages (`stream_stage`), arithmetic helpers (`arith`,
`compressor`, `fp32_steps`), number formats (`fp16`), lane splitting (`lanes`), parameter checks
(`params`), formal invariants (`invariants`) and modules emitted once per design
(`shared_modules`)."""
