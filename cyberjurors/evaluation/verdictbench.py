"""VerdictBench records -> ``DisputeCase``.

VerdictBench (CyberJurors paper, ICML 2026, arXiv 2605.28369) is not available here. The paper
describes each case as metadata d (category among Appliances/Clothing/Food/Digital/Others, order
information), multi-round evidence per party e_i^b = {T_i^b, I_i^b, V_i^b} (texts, images,
videos) and the same for the seller, and the votes of the 17 real jurors. THE FIELD NAMES BELOW
ARE ASSUMED FROM THAT DESCRIPTION, NOT READ FROM THE RELEASE: adapt ``FIELDS`` (and, if needed,
``CATEGORIES`` and ``DEFAULTS``) to the real files; nothing else should need to change.

Evidence ids are generated from party, round, kind and position (``b1-t1``, ``b1-i2``,
``s2-v1``), so converting the same record twice gives the same case and the same digest.
"""

from __future__ import annotations

import json
import mimetypes
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..schemas import JURY_SIZE, DisputeCase
from .dataset import Problems, describe, write_jsonl

# Our field -> the record's field name(s); the first one present wins.
FIELDS: dict[str, tuple[str, ...]] = {
    "case_id": ("id", "case_id"),
    "category": ("category",),
    "product": ("product", "product_name"),
    "order_amount": ("order_amount", "amount", "price"),
    "currency": ("currency",),
    "ordered_at": ("order_time",),
    "delivered_at": ("delivery_time",),
    "dispute_reason": ("dispute_reason",),
    "requested_remedy": ("requested_remedy", "appeal"),
    "rounds": ("rounds",),
    # inside each round
    "party": ("party",),
    "round": ("round",),
    "texts": ("texts", "T"),
    "images": ("images", "I"),
    "videos": ("videos", "V"),
    # inside an image/video entry given as an object rather than a bare path
    "media_path": ("path",),
    "media_caption": ("caption", "text"),
    # the 17 real jurors: {"buyer": b, "seller": s}, or the seller count alone
    "votes": ("votes",),
    "votes_buyer": ("buyer",),
    "votes_seller": ("seller",),
    "seller_votes": ("seller_votes",),
}
CATEGORIES = {
    "Appliances": "appliances",
    "Clothing": "clothing",
    "Food": "food",
    "Digital": "digital",
    "Others": "others",
}
PARTIES = {"buyer": "buyer", "seller": "seller", "b": "buyer", "s": "seller"}
# Values for fields a release leaves out (e.g. {"currency": "CNY"}); empty: missing is an error.
DEFAULTS: dict[str, Any] = {}
KIND_LETTER = {"text": "t", "image": "i", "video": "v"}
FALLBACK_TYPE = {"image": "image/jpeg", "video": "video/mp4"}


def _get(record: dict, field: str, required: bool = True) -> Any:
    for name in FIELDS[field]:
        if record.get(name) is not None:
            return record[name]
    if field in DEFAULTS:
        return DEFAULTS[field]
    if required:
        raise ValueError(f"missing field {' or '.join(map(repr, FIELDS[field]))}")
    return None


def _as_list(value: Any) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _media_path(path: str, media_root: Path | None) -> str:
    p = Path(path)
    if p.is_absolute():
        if media_root is None or not p.is_relative_to(media_root.resolve()):
            raise ValueError(f"media path {path!r} is absolute and not under the media root")
        p = p.relative_to(media_root.resolve())
    return p.as_posix()


def _media_item(entry: Any, kind: str, evidence_id: str, media_root: Path | None) -> dict:
    if isinstance(entry, dict):
        path, caption = _get(entry, "media_path"), _get(entry, "media_caption", required=False)
    else:
        path, caption = entry, None
    if not isinstance(path, str) or not path:
        raise ValueError(f"{kind} {evidence_id}: expected a path, got {path!r}")
    media_type = mimetypes.guess_type(path)[0] or FALLBACK_TYPE[kind]
    item = {"id": evidence_id, "kind": kind, "media": {"media_type": media_type, "path": _media_path(path, media_root)}}
    return item | ({"text": str(caption)} if caption else {})


