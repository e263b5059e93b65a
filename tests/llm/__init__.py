"""The small real LLM's tests: the NumPy forward pass and tokenizer of golden/llm/."""
