"""The key service: what wraps each case's data key before ``KeyRing`` (sealing.py) keeps it.

A case key is 64 random bytes (AES-256-SIV). With a key service the key store holds each key only
wrapped (encrypted) under a key-encryption key (KEK) that never enters it: whoever copies the key
store (a backup, a bucket's object versions) holds nothing that opens a case without the KEK too.
``key_service.kind`` picks one:

* ``local`` with ``kek_file`` (``LocalKeys``): a KEK of 64 bytes in a file of its own (a mounted
  secret), wrapping with AES-SIV, which RFC 5297 defines as a key-wrap construction, the key's id
  as associated data (a wrapped key moved under another case's name does not unwrap)::

      b"CJWRAP1\\0" + KEK fingerprint (8 bytes) + AES-SIV(KEK, key, [those 16 bytes, key id])

* ``local`` without ``kek_file`` (``Unwrapped``): the keys kept raw, as before there was a key
  service. For development only: the key store is then as secret as the media itself.
* ``aws_kms`` (``AwsKms``, the ``kms`` extra): AWS KMS ``Encrypt`` and ``Decrypt`` under
  ``kms_key_id``, with the encryption context ``{"cyberjurors-case-key": <key id>}`` (the same
  binding, checked by KMS, and written to CloudTrail with every call)::

      b"CJKMS01\\0" + KMS's ciphertext blob

A key read as it was stored before wrapping (exactly 64 bytes, no header) is used as it is, whatever
the key service: existing key stores keep working, and their keys are wrapped as new ones are made.

What fails is a ``StoreError``: ``unavailable`` when the service cannot be reached or refuses to
work (a disabled KMS key, missing permissions, a timeout), and when a key was wrapped by another key
service or KEK than this worker's, which is a configuration to fix, not a record to dead-letter: the
agent stops rather than take every case for tampered. ``corrupt`` when one stored key does not open
under the KEK that wrapped it (altered, or moved under another key's name). ``check()`` raises what
a wrap would, for the worker's readiness (streams/probes.py).
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from ..errors import StoreError

if TYPE_CHECKING:
    from ..config.evidence import KeyServiceSettings

KEY_BYTES = 64  # a case key, and a local KEK: AES-256-SIV's two 256-bit keys
LOCAL_MAGIC = b"CJWRAP1\0"
KMS_MAGIC = b"CJKMS01\0"
FINGERPRINT_BYTES = 8
KMS_CONTEXT = "cyberjurors-case-key"
KMS_ATTEMPTS = 2  # botocore's own retries ("standard" mode): one more try, each within timeout_s
MAX_WRAPPED = 8192  # the most a stored key may hold: KMS's blob for 64 bytes is a few hundred


class KeyWrap(Protocol):
    """Wraps and unwraps case keys; ``key_id`` is the key's name in the key store (bound to it)."""

    def wrap(self, key_id: str, key: bytes) -> bytes: ...

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes: ...

    def check(self) -> None:
        """Raise StoreError ``unavailable`` when a wrap or an unwrap would fail for want of the service."""
        ...


def wrapped_by(stored: bytes) -> str:
    """Which key service made ``stored``, for the errors."""
    if stored.startswith(LOCAL_MAGIC) and len(stored) > len(LOCAL_MAGIC) + FINGERPRINT_BYTES:
        fingerprint = stored[len(LOCAL_MAGIC) : len(LOCAL_MAGIC) + FINGERPRINT_BYTES].hex()
        return f"a local KEK (fingerprint {fingerprint})"
    if stored.startswith(KMS_MAGIC):
        return "AWS KMS"
    return ""


def _foreign(key_id: str, stored: bytes, mine: str) -> StoreError:
    """``stored`` is not this key service's: wrapped by another (``unavailable``: the worker is
    configured with the wrong one), or no wrapped key at all (``corrupt``: damaged)."""
    other = wrapped_by(stored)
    if other:
        return StoreError(
            f"case key {key_id[:12]}… was wrapped by {other}, and key_service is {mine}: "
            "configure the key service that wrapped it",
            kind="unavailable",
        )
    return StoreError(
        f"case key {key_id[:12]}… is damaged ({len(stored)} bytes, no key service's header)", kind="corrupt"
    )


def _unwrapped_size(key_id: str, key: bytes) -> bytes:
    if len(key) != KEY_BYTES:
        raise StoreError(f"case key {key_id[:12]}… unwraps to {len(key)} bytes, not {KEY_BYTES}", kind="corrupt")
    return key


class Unwrapped:
    """No key service: keys kept raw. Only for development; the key store is then as secret as the
    media and the records it opens."""

    name = "none (no kek_file)"

    def wrap(self, key_id: str, key: bytes) -> bytes:
        return key

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        if len(wrapped) == KEY_BYTES:
            return wrapped
        raise _foreign(key_id, wrapped, self.name)

    def check(self) -> None:
        return None


def _read_kek(path: Path) -> bytes:
    try:
        kek = path.read_bytes()[: KEY_BYTES + 1]
    except OSError as err:
        raise StoreError(f"key_service.kek_file {path}: cannot be read ({err.strerror})", kind="unavailable") from err
    if len(kek) != KEY_BYTES:
        raise StoreError(
            f"key_service.kek_file {path}: holds {len(kek)} bytes, not {KEY_BYTES} (`head -c 64 /dev/urandom`)",
            kind="unavailable",
        )
    return kek


