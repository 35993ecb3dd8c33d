"""Evaluation datasets: loading, errors, difficulty bands, the stratified split, VerdictBench."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest

from cyberjurors.evaluation.dataset import (
    DatasetError,
    allocate,
    difficulty,
    difficulty_band,
    load_dataset,
    stratified_split,
    stratum,
    write_jsonl,
    write_split,
)
from cyberjurors.evaluation.verdictbench import convert_verdictbench, from_verdictbench
from cyberjurors.schemas import DisputeCase, GroundTruthVotes

from ...conftest import EXAMPLES

CATEGORIES = ("appliances", "clothing", "food", "digital", "others")


def labelled_case(case_id: str, category: str = "food", seller: int = 3, text: str = "It arrived broken.") -> dict:
    return {
        "case_id": case_id,
        "metadata": {
            "category": category,
            "product": "kettle",
            "order_amount": "10.00",
            "currency": "EUR",
            "ordered_at": "2026-01-01T00:00:00Z",
            "dispute_reason": "broken",
            "requested_remedy": "refund",
        },
        "rounds": [{"party": "buyer", "round": 1, "items": [{"id": "b1-1", "kind": "text", "text": text}]}],
        "ground_truth": {"buyer": 17 - seller, "seller": seller},
    }


def cases(n: int, seed: int = 1) -> list[DisputeCase]:
    rng = random.Random(seed)
    return [
        DisputeCase.model_validate(labelled_case(f"c{i:04d}", rng.choice(CATEGORIES), rng.randint(0, 17)))
        for i in range(n)
    ]


def jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


# --- loading -------------------------------------------------------------------------------


def test_directory_and_jsonl_load_the_same_cases(tmp_path: Path) -> None:
    from_dir = load_dataset(EXAMPLES / "cases")
    assert len(from_dir.cases) == len(list((EXAMPLES / "cases").glob("*.json")))
    assert from_dir.media_root == EXAMPLES / "cases" and from_dir.source == EXAMPLES / "cases"
    assert [c.case_id for c in from_dir.cases] == sorted(c.case_id for c in from_dir.cases)  # files sorted

    reversed_file = tmp_path / "all.jsonl"
    write_jsonl(reversed(from_dir.cases), reversed_file)
    from_file = load_dataset(reversed_file)
    assert from_file.media_root == tmp_path
    assert {c.case_id: c for c in from_file.cases} == {c.case_id: c for c in from_dir.cases}
    assert from_file.sha256 == from_dir.sha256  # order and layout do not change the digest


def test_nested_directory_mixes_json_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one.json").write_text(json.dumps(labelled_case("one")))
    jsonl(tmp_path / "a" / "b" / "more.jsonl", [labelled_case("two"), "", labelled_case("three")])
    (tmp_path / "notes.txt").write_text("not a case")
    data = load_dataset(tmp_path)
    # files in sorted path order (a/b/more.jsonl before a/one.json), lines in file order
    assert [c.case_id for c in data.cases] == ["two", "three", "one"]
    jsonl(tmp_path / "a" / "b" / "more.jsonl", [labelled_case("two"), labelled_case("three", seller=4)])
    assert load_dataset(tmp_path).sha256 != data.sha256  # content changed -> digest changed


def test_every_problem_is_reported_with_file_and_line(tmp_path: Path) -> None:
    no_truth = labelled_case("no-truth")
    del no_truth["ground_truth"]
    bad_votes = labelled_case("bad-votes")
    bad_votes["ground_truth"] = {"buyer": 10, "seller": 10}
    path = jsonl(
        tmp_path / "d.jsonl",
        [
            labelled_case("ok"),  # 1
            '{"case_id": "broken", ',  # 2
            no_truth,  # 3
            bad_votes,  # 4
            labelled_case("ok"),  # 5: same content again: fine
            labelled_case("ok", text="Something else."),  # 6: same id, different content
            {**labelled_case("x"), "metadata": {"category": "toys"}},  # 7
        ],
    )
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    problems = err.value.problems
    assert len(problems) == 5
    assert problems[0].startswith(f"{path}:2: invalid JSON")
    assert problems[1].startswith(f"{path}:3:") and "no ground_truth" in problems[1]
    assert problems[2].startswith(f"{path}:4:") and "must sum to 17" in problems[2]
    assert problems[3].startswith(f"{path}:6:") and "'ok'" in problems[3] and f"{path}:1" in problems[3]
    assert problems[4].startswith(f"{path}:7:") and "metadata.category" in problems[4]
    assert isinstance(err.value, ValueError) and "5 problem(s)" in str(err.value)


def test_problems_in_a_json_file_name_the_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.json").write_text('{\n  "case_id": "x",\n  oops\n}')
    (tmp_path / "good.json").write_text(json.dumps(labelled_case("good")))
    with pytest.raises(DatasetError) as err:
        load_dataset(tmp_path)
    assert err.value.problems == [
        str(Path("sub") / "bad.json") + ":3: invalid JSON (Expecting property name enclosed in double quotes, column 3)"
    ]


def test_many_problems_are_capped_but_counted(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "d.jsonl", ["nope"] * 50)
    with pytest.raises(DatasetError) as err:
        load_dataset(path)
    assert len(err.value.problems) == 20 and "and 30 more" in str(err.value)
    assert err.value.problems[19].startswith(f"{path}:20:")


def test_empty_dataset_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="empty dataset"):
        load_dataset(jsonl(tmp_path / "e.jsonl", ["", "  "]))
    (tmp_path / "dir").mkdir()
    with pytest.raises(DatasetError, match="empty dataset"):
        load_dataset(tmp_path / "dir")
    with pytest.raises(DatasetError, match="no such file"):
        load_dataset(tmp_path / "missing.jsonl")


# --- difficulty and split ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seller", "margin", "band"),
    [
        (8, 1, "hard"),
        (9, 1, "hard"),
        (7, 3, "hard"),
        (11, 5, "hard"),
        (6, 5, "hard"),
        (12, 7, "medium"),
        (5, 7, "medium"),
        (14, 11, "medium"),
        (3, 11, "medium"),
        (15, 13, "easy"),
        (2, 13, "easy"),
        (17, 17, "easy"),
        (0, 17, "easy"),
    ],
)
def test_difficulty_bands(seller: int, margin: int, band: str) -> None:
    votes = GroundTruthVotes(buyer=17 - seller, seller=seller)
    assert difficulty(votes) == margin
    assert difficulty_band(votes) == band


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, [1, 0, 0]),
        (2, [1, 0, 1]),
        (3, [2, 0, 1]),
        (4, [2, 1, 1]),
        (5, [2, 1, 2]),
        (6, [3, 1, 2]),
        (7, [4, 1, 2]),
        (12, [6, 2, 4]),
        (13, [7, 2, 4]),
    ],
)
def test_largest_remainder(n: int, expected: list[int]) -> None:
    # n=5: quotas 2.5, 0.833, 1.667 -> floors 2, 0, 1 (3 placed); the 2 left go to the largest
    # remainders, val (.833) and test (.667) -> 2, 1, 2. n=3: 1.5, .5, 1 -> 1, 0, 1; train and
    # val tie at .5, the earlier split wins -> 2, 0, 1
    assert allocate(n, (3, 1, 2)) == expected
    assert sum(allocate(n, (3, 1, 2))) == n


def test_split_is_stratified_and_close_to_the_ratios() -> None:
    data = cases(600)
    split = stratified_split(data, (3, 1, 2), seed=7)
    ids = [c.case_id for s in split.values() for c in s]
    assert sorted(ids) == sorted(c.case_id for c in data)  # every case exactly once
    strata = Counter(stratum(c) for c in data)
    for name, n in strata.items():
        got = [sum(stratum(c) == name for c in split[s]) for s in ("train", "val", "test")]
        assert got == allocate(n, (3, 1, 2)), name
        for count, ratio in zip(got, (3, 1, 2), strict=True):
            assert abs(count - n * ratio / 6) < 1, (name, got)


def test_split_is_deterministic_and_ignores_input_order() -> None:
    data = cases(200)
    shuffled = data[:]
    random.Random(3).shuffle(shuffled)
    ids = lambda split: {k: [c.case_id for c in v] for k, v in split.items()}  # noqa: E731
    assert ids(stratified_split(data, seed=1)) == ids(stratified_split(shuffled, seed=1))
    assert ids(stratified_split(data, seed=1)) != ids(stratified_split(data, seed=2))


def test_tiny_strata() -> None:
    one = [DisputeCase.model_validate(labelled_case("solo", "digital", 0))]
    assert {k: [c.case_id for c in v] for k, v in stratified_split(one).items()} == {
        "train": ["solo"],
        "val": [],
        "test": [],
    }
    two = [DisputeCase.model_validate(labelled_case(f"p{i}", "clothing", 9)) for i in range(2)]
    split = stratified_split(two)
    assert (len(split["train"]), len(split["val"]), len(split["test"])) == (1, 0, 1)


def test_split_rejects_bad_input() -> None:
    data = cases(3)
    with pytest.raises(ValueError, match="more than once"):
        stratified_split(data + data[:1])
    with pytest.raises(ValueError, match="ratios"):
        stratified_split(data, (1, 1))
    no_truth = labelled_case("nt")
    del no_truth["ground_truth"]
    with pytest.raises(ValueError, match="no ground_truth"):
        stratified_split([DisputeCase.model_validate(no_truth)])


def test_write_split_round_trips(tmp_path: Path) -> None:
    source = tmp_path / "data"
    source.mkdir()
    write_jsonl(cases(60), source / "all.jsonl")
    data = load_dataset(source / "all.jsonl")
    manifest = write_split(data, tmp_path / "split", (3, 1, 2), seed=5)
    saved = json.loads((tmp_path / "split" / "split.json").read_text())
    assert saved == manifest
    assert saved["source_sha256"] == data.sha256 and saved["seed"] == 5
    assert saved["ratios"] == {"train": 3, "val": 1, "test": 2}
    parts = {s: load_dataset(tmp_path / "split" / f"{s}.jsonl") for s in ("train", "val", "test")}
    assert sum(len(p.cases) for p in parts.values()) == 60
    assert {s: len(p.cases) for s, p in parts.items()} == saved["cases"]
    assert {s: sum(v.values()) for s, v in saved["strata"].items()} == saved["cases"]
    assert all(p.media_root == source.resolve() for p in parts.values())  # media still found
    assert load_dataset(tmp_path / "split").sha256 == data.sha256  # split.json is not read as a case


# --- VerdictBench --------------------------------------------------------------------------


def verdictbench_record(**over) -> dict:
    return {
        "id": "vb-00042",
        "category": "Clothing",
        "product": "Wool coat, size M",
        "order_amount": 129.5,
        "currency": "CNY",
        "order_time": "2025-11-02T10:00:00+08:00",
        "delivery_time": "2025-11-05T15:30:00+08:00",
        "dispute_reason": "Coat has a moth hole",
        "appeal": "Return for a full refund",
        "rounds": [
            {
                "party": "buyer",
                "round": 1,
                "texts": ["There is a hole in the sleeve.", "See the photos."],
                "images": ["img/42/b1.jpg", {"path": "img/42/b2.png", "caption": "close-up"}],
                "videos": [],
            },
            {"party": "seller", "round": 1, "texts": ["It left our store intact."], "videos": ["vid/42/packing.mp4"]},
            {"party": "buyer", "round": 2, "texts": "I never wore it.", "images": [], "videos": []},
            {"party": "seller", "round": 2, "texts": [], "images": [], "videos": []},  # empty: dropped
        ],
        "votes": {"buyer": 11, "seller": 6},
    } | over


def test_verdictbench_record_maps_to_a_case(tmp_path: Path) -> None:
    c = from_verdictbench(verdictbench_record(), tmp_path)
    assert c.case_id == "vb-00042"
    assert c.metadata.category == "clothing" and str(c.metadata.order_amount) == "129.5"
    assert c.metadata.requested_remedy == "Return for a full refund"
    assert c.metadata.delivered_at is not None
    assert c.ground_truth == GroundTruthVotes(buyer=11, seller=6)
    assert [(r.party, r.round) for r in c.rounds] == [("buyer", 1), ("seller", 1), ("buyer", 2)]
    assert [i.id for i in c.items()] == ["b1-t1", "b1-t2", "b1-i1", "b1-i2", "s1-t1", "s1-v1", "b2-t1"]
    image = c.item("b1-i2")
    assert (image.kind, image.text, image.media.path, image.media.media_type) == (
        "image",
        "close-up",
        "img/42/b2.png",
        "image/png",
    )
    assert c.item("s1-v1").media.media_type == "video/mp4"
    assert c == from_verdictbench(verdictbench_record(), tmp_path)  # deterministic


def test_verdictbench_variants(tmp_path: Path) -> None:
    record = verdictbench_record(category="Others", seller_votes=12, votes=None)
    record["rounds"][0]["images"] = [str(tmp_path / "img" / "abs.jpg")]
    c = from_verdictbench(record, tmp_path)
    assert c.metadata.category == "others"
    assert c.ground_truth == GroundTruthVotes(buyer=5, seller=12)
    assert c.item("b1-i1").media.path == "img/abs.jpg"
    with pytest.raises(ValueError, match="not under the media root"):
        from_verdictbench(record, tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="unknown category 'Toys'"):
        from_verdictbench(verdictbench_record(category="Toys"))
    with pytest.raises(ValueError, match="missing field 'dispute_reason'"):
        from_verdictbench(verdictbench_record(dispute_reason=None))


def test_convert_verdictbench_names_bad_lines(tmp_path: Path) -> None:
    src = jsonl(
        tmp_path / "vb.jsonl",
        [
            verdictbench_record(),
            verdictbench_record(id="vb-2", category="Food", votes={"buyer": 1, "seller": 1}),
            "{not json",
            verdictbench_record(id="vb-3", category="Digital"),
            verdictbench_record(),
            verdictbench_record(id="vb-4", rounds=["just text"]),
            verdictbench_record(id="vb-5", votes=[11, 6]),
        ],
    )
    with pytest.raises(DatasetError) as err:
        convert_verdictbench(src, tmp_path / "out.jsonl")
    lines = [p.split(": ", 1)[0] for p in err.value.problems]
    assert lines == [f"{src}:2", f"{src}:3", f"{src}:5", f"{src}:6", f"{src}:7"]
    assert "round must be a JSON object" in err.value.problems[3] and "votes must be" in err.value.problems[4]
    assert "must sum to 17" in err.value.problems[0] and "already used at line 1" in err.value.problems[2]
    assert not (tmp_path / "out.jsonl").exists()

    good = jsonl(tmp_path / "vb.jsonl", [verdictbench_record(), verdictbench_record(id="vb-3", category="Digital")])
    counts = convert_verdictbench(good, tmp_path / "out.jsonl")
    assert counts == {"cases": 2, "by_category": {"clothing": 1, "digital": 1}, "media_items": 6}
    data = load_dataset(tmp_path / "out.jsonl")
    assert [c.case_id for c in data.cases] == ["vb-00042", "vb-3"]
