"""Payload encryption: an AES-GCM ``PayloadCodec`` with key ids and rotation, and where its
keys come from. Every payload a client or worker of statekeeper sends to Temporal (inputs,
results, memos, summaries, current details, failure messages) leaves the process encrypted;
the Temporal server, its database and anyone reading raw histories see only ciphertext.

Wire format of an encrypted payload: metadata ``encoding: binary/encrypted`` and
``encryption-key-id: <id>``; data ``nonce (12 bytes) || AES-GCM(serialized inner payload)``
with the key id as associated data (a ciphertext moved under another key id does not
decrypt). A serialized payload of ``COMPRESS_MIN_BYTES`` or more is zlib-compressed before it is
encrypted (ciphertext does not compress; JSON shrinks 3-5x, and Temporal stores and ships every
payload in each history): the sealed inner payload is then ``encoding: binary/zlib`` around the
compressed original, so the marker is authenticated too. Payloads without that encoding (recorded before the codec existed, or by a client
with the codec off) decode unchanged.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from settings import Settings, write_private_once
from starter.runtime.preflight import StartupRefused

ENCODING = b"binary/encrypted"
"""The ``encoding`` metadata of an encrypted payload (the value Temporal's samples use)."""
KEY_ID = "encryption-key-id"
"""Metadata naming the key that encrypted a payload."""
NONCE_BYTES = 12
COMPRESSED = b"binary/zlib"
"""The ``encoding`` of a sealed inner payload that holds a zlib-compressed serialized payload."""
COMPRESS_MIN_BYTES = 256
"""Smaller payloads are sealed as they are: zlib's header and dictionary would not pay off.
(Compressing before encrypting lets ciphertext lengths depend on how well a user's words
repeat the rest of the payload: an observer of history sizes who can send many adaptive
messages could learn a little about co-located data; histories are bounded and stored
encrypted, so the size saving is taken.)"""
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
KEY_FILE = "codec.keys"
"""The key file in the data directory (``id:base64key`` lines, the first is current)."""


class CodecKeyError(ValueError):
    """A key configuration that cannot be used (bad id, bad base64, wrong key length, a
    current id that is not listed), or a payload that does not decrypt with the keys known
    (unknown key id, tampered or foreign ciphertext). Messages name key ids, never keys."""


class CodecKeyMissing(StartupRefused):
    """Payload encryption is on and no key is configured (no ``STATEKEEPER_CODEC_KEYS``, no
    key file in the data directory). Raised before anything talks to Temporal."""


class CodecKeySettingInvalid(CodecKeyError, StartupRefused):
    """The configured keys cannot be used (``STATEKEEPER_CODEC_KEYS``, ``STATEKEEPER_CODEC_KEY_ID``
    or the data directory's key file): a ``StartupRefused`` whose message names the setting and
    the shape it needs, so the CLI prints it alone instead of a ``CodecKeyError`` traceback.
    Raised before anything talks to Temporal."""


KEYS_SHAPE = ("`id:base64key,...`: a key id of 1-64 [A-Za-z0-9._-] and an AES key of 16, 24 or 32 bytes "
              "in base64 per entry, the first current")


def _showable(key_id: str) -> bool:
    """True when ``key_id`` has a key id's shape and is shorter than any key in base64 (a
    16-byte key takes 22 characters without its padding, in either alphabet): a value in the
    wrong place (an entry written key first, a key as STATEKEEPER_CODEC_KEY_ID) may be a key."""
    return bool(KEY_ID_PATTERN.fullmatch(key_id)) and len(key_id) < 22


def _shown(key_id: str) -> str:
    """``key_id`` quoted for a message when ``_showable``; else nothing of it."""
    return repr(key_id) if _showable(key_id) else "(not shown)"


def _listed(key_ids: Iterable[str]) -> str:
    """``key_ids`` for a message, sorted, unquoted, each only when ``_showable``."""
    return ", ".join(sorted(k if _showable(k) else "(not shown)" for k in key_ids))


@dataclass(frozen=True)
class Keyring:
    """AES keys by id (16, 24 or 32 bytes each) and the id that encrypts (``current``);
    every key decrypts. Rotation: add a new key, make it current, keep the old ones as long
    as histories encrypted with them are kept."""

    keys: Mapping[str, bytes]
    current: str

    def __post_init__(self) -> None:
        if not self.keys:
            raise CodecKeyError("no codec key is listed")
        for key_id, key in self.keys.items():
            if not KEY_ID_PATTERN.fullmatch(key_id):
                raise CodecKeyError(f"a codec key id {_shown(key_id)} is not 1-64 of [A-Za-z0-9._-]")
            if len(key) not in (16, 24, 32):
                raise CodecKeyError(f"codec key {_shown(key_id)} is {len(key)} bytes; AES needs 16, 24 or 32")
        if self.current not in self.keys:
            raise CodecKeyError(f"the current codec key id {_shown(self.current)} is not among the keys "
                                f"({_listed(self.keys)})")

    @classmethod
    def parse(cls, text: str, current: Optional[str] = None) -> "Keyring":
        """Keys from ``id:base64key`` entries separated by commas or newlines (blank entries
        ignored); ``current`` defaults to the first id. Raises ``CodecKeyError``."""
        keys: dict[str, bytes] = {}
        entries = [entry.strip() for entry in re.split(r"[,\n]", text) if entry.strip()]
        for number, entry in enumerate(entries, 1):
            key_id, sep, encoded = (part.strip() for part in entry.partition(":"))
            if not sep:
                raise CodecKeyError("a codec key entry is not `id:base64key`")
            if not KEY_ID_PATTERN.fullmatch(key_id):
                # never echoed: an entry written key first would show the key
                raise CodecKeyError("a codec key id is not 1-64 of [A-Za-z0-9._-] (is an entry written key first?)")
            if key_id in keys:
                raise CodecKeyError(f"codec key id {_shown(key_id)} is listed twice")
            try:
                keys[key_id] = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                # by its place, not its id: in an entry written key first, the "id" is the key
                raise CodecKeyError(f"the key of codec key entry {number} is not valid base64") from None
        if not keys:
            raise CodecKeyError("no codec key is listed")
        return cls(keys=keys, current=current or next(iter(keys)))

    @classmethod
    def generate(cls) -> "Keyring":
        """A new keyring of one random 256-bit key with a random id ``dev-<8 hex>``."""
        key_id = f"dev-{secrets.token_hex(4)}"
        return cls(keys={key_id: AESGCM.generate_key(bit_length=256)}, current=key_id)

    def dump(self) -> str:
        """The ``id:base64key`` lines, current first (what ``parse`` reads back)."""
        ordered = [self.current, *(k for k in self.keys if k != self.current)]
        return "".join(f"{k}:{base64.b64encode(self.keys[k]).decode()}\n" for k in ordered)


class EncryptionCodec(PayloadCodec):
    """AES-GCM payload codec over a ``Keyring``: encodes with the current key, decodes with
    whichever key the payload names; passes through payloads it did not encrypt."""

    def __init__(self, keyring: Keyring, compress: bool = True) -> None:
        self.keyring = keyring
        self.compress = compress
        """False: seal payloads uncompressed, for readers that predate ``COMPRESSED`` (a
        process of an older release on the same task queue); decoding handles both."""
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keyring.keys.items()}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Each payload serialized and encrypted with the current key (a fresh nonce each)."""
        key_id = self.keyring.current
        cipher = self._ciphers[key_id]
        out = []
        for payload in payloads:
            nonce = os.urandom(NONCE_BYTES)
            serialized = payload.SerializeToString()
            sealed = cipher.encrypt(nonce, _compressed(serialized) if self.compress else serialized, key_id.encode())
            out.append(Payload(metadata={"encoding": ENCODING, KEY_ID: key_id.encode()}, data=nonce + sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Each encrypted payload decrypted with the key it names; others unchanged.
        Raises ``CodecKeyError`` for an unknown key id or a payload that fails to authenticate."""
        return [self.decrypt(p) if p.metadata.get("encoding") == ENCODING else p for p in payloads]

    def decrypt(self, payload: Payload) -> Payload:
        """One encrypted payload's inner payload. Raises ``CodecKeyError``."""
        key_id = payload.metadata.get(KEY_ID, b"").decode("ascii", "replace")
        if not key_id:  # said "encrypted with codec key '', which is not configured"
            raise CodecKeyError(f"an encrypted payload names no codec key (its {KEY_ID!r} metadata is missing)")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise CodecKeyError(f"a payload is encrypted with codec key {key_id!r}, which is not configured "
                                f"(known: {', '.join(sorted(self._ciphers))})")
        data = payload.data
        try:
            inner = Payload.FromString(cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode()))
        except (InvalidTag, ValueError):
            raise CodecKeyError(f"a payload marked with codec key {key_id!r} does not decrypt with it") from None
        if inner.metadata.get("encoding") == COMPRESSED:
            return Payload.FromString(zlib.decompress(inner.data))
        return inner


