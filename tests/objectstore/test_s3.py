"""S3ObjectStore against a real S3 server (moto_server on loopback): the conformance suite, with
and without a key prefix, plus what only S3 has (multipart uploads, buckets, credentials)."""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from botocore.config import Config  # type: ignore[import-untyped]

from gnomon.errors import Conflict, InvalidArgument, NotFound, Unavailable
from gnomon_app.devcluster.brokers import running_moto
from objectstore.api import ObjectStore
from objectstore.cache import SstCache
from objectstore.s3 import MIN_PART_SIZE, S3ObjectStore

from .conformance import ObjectStoreConformance

pytestmark = pytest.mark.integration

MIB = 1 << 20
REGION = "us-east-1"
ACCESS_KEY = "gnomon-test"
SECRET_KEY = "gnomon-test-secret"


def admin_client(endpoint: str) -> Any:
    """A plain boto3 client for test setup and for checks behind the store's back."""
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 3}),
    )


@contextmanager
def fresh_bucket(client: Any) -> Iterator[str]:
    """A new empty bucket, emptied and removed afterwards (moto keeps everything in memory)."""
    name = f"gnomon-{uuid.uuid4().hex[:20]}"
    client.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            for item in page.get("Contents", ()):
                client.delete_object(Bucket=name, Key=item["Key"])
        uploads = client.list_multipart_uploads(Bucket=name).get("Uploads", ())
        for upload in uploads:
            client.abort_multipart_upload(
                Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
            )
        client.delete_bucket(Bucket=name)


