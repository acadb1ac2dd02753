"""The payload codec (``starter.runtime.codec``) and the data converter built on it
(``starter.runtime.connection.data_converter``): AES-GCM with key ids, rotation, payloads recorded
before the codec, tampering, failure messages, and where the keys come from."""

from __future__ import annotations

import base64
import concurrent.futures
import stat

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from settings import Settings
from starter.runtime.codec import (
    COMPRESSED,
    ENCODING,
    KEY_FILE,
    KEY_ID,
    CodecKeyError,
    CodecKeyMissing,
    EncryptionCodec,
    Keyring,
    codec_keyring,
)
from starter.runtime.connection import data_converter
from starter.runtime.preflight import StartupRefused
from tests.policy_fixtures import EMAIL

K1, K2 = b"1" * 32, b"2" * 16


def keys(*pairs: tuple[str, bytes]) -> str:
    return ",".join(f"{key_id}:{base64.b64encode(key).decode()}" for key_id, key in pairs)


def settings_with(tmp_path, **kwargs) -> Settings:
    return Settings(data_dir=tmp_path, **kwargs)


async def test_a_value_leaves_encrypted_under_the_current_key_and_comes_back(tmp_path):
    converter = data_converter(settings_with(tmp_path, codec_keys=keys(("k1", K1))))
    value = {"email": EMAIL, "note": "x" * 100}
    [payload] = await converter.encode([value])
    assert payload.metadata["encoding"] == ENCODING and payload.metadata[KEY_ID] == b"k1"
    assert EMAIL.encode() not in payload.SerializeToString()
    assert await converter.decode([payload], [dict]) == [value]
    # a fresh nonce each time: the same value never gives the same ciphertext
    [again] = await converter.encode([value])
    assert again.data != payload.data
    # a bounded overhead per payload: 12 nonce + 16 tag + the outer metadata (encoding, key
    # id) + the inner payload's framing; 86 bytes here, whatever the value's size
    [plain] = await pydantic_data_converter.encode([value])
    assert 0 < payload.ByteSize() - plain.ByteSize() <= 100


async def test_a_large_payload_is_compressed_inside_the_seal_and_a_small_one_is_not():
    codec = EncryptionCodec(Keyring(keys={"k1": K1}, current="k1"))
    big = Payload(metadata={"encoding": b"json/plain"}, data=b'{"orders": [' + b'{"status": "pending"},' * 200 + b'{}]}')
    small = Payload(metadata={"encoding": b"json/plain"}, data=b'"hi"')
    sealed_big, sealed_small = await codec.encode([big, small])
    assert len(sealed_big.data) < len(big.data) / 5  # JSON compresses; ciphertext would not
    assert COMPRESSED not in sealed_big.data and b"status" not in sealed_big.data  # the marker is sealed too
    assert len(sealed_small.data) > len(small.data)  # nonce and tag, no zlib header
    assert await codec.decode([sealed_big, sealed_small]) == [big, small]


async def test_rotation_encrypts_with_the_new_key_and_still_decrypts_the_old_one():
    old = EncryptionCodec(Keyring.parse(keys(("k1", K1))))
    [sealed_old] = await old.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"old"')])
    rotated = EncryptionCodec(Keyring.parse(keys(("k1", K1), ("k2", K2)), current="k2"))
    [sealed_new] = await rotated.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"new"')])
    assert sealed_new.metadata[KEY_ID] == b"k2"
    assert [p.data for p in await rotated.decode([sealed_old, sealed_new])] == [b'"old"', b'"new"']
    # a keyring without k1 cannot read what k1 sealed: the error names ids, never key bytes
    only_new = EncryptionCodec(Keyring.parse(keys(("k2", K2))))
    with pytest.raises(CodecKeyError, match="'k1', which is not configured") as refused:
        await only_new.decode([sealed_old])
    assert base64.b64encode(K2).decode() not in str(refused.value)


async def test_payloads_recorded_before_the_codec_decode_unchanged(tmp_path):
    converter = data_converter(settings_with(tmp_path, codec_keys=keys(("k1", K1))))
    [legacy] = await pydantic_data_converter.encode([{"email": EMAIL}])
    assert await converter.decode([legacy], [dict]) == [{"email": EMAIL}]
    assert await converter.payload_codec.decode([legacy]) == [legacy]


