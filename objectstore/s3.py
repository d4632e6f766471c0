"""The ObjectStore on S3 (or any S3-compatible server: MinIO, moto, Ceph RGW).

Key ``a/b/c.sst`` is the S3 object ``<prefix>a/b/c.sst`` in one bucket. Atomicity comes from S3
itself: a PUT or a completed multipart upload becomes visible whole, or not at all.

Every request is retried, with exponential backoff and full jitter, on throttling (SlowDown,
429, 503), other 5xx answers, connection errors and timeouts, up to ``max_attempts`` attempts in
all; then it fails with a retryable :class:`Unavailable` naming the bucket and key. botocore's
own retries are switched off so that one policy, with one bound, applies everywhere.

Writes whose outcome a lost answer makes ambiguous are settled rather than guessed:

- ``put_if_absent`` sends ``If-None-Match: *`` and tags the object with a random writer token
  in its metadata. If an attempt got no answer and a later one finds the object present, the
  token tells whether the earlier attempt created it (True) or someone else did (False).
- A multipart upload carries the same kind of token, so a completion whose answer was lost and
  whose retry finds the upload gone is recognised as done when the object bears the token.
"""

from __future__ import annotations

import email.utils
import functools
import io
import os
import random
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import datetime
from typing import Any, BinaryIO, TypeVar

import boto3  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.exceptions import (  # type: ignore[import-untyped]
    BotoCoreError,
    ClientError,
    FlexibleChecksumError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from gnomon.errors import Conflict, GnomonError, InvalidArgument, NotFound, Unavailable
from objectstore.api import ObjectMeta
from objectstore.local import check_key

_T = TypeVar("_T")

MIB = 1 << 20
#: S3 rejects multipart parts smaller than this (except the last one).
MIN_PART_SIZE = 5 * MIB
#: S3 allows at most this many parts per multipart upload.
MAX_PARTS = 10_000
#: S3 keys are at most this many bytes of UTF-8.
MAX_KEY_BYTES = 1024

#: User metadata naming the writer of an object (sent as ``x-amz-meta-gnomon-writer``).
WRITER_META = "gnomon-writer"


_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
_RETRYABLE_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "TooManyRequests",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        # Another conditional write or multipart operation on the key is in progress; AWS
        # documents both as safe to retry.
        "ConditionalRequestConflict",
        "OperationAborted",
    }
)
_CREDENTIAL_CODES = frozenset(
    {
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "AuthorizationHeaderMalformed",
    }
)
# Errors below the HTTP layer (the request may or may not have reached the server) and answers
# damaged on the way (short, or failing their checksum).
_TRANSIENT_TRANSPORT = (
    HTTPClientError,
    BotoConnectionError,
    IncompleteReadError,
    FlexibleChecksumError,
)

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code") or "")


def _is_transient(e: ClientError) -> bool:
    return _status(e) in _RETRYABLE_STATUS or _code(e) in _RETRYABLE_CODES


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def _response_time_ms(response: dict[str, Any]) -> int:
    """The server's clock when it answered (its Date header), so that a put's mtime agrees
    with the Last-Modified that later heads and lists report; our clock if it sent none."""
    date = response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    if date:
        with suppress(TypeError, ValueError):
            return _ms(email.utils.parsedate_to_datetime(date))
    return time.time_ns() // 1_000_000


