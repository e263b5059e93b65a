"""Pack and unpack ``lib.data`` payloads by field name, from a unit's manifest.

The layout description is the one written by :func:`gen.verilog.layout_description`. A payload
value is a nested dict: struct fields by name, arrays as NumPy arrays (or lists) of integers,
plain fields as integers. Batches of beats are handled column-wise: every leaf is an array whose
first axis is the beat; an array of arrays (``ArrayLayout(ArrayLayout(...), n)``) is one leaf with
one axis per level, outer first.
"""

import numpy as np

__all__ = ["PayloadCodec", "compare_outputs", "flatten_fields", "nest_fields"]


class PayloadCodec:
    """Convert between packed payload integers and field dicts for one layout.

    Parameters
    ----------
    description : dict
        A layout description from a manifest (``manifest["ports"][name]["payload"]``).
    """

    def __init__(self, description):
        self.description = description
        self.width = description["width"]
        # Flatten to leaves: (path, offset, elem_width, signed, shape or None); shape holds the
        # array lengths, outer first (an array of arrays is one leaf).
        self._leaves = list(self._flatten(description, (), 0))

    @classmethod
    def _flatten(cls, desc, path, offset):
        kind = desc["kind"]
        if kind == "struct":
            for fld in desc["fields"]:
                yield from cls._flatten(fld["shape"], path + (fld["name"],), offset + fld["offset"])
        elif kind == "array":
            shape = (desc["length"],)
            elem = desc["elem"]
            while elem["kind"] == "array":      # element k of the outer array is contiguous
                shape += (elem["length"],)
                elem = elem["elem"]
            if elem["kind"] != "int":
                raise NotImplementedError("arrays of structs are not supported yet")
            yield path, offset, elem["width"], elem["signed"], shape
        elif kind == "int":
            yield path, offset, desc["width"], desc["signed"], None
        else:
            raise ValueError(f"unknown layout kind {kind!r}")

    def pack_batch(self, fields):
        """Return a list of packed integers, one per beat.

        ``fields`` maps leaf paths to arrays with the beat on the first axis, e.g.
        ``{"a": array(beats, lanes), "b": array(beats, lanes)}``; a nested struct field is
        reached with a nested dict, an array of arrays is an array ``(beats, outer, inner)``.
        Values out of a field's range raise :class:`ValueError`.
        """
        beats = None
        packed = None
        for path, offset, width, signed, shape in self._leaves:
            column = np.asarray(_get(fields, path), dtype=object)
            if shape is None:
                column = column.reshape(-1, 1)
            elif column.ndim != 1 + len(shape) or column.shape[1:] != shape:
                wanted = ", ".join(["beats", *map(str, shape)])
                raise ValueError(f"field {'.'.join(path)} must have shape ({wanted}), "
                                 f"not {column.shape}")
            else:
                column = column.reshape(column.shape[0], -1)
            lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            if column.size and (column.min() < lo or column.max() > hi):
                raise ValueError(f"field {'.'.join(path)} holds values outside {lo}..{hi}")
            if beats is None:
                beats = column.shape[0]
                packed = [0] * beats
            elif column.shape[0] != beats:
                raise ValueError("all fields must have the same number of beats")
            mask = (1 << width) - 1
            if self.width <= 62:               # narrow payload: vectorized in int64
                if not isinstance(packed, np.ndarray):
                    packed = np.zeros(beats, np.int64)
                bits = column.astype(np.int64) & mask
                for lane in range(bits.shape[1]):
                    packed |= bits[:, lane] << (offset + lane * width)
                continue
            for beat in range(beats):
                word = 0
                for lane, value in enumerate(column[beat]):
                    word |= (int(value) & mask) << (lane * width)
                packed[beat] |= word << offset
        return packed.tolist() if isinstance(packed, np.ndarray) else packed

    def unpack_batch(self, words):
        """Return the field dict (arrays with the beat on the first axis) for packed ``words``."""
        if self.width <= 62:                   # narrow payload: vectorized in int64
            return self._unpack_narrow(np.asarray([int(word) for word in words], np.int64))
        words = [int(word) for word in words]
        result = {}
        for path, offset, width, signed, shape in self._leaves:
            count = 1 if shape is None else int(np.prod(shape))
            mask = (1 << width) - 1
            values = np.empty((len(words), count), dtype=object)
            for beat, word in enumerate(words):
                field_bits = word >> offset
                for lane in range(count):
                    value = (field_bits >> (lane * width)) & mask
                    if signed and value >> (width - 1):
                        value -= 1 << width
                    values[beat, lane] = value
            if width <= 62:
                values = values.astype(np.int64)
            _set(result, path,
                 values[:, 0] if shape is None else values.reshape((len(words),) + shape))
        return result


    def _unpack_narrow(self, words):
        result = {}
        for path, offset, width, signed, shape in self._leaves:
            count = 1 if shape is None else int(np.prod(shape))
            lanes = (words[:, None] >> (offset + width * np.arange(count))) & ((1 << width) - 1)
            if signed:
                lanes = np.where(lanes >> (width - 1), lanes - (1 << width), lanes)
            _set(result, path,
                 lanes[:, 0] if shape is None else lanes.reshape((len(words),) + shape))
        return result


