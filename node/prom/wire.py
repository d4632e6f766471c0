"""The bodies of Prometheus remote storage requests: snappy block-compressed protobuf."""

from __future__ import annotations

from typing import TypeVar

import cramjam
from google.protobuf.message import DecodeError, Message

from gnomon.errors import InvalidArgument, TooLarge

M = TypeVar("M", bound=Message)

#: A remote-write body is about a fifth of its decompressed size; this many times the largest
#: accepted body may be decompressed before the body is refused.
DECOMPRESSED_FACTOR = 8


def unsnappy(body: bytes, max_body_bytes: int) -> bytes:
    """``body`` decompressed from snappy's block format (not its framed stream format)."""
    limit = max_body_bytes * DECOMPRESSED_FACTOR
    try:
        size = cramjam.snappy.decompress_raw_len(body)
    except cramjam.DecompressionError as e:
        raise InvalidArgument(f"body is not snappy block-compressed: {e}") from None
    if size > limit:
        raise TooLarge(
            f"body decompresses to {size} bytes, over the limit of {limit}; send fewer samples "
            "per request (queue_config.max_samples_per_send)"
        )
    try:
        return bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError as e:
        raise InvalidArgument(f"body is not snappy block-compressed: {e}") from None


def snappy(data: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(data))


def parse(message: M, data: bytes) -> M:
    """``message`` filled from ``data``; InvalidArgument if it is not such a message."""
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise InvalidArgument(f"body is not a valid {message.DESCRIPTOR.name}: {e}") from None
    return message