class S3ObjectStore:
    """:class:`objectstore.api.ObjectStore` over the objects of ``bucket`` below ``prefix``.

    ``prefix`` acts as a directory (a trailing "/" is implied), so several stores can share a
    bucket. Credentials default to boto3's usual chain (environment, profile, instance role)
    when ``access_key``/``secret_key`` are not given. The store is thread-safe; it opens no
    connection until the first request.
    """

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        session_token: str | None = None,
        max_attempts: int = 5,
        multipart_threshold: int = 16 * MIB,
        part_size: int = 8 * MIB,
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        backoff_base_s: float = 0.1,
        backoff_max_s: float = 5.0,
        read_ahead: int = 256 * 1024,
        list_page_size: int = 1000,
        max_connections: int = 32,
    ) -> None:
        if not isinstance(bucket, str) or not bucket:
            raise InvalidArgument(f"invalid S3 bucket name {bucket!r}")
        if max_attempts < 1:
            raise InvalidArgument(f"max_attempts must be at least 1, not {max_attempts}")
        if part_size < MIN_PART_SIZE:
            raise InvalidArgument(
                f"part_size {part_size} is below the S3 minimum of {MIN_PART_SIZE} bytes"
            )
        if multipart_threshold < 1:
            raise InvalidArgument(f"multipart_threshold must be positive: {multipart_threshold}")
        if read_ahead < 1 or not 1 <= list_page_size <= 1000:
            raise InvalidArgument(
                f"read_ahead ({read_ahead}) must be positive and list_page_size "
                f"({list_page_size}) between 1 and 1000"
            )
        self._bucket = bucket
        self._prefix = self._normalize_prefix(prefix)
        self._endpoint = endpoint_url or "AWS"
        self._max_attempts = max_attempts
        self._multipart_threshold = multipart_threshold
        self._part_size = part_size
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._read_ahead = read_ahead
        self._list_page_size = list_page_size
        # Set once a request proved the bucket exists: only then does a bare 404 from HEAD
        # (which has no body to name the missing thing) mean "no such key" without a check.
        self._bucket_seen = False
        self._random = random.Random()
        self._random_lock = threading.Lock()
        config = Config(
            connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s,
            retries={"total_max_attempts": 1},
            max_pool_connections=max_connections,
            s3={"addressing_style": "path" if endpoint_url else "auto"},
        )
        session = boto3.session.Session(
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
            aws_session_token=session_token,
            region_name=region,
        )
        self._client: Any = session.client("s3", endpoint_url=endpoint_url, config=config)

    @property
    def bucket(self) -> str:
        return self._bucket

    @property
    def prefix(self) -> str:
        return self._prefix

    def __repr__(self) -> str:
        return f"S3ObjectStore(s3://{self._bucket}/{self._prefix} at {self._endpoint})"

    # -- writes ---------------------------------------------------------------------------------

    def uri(self, key: str) -> str:
        """Where readers with their own S3 client (Spark's s3a) find ``key``."""
        return f"s3a://{self._bucket}/{self._prefix}{key}"

    def put(self, key: str, data: bytes) -> ObjectMeta:
        name = self._name(key)
        response = self._request(
            "put",
            key,
            lambda: self._client.put_object(Bucket=self._bucket, Key=name, Body=data),
        )
        return ObjectMeta(key=key, size=len(data), mtime_ms=_response_time_ms(response))

    def put_file(self, key: str, path: str) -> ObjectMeta:
        name = self._name(key)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise NotFound(f"local file {path!r} to store as {key!r} not found") from None
        except OSError as e:
            raise Unavailable(f"cannot read local file {path!r} to store as {key!r}: {e}") from e
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgument(f"{path!r} to store as {key!r} is not a regular file")
        if st.st_size <= self._multipart_threshold:

            def single() -> dict[str, Any]:
                with self._local_file(key, path) as f:
                    response: dict[str, Any] = self._client.put_object(
                        Bucket=self._bucket, Key=name, Body=f
                    )
                    return response

            response = self._request("put_file", key, single)
            return ObjectMeta(key=key, size=st.st_size, mtime_ms=_response_time_ms(response))
        return self._put_multipart(key, name, path, st.st_size)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        name = self._name(key)
        token = uuid.uuid4().hex
        attempts = 0

        def attempt() -> bool:
            nonlocal attempts
            attempts += 1
            try:
                self._client.put_object(
                    Bucket=self._bucket,
                    Key=name,
                    Body=data,
                    IfNoneMatch="*",
                    Metadata={WRITER_META: token},
                )
            except ClientError as e:
                if _status(e) != 412:
                    raise
                # An earlier attempt may have created the object and lost its answer.
                return attempts > 1 and self._writer_of(name) == token
            return True

        return self._request("put_if_absent", key, attempt)

    def delete(self, key: str) -> bool:
        """S3's DELETE does not say whether the object existed, so this HEADs first. Two
        concurrent deletes of one object may therefore both return True, and a put landing
        between the HEAD and the DELETE is deleted (as if it had come just before)."""
        name = self._name(key)
        if self._head(key, name) is None:
            return False
        self._request(
            "delete", key, lambda: self._client.delete_object(Bucket=self._bucket, Key=name)
        )
        return True

    # -- reads ----------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        name = self._name(key)

        def attempt() -> bytes:
            # Whole objects come with the checksum computed at upload (botocore sends one with
            # every put); asking for it makes botocore verify the body against it.
            response = self._client.get_object(
                Bucket=self._bucket, Key=name, ChecksumMode="ENABLED"
            )
            body: bytes = response["Body"].read()
            return body

        return self._request("get", key, attempt)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        name = self._name(key)
        if start < 0 or length < 0:
            raise InvalidArgument(
                f"invalid range of object {key!r}: start {start} and length {length} "
                "must not be negative"
            )
        if length == 0:
            if self._head(key, name) is None:
                raise NotFound(f"object {key!r} not found")
            return b""
        chunk = self._fetch(key, name, start, length, etag=None)
        return chunk.data

    def open_input(self, key: str) -> BinaryIO:
        """A buffered reader over range GETs. The first block is fetched now (so an absent key
        raises NotFound here, and the object's size and ETag come with it); later reads send
        ``If-Match`` with that ETag, so a reader never mixes two versions of an object: if it
        is replaced meanwhile, reading raises :class:`Conflict`, and NotFound if deleted."""
        name = self._name(key)
        first = self._fetch(key, name, 0, self._read_ahead, etag=None)
        if first.size is None:
            # Unsatisfiable from 0 means empty; HEAD still tells a deleted object apart.
            meta = self._head(key, name)
            if meta is None:
                raise NotFound(f"object {key!r} not found")
            first.size = meta.size
        raw = _S3RangeFile(self, key, name, first)
        return io.BufferedReader(raw, buffer_size=self._read_ahead)

    def head(self, key: str) -> ObjectMeta:
        name = self._name(key)
        meta = self._head(key, name)
        if meta is None:
            raise NotFound(f"object {key!r} not found")
        return meta

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        if not isinstance(prefix, str):
            raise InvalidArgument(f"invalid object key prefix {prefix!r}: must be a string")
        return self._list(self._prefix + prefix)

    # -- internals ------------------------------------------------------------------------------

    @staticmethod
    def _normalize_prefix(prefix: str) -> str:
        if not isinstance(prefix, str):
            raise InvalidArgument(f"invalid S3 key prefix {prefix!r}: must be a string")
        stripped = prefix.strip("/")
        if not stripped:
            return ""
        try:
            check_key(stripped)
        except InvalidArgument:
            raise InvalidArgument(
                f"invalid S3 key prefix {prefix!r}: it must follow the object key rules"
            ) from None
        return stripped + "/"

    def _name(self, key: str) -> str:
        check_key(key)
        name = self._prefix + key
        if len(name.encode()) > MAX_KEY_BYTES:
            raise InvalidArgument(
                f"object key {key!r} is too long for S3 (at most {MAX_KEY_BYTES} bytes of UTF-8 "
                "including the store's prefix)"
            )
        return name

    def _where(self, key: str | None) -> str:
        if key is None:
            return f"s3://{self._bucket}/{self._prefix}"
        return f"s3://{self._bucket}/{self._prefix}{key}"

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self._backoff_max_s, self._backoff_base_s * (2 ** (attempt - 1)))
        with self._random_lock:
            return self._random.uniform(0, ceiling)

    def _request(
        self, op: str, key: str | None, fn: Callable[[], _T], *, proves_bucket: bool = True
    ) -> _T:
        """``fn()`` retried on transient failures; other failures become gnomon errors.
        ``proves_bucket``: an answer of ``fn`` shows that the bucket exists."""
        last: BaseException | None = None
        for attempt in range(1, self._max_attempts + 1):
            try:
                result = fn()
            except ClientError as e:
                if not _is_transient(e):
                    raise self._translate(e, op, key) from e
                last = e
            except _TRANSIENT_TRANSPORT as e:
                last = e
            except (NoCredentialsError, PartialCredentialsError) as e:
                raise Unavailable(
                    f"no usable S3 credentials for {self._where(key)}: {e}", retryable=False
                ) from e
            except ParamValidationError as e:
                raise InvalidArgument(f"S3 {op} of {self._where(key)} rejected: {e}") from e
            except BotoCoreError as e:
                raise Unavailable(f"S3 {op} of {self._where(key)} failed: {e}") from e
            else:
                if proves_bucket:
                    self._bucket_seen = True
                return result
            if attempt < self._max_attempts:
                time.sleep(self._backoff(attempt))
        raise Unavailable(
            f"S3 {op} of {self._where(key)} at {self._endpoint} failed after "
            f"{self._max_attempts} attempts: {last}"
        ) from last

    def _translate(self, e: ClientError, op: str, key: str | None) -> GnomonError:
        code, status = _code(e), _status(e)
        message = e.response.get("Error", {}).get("Message") or ""
        where = self._where(key)
        if code == "NoSuchBucket":
            self._bucket_seen = False
            return self._no_bucket()
        if code == "NoSuchKey" or (status == 404 and key is not None and code in ("", "404")):
            return NotFound(f"object {key!r} not found")
        # Repeating a request with the same credentials cannot help, so these are not retryable;
        # they are Unavailable rather than InvalidArgument because the caller's request is fine,
        # it is this node's configuration that the store refuses.
        if code in _CREDENTIAL_CODES:
            return Unavailable(
                f"S3 credentials were rejected by {self._endpoint} for {op} of {where}: "
                f"{code}: {message}",
                retryable=False,
            )
        if status == 403:
            return Unavailable(
                f"S3 access denied for {op} of {where} at {self._endpoint}: the credentials "
                f"were rejected or lack permission ({code or 'HTTP 403'}: {message})",
                retryable=False,
            )
        if code in ("InvalidBucketName", "KeyTooLongError", "InvalidArgument"):
            return InvalidArgument(f"S3 {op} of {where} rejected: {code}: {message}")
        return Unavailable(
            f"S3 {op} of {where} failed: {code or status}: {message}", retryable=False
        )

    def _no_bucket(self) -> NotFound:
        return NotFound(f"bucket {self._bucket!r} does not exist at {self._endpoint}")

    def _confirm_bucket(self) -> None:
        """Raise NotFound if the bucket does not exist (a HEAD's 404 cannot tell)."""
        if self._bucket_seen:
            return

        def attempt() -> None:
            try:
                self._client.head_bucket(Bucket=self._bucket)
            except ClientError as e:
                if _status(e) == 404:
                    raise self._no_bucket() from e
                raise

        self._request("head_bucket", None, attempt)

    def _head(self, key: str, name: str) -> ObjectMeta | None:
        def attempt() -> dict[str, Any] | None:
            try:
                response: dict[str, Any] = self._client.head_object(Bucket=self._bucket, Key=name)
            except ClientError as e:
                if _status(e) == 404:
                    return None
                raise
            return response

        response = self._request("head", key, attempt, proves_bucket=False)
        if response is None:
            self._confirm_bucket()
            return None
        self._bucket_seen = True
        return ObjectMeta(
            key=key, size=int(response["ContentLength"]), mtime_ms=_ms(response["LastModified"])
        )

    def _writer_of(self, name: str) -> str | None:
        """The writer token of the object ``name``; None if absent or untagged. Called inside
        a retried attempt, so its transient failures retry that attempt."""
        try:
            response = self._client.head_object(Bucket=self._bucket, Key=name)
        except ClientError as e:
            if _status(e) == 404:
                return None
            raise
        metadata: dict[str, str] = response.get("Metadata") or {}
        return metadata.get(WRITER_META)

    def _fetch(self, key: str, name: str, start: int, length: int, etag: str | None) -> _Chunk:
        """Bytes ``[start, start + length)`` of the object (fewer at its end), with its size
        and ETag. With ``etag``, Conflict if the object is no longer that version."""

        def attempt() -> _Chunk:
            args: dict[str, Any] = {
                "Bucket": self._bucket,
                "Key": name,
                "Range": f"bytes={start}-{start + length - 1}",
            }
            if etag is not None:
                args["IfMatch"] = etag
            try:
                response = self._client.get_object(**args)
            except ClientError as e:
                if _status(e) == 416:
                    # Only a range starting at or past the end is unsatisfiable.
                    return _Chunk(start, b"", size=None, etag=etag)
                if _status(e) == 412:
                    raise Conflict(
                        f"object {key!r} in {self._where(None)} was replaced while being read; "
                        "open it again"
                    ) from e
                raise
            data: bytes = response["Body"].read()
            content_range = response.get("ContentRange")
            match = _CONTENT_RANGE.fullmatch(content_range) if content_range else None
            if match is None:
                # A server that ignores Range sends the whole object.
                return _Chunk(start, data[start : start + length], len(data), response["ETag"])
            first, last, total = match.groups()
            expected = min(length, int(total) - start) if total != "*" else len(data)
            if (
                int(first) != start
                or len(data) != expected
                or int(last) - int(first) + 1 != len(data)
            ):
                raise Unavailable(
                    f"S3 returned range {content_range!r} with {len(data)} bytes for "
                    f"{start}+{length} of {self._where(key)}"
                )
            size = int(total) if total != "*" else None
            return _Chunk(start, data, size, response["ETag"])

        return self._request("get", key, attempt)

    def _local_file(self, key: str, path: str) -> BinaryIO:
        try:
            return open(path, "rb")
        except FileNotFoundError:
            raise NotFound(f"local file {path!r} to store as {key!r} not found") from None
        except OSError as e:
            raise Unavailable(f"cannot read local file {path!r} to store as {key!r}: {e}") from e

    def _put_multipart(self, key: str, name: str, path: str, size: int) -> ObjectMeta:
        # Larger parts when the configured size would need more parts than S3 allows.
        part_size = max(self._part_size, -(-size // MAX_PARTS))
        token = uuid.uuid4().hex
        created = self._request(
            "put_file",
            key,
            lambda: self._client.create_multipart_upload(
                Bucket=self._bucket, Key=name, Metadata={WRITER_META: token}
            ),
        )
        upload_id: str = created["UploadId"]
        try:
            parts: list[dict[str, Any]] = []
            with self._local_file(key, path) as f:
                for number, offset in enumerate(range(0, size, part_size), start=1):
                    expected = min(part_size, size - offset)
                    try:
                        f.seek(offset)
                        body = f.read(expected)
                    except OSError as e:
                        raise Unavailable(
                            f"cannot read local file {path!r} to store as {key!r}: {e}"
                        ) from e
                    if len(body) != expected:
                        raise InvalidArgument(
                            f"local file {path!r} to store as {key!r} shrank while being stored"
                        )
                    upload = functools.partial(
                        self._client.upload_part,
                        Bucket=self._bucket,
                        Key=name,
                        UploadId=upload_id,
                        PartNumber=number,
                        Body=body,
                    )
                    response = self._request("put_file", key, upload)
                    parts.append({"PartNumber": number, "ETag": response["ETag"]})
            attempts = 0

            def complete() -> dict[str, Any]:
                nonlocal attempts
                attempts += 1
                try:
                    response: dict[str, Any] = self._client.complete_multipart_upload(
                        Bucket=self._bucket,
                        Key=name,
                        UploadId=upload_id,
                        MultipartUpload={"Parts": parts},
                    )
                except ClientError as e:
                    # An earlier completion went through but its answer was lost.
                    if (
                        _code(e) == "NoSuchUpload"
                        and attempts > 1
                        and self._writer_of(name) == token
                    ):
                        return {}
                    raise
                return response

            response = self._request("put_file", key, complete)
        except BaseException:
            # Parts of an aborted upload never become visible, but they are billed until
            # removed; the abort is best effort, a bucket lifecycle rule is the backstop.
            with suppress(GnomonError):
                self._request(
                    "abort multipart upload",
                    key,
                    lambda: self._client.abort_multipart_upload(
                        Bucket=self._bucket, Key=name, UploadId=upload_id
                    ),
                )
            raise
        return ObjectMeta(key=key, size=size, mtime_ms=_response_time_ms(response))

    def _list(self, full_prefix: str) -> Iterator[ObjectMeta]:
        token: str | None = None
        while True:
            args: dict[str, Any] = {
                "Bucket": self._bucket,
                "Prefix": full_prefix,
                "MaxKeys": self._list_page_size,
            }
            if token is not None:
                args["ContinuationToken"] = token
            page: dict[str, Any] = self._request(
                "list", None, functools.partial(self._client.list_objects_v2, **args)
            )
            for item in page.get("Contents", ()):
                key = item["Key"][len(self._prefix) :]
                # Objects written by other tools may not be valid keys; they are not ours.
                try:
                    check_key(key)
                except InvalidArgument:
                    continue
                yield ObjectMeta(
                    key=key, size=int(item["Size"]), mtime_ms=_ms(item["LastModified"])
                )
            if not page.get("IsTruncated"):
                return
            token = page["NextContinuationToken"]


class _Chunk:
    """Bytes of an object starting at ``start``, with what the answer said of the object."""

    __slots__ = ("data", "etag", "size", "start")

    def __init__(self, start: int, data: bytes, size: int | None, etag: str | None) -> None:
        self.start = start
        self.data = data
        self.size = size
        self.etag = etag


class _S3RangeFile(io.RawIOBase):
    """The raw file under :meth:`S3ObjectStore.open_input`: each read is a range GET pinned to
    the ETag of the first answer, except reads within the block fetched at open."""

    def __init__(self, store: S3ObjectStore, key: str, name: str, first: _Chunk) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._name = name
        self._size = first.size or 0
        self._etag = first.etag
        self._block = first
        self._pos = 0

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed file for object {self._key!r}")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._check_open()
        if whence == io.SEEK_SET:
            position = offset
        elif whence == io.SEEK_CUR:
            position = self._pos + offset
        elif whence == io.SEEK_END:
            position = self._size + offset
        else:
            raise ValueError(f"invalid whence {whence}")
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._pos = position
        return position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self._read(max(self._size - self._pos, 0))

    def _read(self, n: int) -> bytes:
        self._check_open()
        n = min(n, self._size - self._pos)
        if n <= 0:
            return b""
        block = self._block
        offset = self._pos - block.start
        if offset >= 0 and offset + n <= len(block.data):
            data = block.data[offset : offset + n]
        else:
            data = self._store._fetch(self._key, self._name, self._pos, n, self._etag).data
            if len(data) != n:
                raise Unavailable(
                    f"object {self._key!r} returned {len(data)} of {n} bytes at {self._pos}"
                )
        self._pos += n
        return data

    def close(self) -> None:
        self._block = _Chunk(0, b"", 0, None)
        super().close()
