"""Orizuru, KLLM's top-k largest / smallest unit: the component and its scan baseline
(`orizuru`), its circuits (`loop`, `tree`, `unrolled`, `units`) and the sorting-network baseline
(`sortnet`, `sortnet_circuits`, `sortnet_networks`)."""

from .orizuru import Orizuru, OrizuruScan
from .sortnet import OrizuruSortnet

__all__ = ["Orizuru", "OrizuruScan", "OrizuruSortnet"]
