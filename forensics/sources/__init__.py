"""The ordered registry of sources. Adding a source: a module here with ``NAME``, ``FORMS``, ``sniff``
and ``parse`` (the job-output sources' are :class:`.joblog.JobSource` objects over their modules), its grammar in ``grammars/``, golden files in ``tests/golden/<name>/``, a line in
``SOURCES`` below, and a row in CONTRIBUTING.md.

>>> get("kernl")
Traceback (most recent call last):
...
forensics.errors.UnknownSourceError: Unknown source 'kernl'. Did you mean 'kernel'?
"""

from __future__ import annotations

import difflib
from types import ModuleType
from typing import Any

from ..errors import UnknownSourceError
from . import (dcgm, df, disks, gpuseries, ibcounters, joblog, journal, kernel, lspci, nicstats, nvsmi, sel, sensors,
               stacks, vendorhealth)

#: Sources in the order sniffing tries them (on equal confidence the first wins).
SOURCES: dict[str, ModuleType | joblog.JobSource] = {
    nvsmi.NAME: nvsmi, journal.NAME: journal, kernel.NAME: kernel,
    **joblog.SOURCES,  # nccl, torch, trainlog: their modules' families, read by joblog
    lspci.NAME: lspci, ibcounters.NAME: ibcounters, nicstats.NAME: nicstats,
    dcgm.NAME: dcgm, disks.NAME: disks, df.NAME: df,
    sel.NAME: sel, sensors.NAME: sensors, gpuseries.NAME: gpuseries, vendorhealth.NAME: vendorhealth,
    stacks.NAME: stacks,
}  # fmt: skip

#: Sources whose ``samples`` stamps are the machine's wall clock (a module with ``LOCAL_TIME = True``):
#: ingest re-reads them in the incident's timezone, as it does for ``dmesg -T``.
LOCAL_TIME: frozenset[str] = frozenset(n for n, m in SOURCES.items() if getattr(m, "LOCAL_TIME", False))
#: Sources whose bare-number ``samples.device`` is nvidia-smi's GPU index (``GPU_INDEX = True``): ingest
#: turns it into the bus id (:func:`forensics.ingest.align.align_samples`).
GPU_INDEX: frozenset[str] = frozenset(n for n, m in SOURCES.items() if getattr(m, "GPU_INDEX", False))


def get(name: str) -> Any:
    """The source module registered as ``name``."""
    try:
        return SOURCES[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(SOURCES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else f" Known sources: {', '.join(SOURCES)}."
        raise UnknownSourceError(f"Unknown source {name!r}.{hint}") from None


def sniff(head: str) -> tuple[str | None, float]:
    """The source most likely to have produced a file starting with ``head``, and the confidence."""
    best: tuple[str | None, float] = (None, 0.0)
    for name, module in SOURCES.items():
        score = module.sniff(head)
        if score > best[1]:
            best = (name, score)
            if score >= 1.0:  # certain: a later source could only tie, and ties go to the first
                break
    return best