def _compressed(serialized: bytes) -> bytes:
    """``serialized`` (a payload), or a ``binary/zlib`` payload around it compressed when
    that is smaller (``COMPRESS_MIN_BYTES``)."""
    if len(serialized) < COMPRESS_MIN_BYTES:
        return serialized
    packed = Payload(metadata={"encoding": COMPRESSED}, data=zlib.compress(serialized, 6)).SerializeToString()
    return packed if len(packed) < len(serialized) else serialized


def key_file(settings: Settings) -> Path:
    """The data directory's key file (what ``statekeeper dev`` writes when no key is configured)."""
    return settings.data_dir / KEY_FILE


def codec_keyring(settings: Settings, create: bool = False) -> Optional[Keyring]:
    """The keys of ``settings``: None when the codec is off (``codec_enabled`` false);
    ``codec_keys`` when set; else the data directory's key file; else, with ``create``
    (``statekeeper dev`` and the CLI's local runs), a new key written there (mode 0600,
    race-safe: a concurrent creator's file wins). ``codec_key_id`` picks the current key.

    Raises ``CodecKeyMissing`` without a key and without ``create``, ``CodecKeySettingInvalid``
    (a ``CodecKeyError`` and a ``StartupRefused``) for a key configuration that cannot be used."""
    if not settings.codec_enabled:
        return None
    if settings.codec_keys is not None:
        return _configured(settings.codec_keys.get_secret_value(), "invalid setting: STATEKEEPER_CODEC_KEYS",
                           settings.codec_key_id)
    path = key_file(settings)
    if not path.exists():
        if not create:
            raise CodecKeyMissing(
                f"payload encryption is on and no key is configured: set STATEKEEPER_CODEC_KEYS "
                f"(`id:base64key,...`), run `statekeeper dev` once to create {path}, or point "
                f"STATEKEEPER_DATA_DIR at the data directory that holds it (STATEKEEPER_CODEC_ENABLED=false "
                f"turns encryption off)")
        write_private_once(path, Keyring.generate().dump())
    return _configured(path.read_text(), f"the codec key file {path} cannot be used", settings.codec_key_id)


