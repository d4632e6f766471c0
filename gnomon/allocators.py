"""How long a gnomon process keeps the memory its queries free before handing it back to the
system.

A query's large buffers (Arrow's and DataFusion's, from their mimalloc; numpy's, from the C
library's malloc) are freed as it ends. Handed back to the system, they are faulted in again,
page by page, when a query of that size next runs: on a virtual machine a fault can cost tens of
microseconds, and TSBS's scans over 100 hosts for 12-24 h (5-10 MB each) took 15-30 ms more
whenever it happened. Kept a while, the next query reuses them. The cost is memory: what a
burst of queries freed stays resident for up to :data:`PURGE_DELAY_MS` (mimalloc) or, below
:data:`TRIM_THRESHOLD` per malloc arena, until reused (glibc)."""

from __future__ import annotations

import ctypes
import os

#: How long mimalloc keeps freed memory before purging it (its own default is 10 ms; its
#: arenas wait ten times as long). TSBS's after-idle queries meet a scan of their size every
#: few seconds, other queries in between: 1 s still let most of their buffers go.
PURGE_DELAY_MS = 10_000
#: Blocks from this size up are mapped on their own and unmapped when freed; glibc's largest
#: setting. Its default starts at 128 KiB and moves to the size of the last such block freed,
#: so blocks around a query's usual sizes went back to the system after every query.
MMAP_THRESHOLD = 32 * 2**20
#: Free memory at the top of a malloc arena beyond this is handed back to the system: twice
#: the mapping threshold, where glibc's own moving setting ends.
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD
# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def defer_purge() -> None:
    """mimalloc purges freed memory after :data:`PURGE_DELAY_MS`. It reads its settings as
    Arrow and DataFusion load, so this runs before anything imports them (importing gnomon
    comes first in every gnomon process); an explicit setting in the environment wins."""
    os.environ.setdefault("MIMALLOC_PURGE_DELAY", str(PURGE_DELAY_MS))


def hold_freed_memory() -> bool:
    """glibc's malloc keeps freed blocks below :data:`MMAP_THRESHOLD`, and trims an arena only
    beyond :data:`TRIM_THRESHOLD`, for the rest of the process. False (nothing changed) with
    another C library."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        return False
    return bool(
        libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
