"""KafkaWal: the :class:`gnomon.wal.api.Wal` of cluster mode, with its regions on Kafka.

Region ``r`` of namespace ``ns`` is the topics ``ns-wal-r`` (the log) and ``ns-wal-r-meta``
(RegionMeta snapshots), one partition each. One producer serves every region of a KafkaWal; a
poller thread serves its delivery reports and a cleaner thread snapshots the regions and
deletes records nothing needs any more. See README.md in this folder.

A region must be open in one KafkaWal at a time (the cluster gives each shard one owner). It is
opened at the shard's epoch: records carry it, an epoch marker starts each owner's part of the
log, and a deposed owner's late records are never replayed (see README.md, "Fencing").
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from gnomon.errors import Closed, InvalidArgument
from gnomon.wal.region_wal import RegionWal

from .follow import RegionFollower
from .frame import MIN_RECORD_BYTES
from .kafka import (
    Clients,
    DeleteOutcome,
    TopicSpec,
    delete_records_before,
    ensure_topics,
    reachable,
)
from .region import Context, Counters, RecoveryInfo, Region

logger = logging.getLogger("gnomon.wal.kafka")

_NAMESPACE = re.compile(r"[A-Za-z0-9._-]{1,200}")
#: Times the broker must drop the connection on DeleteRecords, while answering other requests,
#: before the WAL takes it for a broker that does not implement DeleteRecords.
_DROPS_BEFORE_GIVING_UP = 2
#: Failed cleaner rounds in a row before a transient DeleteRecords failure is worth a warning
#: (a client may need a round or two to learn a new topic's leader).
_FAILURES_BEFORE_WARNING = 5
_POLL_INTERVAL_S = 0.1


class _ProducerHealth:
    """The producer's fatal error, set from its error callback. Kept apart from the KafkaWal
    so the callback holds no reference to it (a closed WAL is freed, connections and all,
    as soon as it is dropped)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.fatal: KafkaError | None = None

    def on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = error
            logger.error("Kafka WAL at %s: the producer failed for good: %s", self.bootstrap, error)
        else:
            logger.debug("Kafka WAL at %s: client error: %s", self.bootstrap, error)