def _get(fields, path):
    node = fields
    for name in path:
        try:
            node = node[name]
        except KeyError:
            raise KeyError(f"payload field {'.'.join(path)!r} is missing") from None
    return node


def _set(fields, path, value):
    node = fields
    for name in path[:-1]:
        node = node.setdefault(name, {})
    node[path[-1]] = value


def flatten_fields(fields, prefix=""):
    """``{"o": {"y": array}}`` -> ``{"o.y": array}`` (for ``.npz`` files)."""
    flat = {}
    for name, value in fields.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            flat.update(flatten_fields(value, key + "."))
        else:
            flat[key] = np.asarray(value)
    return flat


def nest_fields(flat):
    """The inverse of :func:`flatten_fields`."""
    fields = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = fields
        for name in path:
            node = node.setdefault(name, {})
        node[leaf] = value
    return fields


def compare_outputs(got: dict, expected: dict, equal: dict | None = None) -> list[str]:
    """Compare output beats ``got`` with ``expected`` (``{port: fields}``) beat by beat; return
    one line per mismatching beat and field (beat counts first). ``equal`` maps a field's leaf
    name to ``(got, want) -> bool array`` for fields not compared bit for bit (a golden
    adapter's ``equal``). Used by the board host and the Amaranth-simulator harness."""
    equal = equal or {}
    problems = []
    for port, want_fields in expected.items():
        got_fields = flatten_fields(got.get(port, {}))
        want_fields = flatten_fields(want_fields)
        want_beats = len(next(iter(want_fields.values()))) if want_fields else 0
        got_beats = len(next(iter(got_fields.values()))) if got_fields else 0
        if got_beats != want_beats:
            problems.append(f"{port}: {got_beats} beats received, {want_beats} expected")
        beats = min(got_beats, want_beats)
        for name, want in want_fields.items():
            have = got_fields.get(name)
            if have is None:
                problems.append(f"{port}.{name}: field missing")
                continue
            have, want = np.asarray(have)[:beats], np.asarray(want)[:beats]
            leaf = name.split(".")[-1]
            if leaf in equal:
                same = np.asarray(equal[leaf](have, want), bool)
            else:
                same = have == want
            same = same.reshape(beats, -1).all(axis=1) if beats else same
            for beat in np.flatnonzero(~same):
                problems.append(f"{port}.{name} beat {beat}: got {_show(have[beat])}, "
                                f"expected {_show(want[beat])}")
    return problems


def _show(value):
    value = np.asarray(value)
    return str(value.tolist()) if value.ndim else str(value.item())