class LocalKeys:
    """Keys wrapped under a KEK read from ``kek_file``, on first use (``erase`` and the media
    commands, which never unwrap, do not need it), then held; ``check`` reads the file again, so a
    secret unmounted or replaced under a running worker makes it not ready."""

    def __init__(self, kek_file: Path):
        self.path = kek_file
        self._kek: bytes | None = None

    def _key(self) -> bytes:
        if self._kek is None:
            self._kek = _read_kek(self.path)
        return self._kek

    @staticmethod
    def _fingerprint(kek: bytes) -> bytes:
        return hashlib.sha256(b"cyberjurors-kek:" + kek).digest()[:FINGERPRINT_BYTES]

    @property
    def fingerprint(self) -> bytes:
        return self._fingerprint(self._key())

    @property
    def name(self) -> str:
        return f"a local KEK (fingerprint {self.fingerprint.hex()})"

    def wrap(self, key_id: str, key: bytes) -> bytes:
        header = LOCAL_MAGIC + self.fingerprint
        return header + AESSIV(self._key()).encrypt(key, [header, key_id.encode()])

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        if len(wrapped) == KEY_BYTES:  # kept raw, before there was a key service
            return wrapped
        header = LOCAL_MAGIC + self.fingerprint
        if not wrapped.startswith(header):
            raise _foreign(key_id, wrapped, self.name)
        try:
            key = AESSIV(self._key()).decrypt(wrapped[len(header) :], [header, key_id.encode()])
        except InvalidTag as err:
            raise StoreError(
                f"case key {key_id[:12]}… does not unwrap under its KEK (altered, or stored under another name)",
                kind="corrupt",
            ) from err
        return _unwrapped_size(key_id, key)

    def check(self) -> None:
        current = _read_kek(self.path)
        if self._fingerprint(current) != self._fingerprint(self._key()):
            raise StoreError(
                f"key_service.kek_file {self.path} holds another KEK than this worker started with: restart it",
                kind="unavailable",
            )


# KMS's answers that say the service will not work now (a disabled or deleted key, no permission, its
# own outage), as against one stored key that does not decrypt
_KMS_CORRUPT = {"InvalidCiphertextException"}


class AwsKms:
    """Keys wrapped by AWS KMS under ``key_id`` (an id, ARN or alias of a symmetric key). Each call
    is bounded by ``timeout_s`` for the connection and again for the answer, tried at most
    ``KMS_ATTEMPTS`` times by botocore's own retries. Needs kms:Encrypt, kms:Decrypt, kms:DescribeKey."""

    def __init__(self, key_id: str, region: str | None = None, endpoint_url: str | None = None, timeout_s: float = 5.0):
        self.key_id = key_id
        self.name = f"AWS KMS key {key_id}"
        self.region, self.endpoint_url, self.timeout_s = region, endpoint_url, timeout_s
        self._client: Any = None
        self._making = threading.Lock()

    def client(self) -> Any:
        """The KMS client, made on first use: a region the SDK cannot find is then a StoreError of
        that call, not a failure of whatever built the store (``erase`` never calls KMS)."""
        with self._making:
            if self._client is None:
                import boto3  # the kms extra: imported only when key_service.kind is aws_kms
                from botocore.config import Config

                config = Config(
                    connect_timeout=self.timeout_s,
                    read_timeout=self.timeout_s,
                    retries={"mode": "standard", "total_max_attempts": KMS_ATTEMPTS},
                )
                # a session of its own: boto3's default session is not thread-safe, its clients are
                self._client = boto3.session.Session().client(
                    "kms", region_name=self.region, endpoint_url=self.endpoint_url, config=config
                )
            return self._client

    def _call(self, what: str, key_id: str, method: str, **params: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self.client(), method)(**params)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            message = err.response.get("Error", {}).get("Message", "")
            kind = "corrupt" if code in _KMS_CORRUPT else "unavailable"
            about = f"case key {key_id[:12]}…: " if key_id else ""
            raise StoreError(f"{self.name}: cannot {what}: {about}{code} {message}".rstrip(), kind=kind) from err
        except BotoCoreError as err:  # no connection, a timeout, no credentials
            raise StoreError(f"{self.name}: cannot {what}: {err}", kind="unavailable") from err

    def wrap(self, key_id: str, key: bytes) -> bytes:
        done = self._call(
            "wrap",
            key_id,
            "encrypt",
            KeyId=self.key_id,
            Plaintext=key,
            EncryptionContext={KMS_CONTEXT: key_id},
        )
        return KMS_MAGIC + done["CiphertextBlob"]

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        if len(wrapped) == KEY_BYTES:  # kept raw, before there was a key service
            return wrapped
        if not wrapped.startswith(KMS_MAGIC):
            raise _foreign(key_id, wrapped, self.name)
        done = self._call(
            "unwrap",
            key_id,
            "decrypt",
            CiphertextBlob=wrapped[len(KMS_MAGIC) :],
            KeyId=self.key_id,  # a blob of another KMS key is refused, not decrypted under it
            EncryptionContext={KMS_CONTEXT: key_id},
        )
        return _unwrapped_size(key_id, done["Plaintext"])

    def check(self) -> None:
        meta = self._call("describe its key", "", "describe_key", KeyId=self.key_id)["KeyMetadata"]
        if meta.get("KeyState") != "Enabled":
            raise StoreError(f"{self.name} is {meta.get('KeyState')}, not Enabled", kind="unavailable")


def key_wrap(settings: KeyServiceSettings) -> KeyWrap:
    """The key service ``key_service`` configures."""
    if settings.kind == "aws_kms":
        if not settings.kms_key_id:
            raise StoreError("key_service.kind=aws_kms needs key_service.kms_key_id", kind="unsupported")
        return AwsKms(settings.kms_key_id, settings.kms_region, settings.kms_endpoint_url, settings.timeout_s)
    if settings.kek_file is not None:
        return LocalKeys(settings.kek_file)
    return Unwrapped()
