"""What one evaluation run is, whether it streams (runner.py) or batches (batch.py): its options,
the state kept in its output folder, its settings' fingerprint, and the results it collects."""

from __future__ import annotations

import hashlib
import json
import shutil
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..config import Settings
from ..errors import CyberJurorsError
from ..schemas import Verdict
from .dataset import Dataset
from .pricing import model_prices
from .report import DatasetInfo, EvalReport
from .results import CaseResult
from .scores import Pricing, summarize
from .swap import twin_id

# left out of the stored settings: a setting, or a nested setting's fields
SECRETS: dict[str, Any] = {
    "anthropic_api_key": True,
    "openai_api_key": True,
    "elasticsearch": {"api_key", "password"},
    "kafka_auth": {"sasl_password"},
    "case_key_secret": True,  # names every case's media key (evidence/sealing.py)
}
# where and under which names a run happens, not how it judges: left out of the fingerprint
RUN_PLACES = {
    "kafka_bootstrap_servers",
    "kafka_idempotence",  # off on the embedded broker an eval starts, auto on a --bootstrap one
    "cloudevents_source",
    "schema_base_url",
    "app_id",
    "topic_prefix",
    "datadir",
    "metrics_port",
    "llm_call_log",
    "media_root",
    "stage_concurrency",
    "llm_concurrency",
    "probe_port",
    "probe_host",
    "lag_interval_s",
    "llm_batch",
}


class EvalError(CyberJurorsError, RuntimeError):
    kind = "eval_failed"


def public_settings(settings: Settings) -> dict[str, Any]:
    return settings.model_dump(mode="json", exclude=SECRETS)


def fingerprint(settings: Settings) -> str:
    judged = {k: v for k, v in public_settings(settings).items() if k not in RUN_PLACES}
    return hashlib.sha256(json.dumps(judged, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Options:
    out: Path
    concurrency: int = 8
    party_swap: bool = True
    timeout_s: float = 600.0
    """Give up on the remaining cases of a configuration when no result has arrived for this long."""
    fresh: bool = False
    batch: bool = False
    """judge in waves through the Message Batches API (``batch.py``) instead of the streaming topology"""


class RunState:
    """OUT/run.json and OUT/results/*.jsonl: what has been decided so far, and under which settings."""

    def __init__(self, out: Path, dataset: Dataset, fresh: bool):
        self.out = out
        self.path = out / "run.json"
        (out / "results").mkdir(parents=True, exist_ok=True)
        state = json.loads(self.path.read_text()) if self.path.exists() and not fresh else {}
        if state and state.get("dataset_sha256") != dataset.sha256:
            raise EvalError(
                f"{out} holds results for another dataset ({state.get('dataset_source')}); "
                "use --fresh to discard them, or another --out"
            )
        if fresh:
            for old in (out / "results").glob("*.jsonl"):
                old.unlink()
            shutil.rmtree(out / "batches", ignore_errors=True)  # eval --batch's batches and their answers
        self.state = state or {
            "run_id": uuid.uuid4().hex[:8],
            "dataset_sha256": dataset.sha256,
            "dataset_source": str(dataset.source),
            "configurations": {},
        }
        self._save()

    @property
    def run_id(self) -> str:
        return self.state["run_id"]

    def _save(self) -> None:
        self.path.write_text(json.dumps(self.state, indent=2))

    def results_path(self, key: str) -> Path:
        return self.out / "results" / f"{key}.jsonl"

    def claim(self, key: str, settings: Settings) -> None:
        known = self.state["configurations"].get(key)
        mark = fingerprint(settings)
        if known and known != mark:
            raise EvalError(
                f"{self.results_path(key)} was produced with different settings for {key!r}; "
                "use --fresh to start over, or another --out"
            )
        self.state["configurations"][key] = mark
        self._save()

    def decided(self, key: str) -> dict[str, Verdict]:
        path = self.results_path(key)
        if not path.exists():
            return {}
        verdicts = {}
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("verdict"):
                verdicts[record["case_id"]] = Verdict.model_validate(record["verdict"])
        return verdicts

    def record(self, key: str, case_id: str, verdict: Verdict | None = None, failure: str | None = None) -> None:
        line = {"case_id": case_id, "verdict": verdict.model_dump(mode="json") if verdict else None, "failure": failure}
        with self.results_path(key).open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def media_root(base: Settings, dataset: Dataset) -> Path:
    """Where the cases' media paths are looked up: a media_root set on purpose (environment,
    settings file, ``--media-root``) wins over the dataset's own folder."""
    return base.media_root if "media_root" in base.model_fields_set else dataset.media_root


def case_results(
    dataset: Dataset, verdicts: dict[str, Verdict], failures: dict[str, str], party_swap: bool
) -> list[CaseResult]:
    results = []
    for case in dataset.cases:
        assert case.ground_truth is not None  # load_dataset refuses cases without it
        twin = twin_id(case.case_id)
        results.append(
            CaseResult(
                case_id=case.case_id,
                category=case.metadata.category,
                truth=case.ground_truth,
                verdict=verdicts.get(case.case_id),
                failure=failures.get(case.case_id),
                swapped=verdicts.get(twin) if party_swap else None,
                swapped_failure=failures.get(twin) if party_swap else None,
            )
        )
    return results


def failed_cases(results: list[CaseResult], party_swap: bool) -> dict[str, str]:
    """Every case sent that has no verdict, party-swap twins included: case id -> why (the dead
    letter's ``stage:reason``, or ``timeout``)."""
    failed = {}
    for r in results:
        if r.verdict is None:
            failed[r.case_id] = r.failure or "no verdict"
        if party_swap and r.swapped is None:
            failed[twin_id(r.case_id)] = r.swapped_failure or "no verdict"
    return dict(sorted(failed.items()))


def run_report(
    name: str,
    description: str,
    dataset: Dataset,
    settings: Settings,
    results: list[CaseResult],
    verdicts: dict[str, Verdict],
    started: datetime,
    clock: float,
    options: Options,
    batch_prices: bool = False,
    **more: Any,
) -> EvalReport:
    """One configuration's report, made alike by a streamed and a batched run (``clock``: the
    run's ``time.monotonic()`` at its start; ``more``: the batch run's own fields)."""
    models = sorted({m for v in verdicts.values() for m in v.models})
    return EvalReport(
        name=name,
        description=description,
        dataset=DatasetInfo(source=str(dataset.source), sha256=dataset.sha256, cases=len(dataset.cases)),
        backend=settings.backend,
        models=models,
        settings=public_settings(settings),
        started_at=started,
        finished_at=datetime.now(UTC),
        wall_s=round(time.monotonic() - clock, 2),
        summary=summarize(results, Pricing(settings.llm_prices, settings.model)),
        failed_cases=failed_cases(results, options.party_swap),
        prices=model_prices(settings, models, settings.backend, batch=batch_prices),
        # a plumbing-only tiny model behind a real server decides as a stand-in too (Verdict.stand_in)
        stand_in=any(v.stand_in for v in verdicts.values()),
        **more,
    )
