"""Write-ahead logs: the :class:`Wal` contract and the disk implementation."""

from node.wal.api import Wal, WalRecord

__all__ = ["Wal", "WalRecord"]