def _configured(text: str, source: str, current: Optional[str]) -> Keyring:
    # a setting the user got wrong is said as one (CodecKeySettingInvalid, a StartupRefused:
    # the CLI prints it alone), not as the CodecKeyError traceback a payload that does not
    # decrypt would be
    try:
        keyring = Keyring.parse(text)
    except CodecKeyError as err:
        raise CodecKeySettingInvalid(f"{source}: {err}; expected {KEYS_SHAPE}") from None
    if not current or current == keyring.current:
        return keyring
    if current not in keyring.keys:
        raise CodecKeySettingInvalid(f"invalid setting: STATEKEEPER_CODEC_KEY_ID: {_shown(current)} is not among the "
                                     f"codec keys ({_listed(keyring.keys)})")
    return Keyring(keys=keyring.keys, current=current)


def check_configured_keys(settings: Settings) -> None:
    """Raise ``CodecKeySettingInvalid`` now when the keys configured (``STATEKEEPER_CODEC_KEYS``,
    or an existing key file) cannot be used; a missing key is ``codec_keyring``'s to handle
    (``statekeeper dev`` creates one). For a command about to start servers it would then stop."""
    if settings.codec_enabled and (settings.codec_keys is not None or key_file(settings).exists()):
        codec_keyring(settings)


def payload_codec(settings: Settings, create: bool = False) -> Optional[EncryptionCodec]:
    """The codec for ``settings`` (None when encryption is off); see ``codec_keyring``."""
    keyring = codec_keyring(settings, create=create)
    return None if keyring is None else EncryptionCodec(keyring, compress=settings.codec_compress)
