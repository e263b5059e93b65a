"""NumPy golden models, written from the papers and SPEC.md alone (never from ``hdl``).

Integer models are bit-exact with the RTL; float models give the paper's algorithm where the RTL
approximates it.
"""