def _rounds(record: dict, media_root: Path | None) -> list[dict]:
    rounds, seen, count = [], set(), {"buyer": 0, "seller": 0}
    for raw in _as_list(_get(record, "rounds")):
        if not isinstance(raw, dict):
            raise ValueError(f"a round must be a JSON object, got {raw!r:.60}")
        party = PARTIES.get(str(_get(raw, "party")).strip().lower())
        if party is None:
            raise ValueError(f"round party must be buyer or seller, got {_get(raw, 'party')!r}")
        count[party] += 1
        number = int(_get(raw, "round", required=False) or count[party])
        if (party, number) in seen:
            raise ValueError(f"{party} round {number} appears twice")
        seen.add((party, number))
        prefix = f"{party[0]}{number}"
        items = [
            {"id": f"{prefix}-t{j}", "kind": "text", "text": str(t)}
            for j, t in enumerate((t for t in _as_list(_get(raw, "texts", False)) if str(t).strip()), 1)
        ]
        for kind, field in (("image", "images"), ("video", "videos")):
            items += [
                _media_item(e, kind, f"{prefix}-{KIND_LETTER[kind]}{j}", media_root)
                for j, e in enumerate(_as_list(_get(raw, field, False)), 1)
            ]
        if items:  # a round with nothing in it adds nothing to e_i
            rounds.append({"party": party, "round": number, "items": items})
    return rounds


def _votes(record: dict) -> dict:
    votes = _get(record, "votes", required=False)
    if votes is not None and not isinstance(votes, dict):
        raise ValueError(f"votes must be an object with buyer and seller counts, got {votes!r:.60}")
    if isinstance(votes, dict):
        return {"buyer": int(_get(votes, "votes_buyer")), "seller": int(_get(votes, "votes_seller"))}
    seller = _get(record, "seller_votes")
    return {"buyer": JURY_SIZE - int(seller), "seller": int(seller)}


def from_verdictbench(record: dict, media_root: str | Path | None = None) -> DisputeCase:
    """Raises ValueError (including pydantic's ValidationError) saying what is wrong."""
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object, got {type(record).__name__}")
    root = Path(media_root) if media_root is not None else None
    category = str(_get(record, "category"))
    if category not in CATEGORIES and category not in CATEGORIES.values():
        raise ValueError(f"unknown category {category!r} (expected one of {', '.join(CATEGORIES)})")
    try:
        amount = Decimal(str(_get(record, "order_amount")))
    except InvalidOperation:
        raise ValueError(f"order amount is not a number: {_get(record, 'order_amount')!r}") from None
    return DisputeCase.model_validate(
        {
            "case_id": str(_get(record, "case_id")),
            "metadata": {
                "category": CATEGORIES.get(category, category),
                "product": _get(record, "product"),
                "order_amount": amount,
                "currency": _get(record, "currency"),
                "ordered_at": _get(record, "ordered_at"),
                "delivered_at": _get(record, "delivered_at", required=False),
                "dispute_reason": _get(record, "dispute_reason"),
                "requested_remedy": _get(record, "requested_remedy"),
            },
            "rounds": _rounds(record, root),
            "ground_truth": _votes(record),
        }
    )


def convert_verdictbench(src: str | Path, out: str | Path, media_root: str | Path | None = None) -> dict:
    """Converts a VerdictBench .jsonl into a dataset .jsonl (media root: src's folder unless
    given). Every bad line is reported, with its number, before anything is written."""
    src, out = Path(src), Path(out)
    root = Path(media_root) if media_root is not None else src.parent
    problems, cases = Problems(), []
    ids: dict[str, int] = {}  # case id -> the line it was first used on
    for n, line in enumerate(src.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{src}:{n}"
        try:
            case = from_verdictbench(json.loads(line), root)
        except json.JSONDecodeError as e:
            problems.add(where, f"invalid JSON ({e.msg}, column {e.colno})")
        except ValidationError as e:
            problems.add(where, f"not a valid case: {describe(e)}")
        except (ValueError, TypeError) as e:
            problems.add(where, str(e))
        else:
            if case.case_id in ids:
                problems.add(where, f"case id {case.case_id!r} already used at line {ids[case.case_id]}")
                continue
            ids[case.case_id] = n
            cases.append(case)
    if not cases and not problems.total:
        problems.add(str(src), "no records")
    problems.raise_if_any()
    write_jsonl(cases, out)
    by_category: dict[str, int] = {}
    for c in cases:
        by_category[c.metadata.category] = by_category.get(c.metadata.category, 0) + 1
    return {
        "cases": len(cases),
        "by_category": dict(sorted(by_category.items())),
        "media_items": sum(1 for c in cases for i in c.items() if i.media is not None),
    }
