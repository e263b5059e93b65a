"""The papers' side of ``make paper``'s area table: their hardware tables' cells as they stand in
the texts (``../shared/papers``), their clocks, and the 28 nm conversion.

Every quoted cell (`Quote.cells`) is a substring of one line of the paper's text, checked by the
tests; `Quote.area_um2` is the same number read as um^2 (mm^2 x 10^6). A quote with no cells is
not in the texts here (BitMoD's own sheet) and says where it comes from instead.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLOCKS", "Clock", "NAND2_28NM_SOURCE", "NAND2_28NM_UM2", "PAPER_TEXTS", "Quote",
           "QUOTES", "TABLE_I", "lane_rows_check", "nand2_eq_28nm", "um2_28nm"]

#: Paper -> its text's file name in ``../shared/papers``.
PAPER_TEXTS = {"KLLM": "kllm.txt", "P3-LLM": "p3-llm.txt", "Oaken": "oaken.txt"}

#: Area of one 28 nm NAND2 of drive 1 (um^2): the unit that turns NAND2-equivalents into
#: 28 nm um^2 and back. No 28 nm library is public; see :data:`NAND2_28NM_SOURCE`.
NAND2_28NM_UM2 = 0.49
NAND2_28NM_SOURCE = (
    "0.49 um^2, the one-gate-equivalent figure commonly used for TSMC 28 nm planar libraries; "
    "no 28 nm Liberty file or vendor datasheet is public, and the figure depends on the "
    "library's track height (9 to 12 tracks): take it as +-25 %")


def um2_28nm(nand2_eq: float) -> float:
    """NAND2-equivalents as 28 nm um^2 (x :data:`NAND2_28NM_UM2`)."""
    return nand2_eq * NAND2_28NM_UM2


def nand2_eq_28nm(um2: float) -> float:
    """A 28 nm area (um^2) in NAND2-equivalents (/ :data:`NAND2_28NM_UM2`)."""
    return um2 / NAND2_28NM_UM2


@dataclass(frozen=True)
class Clock:
    """A paper's synthesis clock: ``mhz`` and the ``quote`` (a substring of the paper's text)
    that states it, or ``source`` in words when the texts here do not."""

    mhz: float
    quote: str
    paper: str
    source: str = ""


CLOCKS = {
    "KLLM": Clock(500, "KLLM ACCELERATOR CONFIGURATIONS (28NM, 500MHZ).", "KLLM",
                  "Table I caption"),
    "P3-LLM": Clock(1000, "The area and energy consumption of different PE design under 1GHz",
                    "P3-LLM", "Table VIII caption"),
    "Oaken": Clock(1000, "frequency of 1 GHz on TSMC 28nm technology",
                   "Oaken", "section 6.1"),
    # BitMoD's PE as P3-LLM compares it (Table VIII, under 1GHz).
    "BitMoD": Clock(1000, "The area and energy consumption of different PE design under 1GHz",
                    "P3-LLM", "P3-LLM Table VIII compares BitMoD's PE under 1GHz"),
}


@dataclass(frozen=True)
class Quote:
    """One area cell of a paper's table.

    Attributes
    ----------
    paper : str
        ``"KLLM"``, ``"P3-LLM"``, ``"Oaken"`` or ``"BitMoD"``.
    table : str
        Where it is (``"Table I"``...).
    item : str
        What the row is, in words.
    cells : tuple of str
        The row's cells exactly as in the paper's text, all on one line (empty: not in the
        texts here, see ``source``).
    area_um2 : float
        The area the row states, in um^2.
    units : int
        Units that area covers (per unit = area / units).
    source : str
        Where a quote without cells comes from, and any reading of the cells.
    absolute : bool
        Whether the area compares with one of ours as it stands (False: only ratios of the
        paper's own rows do).
    """

    paper: str
    table: str
    item: str
    cells: tuple
    area_um2: float
    units: int = 1
    source: str = ""
    absolute: bool = True

    @property
    def per_unit_um2(self) -> float:
        """Area of one unit (um^2)."""
        return self.area_um2 / self.units

    @property
    def per_unit_mm2(self) -> float:
        """Area of one unit (mm^2)."""
        return self.per_unit_um2 / 1e6

    @property
    def text(self) -> str:
        """The cells as printed in the table (``" / "`` between them)."""
        return " / ".join(self.cells) if self.cells else self.source.split(";")[0]


def _table_i(item, specification, count, area_text, mm2):
    return Quote("KLLM", "Table I", item, (specification, area_text), mm2 * 1e6, count)


#: KLLM Table I ("KLLM accelerator configurations (28nm, 500MHz)"), the area column (mm^2) of
#: the rows compared; a row's area covers the ``units`` its specification names.
TABLE_I = {
    "mac": _table_i("FP16 MAC", "32 FP16 MAC Units per lane", 32, "9.05×10^{-2}", 9.05e-2),
    "concat": _table_i("Concat unit", "4096 Concat Units per lane", 4096, "8.68×10^{-2}",
                       8.68e-2),
    "counter": _table_i("16-input IdxCounter", "32 16-in IdxCounter per lane", 32,
                        "2.71×10^{-1}", 2.71e-1),
    "orizuru": _table_i("16-input Orizuru", "273 16-in Orizuru Units per chip", 273,
                        "7.39×10^{-1}", 7.39e-1),
    # The other per-lane row and the PE Lane row, for `lane_rows_check` only.
    "wgt_buffer": _table_i("Wgt Buffer", "2 KB per lane", 1, "6.75×10^{-2}", 6.75e-2),
    "pe_lane": _table_i("PE Lane", "16 PE Lanes per chip", 16, "8.25", 8.25),
}


def lane_rows_check() -> tuple[float, float]:
    """``(sum of the four per-lane rows, PE Lane area / 16)`` in mm^2: equal to the table's
    precision when the number column of the per-lane rows is area, not power."""
    lane = ("concat", "wgt_buffer", "counter", "mac")
    return (sum(TABLE_I[key].area_um2 for key in lane) / 1e6,
            TABLE_I["pe_lane"].per_unit_um2 / 1e6)


QUOTES = {
    # P3-LLM Table VIII (PE area under 1GHz, 28 nm; "normalized to that of an FP16 MAC").
    "p3.mac": Quote("P3-LLM", "Table VIII", "HBM-PIM's FP16 MAC (the 1.00x reference)",
                    ("HBM-PIM [42]", "1 MAC", "1023.1 (1.00×"), 1023.1),
    "p3.pe": Quote("P3-LLM", "Table VIII", "P3-LLM PE (a 4-way dot product)",
                   ("P³-LLM (Ours)", "4 MACs", "1109.2 (1.08×"), 1109.2),
    # P3-LLM Table VII: the PCUs' compute area of the whole HBM device, scaled to HBM-PIM's
    # 20 nm DRAM process (section VI-A): only the ratio of the two compares.
    "p3.pcu.base": Quote("P3-LLM", "Table VII", "HBM-PIM PCUs' compute area (all PCUs)",
                         ("HBM-PIM", "0.44", "7.7", "6.2", "16.4%"), 7.7e6,
                         source="whole device, 20 nm DRAM process; ratio only",
                         absolute=False),
    "p3.pcu": Quote("P3-LLM", "Table VII", "P3-LLM PCUs' compute area (all PCUs)",
                    ("P³-LLM", "0.46", "8.4", "6.2", "17.5%"), 8.4e6,
                    source="whole device, 20 nm DRAM process; ratio only", absolute=False),
    # Oaken Table 4 (TSMC 28 nm; area in mm^2 and share of a compute core).
    "oaken.quant": Quote("Oaken", "Table 4", "quantization engine (decomposer, inlier and "
                         "outlier quantizers)", ("Quantization engine 0.074 1.86",), 0.074e6),
    "oaken.dequant": Quote("Oaken", "Table 4", "dequantization engine",
                           ("Dequantization engine 0.252 6.35",), 0.252e6),
    "oaken.core": Quote("Oaken", "Table 4", "compute core (MPU, VPU, DMA with the engines)",
                        ("Compute core 3.971 100",), 3.971e6),
    # BitMoD's own 28 nm PE sheet: not in the texts here (P3-LLM Table VIII quotes BitMoD's
    # PE at 1291.6 um^2 with its registers, "1291.6 (1.26×").
    "bitmod.pe": Quote("BitMoD", "PE sheet", "BitMoD PE without registers", (), 1221.6,
                       source="1,221.6 um^2; Y. Chen et al., BitMoD, HPCA 2025 (28 nm PE "
                              "sheet, as issue 33 gives it; not checked against its text)"),
    "bitmod.fp16": Quote("BitMoD", "PE sheet", "FP16 multiplier + FP16 adder", (),
                         1273.6 + 459.9,
                         source="1,273.6 + 459.9 um^2; BitMoD, HPCA 2025 (FP16 multiplier "
                                "and FP16 adder, as issue 33 gives them)"),
}
"""The other papers' quoted rows, by key (see `fpga.paper.rows` for what each is set beside)."""