async def test_a_tampered_or_relabelled_ciphertext_does_not_decrypt():
    codec = EncryptionCodec(Keyring.parse(keys(("k1", K1), ("k2", K1))))  # same bytes, two ids
    [sealed] = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"secret"')])
    flipped = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(CodecKeyError, match="does not decrypt"):
        await codec.decode([flipped])
    # the key id is authenticated: the same bytes under another id are refused
    relabelled = Payload(metadata={"encoding": ENCODING, KEY_ID: b"k2"}, data=sealed.data)
    with pytest.raises(CodecKeyError, match="'k2' does not decrypt"):
        await codec.decode([relabelled])
    with pytest.raises(CodecKeyError):
        await codec.decode([Payload(metadata={"encoding": ENCODING, KEY_ID: b"k1"}, data=b"short")])


async def test_an_encrypted_payload_without_its_key_id_is_refused_as_such():
    """Posted to the codec server's /decode, such a payload is refused for its missing key id,
    not as "encrypted with codec key '', which is not configured" (as if a key named '' were missing)."""
    codec = EncryptionCodec(Keyring.parse(keys(("k1", K1))))
    [sealed] = await codec.encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"secret"')])
    unnamed = Payload(metadata={"encoding": ENCODING}, data=sealed.data)
    with pytest.raises(CodecKeyError, match="names no codec key .its 'encryption-key-id' metadata is missing.") as refused:
        await codec.decode([unnamed])
    assert "''" not in str(refused.value)


async def test_failure_messages_and_stack_traces_are_encrypted_and_decode_back(tmp_path):
    converter = data_converter(settings_with(tmp_path, codec_keys=keys(("k1", K1))))
    failure = Failure()
    try:
        raise ApplicationError(f"no user with email {EMAIL}", type="NotFound", non_retryable=True)
    except ApplicationError as err:
        await converter.encode_failure(err, failure)
    assert EMAIL.encode() not in failure.SerializeToString()
    assert failure.message == "Encoded failure" and failure.stack_trace == ""
    assert failure.encoded_attributes.metadata["encoding"] == ENCODING
    back = await converter.decode_failure(failure)
    assert isinstance(back, ApplicationError) and EMAIL in back.message and back.type == "NotFound"


def test_encryption_off_is_the_plain_pydantic_converter(tmp_path):
    assert data_converter(settings_with(tmp_path, codec_enabled=False, codec_keys=None)) is pydantic_data_converter
    assert codec_keyring(settings_with(tmp_path, codec_enabled=False)) is None


@pytest.mark.parametrize("text, current, error", [
    ("", None, "no codec key is listed"),
    (" , \n", None, "no codec key is listed"),
    ("k1", None, "not `id:base64key`"),
    ("k1:not*base64", None, "not valid base64"),
    (keys(("k1", b"short")), None, "5 bytes; AES needs 16, 24 or 32"),
    (keys(("k1", K1), ("k1", K2)), None, "listed twice"),
    (keys(("k 1", K1)), None, "is not 1-64 of"),
    (keys(("k1", K1)), "k9", "'k9' is not among the keys"),
])
def test_unusable_key_settings_are_refused_with_the_reason(text, current, error):
    with pytest.raises(CodecKeyError, match=error):
        Keyring.parse(text, current)


@pytest.mark.parametrize("text, current, error", [
    ("", None, "invalid setting: STATEKEEPER_CODEC_KEYS: no codec key is listed"),
    ("abc", None, "invalid setting: STATEKEEPER_CODEC_KEYS: a codec key entry is not `id:base64key`"),
    ("id:not-base64", None, "invalid setting: STATEKEEPER_CODEC_KEYS: the key of codec key entry 1 is not valid "
                            "base64"),
    (keys(("k1", b"short")), None, "invalid setting: STATEKEEPER_CODEC_KEYS: codec key 'k1' is 5 bytes"),
    (keys(("k1", K1)), "k9", "invalid setting: STATEKEEPER_CODEC_KEY_ID: 'k9' is not among the codec keys (k1)"),
])
def test_an_unusable_key_setting_is_a_startup_refusal_naming_it(tmp_path, text, current, error):
    """The ``CodecKeyError`` of ``Keyring.parse`` is a ``StartupRefused`` too, so every command
    (api, codec-server, worker, state, ...) refuses in one line instead of dying with its traceback."""
    settings = settings_with(tmp_path, codec_keys=text, codec_key_id=current)
    with pytest.raises(StartupRefused) as refused:  # the CLI prints a StartupRefused alone, status 2
        data_converter(settings)
    assert isinstance(refused.value, CodecKeyError)  # still what it was for callers that catch that
    assert str(refused.value).startswith(error)
    if current is None:
        assert "expected `id:base64key,...`" in str(refused.value)
    assert base64.b64encode(K1).decode() not in str(refused.value)  # ids, never keys
    assert not (tmp_path / KEY_FILE).exists()


