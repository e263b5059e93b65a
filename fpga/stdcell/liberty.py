"""Open standard-cell libraries: where they are, and the few facts the flow reads from them.

A library is found the way a user has it: under ``PDK_ROOT`` in the volare/ciel layout
(``<pdk>/libs.ref/<library>/lib/<file>.lib`` or ``.lib.gz``), or given as explicit Liberty
files. :data:`LIBRARIES` names the three the project measures (sky130_fd_sc_hd tt, IHP
SG13G2 typical, ASAP7 RVT TT). :func:`library_facts` parses a library once (a small
Liberty reader: groups, simple and complex attributes) and keeps what the flow needs: every
cell's area and whether it is sequential, the smallest 2-input NAND (the NAND2-equivalent),
the time unit, and per flip-flop its clock-to-Q and setup from its tables. :func:`fo4_delay`
measures a library's fanout-of-4 inverter delay from its NLDM tables (the yardstick by which
``make paper`` scales the papers' 28 nm clocks to a library; :data:`FO4_28NM_PS` is the 28 nm
side).
"""

from __future__ import annotations

import fnmatch
import gzip
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FO4_28NM_PS", "FO4_28NM_SOURCE", "Fo4", "LIBRARIES", "Library", "LibraryError",
           "LibraryFacts", "find_liberty", "fo4_delay", "library_facts", "nldm_lookup",
           "parse_liberty"]


class LibraryError(ValueError):
    """A library cannot be found or read."""


@dataclass(frozen=True)
class Library:
    """An open library in the volare/ciel ``PDK_ROOT`` layout: ``pdk`` (its folder),
    ``name`` (under ``libs.ref``), ``files`` (glob patterns of its Liberty files, without
    ``.gz``), ``dont_use`` (cells the mapping must not use), ``title``."""

    pdk: str
    name: str
    files: tuple
    dont_use: tuple = ()
    title: str = ""


#: The libraries of ``make report`` (sky130, ihp) and of ``make area``/``make sweep`` on
#: request (asap7). sky130's ``lpflow`` cells are power-gating cells.
LIBRARIES = {
    "sky130": Library("sky130A", "sky130_fd_sc_hd", ("sky130_fd_sc_hd__tt_025C_1v80.lib",),
                      ("*lpflow*",), "SkyWater 130 nm sky130_fd_sc_hd, tt 25 C 1.80 V"),
    "ihp": Library("ihp-sg13g2", "sg13g2_stdcell", ("sg13g2_stdcell_typ_1p20V_25C.lib",),
                   (), "IHP SG13G2 130 nm sg13g2_stdcell, typ 1.20 V 25 C"),
    "asap7": Library("asap7", "asap7sc7p5t_rvt", ("asap7sc7p5t_*_RVT_TT_nldm.lib",),
                     (), "ASAP7 7 nm predictive asap7sc7p5t RVT, TT"),
}


def find_liberty(library: str, pdk_root: str | os.PathLike | None = None) -> list[Path]:
    """The Liberty files of ``library`` (a key of :data:`LIBRARIES`) under ``pdk_root``
    (default: the ``PDK_ROOT`` environment variable), ``.lib`` preferred to ``.lib.gz``.

    Raises
    ------
    LibraryError
        Unknown library, no ``PDK_ROOT``, or no file where the layout puts it (the message
        names the folder searched and ``PDK_ROOT``).
    """
    if library not in LIBRARIES:
        raise LibraryError(f"library must be one of {sorted(LIBRARIES)}, not {library!r}")
    root = pdk_root if pdk_root is not None else os.environ.get("PDK_ROOT")
    if not root:
        raise LibraryError(f"PDK_ROOT is not set: point it at a volare/ciel PDK root holding "
                           f"{LIBRARIES[library].pdk}/ (or pass --liberty FILE)")
    spec = LIBRARIES[library]
    folder = Path(root) / spec.pdk / "libs.ref" / spec.name / "lib"
    found = []
    for pattern in spec.files:
        plain = sorted(folder.glob(pattern))
        packed = sorted(folder.glob(pattern + ".gz"))
        chosen = plain or packed
        if not chosen:
            raise LibraryError(f"no {pattern}[.gz] in {folder} (PDK_ROOT={root}): install "
                               f"the {spec.pdk} PDK there or pass --liberty FILE")
        found += chosen
    return found


