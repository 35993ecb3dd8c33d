"""The key service (evidence/key_service.py): case keys wrapped by a local KEK or by AWS KMS (moto's,
in this process) before the key store keeps them; keys stored raw before wrapping still read; what
fails says ``unavailable`` (the service, or a worker configured with another KEK) or ``corrupt`` (one
stored key altered or moved); a KMS that cannot be reached fails the call and ``check()``."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from cyberjurors.config import Settings
from cyberjurors.config.evidence import KeyServiceSettings
from cyberjurors.errors import StoreError
from cyberjurors.evidence.key_service import (
    KEY_BYTES,
    KMS_CONTEXT,
    KMS_MAGIC,
    LOCAL_MAGIC,
    AwsKms,
    LocalKeys,
    Unwrapped,
    key_wrap,
)
from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.sealing import KeyRing
from cyberjurors.tooling.broker import free_port

from .test_media_store import RETENTION, Clock

SECRET = "s" * 32
KEY = bytes(range(KEY_BYTES))
KEY_ID = "ab" * 32
TEXT = b"the buyer wrote: my number is 07700 900123"
REGION = "eu-west-1"


def kek_file(folder: Path, name: str = "kek") -> Path:
    path = folder / name
    path.write_bytes(os.urandom(KEY_BYTES))
    return path


def ring(folder: Path, wrap: object | None = None) -> KeyRing:
    return KeyRing(LocalMediaStore(folder, RETENTION, Clock()), SECRET, wrap=wrap)  # type: ignore[arg-type]


def stored_keys(folder: Path) -> list[bytes]:
    return [p.read_bytes() for p in folder.rglob("*") if p.is_file()]


def refused(kind: str, fn, *args) -> StoreError:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreError) as err:
        fn(*args)
    assert err.value.kind == kind, err.value.detail
    return err.value


# --- a local KEK --------------------------------------------------------------------------------------


def test_a_local_kek_wraps_a_key_bound_to_its_id(tmp_path: Path) -> None:
    keys = LocalKeys(kek_file(tmp_path))
    wrapped = keys.wrap(KEY_ID, KEY)
    assert wrapped.startswith(LOCAL_MAGIC + keys.fingerprint) and KEY not in wrapped
    assert len(wrapped) == len(LOCAL_MAGIC) + len(keys.fingerprint) + 16 + KEY_BYTES
    assert keys.unwrap(KEY_ID, wrapped) == KEY
    refused("corrupt", keys.unwrap, "cd" * 32, wrapped)  # moved under another case's name
    altered = bytearray(wrapped)
    altered[-1] ^= 1
    refused("corrupt", keys.unwrap, KEY_ID, bytes(altered))


def test_a_key_wrapped_under_another_kek_is_refused_as_a_configuration_not_as_tampering(tmp_path: Path) -> None:
    """Another KEK than the one that wrapped it: every key would fail alike, so the worker stops
    (``unavailable``) rather than dead-letter each record as tampered."""
    first, second = LocalKeys(kek_file(tmp_path, "a")), LocalKeys(kek_file(tmp_path, "b"))
    err = refused("unavailable", second.unwrap, KEY_ID, first.wrap(KEY_ID, KEY))
    assert first.fingerprint.hex() in err.detail and second.fingerprint.hex() in err.detail
    refused("unavailable", Unwrapped().unwrap, KEY_ID, first.wrap(KEY_ID, KEY))  # no key service at all
    refused("corrupt", second.unwrap, KEY_ID, b"\x00" * 10)  # no key service's at all: damaged


def test_a_kek_file_must_hold_64_bytes_and_check_reads_it_again(tmp_path: Path) -> None:
    short = tmp_path / "short"
    short.write_bytes(os.urandom(32))
    refused("unavailable", LocalKeys(short).check)
    refused("unavailable", LocalKeys(short).wrap, KEY_ID, KEY)
    refused("unavailable", LocalKeys(tmp_path / "none").check)
    path = kek_file(tmp_path)
    keys = LocalKeys(path)
    keys.check()
    path.write_bytes(os.urandom(KEY_BYTES))  # replaced under a running worker
    refused("unavailable", keys.check)
    path.unlink()  # a secret unmounted
    refused("unavailable", keys.check)


async def test_a_ring_with_a_local_kek_stores_only_wrapped_keys_and_reads_raw_ones_from_before(tmp_path: Path) -> None:
    before = ring(tmp_path / "keys")  # no key service: keys kept raw, as before this change
    old = await before.seal("c-old", TEXT)
    [raw] = stored_keys(tmp_path / "keys")
    assert len(raw) == KEY_BYTES

    wrapped = ring(tmp_path / "keys", LocalKeys(kek_file(tmp_path)))
    assert await wrapped.open(old, "a record") == TEXT  # the raw key reads as it is
    new = await wrapped.seal("c-new", TEXT)
    assert await wrapped.open(new, "a record") == TEXT
    [(key_id, key)] = [await wrapped.key_for("c-new")]
    held = [s for s in stored_keys(tmp_path / "keys") if s != raw]
    assert held and all(s.startswith(LOCAL_MAGIC) and key not in s for s in held)
    assert key_id == wrapped.key_id("c-new")
    with pytest.raises(StoreError) as err:  # the same store read with no key service: refused, not taken raw
        await ring(tmp_path / "keys").open(new, "a record")
    assert err.value.kind == "unavailable"


def test_key_wrap_builds_the_configured_one(tmp_path: Path) -> None:
    assert isinstance(key_wrap(KeyServiceSettings()), Unwrapped)
    assert isinstance(key_wrap(KeyServiceSettings(kek_file=kek_file(tmp_path))), LocalKeys)
    kms = key_wrap(KeyServiceSettings(kind="aws_kms", kms_key_id="alias/cj", kms_region=REGION, timeout_s=2))
    assert isinstance(kms, AwsKms) and kms.key_id == "alias/cj"
    client = kms.client()
    assert client.meta.config.connect_timeout == 2 and client.meta.config.read_timeout == 2
    assert client.meta.region_name == REGION and client.meta.config.retries["total_max_attempts"] == 2


def test_aws_kms_without_boto3_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n: None if n == "boto3" else find_spec(n))
    with pytest.raises(ValueError, match=r"key_service\.kind=aws_kms needs the kms extra: pip install '\.\[kms\]'"):
        Settings(key_service={"kind": "aws_kms", "kms_key_id": "alias/cj"})
    Settings(key_service={"kek_file": "kek"})  # the local one needs no extra


# --- AWS KMS (moto's, in this process) ----------------------------------------------------------------


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    for var in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_KMS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.client("kms", region_name=REGION)


def kms_key(client) -> str:  # type: ignore[no-untyped-def]
    return client.create_key(Description="cyberjurors case keys")["KeyMetadata"]["KeyId"]


def test_kms_wraps_under_the_key_id_as_encryption_context(aws) -> None:  # type: ignore[no-untyped-def]
    key = kms_key(aws)
    kms = AwsKms(key, REGION)
    kms.check()
    wrapped = kms.wrap(KEY_ID, KEY)
    assert wrapped.startswith(KMS_MAGIC) and KEY not in wrapped
    assert kms.unwrap(KEY_ID, wrapped) == KEY
    blob = wrapped[len(KMS_MAGIC) :]  # KMS itself holds the binding: no other context decrypts it
    assert aws.decrypt(CiphertextBlob=blob, EncryptionContext={KMS_CONTEXT: KEY_ID})["Plaintext"] == KEY
    refused("corrupt", kms.unwrap, "cd" * 32, wrapped)  # moved under another case's name
    refused("corrupt", kms.unwrap, KEY_ID, KMS_MAGIC + blob[:-1] + bytes([blob[-1] ^ 1]))
    assert kms.unwrap(KEY_ID, KEY) == KEY  # a raw key from before wrapping
    aliased = AwsKms("alias/cj", REGION)
    aws.create_alias(AliasName="alias/cj", TargetKeyId=key)
    assert aliased.unwrap(KEY_ID, aliased.wrap(KEY_ID, KEY)) == KEY


async def test_a_ring_with_kms_seals_and_opens_and_its_store_holds_no_raw_key(aws, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    keys = ring(tmp_path / "keys", AwsKms(kms_key(aws), REGION))
    sealed = await keys.seal("c-1", TEXT)
    assert await keys.open(sealed, "a record") == TEXT
    _, key = await keys.key_for("c-1")
    files = stored_keys(tmp_path / "keys")
    assert files and all(f.startswith(KMS_MAGIC) and key not in f for f in files)
    with pytest.raises(StoreError) as err:  # the store read under another KMS key: that key cannot unwrap it
        await ring(tmp_path / "keys", AwsKms(kms_key(aws), REGION)).open(sealed, "a record")
    assert err.value.kind == "unavailable"
    assert await ring(tmp_path / "keys").destroy("c-1") >= 1  # erase destroys a key without the key service
    with pytest.raises(StoreError) as err:
        await keys.open(sealed, "a record")
    assert err.value.kind == "shredded"


def test_a_disabled_or_deleted_kms_key_fails_the_check(aws) -> None:  # type: ignore[no-untyped-def]
    disabled, deleted = kms_key(aws), kms_key(aws)
    aws.disable_key(KeyId=disabled)
    aws.schedule_key_deletion(KeyId=deleted, PendingWindowInDays=7)
    assert "Disabled" in refused("unavailable", AwsKms(disabled, REGION).check).detail
    assert "PendingDeletion" in refused("unavailable", AwsKms(deleted, REGION).check).detail
    missing = AwsKms("alias/no-such-key", REGION)
    refused("unavailable", missing.check)
    refused("unavailable", missing.wrap, KEY_ID, KEY)


def test_kms_refusing_a_disabled_key_is_unavailable(aws) -> None:  # type: ignore[no-untyped-def]
    """Real KMS refuses Decrypt under a disabled key (DisabledException); moto decrypts anyway, so
    KMS's answer is given by botocore's Stubber here: a service that will not work now, not a bad key."""
    kms = AwsKms(kms_key(aws), REGION)
    with Stubber(kms.client()) as stub:
        stub.add_client_error("decrypt", "DisabledException", "arn:aws:kms:...:key/... is disabled.")
        stub.add_client_error("encrypt", "KMSInvalidStateException", "pending deletion")
        refused("unavailable", kms.unwrap, KEY_ID, KMS_MAGIC + b"blob")
        refused("unavailable", kms.wrap, KEY_ID, KEY)


def test_a_kms_that_cannot_be_reached_fails_the_call_and_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    kms = AwsKms("alias/cj", REGION, endpoint_url=closed, timeout_s=0.5)
    assert "127.0.0.1" in refused("unavailable", kms.wrap, KEY_ID, KEY).detail
    refused("unavailable", kms.unwrap, KEY_ID, KMS_MAGIC + b"blob")
    refused("unavailable", kms.check)


def test_a_kms_without_a_region_fails_its_calls_not_the_store_built_on_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    kms = key_wrap(KeyServiceSettings(kind="aws_kms", kms_key_id="alias/cj"))  # erase builds it, never calls it
    assert "region" in refused("unavailable", kms.check).detail.lower()