def make_store(endpoint: str, bucket: str, **options: Any) -> S3ObjectStore:
    return S3ObjectStore(
        bucket,
        endpoint_url=endpoint,
        region=REGION,
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        **options,
    )


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_moto(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(scope="module")
def client(endpoint: str) -> Any:
    # One for the module: a boto3 client costs a session's model loading to make.
    return admin_client(endpoint)


@pytest.fixture
def bucket(client: Any) -> Iterator[str]:
    with fresh_bucket(client) as name:
        yield name


class TestS3ObjectStore(ObjectStoreConformance):
    @pytest.fixture
    def object_store(self, endpoint: str, bucket: str) -> Iterator[ObjectStore]:
        yield make_store(endpoint, bucket)


class TestS3ObjectStoreWithPrefix(ObjectStoreConformance):
    """The same contract for a store confined to a prefix of a bucket it shares with objects
    that are not its own (and that it must never list or touch)."""

    @pytest.fixture
    def object_store(self, endpoint: str, bucket: str, client: Any) -> Iterator[ObjectStore]:
        for outside in ["tenant/a", "tenant/b/k", "tenant-other/a", "a", "other/tenant/a/k"]:
            client.put_object(Bucket=bucket, Key=outside, Body=b"not the store's")
        yield make_store(endpoint, bucket, prefix="tenant/a/")
        listed = sorted(
            item["Key"]
            for item in client.list_objects_v2(Bucket=bucket, Prefix="tenant/a").get("Contents", ())
        )
        assert "tenant/a" in listed  # the neighbour of the prefix was never deleted


# -- S3 specifics ------------------------------------------------------------------------------


def test_put_file_multipart(endpoint: str, bucket: str, client: Any, tmp_path: Path) -> None:
    store = make_store(endpoint, bucket, multipart_threshold=MIN_PART_SIZE, part_size=MIN_PART_SIZE)
    data = os.urandom(20 * MIB + 12_345)
    local = tmp_path / "big.sst"
    local.write_bytes(data)
    meta = store.put_file("sst/big.sst", str(local))
    assert meta.size == len(data)
    # A multipart ETag is "<md5 of the parts' md5s>-<number of parts>".
    etag = client.head_object(Bucket=bucket, Key="sst/big.sst")["ETag"].strip('"')
    assert etag.endswith("-5")
    assert store.get("sst/big.sst") == data
    assert store.get_range("sst/big.sst", 5 * MIB - 3, 6) == data[5 * MIB - 3 : 5 * MIB + 3]
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_put_file_below_threshold_is_one_put(
    endpoint: str, bucket: str, client: Any, tmp_path: Path
) -> None:
    store = make_store(endpoint, bucket, multipart_threshold=MIN_PART_SIZE)
    local = tmp_path / "small"
    local.write_bytes(b"x" * MIN_PART_SIZE)
    store.put_file("small", str(local))
    assert "-" not in client.head_object(Bucket=bucket, Key="small")["ETag"]


def test_missing_bucket(endpoint: str, tmp_path: Path) -> None:
    store = make_store(endpoint, "gnomon-no-such-bucket")
    local = tmp_path / "f"
    local.write_bytes(b"x")
    operations: dict[str, Callable[[], object]] = {
        "put": lambda: store.put("k", b"x"),
        "put_file": lambda: store.put_file("k", str(local)),
        "put_if_absent": lambda: store.put_if_absent("k", b"x"),
        "get": lambda: store.get("k"),
        "get_range": lambda: store.get_range("k", 0, 1),
        "empty get_range": lambda: store.get_range("k", 0, 0),
        "open_input": lambda: store.open_input("k"),
        "head": lambda: store.head("k"),
        "list": lambda: list(store.list()),
        "delete": lambda: store.delete("k"),
    }
    for name, operation in operations.items():
        try:
            operation()
        except NotFound as e:
            assert "bucket 'gnomon-no-such-bucket' does not exist" in str(e), f"{name}: {e}"
        else:
            pytest.fail(f"{name} did not raise NotFound")


def test_bad_credentials_are_reported_once(tmp_path: Path) -> None:
    # This server checks access keys against its (empty) IAM: every key is unknown.
    with running_moto(tmp_path, env={"INITIAL_NO_AUTH_ACTION_COUNT": "0"}) as url:
        store = S3ObjectStore(
            "any-bucket",
            endpoint_url=url,
            region=REGION,
            access_key="AKIAUNKNOWN",
            secret_key="wrong",
            backoff_base_s=5.0,  # a retry would show up as a slow test
        )
        for operation in (
            lambda: store.put("k", b"x"),
            lambda: store.get("k"),
            lambda: list(store.list()),
        ):
            with pytest.raises(Unavailable, match="credentials were rejected") as info:
                operation()
            assert info.value.retryable is False
        with pytest.raises(Unavailable, match="credentials were rejected or lack permission"):
            store.head("k")  # a HEAD's 403 has no body to say why


def test_open_input_reads_parquet_by_ranges(endpoint: str, bucket: str) -> None:
    store = make_store(endpoint, bucket, read_ahead=64 * 1024)
    rows = 200_000
    table = pa.table(
        {
            "ts": pa.array(range(rows), type=pa.int64()),
            "host": pa.array([f"host-{i % 13}" for i in range(rows)]),
            "value": pa.array([i * 0.25 for i in range(rows)]),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=50_000, compression="none")
    data = sink.getvalue()
    assert len(data) > 1 * MIB  # larger than the read-ahead many times over
    store.put("tables/t/1.parquet", data)

    with store.open_input("tables/t/1.parquet") as f:
        parquet = pq.ParquetFile(f)
        assert parquet.metadata.num_row_groups == 4
        assert parquet.read_row_group(3, columns=["value"]).column("value").to_pylist() == [
            i * 0.25 for i in range(150_000, 200_000)
        ]
        assert parquet.read().equals(table)
    with store.open_input("tables/t/1.parquet") as f:
        assert pq.read_table(f, columns=["ts"]).column("ts").to_pylist() == list(range(rows))


def test_open_input_of_a_replaced_object_raises_conflict(endpoint: str, bucket: str) -> None:
    store = make_store(endpoint, bucket, read_ahead=1024)
    store.put("k", b"a" * 10_000)
    with store.open_input("k") as f:
        assert f.read(10) == b"a" * 10
        store.put("k", b"b" * 10_000)
        assert f.read(10) == b"a" * 10  # still within the block fetched at open
        f.seek(5_000)
        with pytest.raises(Conflict, match="replaced while being read"):
            f.read(10)
    with store.open_input("k") as f:
        store.delete("k")
        f.seek(5_000)
        with pytest.raises(NotFound, match="'k'"):
            f.read(10)


def test_open_input_of_an_empty_object(endpoint: str, bucket: str) -> None:
    store = make_store(endpoint, bucket)
    store.put("empty", b"")
    with store.open_input("empty") as f:
        assert f.read() == b""
        assert f.seek(0, io.SEEK_END) == 0


def test_prefixes_isolate_stores(endpoint: str, bucket: str) -> None:
    first = make_store(endpoint, bucket, prefix="one")
    second = make_store(endpoint, bucket, prefix="/two/nested/")
    assert first.prefix == "one/"
    assert second.prefix == "two/nested/"
    first.put("k", b"1")
    second.put("k", b"2")
    assert first.get("k") == b"1"
    assert second.get("k") == b"2"
    assert [m.key for m in first.list()] == ["k"]
    assert first.delete("k")
    assert second.get("k") == b"2"


def test_list_pages(endpoint: str, bucket: str) -> None:
    store = make_store(endpoint, bucket, list_page_size=7)
    keys = sorted(f"p/{i:03d}" for i in range(40))
    for key in keys:
        store.put(key, b"")
    store.put("q", b"")
    assert [m.key for m in store.list("p/")] == keys


def test_list_skips_foreign_keys(endpoint: str, bucket: str, client: Any) -> None:
    client.put_object(Bucket=bucket, Key="d/a//b", Body=b"")
    client.put_object(Bucket=bucket, Key="d/../x", Body=b"")
    store = make_store(endpoint, bucket)
    store.put("d/ok", b"")
    assert [m.key for m in store.list()] == ["d/ok"]


def test_put_if_absent_tags_the_writer(endpoint: str, bucket: str, client: Any) -> None:
    store = make_store(endpoint, bucket)
    assert store.put_if_absent("lock", b"me")
    assert client.head_object(Bucket=bucket, Key="lock")["Metadata"]["gnomon-writer"]


def test_long_keys_are_invalid(endpoint: str, bucket: str) -> None:
    store = make_store(endpoint, bucket, prefix="p")
    with pytest.raises(InvalidArgument, match="too long"):
        store.put("x" * 1023, b"")
    store.put("x" * 1022, b"")


@pytest.mark.parametrize(
    "options",
    [
        {"part_size": MIN_PART_SIZE - 1},
        {"max_attempts": 0},
        {"multipart_threshold": 0},
        {"read_ahead": 0},
        {"list_page_size": 1001},
        {"prefix": "a/../b"},
        {"prefix": "a//b"},
    ],
)
def test_invalid_options(options: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        S3ObjectStore("bucket", endpoint_url="http://127.0.0.1:9", **options)


def test_sst_cache_over_s3(endpoint: str, bucket: str, tmp_path: Path) -> None:
    store = make_store(endpoint, bucket)
    table = pa.table({"ts": pa.array(range(100_000), type=pa.int64())})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=30_000)
    store.put("tables/1/a.parquet", sink.getvalue())
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=64 * MIB)
    path = cache.local_path("tables/1/a.parquet")
    assert pq.read_table(path).equals(table)
    assert cache.local_path("tables/1/a.parquet") == path
    assert (cache.hits, cache.misses) == (1, 1)
    with pytest.raises(NotFound, match="absent"):
        cache.local_path("absent")
