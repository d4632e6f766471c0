"""S3ObjectStore under network faults: a fault-injecting proxy between the store and a real S3
server (moto) throttles, hangs and drops requests. Transient faults are retried away; lasting
ones surface as Unavailable after ``max_attempts``, and never leave a partial object behind or
hand a reader garbage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon.errors import NotFound, Unavailable
from objectstore.s3 import MIN_PART_SIZE, S3ObjectStore
from testkit.faultproxy import FaultProxy
from testkit.procs import free_port

from .test_s3 import admin_client, fresh_bucket, make_store, running_moto

MIB = 1 << 20
ATTEMPTS = 4
READ_TIMEOUT_S = 0.5
# Longer than the client's read timeout, so that a hung request times out on the client side.
HANG_S = 2.0

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_moto(tmp_path_factory.mktemp("moto")) as url:
        yield url


@pytest.fixture(scope="module")
def module_proxy(moto_endpoint: str) -> Iterator[FaultProxy]:
    with FaultProxy(int(moto_endpoint.rsplit(":", 1)[1])) as proxy:
        yield proxy


@pytest.fixture
def proxy(module_proxy: FaultProxy) -> Iterator[FaultProxy]:
    module_proxy.clear()
    module_proxy.reset_seen()
    yield module_proxy
    module_proxy.clear()


@pytest.fixture
def client(moto_endpoint: str) -> Any:
    """Talks to moto directly, behind the proxy's back."""
    return admin_client(moto_endpoint)


@pytest.fixture
def bucket(client: Any) -> Iterator[str]:
    with fresh_bucket(client) as name:
        yield name


@pytest.fixture
def store(proxy: FaultProxy, bucket: str) -> S3ObjectStore:
    return make_store(
        proxy.url,
        bucket,
        max_attempts=ATTEMPTS,
        read_timeout_s=READ_TIMEOUT_S,
        connect_timeout_s=1.0,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        multipart_threshold=MIN_PART_SIZE,
        part_size=MIN_PART_SIZE,
    )


def _actions(proxy: FaultProxy, method: str) -> list[str]:
    return [action for _, _, action in proxy.seen(method)]


def _set_fault(proxy: FaultProxy, mode: str, count: int | None, method: str) -> None:
    if mode == "error":
        proxy.error(count, method=method)
    elif mode == "hang":
        proxy.hang(count, seconds=HANG_S, method=method)
    elif mode == "hang-after-apply":
        proxy.hang(count, seconds=HANG_S, forward=True, method=method)
    elif mode == "drop":
        proxy.drop(count, method=method)
    elif mode == "drop-after-apply":
        proxy.drop(count, forward=True, method=method)
    elif mode == "partial-answer":
        proxy.drop(count, partial=True, method=method)
    else:
        raise AssertionError(mode)


# Faults after which the server has not applied the request.
UNAPPLIED = ["error", "hang", "drop"]
# Faults after which it has, but the client never hears of it.
APPLIED = ["hang-after-apply", "drop-after-apply"]


# -- transient faults are retried away ----------------------------------------------------------


@pytest.mark.parametrize("mode", UNAPPLIED + APPLIED)
def test_put_succeeds_after_transient_faults(
    store: S3ObjectStore, proxy: FaultProxy, mode: str
) -> None:
    _set_fault(proxy, mode, 2, "PUT")
    meta = store.put("k", b"payload")
    assert meta.size == 7
    assert _actions(proxy, "PUT") == [mode.split("-")[0]] * 2 + ["pass"]
    assert store.get("k") == b"payload"


def test_put_retries_through_503s_with_backoff(store: S3ObjectStore, proxy: FaultProxy) -> None:
    proxy.error(ATTEMPTS - 1, method="PUT")
    store.put("k", b"v")
    assert _actions(proxy, "PUT") == ["error"] * (ATTEMPTS - 1) + ["pass"]


def test_hung_request_is_abandoned_after_the_read_timeout(
    store: S3ObjectStore, proxy: FaultProxy
) -> None:
    proxy.hang(1, seconds=HANG_S, method="PUT")
    started = time.monotonic()
    store.put("k", b"v")
    elapsed = time.monotonic() - started
    assert READ_TIMEOUT_S <= elapsed < HANG_S
    assert store.get("k") == b"v"


@pytest.mark.parametrize("mode", APPLIED)
def test_put_if_absent_applied_but_unanswered_still_wins(
    store: S3ObjectStore, proxy: FaultProxy, mode: str
) -> None:
    # The first attempt creates the object but its answer is lost; the retry finds the object
    # present, and the writer token shows that it was this call's.
    _set_fault(proxy, mode, 1, "PUT")
    assert store.put_if_absent("lock", b"mine") is True
    assert _actions(proxy, "PUT") == [mode.split("-")[0], "pass"]
    assert store.put_if_absent("lock", b"other") is False
    assert store.get("lock") == b"mine"


def test_put_if_absent_retry_does_not_steal_anothers_object(
    store: S3ObjectStore, proxy: FaultProxy, client: Any, bucket: str
) -> None:
    client.put_object(Bucket=bucket, Key="lock", Body=b"theirs")
    proxy.error(1, method="PUT")
    assert store.put_if_absent("lock", b"mine") is False
    assert store.get("lock") == b"theirs"