@pytest.mark.parametrize("encoded", [
    *(base64.b64encode(key).decode() for key in (K1, bytes(range(24)), b"A" * 24, b"x" * 32)),
    base64.b64encode(bytes(range(16))).decode().rstrip("="),  # unpadded: 22 characters, an id's shape
    base64.urlsafe_b64encode(b"\xff\xef\xfb" * 5 + b"\xff").decode().rstrip("="),  # url-safe: - and _
])
def test_an_entry_written_key_first_never_shows_the_key(tmp_path, encoded):
    """A key's base64 without padding may look like a key id: the messages name entries by
    their place, and ids only when they have an id's shape and are shorter than any key."""
    for text, current in ((f"{encoded}:k1", None), (keys(("k1", K2)) + f",{encoded}:k2", None),
                          (keys(("k1", K2)), encoded), (f"{encoded}:QUJD", None), (f"{encoded}:prod", None),
                          (f"{encoded}:abcd,{encoded}:abcd", None),
                          (f"{encoded}:{base64.b64encode(K1).decode()},{encoded}:{base64.b64encode(K2).decode()}", None)):
        with pytest.raises(CodecKeyError) as refused:
            Keyring.parse(text, current)
        assert encoded not in str(refused.value)
    settings = Settings(_env_file=None, data_dir=tmp_path, codec_keys=keys(("k1", K2)), codec_key_id=encoded)
    with pytest.raises(StartupRefused) as refused:
        codec_keyring(settings)
    assert encoded not in str(refused.value)


def test_an_unusable_key_file_is_a_startup_refusal_naming_it(tmp_path):
    (tmp_path / KEY_FILE).write_text("garbage\n")
    with pytest.raises(StartupRefused, match=f"the codec key file {tmp_path / KEY_FILE} cannot be used: a codec key "
                                             "entry is not `id:base64key`"):
        codec_keyring(settings_with(tmp_path, codec_keys=None), create=True)  # an existing file is never replaced
    assert (tmp_path / KEY_FILE).read_text() == "garbage\n"


def test_keys_come_from_settings_first_the_first_listed_is_current(tmp_path):
    ring = codec_keyring(settings_with(tmp_path, codec_keys=keys(("new", K2), ("old", K1))))
    assert ring.current == "new" and set(ring.keys) == {"new", "old"}
    assert codec_keyring(settings_with(tmp_path, codec_keys=keys(("new", K2), ("old", K1)),
                                       codec_key_id="old")).current == "old"
    assert not (tmp_path / KEY_FILE).exists()  # configured keys never write a file


def test_without_a_key_a_process_refuses_to_start_and_writes_nothing(tmp_path):
    settings = settings_with(tmp_path, codec_keys=None)
    with pytest.raises(CodecKeyMissing, match="STATEKEEPER_CODEC_KEYS") as refused:
        data_converter(settings)
    assert isinstance(refused.value, StartupRefused)  # the CLI prints it without a traceback
    assert not (tmp_path / KEY_FILE).exists()


def test_the_dev_key_file_is_made_once_0600_and_shared(tmp_path):
    settings = settings_with(tmp_path / "data", codec_keys=None)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:  # processes starting together agree
        rings = list(pool.map(lambda _: codec_keyring(settings, create=True), range(8)))
    assert len({r.current for r in rings}) == 1 and len({r.keys[r.current] for r in rings}) == 1
    path = tmp_path / "data" / KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [KEY_FILE]  # no partial file left
    assert codec_keyring(settings) == rings[0]  # later processes read it, without create
    ring = rings[0]
    assert len(ring.keys[ring.current]) == 32 and ring.current.startswith("dev-")
