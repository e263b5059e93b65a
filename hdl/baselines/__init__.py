"""The FP16 baselines the papers compare with: the FP16 MAC and the HBM-PIM compute unit."""

from .fp16_mac import Fp16Mac
from .fp16_pcu import Fp16Pcu

__all__ = ["Fp16Mac", "Fp16Pcu"]