@pytest.mark.parametrize("mode", [*UNAPPLIED, "partial-answer"])
def test_reads_succeed_after_transient_faults(
    store: S3ObjectStore, proxy: FaultProxy, mode: str
) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    store.put("k", data)
    _set_fault(proxy, mode, 1, "GET")
    assert store.get("k") == data
    _set_fault(proxy, mode, 1, "GET")
    assert store.get_range("k", 1000, 5000) == data[1000:6000]
    _set_fault(proxy, mode, 1, "HEAD")
    assert store.head("k").size == len(data)
    _set_fault(proxy, mode, 2, "GET")
    with store.open_input("k") as f:
        f.seek(700_000)
        assert f.read(300_000) == data[700_000:1_000_000]
    _set_fault(proxy, mode, 1, "GET")
    assert [m.key for m in store.list()] == ["k"]
    assert "pass" in _actions(proxy, "GET")


def test_multipart_upload_retries_a_part(
    store: S3ObjectStore, proxy: FaultProxy, tmp_path: Path
) -> None:
    data = bytes(range(256)) * (12 * MIB // 256)
    local = tmp_path / "big"
    local.write_bytes(data)
    proxy.error(2, method="PUT", path_contains="partNumber=2")
    # The completion is applied but its answer lost: the retry must still end in success.
    proxy.hang(1, seconds=HANG_S, forward=True, method="POST", path_contains="uploadId=")
    store.put_file("big", str(local))
    assert _actions(proxy, "PUT").count("error") == 2
    assert "hang" in _actions(proxy, "POST")
    assert store.get("big") == data


# -- lasting faults fail cleanly ----------------------------------------------------------------


@pytest.mark.parametrize("mode", UNAPPLIED + APPLIED)
def test_persistent_put_failure(
    store: S3ObjectStore, proxy: FaultProxy, bucket: str, mode: str
) -> None:
    old, new = b"old version" * 1000, b"new version" * 1000
    store.put("k", old)
    proxy.reset_seen()
    _set_fault(proxy, mode, None, "PUT")
    with pytest.raises(Unavailable) as info:
        store.put("k", new)
    assert info.value.retryable
    assert f"s3://{bucket}/k" in str(info.value)
    assert f"after {ATTEMPTS} attempts" in str(info.value)
    with pytest.raises(Unavailable):
        store.put("fresh", new)
    assert len(_actions(proxy, "PUT")) == 2 * ATTEMPTS

    proxy.clear()
    current = store.get("k")
    if mode in UNAPPLIED:
        assert current == old
        with pytest.raises(NotFound):
            store.get("fresh")
    else:  # the outcome was unknown to the writer: either version, whole
        assert current in (old, new)
        assert store.get("fresh") == new


@pytest.mark.parametrize("mode", UNAPPLIED)
def test_persistent_part_failure_aborts_the_upload(
    store: S3ObjectStore,
    proxy: FaultProxy,
    client: Any,
    bucket: str,
    tmp_path: Path,
    mode: str,
) -> None:
    store.put("big", b"old")
    local = tmp_path / "big"
    local.write_bytes(b"n" * (11 * MIB))
    _set_fault(proxy, mode, None, "PUT")
    with pytest.raises(Unavailable):
        store.put_file("big", str(local))
    proxy.clear()
    assert store.get("big") == b"old"
    assert client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []
    assert "pass" in _actions(proxy, "DELETE")  # the abort


def test_persistent_failure_of_a_new_key_leaves_nothing(
    store: S3ObjectStore, proxy: FaultProxy
) -> None:
    proxy.drop(None, method="PUT")
    with pytest.raises(Unavailable):
        store.put_if_absent("new/key", b"x" * 100_000)
    proxy.clear()
    with pytest.raises(NotFound):
        store.head("new/key")
    assert list(store.list()) == []


def test_truncated_answers_never_reach_the_reader(store: S3ObjectStore, proxy: FaultProxy) -> None:
    data = bytes(range(256)) * 1024
    store.put("k", data)
    proxy.drop(None, partial=True, method="GET")
    with pytest.raises(Unavailable, match="after 4 attempts"):
        store.get("k")
    with pytest.raises(Unavailable):
        store.get_range("k", 10, 100_000)
    with pytest.raises(Unavailable):
        store.open_input("k")
    assert set(_actions(proxy, "GET")) == {"drop"}
    proxy.clear()
    assert store.get("k") == data


def test_throttling_is_bounded(store: S3ObjectStore, proxy: FaultProxy) -> None:
    store.put("k", b"v")
    proxy.error(None, method="GET")
    started = time.monotonic()
    with pytest.raises(Unavailable, match="SlowDown"):
        store.get("k")
    assert time.monotonic() - started < 5
    assert _actions(proxy, "GET") == ["error"] * ATTEMPTS


@pytest.mark.parametrize("code", ["InvalidAccessKeyId", "SignatureDoesNotMatch"])
def test_rejected_credentials_are_not_retried(
    store: S3ObjectStore, proxy: FaultProxy, code: str
) -> None:
    proxy.error(None, status=403, code=code)
    with pytest.raises(Unavailable, match="credentials were rejected") as info:
        store.put("k", b"v")
    assert info.value.retryable is False
    assert code in str(info.value)
    assert _actions(proxy, "PUT") == ["error"]


def test_unreachable_endpoint_is_unavailable(bucket: str) -> None:
    store = make_store(
        f"http://127.0.0.1:{free_port()}",
        bucket,
        max_attempts=2,
        connect_timeout_s=0.5,
        backoff_base_s=0.01,
    )
    with pytest.raises(Unavailable, match=f"s3://{bucket}/k .* failed after 2 attempts"):
        store.get("k")
