"""The FP16 MAC baseline: the component (`fp16_mac`), its formats (`formats`), the FP32
accumulator (`accumulator`) and the binary16 accumulation (`half`)."""

from .fp16_mac import Fp16Mac

__all__ = ["Fp16Mac"]