@dataclass(frozen=True)
class LibraryFacts:
    """What the flow reads from a library. Times in ps, areas in the library's unit
    (um^2 for the three of :data:`LIBRARIES`)."""

    files: tuple
    nand2: str
    nand2_area: float
    areas: dict = field(repr=False)
    sequential: frozenset = field(repr=False)
    #: flip-flop -> (clock-to-Q, setup) in ps
    flop_timing: dict = field(repr=False)
    #: the sequential cells that are latches (the others are flip-flops)
    latches: frozenset = field(default=frozenset(), repr=False)

    def sequential_area(self, cells: dict) -> float:
        """Area of the sequential cells among ``cells`` (cell type -> count)."""
        return sum(self.areas[name] * count for name, count in cells.items()
                   if name in self.sequential)

    def smallest(self, kind: str, dont_use=()) -> tuple[str, float]:
        """``(name, area)`` of the smallest ``"latch"`` or ``"flop"`` cell not matching a
        ``dont_use`` glob. Raises LibraryError if the library has none."""
        cells = self.latches if kind == "latch" else self.sequential - self.latches
        usable = [(self.areas[name], name) for name in cells
                  if not any(fnmatch.fnmatchcase(name, pattern) for pattern in dont_use)]
        if not usable:
            raise LibraryError(f"no {kind} cell in {', '.join(map(str, self.files))}")
        area, name = min(usable)
        return name, area


def library_facts(files) -> LibraryFacts:
    """Parse the Liberty ``files`` (``.lib`` or ``.lib.gz``) of one library."""
    files = tuple(Path(path) for path in files)
    areas, sequential, latches, timing, time_ps = {}, set(), set(), {}, None
    nand2 = []
    for path in files:
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", errors="replace") as handle:
                text = handle.read()
        except OSError as error:
            raise LibraryError(f"cannot read {path}: {error}") from None
        top = _parse(text, path)
        unit = top.attribute("time_unit")
        scale = _time_unit_ps(unit, path)
        time_ps = time_ps or scale
        for cell in top.groups_of("cell"):
            name = cell.name
            area = float(cell.attribute("area") or 0.0)
            areas[name] = area
            if cell.groups_of("latch"):
                latches.add(name)
            if cell.groups_of("ff") or cell.groups_of("latch"):
                sequential.add(name)
                flop = _flop_timing(cell, scale)
                if flop is not None:
                    timing[name] = flop
            if _is_nand2(cell):
                nand2.append((area, name))
    if not nand2:
        raise LibraryError(f"no 2-input NAND in {', '.join(map(str, files))}")
    area, name = min(nand2)
    return LibraryFacts(files, name, area, areas, frozenset(sequential), timing,
                        frozenset(latches))


# --- a small Liberty reader -------------------------------------------------------------------

@dataclass
class _Group:
    kind: str
    args: list
    attributes: dict = field(default_factory=dict)
    groups: list = field(default_factory=list)

    @property
    def name(self):
        return self.args[0] if self.args else ""

    def attribute(self, key):
        return self.attributes.get(key)

    def groups_of(self, kind):
        return [group for group in self.groups if group.kind == kind]


