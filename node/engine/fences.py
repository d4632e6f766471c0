"""Shard epochs as fences in the catalog store.

Every open of a shard in a cluster carries an epoch from the meta service, strictly larger
than any earlier open's. The opener raises the shard's fence row to its epoch (never lowers
it), and every manifest commit of a table on that shard re-reads the row *in the commit's own
transaction*: once a newer owner has opened the shard, a deposed owner's flush or compaction
cannot install a version, whatever its clock or lease believes. The row lives beside the
manifests (same store) precisely so that the check and the commit are one transaction.

Epoch 0 means unfenced (standalone: one process owns every shard; the data-directory lock
keeps a second one out).
"""

from __future__ import annotations

from gnomon.errors import Fenced
from gnomon.store.api import StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec

SHARD_FENCES = TableSpec(
    "shard_fences",
    (FieldSpec("shard_id", FieldType.LONG), FieldSpec("epoch", FieldType.LONG)),
    primary_key=("shard_id",),
)

UNFENCED = 0


class ShardFences:
    def __init__(self, store: StructuredStore) -> None:
        store.create(SHARD_FENCES, if_not_exists=True)
        self._store = store

    def take(self, shard_id: int, epoch: int) -> None:
        """Raise the fence of ``shard_id`` to ``epoch``; Fenced if a later epoch holds it.
        Taking the epoch already held is a no-op (a reopen after a crash of this owner)."""
        if epoch == UNFENCED:
            return

        def txn(ctx: TableContext) -> None:
            fences = ctx.table(SHARD_FENCES.name)
            row = fences.read({"shard_id": shard_id})
            held = UNFENCED if row is None else int(row["epoch"])
            if held > epoch:
                raise Fenced(
                    f"shard {shard_id} is held at epoch {held}; cannot open it at epoch {epoch}",
                    shard_id=shard_id,
                )
            if held < epoch:
                fences.write({"shard_id": shard_id, "epoch": epoch})

        run_with_retries(self._store, txn)

    def held(self, shard_id: int) -> int:
        row = run_with_retries(
            self._store, lambda ctx: ctx.table(SHARD_FENCES.name).read({"shard_id": shard_id})
        )
        return UNFENCED if row is None else int(row["epoch"])


def check(ctx: TableContext, shard_id: int, epoch: int) -> None:
    """Inside a commit's transaction: refuse unless ``epoch`` still holds the shard."""
    if epoch == UNFENCED:
        return
    row = ctx.table(SHARD_FENCES.name).read({"shard_id": shard_id})
    held = UNFENCED if row is None else int(row["epoch"])
    if held != epoch:
        raise Fenced(
            f"shard {shard_id} moved on to epoch {held}; this owner (epoch {epoch}) may not commit",
            shard_id=shard_id,
        )
