"""KLLM's tests: the Concat array, the Index Distribution Counter, the MatMul column, Orizuru and
its baselines, and the golden models of golden/kllm/."""
