"""What the Kafka WAL needs from confluent-kafka, with errors mapped onto gnomon's tree."""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from gnomon.errors import Corrupted, Unavailable

#: librdkafka's own log lines, routed through Python logging instead of stderr.
client_logger = logging.getLogger("gnomon.wal.kafka.client")

#: Most records fetched per ``consume`` call.
_CONSUME_BATCH = 256
#: How long one ``consume`` call may block; the no-progress deadline is the real bound.
_CONSUME_WAIT_S = 0.2

#: Errors a topic may report for a while right after it was created.
_NOT_READY = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
    }
)


def unavailable(bootstrap: str, what: str, error: object) -> Unavailable:
    return Unavailable(f"Kafka at {bootstrap}: {what}: {error}")


def error_of(exc: KafkaException) -> KafkaError | None:
    first = exc.args[0] if exc.args else None
    return first if isinstance(first, KafkaError) else None


@dataclass(frozen=True)
class Clients:
    """Connection settings shared by every client of one KafkaWal."""

    bootstrap: str
    namespace: str
    timeout_s: float
    extra: Mapping[str, Any]

    def base(self) -> dict[str, Any]:
        timeout_ms = max(1, int(self.timeout_s * 1000))
        return {
            "bootstrap.servers": self.bootstrap,
            "socket.timeout.ms": max(timeout_ms, 10),
            "socket.connection.setup.timeout.ms": max(timeout_ms, 1000),
            "logger": client_logger,
            # Brokers close idle connections; the client reconnects when it needs to.
            "log.connection.close": False,
            # Topics are created by the WAL with its settings, never implicitly: a metadata
            # request of a client that allows it (the admin client and the producer do by
            # default) makes some brokers create the topic with their defaults (tansu: 4
            # partitions).
            "allow.auto.create.topics": False,
            **self.extra,
        }

    def admin(self) -> AdminClient:
        return AdminClient(self.base())

    def producer_config(
        self, *, idempotent: bool, max_record_bytes: int, on_error: Callable[[KafkaError], None]
    ) -> dict[str, Any]:
        timeout_ms = max(1, int(self.timeout_s * 1000))
        return {
            **self.base(),
            "enable.idempotence": idempotent,
            "acks": "all",
            # The WAL batches writers itself; waiting for more would only add latency.
            "linger.ms": 0,
            # One record per record batch: some brokers (tansu) report the high watermark as
            # the last batch's base offset + 1, which is only right for one-record batches.
            "batch.num.messages": 1,
            "message.max.bytes": max_record_bytes + 1024,
            "message.timeout.ms": timeout_ms,
            "request.timeout.ms": min(timeout_ms, 30000),
            "error_cb": on_error,
            **self.extra,
        }

    def consumer(self) -> Consumer:
        return Consumer(
            {
                **self.base(),
                # Required by the client; the WAL assigns partitions and never commits, so the
                # group never coordinates anything.
                "group.id": f"{self.namespace}-wal-reader",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                # A read planned before the cleaner deleted what it would have skipped anyway
                # starts at the new log start.
                "auto.offset.reset": "earliest",
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 100,
                "queued.max.messages.kbytes": 16384,
                **self.extra,
            }
        )


@dataclass(frozen=True)
class TopicSpec:
    name: str
    config: Mapping[str, str]


def ensure_topics(
    admin: AdminClient,
    specs: list[TopicSpec],
    *,
    replication_factor: int,
    bootstrap: str,
    timeout_s: float,
) -> None:
    """Create the topics that do not exist yet (one partition each); check the others have
    exactly one partition."""
    missing: list[TopicSpec] = []
    for spec in specs:
        partitions = _partition_count(admin, spec.name, bootstrap, timeout_s)
        if partitions is None:
            missing.append(spec)
        elif partitions != 1:
            raise Corrupted(
                f"Kafka at {bootstrap}: topic {spec.name} has {partitions} partitions; "
                "a WAL topic must have exactly 1"
            )
    if not missing:
        return
    new = [NewTopic(spec.name, 1, replication_factor, config=dict(spec.config)) for spec in missing]
    try:
        futures = admin.create_topics(new, operation_timeout=timeout_s, request_timeout=timeout_s)
    except KafkaException as e:
        raise unavailable(bootstrap, "cannot create WAL topics", e) from e
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s + 1)
        except KafkaException as e:
            error = error_of(e)
            # Another opener of the region won the race; its topics are as good as ours.
            if error is None or error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise unavailable(bootstrap, f"cannot create topic {name}", e) from e
        except TimeoutError as e:
            raise unavailable(bootstrap, f"creating topic {name} timed out", e) from e


def _partition_count(
    admin: AdminClient, topic: str, bootstrap: str, timeout_s: float
) -> int | None:
    try:
        metadata = admin.list_topics(topic, timeout=timeout_s)
    except KafkaException as e:
        raise unavailable(bootstrap, "unreachable", e) from e
    found = metadata.topics.get(topic)
    if found is None:
        return None
    if found.error is not None:
        if found.error.code() in _NOT_READY:
            return None
        raise unavailable(bootstrap, f"topic {topic}", found.error)
    return len(found.partitions)


