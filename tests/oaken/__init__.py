"""Oaken's tests: the decomposer, the dequantizer, the online quantizer and the golden models of
golden/oaken/."""
