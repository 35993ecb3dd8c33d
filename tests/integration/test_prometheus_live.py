"""Every dashboard query and every alert rule against a real Prometheus scraping real workers.

Prometheus is Debian's server binary (``make test`` installs the package), started on a free
port with a 1 s scrape and evaluation interval and the repository's infra/recording.yml and
infra/alerts.yml as its rule files. It scrapes two CyberJurors workers on the embedded broker:

* the pipeline worker: offline backend, an empty embedded precedent base (so every case is a
  precedent cold start), all the sample cases, three outcomes (two agreeing, one not) and one
  malformed event (a dead letter);
* the provider worker: the ``anthropic`` backend against a local server speaking the Messages
  API, which overloads once (an SDK retry), answers stage I with prompt-cache usage (tokens of
  every kind, priced), answers stage II, then gives the jurors replies that are no ballot (LLM
  errors, a dead letter); its precedent base is an Elasticsearch nobody listens on (a fallback).

Then every query of every panel (Grafana's variables substituted) and every alert expression
goes through /api/v1/query: each must parse, each metric it names must exist in Prometheus,
and each panel query must return data, except the few listed in ``MAY_BE_EMPTY`` with the
reason. A query naming a metric no worker exports fails, even behind ``or vector(0)``. Every
recording rule must be healthy and have recorded a number, and the fleet's drift figures must be
what the verdicts and outcomes on the topics say.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.schemas import CATEGORIES, Verdict
from cyberjurors.tooling.broker import free_port, stop_process
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, read_topic, worker_process
from ..messages_server import ScriptedServer, anthropic_error, anthropic_message
from ..unit.project.test_infra import (
    INFRA,
    alert_rules,
    dashboard_files,
    load_dashboard,
    metric_names,
    panel_queries,
    recording_rules,
    variable_query,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("prometheus") is None,
        reason="prometheus not installed: `make test` installs Debian's prometheus package "
        "(apt-get install prometheus, as root)",
    ),
]

# Grafana's variables, as the dashboards would send them for the last few minutes.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__range": "5m",
    "$__interval": "15s",
    "$instance": ".*",
    "${instance}": ".*",
}

# Panel queries allowed to return no series here, with the reason. Empty: the scenario above makes
# every series exist (outcomes, a dead letter, an LLM error, a retry, cache tokens, a precedent
# fallback and cold starts), so every panel query must return data. Were a scenario unable to
# produce one (say, a future panel on Elasticsearch-only metrics), its query goes here, with why.
MAY_BE_EMPTY: dict[str, str] = {}

LOCAL_ONLY = {"metrics_host": "127.0.0.1"}
FAST = {"retry-after-ms": "5"}  # the SDK retries after 5 ms instead of its 0.5 s backoff
FOCUS = {
    "focus": "Was the shirt's seam torn when it arrived?",
    "buyer_claims": ["the seam was torn on arrival"],
    "seller_claims": ["the shirt left the warehouse intact"],
}
NO_MORE_EVIDENCE = {"evidence_id": None, "reason": "nothing left that bears on the focus"}


def substitute(expr: str) -> str:
    for variable in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(variable, GRAFANA_VARIABLES[variable])
    assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
    return expr


class Prometheus:
    def __init__(self, url: str):
        self.url = url

    def get(self, path: str, **params: str) -> dict:
        query = urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=10) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as err:  # 400/422: a query that does not parse or evaluate
            return json.loads(err.read())

    def query(self, expr: str) -> dict:
        return self.get("/api/v1/query", query=expr)

    def value(self, expr: str) -> float:
        result = self.query(expr).get("data", {}).get("result", [])
        return float(result[0]["value"][1]) if result else float("nan")

    def metric_names(self) -> set[str]:
        return set(self.get("/api/v1/label/__name__/values")["data"])


@pytest.fixture
def metrics_ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture
def prometheus(tmp_path: Path, metrics_ports: tuple[int, int]) -> Iterator[Prometheus]:
    """A real Prometheus scraping 127.0.0.1 on ``metrics_ports`` every second, with the repo's alert rules."""
    port, folder = free_port(), tmp_path / "prometheus"
    folder.mkdir()
    config = folder / "prometheus.yml"
    config.write_text(
        json.dumps(
            {  # JSON is YAML
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
                "rule_files": [str(INFRA / "recording.yml"), str(INFRA / "alerts.yml")],
                "scrape_configs": [
                    {
                        "job_name": "cyberjurors-worker",
                        "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in metrics_ports]}],
                    }
                ],
            }
        )
    )
    log = (folder / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            shutil.which("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Prometheus(f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, (folder / "prometheus.log").read_text()[-3000:]
            with contextlib.suppress(OSError):
                if urllib.request.urlopen(f"{server.url}/-/ready", timeout=1).status == 200:
                    break
            assert time.monotonic() < deadline, "Prometheus did not become ready in 20 s"
            time.sleep(0.1)
        yield server
    finally:
        stop_process(process, timeout_s=10)
        log.close()


@pytest.fixture
async def provider() -> ScriptedServer:
    server = ScriptedServer().reply(
        anthropic_error(529, "overloaded_error", "Overloaded", **FAST),  # stage I, first try
        anthropic_message(
            json.dumps(FOCUS),
            model="claude-sonnet-5-5",
            input_tokens=900,
            output_tokens=60,
            cache_read=0,
            cache_write=1800,
        ),  # stage I, the SDK's retry
        anthropic_message(
            json.dumps(NO_MORE_EVIDENCE),
            model="claude-sonnet-5-5",
            input_tokens=300,
            output_tokens=20,
            cache_read=1800,
            cache_write=0,
        ),  # stage II, then every call
    )
    await server.start()
    yield server
    await server.stop()


async def wait_for(prometheus: Prometheus, conditions: dict[str, float], timeout_s: float) -> dict[str, float]:
    """Poll until each expression's value reaches its minimum (so Prometheus has scraped it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        values = {expr: prometheus.value(expr) for expr in conditions}
        if all(values[e] >= low for e, low in conditions.items()) or time.monotonic() > deadline:
            return values
        await asyncio.sleep(0.5)


def outcome(case_id: str, buyer: int) -> Outgoing:
    value = {"type": "outcome", "case_id": case_id, "votes": {"buyer": buyer, "seller": 17 - buyer}}
    return Outgoing(case_id, json.dumps(value).encode(), "test")


def fleet_figures(
    prometheus: Prometheus,
    verdicts: dict[str, Verdict],
    others: list[Verdict],
    outcomes: dict[str, int],
    reference: float,
) -> list[str]:
    """The recording rules' drift figures against the verdicts and outcomes on the topics
    (``others``: the verdicts of the fleet's other workers, which the win shares count too)."""
    fleet = [*verdicts.values(), *others]
    sellers = sum(v.winner == "seller" for v in fleet) / len(fleet)
    agree = sum(verdicts[c].winner == ("buyer" if b > 17 - b else "seller") for c, b in outcomes.items())
    mae = sum(
        abs(verdicts[c].votes.seller * 17 / verdicts[c].votes.total - (17 - b)) for c, b in outcomes.items()
    ) / len(outcomes)
    expected = {
        "cyberjurors:seller_win_share:ratio_rate1h": sellers,
        "cyberjurors:seller_win_share:ratio_rate1d": sellers,
        "cyberjurors:seller_win_share_deviation:ratio_rate1d": sellers - reference,
        "cyberjurors:outcome_accuracy:ratio_rate1d": agree / len(outcomes),
        "cyberjurors:outcome_vote_error:mean1d": mae,
    }
    # rate() extrapolates each worker's series over its own first and last scrape: the shares of a
    # fleet whose workers were scraped apart are within a fraction of a percent, not exact (one
    # verdict of 18 missed or miscounted moves them by 0.04); the outcomes came from one worker
    tolerance = {name: 0.01 for name in expected if "seller_win_share" in name}
    return [
        f"{name} = {prometheus.value(name)}, the topics say {value}"
        for name, value in expected.items()
        if not math.isclose(prometheus.value(name), value, rel_tol=1e-9, abs_tol=tolerance.get(name, 1e-9))
    ]


def query_problems(
    prometheus: Prometheus, where: str, expr: str, known: set[str], need_data: bool, need_number: bool = False
) -> list[str]:
    """What is wrong with one query on this Prometheus: a parse or evaluation error, a metric it
    names that Prometheus has never scraped, or (when ``need_data``) an empty result, or (when
    ``need_number``) a result that is NaN throughout."""
    reply = prometheus.query(substitute(expr))
    if reply.get("status") != "success":
        return [f"{where}: {reply.get('errorType')}: {reply.get('error')} in {expr}"]
    problems = [f"{where}: Prometheus has no metric {name} ({expr})" for name in sorted(metric_names(expr) - known)]
    result = reply["data"]["result"]
    if need_data and not problems and not result:
        problems.append(f"{where}: no data for {expr}")
    elif need_number and not problems and all(math.isnan(float(r["value"][1])) for r in result):
        problems.append(f"{where}: only NaN for {expr}")
    return problems


@pytest.mark.timeout(180)
async def test_every_dashboard_query_and_alert_rule_runs_on_prometheus(
    settings: Settings, tmp_path: Path, prometheus: Prometheus, metrics_ports: tuple[int, int], provider: ScriptedServer
) -> None:
    started = time.monotonic()
    pipeline = settings.model_copy(
        update={
            "metrics_port": metrics_ports[0],
            **LOCAL_ONLY,
            "precedent_backend": "embedded",
            "precedent_dir": tmp_path / "precedents",  # empty: cold starts
            # the outcomes below are counted at once: an escalated case (an empty base escalates
            # every verdict for no precedent coverage) would hold them for its human panel
            "escalate_on": [],
        }
    )
    provider_settings = settings.model_copy(
        update={
            "metrics_port": metrics_ports[1],
            **LOCAL_ONLY,
            "app_id": f"{settings.app_id}-provider",
            "topic_prefix": f"{settings.topic_prefix}provider.",
            "datadir": tmp_path / "faust-provider",
            "llm_call_log": tmp_path / "llm-calls-provider.jsonl",
            "llm_backend": "anthropic",
            "anthropic_api_key": "sk-ant-test",
            "anthropic_base_url": provider.url,
            "llm_max_retries": 1,
            "jurors": 3,
            "precedent_backend": "elasticsearch",
            "elasticsearch": {"url": f"http://127.0.0.1:{free_port()}", "max_retries": 0},
            "precedent_retries": 0,
        }
    )
    events = read_events([EXAMPLES / "cases", EXAMPLES / "incremental"])
    cases = {e.case_id for e in events}
    one_case = read_events([EXAMPLES / "cases" / "clot-001-shirt-torn-seam.json"])

    async with (
        worker_process(pipeline, tmp_path / "worker.log"),
        worker_process(provider_settings, tmp_path / "worker-provider.log"),
    ):
        # both scraped before any verdict: rate() then sees every count from 0
        primed = {"count(cyberjurors_verdicts_total)": 2 * len(CATEGORIES) * 2}  # workers x categories x winners
        scraped = await wait_for(prometheus, primed, timeout_s=60)
        assert scraped == primed, scraped
        await produce(pipeline, [*events, Outgoing("broken-001", b"{not json", "test")])
        await produce(provider_settings, one_case)
        seen = await read_topic(pipeline, "disputes.verdicts", until=len(cases), timeout_s=90)
        verdicts = {v.case_id: v for v in (Verdict.model_validate_json(value) for _, value in seen)}
        assert set(verdicts) == cases, (tmp_path / "worker.log").read_text()[-4000:]

        # real outcomes for three cases: one our buyer verdict got right, one seller verdict it got
        # right and one it got wrong (so both sides' recall and both agreement labels have data)
        buyers = sorted(c for c, v in verdicts.items() if v.winner == "buyer")
        sellers = sorted(c for c, v in verdicts.items() if v.winner == "seller")
        assert buyers and len(sellers) >= 2, {c: v.winner for c, v in verdicts.items()}
        outcomes = {buyers[0]: 13, sellers[0]: 3, sellers[1]: 12}  # case -> the real jury's buyer votes
        await produce(pipeline, [outcome(case, buyer) for case, buyer in outcomes.items()], topic="disputes.outcomes")

        wanted = {
            "sum(cyberjurors_verdicts_total)": len(cases),
            "sum(cyberjurors_outcomes_total)": 3,  # the three outcomes
            "sum(cyberjurors_outcome_vote_error_count)": 3,
            "cyberjurors:outcomes:increase1h": 2.9,  # the rules have seen them
            'sum(cyberjurors_dead_letters_total{stage="intake"})': 1,  # the malformed event
            # the provider's jurors answer no ballot: each abstains, and the verdict is escalated
            'sum(cyberjurors_escalations_total{reason="quorum_not_reached"})': 1,
            'sum(cyberjurors_llm_errors_total{backend="anthropic"})': 1,
            "sum(cyberjurors_llm_retries_total)": 1,  # the 529
            'sum(cyberjurors_llm_tokens_total{kind="cache_write"})': 1800,
            "sum(cyberjurors_llm_cost_usd_total)": 0.001,  # priced Claude tokens
            "sum(cyberjurors_precedent_fallbacks_total)": 1,  # Elasticsearch unreachable
            "sum(cyberjurors_precedent_cold_starts_total)": 1,  # the empty embedded base
            "count(cyberjurors_consumer_lag_records)": 12,  # 6 consumed topics x 2 partitions, from each worker
        }
        reached = await wait_for(prometheus, wanted, timeout_s=45)
        missing = {expr: value for expr, value in reached.items() if not value >= wanted[expr]}
        assert not missing, f"never scraped: {missing}\n" + (tmp_path / "worker-provider.log").read_text()[-3000:]
        await asyncio.sleep(3)  # a few more scrapes after the last change, for rate() and increase()
        print(f"state reached after {time.monotonic() - started:.1f} s")

        known = prometheus.metric_names()
        problems: list[str] = []
        for path in dashboard_files():
            dashboard = load_dashboard(path)
            single_values = {
                t["expr"]
                for p in dashboard["panels"]
                if p["type"] in ("stat", "gauge", "bargauge")
                for t in p["targets"]
            }
            for where, expr in panel_queries(dashboard):
                # a stat, gauge or bar gauge shows one number per series: NaN there is a broken panel
                problems += query_problems(
                    prometheus,
                    where,
                    expr,
                    known,
                    need_data=expr not in MAY_BE_EMPTY,
                    need_number=expr in single_values,
                )
            for variable in dashboard["templating"]["list"]:
                query = variable_query(variable)
                if query is not None:  # label_values(selector, label), asked the way Grafana asks it
                    selector, label = query
                    values = prometheus.get(f"/api/v1/label/{label}/values", **{"match[]": selector})
                    if sorted(values.get("data") or []) != sorted(f"127.0.0.1:{p}" for p in metrics_ports):
                        problems.append(f"{dashboard['uid']} / ${variable['name']}: {label} values {values}")
                    problems += [
                        f"{dashboard['uid']} / ${variable['name']}: unknown metric {name}"
                        for name in metric_names(selector) - known
                    ]
        for rule in alert_rules():  # alerts may well be quiet; they must parse and name real metrics
            problems += query_problems(prometheus, f"alert {rule['alert']}", rule["expr"], known, need_data=False)
        for rule in recording_rules():  # each rule's expression, and the series it recorded
            problems += query_problems(
                prometheus, f"rule {rule['record']}", rule["expr"], known, need_data=True, need_number=True
            )
            problems += query_problems(
                prometheus, f"recorded {rule['record']}", rule["record"], known, need_data=True, need_number=True
            )
        # the provider worker's case ends as a verdict too (its jurors abstained), and counts in the fleet
        provided = await read_topic(provider_settings, "disputes.verdicts", until=1, timeout_s=30)
        others = [Verdict.model_validate_json(value) for _, value in provided]
        assert [v.case_id for v in others] == ["clot-001-shirt-torn-seam"], others
        problems += fleet_figures(prometheus, verdicts, others, outcomes, settings.drift_reference_seller_share)

        # Prometheus itself evaluates the rule files: every rule healthy, no evaluation errors
        groups = prometheus.get("/api/v1/rules")["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        assert {r["name"] for r in rules} == {r["alert"] for r in alert_rules()} | {
            r["record"] for r in recording_rules()
        }
        problems += [
            f"rule {r['name']}: {r['health']} {r.get('lastError')}"
            for r in rules
            if r["health"] != "ok" or r.get("lastError")
        ]
        # both workers scraped and up
        targets = prometheus.get("/api/v1/targets")["data"]["activeTargets"]
        assert sorted(t["health"] for t in targets) == ["up", "up"], targets

        # a query naming a metric the workers do not export is reported, even when it returns data
        assert query_problems(
            prometheus, "mistyped", "sum(rate(cyberjurors_verdict_total[1m])) or vector(0)", known, need_data=True
        )
        assert query_problems(prometheus, "mistyped", "sum(cyberjurors_cases_in_flight{", known, need_data=True)

    assert not problems, "\n".join(problems)
    print(f"done in {time.monotonic() - started:.1f} s")  # about 40 s on a 2-core machine