def watermarks(
    consumer: Consumer, topic: str, *, bootstrap: str, timeout_s: float
) -> tuple[int, int]:
    """``(log start offset, high watermark)`` of partition 0, retried while a new topic
    settles."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, 0), timeout=max(0.1, deadline - time.monotonic())
            )
            return int(low), int(high)
        except KafkaException as e:
            error = error_of(e)
            if error is None or error.code() not in _NOT_READY or time.monotonic() > deadline:
                raise unavailable(bootstrap, f"cannot read the offsets of {topic}", e) from e
            time.sleep(0.05)
            # The client caches a just-created topic as unknown until its next metadata
            # refresh, which can be minutes away; ask for the topic's metadata now.
            with contextlib.suppress(KafkaException):
                consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))


def consume_range(
    consumer: Consumer,
    topic: str,
    start: int,
    end: int,
    *,
    bootstrap: str,
    timeout_s: float,
    check: Callable[[], None] | None = None,
) -> Iterator[tuple[int, bytes]]:
    """``(offset, value)`` of the records of partition 0 from ``start`` up to ``end``
    (exclusive). ``Unavailable`` if no record arrives for ``timeout_s``; ``check`` runs before
    each record is handed out (a closed region raises there)."""
    if start >= end:
        return
    consumer.assign([TopicPartition(topic, 0, start)])
    position = start
    deadline = time.monotonic() + timeout_s
    while position < end:
        try:
            messages = consumer.consume(min(_CONSUME_BATCH, end - position), _CONSUME_WAIT_S)
        except KafkaException as e:
            raise unavailable(bootstrap, f"cannot read {topic}", e) from e
        if not messages:
            if time.monotonic() > deadline:
                raise Unavailable(
                    f"Kafka at {bootstrap}: no record of {topic} arrived for {timeout_s}s "
                    f"(waiting for offset {position}, reading up to {end})"
                )
            continue
        deadline = time.monotonic() + timeout_s
        for message in messages:
            offset = _checked(message, topic, bootstrap)
            # Left over from an earlier fetch position, or already handed out.
            if offset < position:
                continue
            if offset >= end:
                return
            position = offset + 1
            if check is not None:
                check()
            yield offset, message.value() or b""


def _checked(message: Message, topic: str, bootstrap: str) -> int:
    error = message.error()
    if error is not None:
        raise unavailable(bootstrap, f"cannot read {topic}", error)
    offset = message.offset()
    if offset is None:
        raise Unavailable(f"Kafka at {bootstrap}: a record of {topic} came without an offset")
    return offset


class Delivery:
    """The outcome of one produced record, set by the producer's delivery callback (run by
    whichever thread polls the producer)."""

    __slots__ = ("_event", "error", "offset")

    def __init__(self) -> None:
        self._event = threading.Event()
        self.offset = -1
        self.error: KafkaError | None = None

    def __call__(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            offset = message.offset()
            if offset is None:
                error = KafkaError(KafkaError._FAIL, "delivered without an offset")
            else:
                self.offset = offset
        self.error = error
        self._event.set()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float) -> bool:
        return self._event.wait(timeout_s)


def all_in(deliveries: list[Delivery], until: float) -> bool:
    """Wait until every delivery report is in or the monotonic clock reaches ``until``;
    whether they all are."""
    return all(d.wait(max(0.0, until - time.monotonic())) for d in deliveries)


class DeleteOutcome(enum.Enum):
    DELETED = "deleted"
    #: The broker said it does not implement DeleteRecords.
    UNSUPPORTED = "unsupported"
    #: The connection broke while the request was out: some brokers (tansu) drop it on
    #: request types they do not implement.
    DROPPED = "dropped"
    FAILED = "failed"


_UNSUPPORTED = frozenset(
    {
        KafkaError.UNSUPPORTED_VERSION,
        KafkaError._UNSUPPORTED_FEATURE,
        KafkaError.INVALID_REQUEST,
        KafkaError._NOT_IMPLEMENTED,
    }
)
_DROPPED = frozenset({KafkaError._TRANSPORT, KafkaError.NETWORK_EXCEPTION})


def delete_records_before(
    admin: AdminClient, topic: str, offset: int, timeout_s: float
) -> tuple[DeleteOutcome, str]:
    """Delete the records of partition 0 below ``offset``; the outcome and what went wrong.

    The error comes back as text: the exception's traceback would keep the client alive in
    whatever holds on to it (a log record, say).
    """
    try:
        futures = admin.delete_records(
            [TopicPartition(topic, 0, offset)],
            request_timeout=timeout_s,
            operation_timeout=timeout_s,
        )
        for future in futures.values():
            future.result(timeout=timeout_s + 1)
    except KafkaException as e:
        error = error_of(e)
        code = error.code() if error is not None else None
        if code in _UNSUPPORTED:
            return DeleteOutcome.UNSUPPORTED, str(e)
        if code in _DROPPED:
            return DeleteOutcome.DROPPED, str(e)
        return DeleteOutcome.FAILED, str(e)
    except TimeoutError:
        return DeleteOutcome.FAILED, f"no answer within {timeout_s + 1}s"
    return DeleteOutcome.DELETED, ""


def reachable(admin: AdminClient, timeout_s: float) -> bool:
    """Whether the cluster answers a metadata request."""
    try:
        admin.list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return True
