"""A serving process keeps the memory a query freed for the next one: reusing a freed block
faults no page in again (counted as the kernel counts a process's minor faults), neither
from the C library's malloc nor from Arrow's mimalloc a second after the free."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
BLOCK = 8 * 2**20
PAGES = BLOCK // 4096

#: Takes a block of BLOCK bytes, fills and frees it, runs ``pause``, then takes and fills one
#: of the same size again and prints the minor faults that cost. ``setup`` gives the
#: allocator's ``alloc``, ``fill`` and ``free``.
_REUSE = """
import resource, sys
{setup}
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = alloc({block}); fill(block); free(block)
{pause}
before = faults()
block = alloc({block}); fill(block)
print(faults() - before)
"""

_GLIBC = """
import ctypes
from gnomon.allocators import hold_freed_memory
if not hold_freed_memory():
    print("not glibc"); sys.exit(0)
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
alloc = libc.malloc
def fill(p): ctypes.memset(p, 1, {block})
free = libc.free
"""

_ARROW = """
import gnomon
import numpy as np, pyarrow as pa
assert pa.default_memory_pool().backend_name == "mimalloc"
alloc = pa.allocate_buffer
def fill(b): np.frombuffer(b, dtype=np.uint8)[:] = 1
def free(b): pass  # the last reference goes in the pause
"""


def _faults(setup: str, *, pause: str = "") -> str:
    script = _REUSE.format(setup=setup.format(block=BLOCK), block=BLOCK, pause=pause)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        # gnomon's own settings, not the caller's.
        env={k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_malloc_reuses_a_freed_block() -> None:
    out = _faults(_GLIBC)
    if out == "not glibc":
        pytest.skip("the C library is not glibc")
    # Unheld, glibc unmaps the block when freed (or trims it off the heap) and the second
    # one faults in every page again.
    assert int(out) < PAGES // 16, f"{out} of {PAGES} pages faulted in again"


def test_arrow_reuses_a_block_freed_a_second_ago() -> None:
    # The block is freed, and after a pause longer than mimalloc's own 10 ms and the second
    # gnomon held memory for before, a smaller buffer comes and goes: that is when mimalloc
    # purges what expired, and before, the block came back with a quarter of its pages
    # faulted in again.
    pause = "block = None; import time; time.sleep(1.5); pa.allocate_buffer(4 * 2**20)"
    out = _faults(_ARROW, pause=pause)
    assert int(out) < PAGES // 16, f"{out} of {PAGES} pages faulted in again"
