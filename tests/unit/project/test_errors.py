"""Notes and dead-letter details are written for people: causes, not Python internals."""

from __future__ import annotations

import asyncio
import base64
import io

import pytest
from PIL import Image
from pydantic import ValidationError

from cyberjurors.config import Settings
from cyberjurors.errors import for_people, plain
from cyberjurors.evidence.media import MediaUnreadable, load_image, sample_frames
from cyberjurors.schemas import DisputeCase, MediaRef

INTERNALS = ("0x", "object at", "<_io", "input_value", "errors.pydantic.dev")


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("cannot identify image file <_io.BytesIO object at 0x7f3a2c1d9e40>", "cannot identify image file"),
        ("handler <function f at 0x10ab3> failed", "handler failed"),
        ("<aiohttp.client.ClientSession object at 0x7fe1>: closed", ": closed"),
        ("two\n  lines\tand   spaces", "two lines and spaces"),
        ("a plain cause stays as it is", "a plain cause stays as it is"),
    ],
)
def test_plain_takes_out_reprs_and_addresses(raw, expected):
    assert plain(raw) == expected


def test_plain_is_bounded():
    assert len(plain("x" * 10_000)) == 4000 and len(plain("x" * 10_000, 50)) == 50


def test_a_validation_error_reads_as_fields_and_messages_without_the_input():
    with pytest.raises(ValidationError) as caught:
        DisputeCase.model_validate({"case_id": "c 1!", "metadata": {"secret_field": "s3cr3t"}, "rounds": []})
    text = for_people(caught.value)
    assert text.startswith("case_id: String should match pattern")
    assert "metadata.category: Field required" in text and "and " in text and "more" in text
    assert "s3cr3t" not in text and not any(i in text for i in INTERNALS)


def test_an_exception_that_says_nothing_gives_its_name():
    assert for_people(TimeoutError()) == "TimeoutError"
    assert for_people(RuntimeError("<object object at 0x7f00aa>")) == "RuntimeError"


def inline(data: bytes, media_type: str) -> MediaRef:
    return MediaRef(media_type=media_type, data_base64=base64.b64encode(data).decode())


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


@pytest.mark.parametrize(
    "ref, load",
    [
        (inline(b"plain text, not a picture", "image/png"), "image"),
        (inline(png()[:60], "image/png"), "image"),  # truncated
        (inline(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 8, "video/mp4"), "video"),
        (MediaRef(media_type="image/png", url="http://127.0.0.1:9/x.png"), "image"),  # nothing listens on 9
    ],
)
def test_unreadable_media_is_described_for_people(ref, load):
    settings = Settings(llm_backend="offline", url_allowlist=["127.0.0.1:9"], media_fetch_timeout_s=5)
    read = (
        load_image(ref, settings, label="evidence b1")
        if load == "image"
        else sample_frames(ref, settings, label="evidence b1")
    )
    with pytest.raises(MediaUnreadable) as caught:
        asyncio.run(read)
    assert caught.value.reason in {"corrupt_image", "corrupt_video", "no_frames", "fetch_failed"}
    assert caught.value.detail and not any(i in caught.value.detail for i in INTERNALS), caught.value.detail


# --- one error tree ------------------------------------------------------------------------


def _exception_classes() -> list[type]:
    """Every class the package defines that is an exception, found by importing each module."""
    import importlib
    import inspect
    import pkgutil

    import cyberjurors

    found = []
    for info in pkgutil.walk_packages(cyberjurors.__path__, "cyberjurors."):
        if info.name.endswith("__main__"):  # runs the command line
            continue
        module = importlib.import_module(info.name)
        found += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == module.__name__
        ]
    return found


def test_every_exception_the_package_defines_derives_from_one_root():
    from cyberjurors.errors import CyberJurorsError

    classes = _exception_classes()
    assert len(classes) >= 13
    assert [c.__qualname__ for c in classes if not issubclass(c, CyberJurorsError)] == []


def test_the_root_carries_kind_and_detail_and_old_attributes_still_work():
    from cyberjurors.evidence import intake
    from cyberjurors.llm.port import LLMError
    from cyberjurors.precedents.models import PrecedentError

    rejected = intake.Rejected("text_too_long", "evidence b1: 5000 characters")
    assert (rejected.kind, rejected.reason, rejected.detail) == ("text_too_long",) * 2 + (
        "evidence b1: 5000 characters",
    )
    assert str(rejected) == "text_too_long: evidence b1: 5000 characters" and isinstance(rejected, ValueError)
    assert not rejected.replayable
    for err in (LLMError("timeout", "no answer"), PrecedentError("corrupt", "no answer")):
        assert (err.detail, str(err)) == ("no answer", "no answer") and err.replayable
    with pytest.raises(ValueError):  # a rejection's reason is one of the closed set
        intake.Rejected("not_a_reason", "x")