_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|[{}();:,]|[^\s{}();:,"]+')


def _parse(text, path):
    """The library group of a Liberty text (comments and line continuations removed)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).replace("\\\n", " ")
    tokens = _TOKEN.findall(text)
    stack = [_Group("root", [])]
    position, count = 0, len(tokens)

    def word(token):
        return token[1:-1] if token.startswith('"') else token

    while position < count:
        token = tokens[position]
        if token == "}":
            group = stack.pop()
            stack[-1].groups.append(group)
            position += 1
            continue
        if token == ";":
            position += 1
            continue
        following = tokens[position + 1] if position + 1 < count else ""
        if following == ":":                        # key : value [;] (ASAP7 omits some ;)
            stack[-1].attributes[token] = word(tokens[position + 2])
            position += 3
            continue
        if following == "(":                                    # name ( args ) { or ;
            args, position = [], position + 2
            while position < count and tokens[position] != ")":
                if tokens[position] != ",":
                    args.append(word(tokens[position]))
                position += 1
            position += 1
            if position < count and tokens[position] == "{":
                stack.append(_Group(token, args))
                position += 1
            else:
                stack[-1].attributes.setdefault(token, args)
            continue
        position += 1
    if len(stack) != 1 or not stack[0].groups:
        raise LibraryError(f"{path}: not a Liberty file (unbalanced groups)")
    return stack[0].groups[0]


def _time_unit_ps(unit, path):
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ps|ns)\s*", unit or "")
    if not match:
        raise LibraryError(f"{path}: time_unit {unit!r} is not in ps or ns")
    return float(match.group(1)) * (1000.0 if match.group(2) == "ns" else 1.0)


def _is_nand2(cell):
    """A cell with two inputs and one output computing NOT (A AND B)."""
    pins = cell.groups_of("pin")
    inputs = [pin.name for pin in pins if pin.attribute("direction") == "input"]
    outputs = [pin for pin in pins if pin.attribute("direction") == "output"]
    if len(inputs) != 2 or len(outputs) != 1 or cell.groups_of("ff"):
        return False
    function = outputs[0].attribute("function") or ""
    table = [_evaluate(function, dict(zip(inputs, (a, b)))) for a in (0, 1) for b in (0, 1)]
    return table == [True, True, True, False]


def _evaluate(function, values):
    """A Liberty boolean ``function`` (``!``, ``&``/``*``, ``|``/``+``, ``^``, parentheses)
    at ``values`` (pin -> 0/1); None if it holds anything else."""
    text = function.replace("+", "|").replace("*", "&")
    if not re.fullmatch(r"[\w\s!&|^()]*", text):
        return None
    text = re.sub(r"\w+", lambda match: str(values.get(match.group(0), "x")), text)
    if "x" in text:
        return None
    try:                                        # digits, ~ & | ^ and parentheses only
        return bool(eval(text.replace("!", "~"), {"__builtins__": {}}) & 1)
    except SyntaxError:
        return None


def _table(group, kinds):
    """The largest entry of ``kinds`` tables of a timing group at its second index of each
    axis (a short transition and a light load: the entry a flop sees beside its neighbours)."""
    worst = None
    for kind in kinds:
        for table in group.groups_of(kind):
            values = table.attribute("values")
            if not values:
                continue
            rows = [[float(v) for v in row.replace(",", " ").split()] for row in values]
            row = rows[min(1, len(rows) - 1)]
            value = row[min(1, len(row) - 1)]
            worst = value if worst is None else max(worst, value)
    return worst


def _flop_timing(cell, scale):
    """(clock-to-Q, setup) of an edge-triggered flip-flop in ps, or None."""
    clock_to_q = setup = None
    for pin in cell.groups_of("pin"):
        for timing in pin.groups_of("timing"):
            kind = timing.attribute("timing_type") or ""
            if kind in ("rising_edge", "falling_edge") and pin.attribute("direction") == "output":
                value = _table(timing, ("cell_rise", "cell_fall"))
                if value is not None:
                    clock_to_q = max(clock_to_q or 0.0, value)
            elif kind in ("setup_rising", "setup_falling"):
                value = _table(timing, ("rise_constraint", "fall_constraint"))
                if value is not None:
                    setup = max(setup or 0.0, value)
    if clock_to_q is None or setup is None:
        return None
    return clock_to_q * scale, setup * scale


# --- fanout-of-4 inverter delay ---------------------------------------------------------------

#: A 28 nm fanout-of-4 inverter delay (ps), the papers' node, for scaling their clocks to a
#: library by FO4 (docs/paper.md). No 28 nm library is public; see :data:`FO4_28NM_SOURCE`.
FO4_28NM_PS = 14.0
FO4_28NM_SOURCE = ("rule of thumb FO4 ~ 0.5 ns per um of drawn gate length (M. Horowitz; "
                   "R. Ho, K. Mai, M. Horowitz, 'The Future of Wires', Proc. IEEE 89(4), 2001) "
                   "at 28 nm: 14 ps; 28 nm high-k metal-gate libraries at nominal supply are "
                   "likely faster (about 10 ps), so the scaled clocks err on the demanding side")


@dataclass(frozen=True)
class Fo4:
    """A library's fanout-of-4 inverter delay (times in ps, capacitances in the library's
    load unit): ``cell`` driving ``load`` = 4 x its input capacitance, at the input slews
    ``slew_rise``/``slew_fall`` that the same stage produces (a chain of equal stages)."""

    cell: str
    input_capacitance: float
    load: float
    rise: float
    fall: float
    slew_rise: float
    slew_fall: float
    iterations: int

    @property
    def delay(self) -> float:
        """The FO4 delay: the mean of the rise and fall delays (ps)."""
        return (self.rise + self.fall) / 2


def parse_liberty(text: str, name: str = "<text>"):
    """The library group of the Liberty ``text`` (``name`` for messages): a tree of groups
    with ``kind``, ``name``, ``attribute(key)`` and ``groups_of(kind)``, as :func:`fo4_delay`
    and :func:`nldm_lookup` read it."""
    return _parse(text, name)


def nldm_lookup(table, templates, slew, load):
    """The value of a Liberty NLDM table group at an input transition ``slew`` and an output
    load ``load`` (both in the library's units): bilinear interpolation between the grid
    points, linear extrapolation beyond the outermost two (as static timing tools do). The
    axes are named by the table's template (``variable_1``/``variable_2``); its own
    ``index_1``/``index_2`` override the template's. A 1-D table reads its one variable."""
    template = templates.get(table.name)
    point = {"input_net_transition": slew, "total_output_net_capacitance": load}
    axes = []
    for number in (1, 2):
        variable = template.attribute(f"variable_{number}") if template else None
        index = table.attribute(f"index_{number}") or (
            template.attribute(f"index_{number}") if template else None)
        if variable is None or index is None:
            break
        if variable not in point:
            raise LibraryError(f"table {table.name!r}: unsupported axis {variable!r}")
        axes.append((_numbers(index), point[variable]))
    rows = [_numbers([row]) for row in table.attribute("values") or []]
    if not axes or not rows:
        raise LibraryError(f"table {table.name!r} has no index or values")
    if len(axes) == 1:
        rows = [[value] for value in sum(rows, [])]
        axes.append(([0.0], 0.0))
    (xs, x), (ys, y) = axes
    i, s = _segment(xs, x)
    j, t = _segment(ys, y)

    def at(a, b):
        return rows[min(a, len(rows) - 1)][min(b, len(rows[0]) - 1)]

    low = at(i, j) + t * (at(i, j + 1) - at(i, j))
    high = at(i + 1, j) + t * (at(i + 1, j + 1) - at(i + 1, j))
    return low + s * (high - low)


def _numbers(strings):
    return [float(value) for text in strings for value in text.replace(",", " ").split()]


def _segment(points, value):
    """(i, fraction) placing ``value`` on the segment points[i]..points[i+1] (extrapolating
    beyond the ends)."""
    if len(points) == 1:
        return 0, 0.0
    i = 0
    while i < len(points) - 2 and value > points[i + 1]:
        i += 1
    return i, (value - points[i]) / (points[i + 1] - points[i])


def fo4_delay(files, dont_use=(), *, fanout=4, tolerance=1e-9, max_iterations=100) -> Fo4:
    """The fanout-of-4 delay of the library in the Liberty ``files``, from its NLDM tables.

    The inverter of the smallest drive (the cell whose one output is the negation of its one
    input with the least input capacitance; ties: the smaller area; cells matching a
    ``dont_use`` glob excluded) drives ``fanout`` x its own input capacitance. In a chain of
    such stages a stage's input slew is the previous stage's output transition, so the slews
    are iterated to a fixed point: s_rise <- rise_transition(s_fall, load), s_fall <-
    fall_transition(s_rise, load) (a rising output follows a falling input), starting at the
    tables' smallest slew, until both move by less than ``tolerance`` (library time unit).
    The delay is the mean of cell_rise(s_fall) and cell_fall(s_rise).

    Raises
    ------
    LibraryError
        No inverter, no timing arc with the four tables, or no convergence.
    """
    candidates = []
    for path in (Path(name) for name in files):
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt", errors="replace") as handle:
                top = _parse(handle.read(), path)
        except OSError as error:
            raise LibraryError(f"cannot read {path}: {error}") from None
        templates = {group.name: group for group in top.groups_of("lu_table_template")}
        scale = _time_unit_ps(top.attribute("time_unit"), path)
        for cell in top.groups_of("cell"):
            if any(fnmatch.fnmatchcase(cell.name, pattern) for pattern in dont_use):
                continue
            inverter = _inverter_arc(cell)
            if inverter is not None:
                capacitance, arc = inverter
                area = float(cell.attribute("area") or 0.0)
                candidates.append((capacitance, area, cell.name, arc, templates, scale))
    if not candidates:
        raise LibraryError(f"no inverter in {', '.join(map(str, files))}")
    capacitance, _, name, arc, templates, scale = min(candidates, key=lambda c: c[:3])
    kinds = ("cell_rise", "cell_fall", "rise_transition", "fall_transition")
    tables = {kind: arc.groups_of(kind)[0] for kind in kinds if arc.groups_of(kind)}
    missing = [kind for kind in kinds if kind not in tables]
    if missing:
        raise LibraryError(f"{name}: its timing arc has no {', '.join(missing)} table")
    load = fanout * capacitance
    slew_index = templates.get(tables["rise_transition"].name)
    first = _numbers(tables["rise_transition"].attribute("index_1")
                     or (slew_index.attribute("index_1") if slew_index else ["0"]))[0]
    slew_rise = slew_fall = first
    for iteration in range(1, max_iterations + 1):
        new_rise = nldm_lookup(tables["rise_transition"], templates, slew_fall, load)
        new_fall = nldm_lookup(tables["fall_transition"], templates, slew_rise, load)
        done = abs(new_rise - slew_rise) < tolerance and abs(new_fall - slew_fall) < tolerance
        slew_rise, slew_fall = new_rise, new_fall
        if done:
            break
    else:
        raise LibraryError(f"{name}: FO4 input slew did not converge in {max_iterations} steps")
    rise = nldm_lookup(tables["cell_rise"], templates, slew_fall, load)
    fall = nldm_lookup(tables["cell_fall"], templates, slew_rise, load)
    return Fo4(name, capacitance, load, rise * scale, fall * scale, slew_rise * scale,
               slew_fall * scale, iteration)


def _inverter_arc(cell):
    """(input capacitance, timing group) of a one-input inverter cell, or None."""
    if cell.groups_of("ff") or cell.groups_of("latch"):
        return None
    pins = cell.groups_of("pin")
    inputs = [pin for pin in pins if pin.attribute("direction") == "input"]
    outputs = [pin for pin in pins if pin.attribute("direction") == "output"]
    if len(inputs) != 1 or len(outputs) != 1:
        return None
    name = inputs[0].name
    function = outputs[0].attribute("function") or ""
    if [_evaluate(function, {name: value}) for value in (0, 1)] != [True, False]:
        return None
    arcs = [timing for timing in outputs[0].groups_of("timing")
            if (timing.attribute("related_pin") or name) == name]
    capacitance = inputs[0].attribute("capacitance")
    if capacitance is None:
        sides = [inputs[0].attribute(key) for key in ("rise_capacitance", "fall_capacitance")]
        if None in sides:
            return None
        capacitance = sum(float(side) for side in sides) / 2
    return (float(capacitance), arcs[0]) if arcs else None
