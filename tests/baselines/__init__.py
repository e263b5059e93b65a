"""The FP16 baselines' tests: fp16_mac (both accumulator readings) and fp16_pcu."""