class KafkaWal(RegionWal[Region]):
    """A :class:`gnomon.wal.api.Wal` on Kafka.

    ``bootstrap`` is the broker list (``host:port,...``) and ``namespace`` prefixes the topic
    names, so several WALs can share a cluster. ``timeout_s`` bounds every Kafka operation
    (an unreachable cluster surfaces as ``Unavailable`` naming ``bootstrap`` after it).
    ``replication_factor`` applies to topics the WAL creates (-1: the broker's default).
    ``max_record_bytes`` caps a Kafka record (larger groups and payloads are split; it must
    stay under the broker's ``message.max.bytes``). ``index_interval`` is the most Kafka
    records a read may skip before its first record (the seq -> offset index keeps one entry
    per that many records at most). Every ``clean_interval_s`` the cleaner snapshots each
    changed region and deletes records below its lowest live offset, unless
    ``delete_records=False`` (a broker known to lack DeleteRecords: records are then only
    marked deleted). ``idempotent=False`` is for brokers without idempotent producers.
    ``config`` is passed to every Kafka client (security settings and the like).
    """

    def __init__(
        self,
        bootstrap: str,
        *,
        namespace: str = "gnomon",
        timeout_s: float = 10.0,
        append_timeout_s: float = 5.0,
        replication_factor: int = -1,
        max_record_bytes: int = 1_000_000,
        index_interval: int = 16,
        clean_interval_s: float = 30.0,
        delete_records: bool = True,
        idempotent: bool = True,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(bootstrap, str) or not bootstrap:
            raise InvalidArgument(f"Kafka WAL bootstrap servers must be given, got {bootstrap!r}")
        if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
            raise InvalidArgument(
                f"Kafka WAL namespace must be 1-200 of A-Z a-z 0-9 . _ -, got {namespace!r}"
            )
        for what, number, minimum in (
            ("timeout_s", timeout_s, 0.1),
            ("append_timeout_s", append_timeout_s, 0.1),
            ("clean_interval_s", clean_interval_s, 0.001),
        ):
            if isinstance(number, bool) or not isinstance(number, int | float) or number < minimum:
                raise InvalidArgument(
                    f"Kafka WAL {what} must be at least {minimum}, got {number!r}"
                )
        for what, count, least in (
            ("max_record_bytes", max_record_bytes, MIN_RECORD_BYTES),
            ("index_interval", index_interval, 1),
            # -1 (the broker's default) or a positive count.
            ("replication_factor", replication_factor, -1),
        ):
            if isinstance(count, bool) or not isinstance(count, int) or count < least:
                raise InvalidArgument(f"Kafka WAL {what} must be an int >= {least}, got {count!r}")
        if replication_factor == 0:
            raise InvalidArgument("Kafka WAL replication_factor must be -1 or positive, got 0")
        super().__init__(f"Kafka WAL {namespace} at {bootstrap}")
        self.bootstrap = bootstrap
        self.namespace = namespace
        self.timeout_s = float(timeout_s)
        self._replication_factor = replication_factor
        self._clean_interval_s = float(clean_interval_s)
        clients = Clients(bootstrap, namespace, self.timeout_s, dict(config or {}))
        health = _ProducerHealth(bootstrap)
        try:
            #: Released on close: the client has no close of its own, only its destructor.
            self._admin: AdminClient | None = clients.admin()
            producer = Producer(
                clients.producer_config(
                    idempotent=idempotent,
                    max_record_bytes=max_record_bytes,
                    on_error=health.on_error,
                )
            )
        except (KafkaException, ValueError, TypeError) as e:
            raise InvalidArgument(f"Kafka WAL client configuration: {e}") from e
        self._counters = Counters()
        self._ctx = Context(
            clients=clients,
            producer=producer,
            max_record_bytes=max_record_bytes,
            index_interval=index_interval,
            fatal=lambda: health.fatal,
            counters=self._counters,
            append_timeout_s=float(append_timeout_s),
        )
        #: None until DeleteRecords first succeeds (True) or is found unsupported (False).
        self._delete_supported: bool | None = None if delete_records else False
        if not delete_records:
            logger.info(
                "Kafka WAL at %s: DeleteRecords is not used (wal_delete_records is off); WAL "
                "records are only marked deleted, and the data topics keep growing",
                bootstrap,
            )
        self._delete_drops = 0
        self._delete_failures = 0
        self._stop_cleaning = threading.Event()
        self._stop_polling = threading.Event()
        self._poller = threading.Thread(
            target=self._poll_loop, name=f"gnomon-wal-{namespace}-poll", daemon=True
        )
        self._cleaner = threading.Thread(
            target=self._clean_loop, name=f"gnomon-wal-{namespace}-clean", daemon=True
        )
        self._poller.start()
        self._cleaner.start()

    # -- regions (RegionWal routes the Wal calls to them) ------------------------------------

    def _open_region(self, region_id: int, epoch: int) -> Region:
        data_topic = f"{self.namespace}-wal-{region_id}"
        return Region.open(
            self._ctx, region_id, data_topic, f"{data_topic}-meta", self._ensure_topics, epoch
        )

    def follow(self, region_id: int, floors: Mapping[int, int]) -> RegionFollower:
        """Read ``region_id`` as its leader writes it, without opening it (a follower)."""
        data_topic = f"{self.namespace}-wal-{region_id}"
        return RegionFollower(self._ctx, region_id, data_topic, f"{data_topic}-meta", floors)

    def _region_name(self, region_id: int) -> str:
        return f"WAL region {region_id} of namespace {self.namespace} at {self.bootstrap}"

    def close(self) -> None:
        with self._open_lock:
            regions = self._take_regions()
        if regions is None:
            return
        self._stop_cleaning.set()
        self._cleaner.join(timeout=self.timeout_s + 10)
        try:
            # The poller still runs: it serves the delivery reports of the last snapshots.
            for region in regions:
                region.close()
        finally:
            self._stop_polling.set()
            self._poller.join(timeout=self.timeout_s + 10)
            producer = self._ctx.producer
            if producer.flush(self.timeout_s):
                producer.purge()
            producer.close()
            self._admin = None

    # -- observability ----------------------------------------------------------------------

    @property
    def records_produced(self) -> int:
        """Kafka records written to data topics (one per group commit, more for groups larger
        than ``max_record_bytes``)."""
        return self._counters.records_produced

    @property
    def snapshots_written(self) -> int:
        return self._counters.snapshots_written

    @property
    def delete_records_supported(self) -> bool | None:
        """Whether the cluster deletes records (None: not known yet)."""
        return self._delete_supported

    def recovery_info(self, region_id: int) -> RecoveryInfo:
        """How the open region was recovered."""
        return self._region(region_id).recovery

    def topics(self, region_id: int) -> tuple[str, str]:
        """The data and the meta topic of an open region."""
        region = self._region(region_id)
        return region.data_topic, region.meta_topic

    # -- internals --------------------------------------------------------------------------

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            raise Closed(f"{self._where} is closed")
        return self._admin

    def _ensure_topics(self, specs: list[TopicSpec]) -> None:
        ensure_topics(
            self._admin_client(),
            specs,
            replication_factor=self._replication_factor,
            bootstrap=self.bootstrap,
            timeout_s=self.timeout_s,
        )

    def _poll_loop(self) -> None:
        """Serves the producer's delivery reports (which wake the writers waiting on them)
        and the clients' log lines, until the WAL closes."""
        while not self._stop_polling.is_set():
            try:
                self._ctx.producer.poll(_POLL_INTERVAL_S)
                self._admin_client().poll(0)
            except Exception:
                logger.exception("Kafka WAL at %s: polling the producer failed", self.bootstrap)
                self._stop_polling.wait(_POLL_INTERVAL_S)

    def _clean_loop(self) -> None:
        while not self._stop_cleaning.wait(self._clean_interval_s):
            for region in list(self._regions.values()):
                if self._stop_cleaning.is_set():
                    return
                try:
                    region.clean(self._delete_below)
                except Exception as e:
                    logger.warning("WAL region %d: cleaning round failed: %s", region.id, e)

    def _delete_below(self, topic: str, offset: int) -> bool:
        """Delete the records of ``topic`` below ``offset`` if the cluster can; whether it
        did. Runs on the cleaner thread only."""
        if self._delete_supported is False:
            return False
        admin = self._admin_client()
        outcome, error = delete_records_before(admin, topic, offset, self.timeout_s)
        if outcome is DeleteOutcome.DELETED:
            if self._delete_failures >= _FAILURES_BEFORE_WARNING:
                logger.info("Kafka WAL at %s: deleting records works again", self.bootstrap)
            self._delete_supported = True
            self._delete_drops = self._delete_failures = 0
            return True
        if outcome is DeleteOutcome.UNSUPPORTED:
            self._stop_deleting(error)
            return False
        if (
            outcome is DeleteOutcome.DROPPED
            and self._delete_supported is None
            and reachable(admin, self.timeout_s)
        ):
            self._delete_drops += 1
            if self._delete_drops >= _DROPS_BEFORE_GIVING_UP:
                self._stop_deleting(error)
                return False
        # Otherwise transient (the cluster is unreachable, a timeout, the client still
        # learning a partition's leader, or a drop still under suspicion): the next round
        # tries again. Warned about once, when it persists.
        self._delete_failures += 1
        level = logging.DEBUG
        if self._delete_failures == _FAILURES_BEFORE_WARNING and not self._delete_drops:
            level = logging.WARNING
        logger.log(
            level,
            "Kafka WAL at %s: cannot delete records of %s below offset %d (%d rounds): %s",
            self.bootstrap,
            topic,
            offset,
            self._delete_failures,
            error,
        )
        return False

    def _stop_deleting(self, error: str) -> None:
        self._delete_supported = False
        logger.warning(
            "Kafka WAL at %s: the broker does not implement DeleteRecords (%s); WAL records "
            "will no longer be deleted, only marked deleted, and the data topics keep growing",
            self.bootstrap,
            error,
        )
