"""Generate the Grafana dashboards in this folder (deterministic: same input, same bytes).

    python dashboards/make_dashboards.py            # rewrite the *.json files
    python dashboards/make_dashboards.py --check    # exit 1 if a committed file differs

Plain dicts in Grafana's classic dashboard JSON model, schemaVersion 42 (the latest migration
step Grafana ships for the classic model; Grafana 13 converts classic dashboards to its v2
schema when it loads them). No migration step from 39 on touches a field used here, so older
Grafana versions read the files as they are. Panels are timeseries, stat, gauge and
bargauge with explicit gridPos; every panel and query names the data source through the
``datasource`` template variable, whose default is the uid of the data source provisioned by
infra/grafana/provisioning/datasources/prometheus.yml. The ``instance`` variable selects workers
(all by default), which matters once docker compose runs several (``--scale worker=N``).

Every query uses only metrics the workers export (cyberjurors/observability/metrics.py) or the series the
recording rules in infra/recording.yml derive from them (the fleet's drift: ``cyberjurors:...``,
fleet-wide by construction, so the Worker filter does not apply to them); tests/unit/project/test_infra.py
checks the names, and that Grafana's own generated types (grafana-foundation-sdk) read every
field back unchanged; tests/integration/test_prometheus_live.py runs every query against a real Prometheus.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 42
DATASOURCE_UID = "cyberjurors-prometheus"
DS = {"type": "prometheus", "uid": "${datasource}"}
W = 'instance=~"$instance"'  # every selector carries the worker filter
PAPER_SELLER_SHARE = 0.626
DRIFT_BAND = 0.15  # the same band as CyberJurorsSellerWinShareDrift in infra/alerts.yml

Panel = dict[str, Any]

# Every worker reports its whole consumer group's lag, so it is taken once per partition (max over workers).
LAG = "cyberjurors_consumer_lag_records"
LAG_DESCRIPTION = ("Records the consumer group has not committed yet (end offset minus committed offset), read from "
                   "the broker by every worker, counted once per partition. Scale on it: workers up to the "
                   "partition count.")


# --- building blocks -------------------------------------------------------------------------------


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, fmt: str = "time_series") -> dict:
    return {
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "format": fmt,
        "instant": instant,
        "legendFormat": legend or "__auto",
        "range": not instant,
        "refId": ref,
    }


def targets(queries: list[tuple[str, str]], instant: bool = False, fmt: str = "time_series") -> list[dict]:
    return [target(expr, legend, chr(ord("A") + n), instant, fmt) for n, (expr, legend) in enumerate(queries)]


def thresholds(*steps: tuple[float | None, str]) -> dict:
    return {"mode": "absolute", "steps": [{"color": color, "value": value} for value, color in steps]}


GREEN = thresholds((None, "green"))


def defaults(unit: str, *, decimals: int | None = None, min_: float | None = None, max_: float | None = None,
             steps: dict | None = None, color: str = "palette-classic", custom: dict | None = None) -> dict:
    out: dict[str, Any] = {"color": {"mode": color}, "mappings": [], "thresholds": steps or GREEN, "unit": unit}
    if decimals is not None:
        out["decimals"] = decimals
    if min_ is not None:
        out["min"] = min_
    if max_ is not None:
        out["max"] = max_
    if custom is not None:
        out["custom"] = custom
    return out


REDUCE_LAST = {"calcs": ["lastNotNull"], "fields": "", "values": False}
TIMESERIES_CUSTOM = {
    "axisBorderShow": False, "axisCenteredZero": False, "axisColorMode": "text", "axisLabel": "",
    "axisPlacement": "auto", "barAlignment": 0, "drawStyle": "line", "fillOpacity": 10,
    "gradientMode": "none", "hideFrom": {"legend": False, "tooltip": False, "viz": False},
    "insertNulls": False, "lineInterpolation": "linear", "lineWidth": 1, "pointSize": 4,
    "scaleDistribution": {"type": "linear"}, "showPoints": "never", "spanNulls": False,
    "stacking": {"group": "A", "mode": "none"}, "thresholdsStyle": {"mode": "off"},
}


def timeseries(title: str, description: str, queries: list[tuple[str, str]], unit: str, *,
               min_: float | None = 0, max_: float | None = None, stack: bool = False) -> Panel:
    custom = dict(TIMESERIES_CUSTOM)
    if stack:
        custom["stacking"] = {"group": "A", "mode": "normal"}
        custom["fillOpacity"] = 40
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": defaults(unit, min_=min_, max_=max_, custom=custom), "overrides": []},
        "options": {
            "legend": {"calcs": ["lastNotNull", "max"], "displayMode": "table", "placement": "bottom",
                       "showLegend": True},
            "tooltip": {"hideZeros": False, "mode": "multi", "sort": "desc"},
        },
        "targets": targets(queries),
    }


def stat(title: str, description: str, expr: str, unit: str, *, decimals: int | None = None,
         steps: dict | None = None, legend: str = "") -> Panel:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": defaults(unit, decimals=decimals, steps=steps,
                                             color="thresholds" if steps else "fixed"), "overrides": []},
        "options": {
            "colorMode": "value", "graphMode": "none", "justifyMode": "auto", "orientation": "auto",
            "percentChangeColorMode": "standard", "reduceOptions": REDUCE_LAST, "showPercentChange": False,
            "textMode": "auto", "wideLayout": True,
        },
        "targets": [target(expr, legend, instant=True)],
    }


def gauge(title: str, description: str, expr: str, unit: str, steps: dict, *, min_: float = 0,
          max_: float = 1, decimals: int | None = None) -> Panel:
    return {
        "type": "gauge",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": defaults(unit, decimals=decimals, min_=min_, max_=max_, steps=steps,
                                             color="thresholds"), "overrides": []},
        "options": {
            "minVizHeight": 75, "minVizWidth": 75, "orientation": "auto", "reduceOptions": REDUCE_LAST,
            "showThresholdLabels": False, "showThresholdMarkers": True, "sizing": "auto",
        },
        "targets": [target(expr, instant=True)],
    }


def bargauge(title: str, description: str, expr: str, legend: str, unit: str, *, fmt: str = "time_series",
             min_: float | None = 0, max_: float | None = None, decimals: int | None = None) -> Panel:
    return {
        "type": "bargauge",
        "title": title,
        "description": description,
        "datasource": DS,
        "fieldConfig": {"defaults": defaults(unit, decimals=decimals, min_=min_, max_=max_, color="continuous-BlYlRd"),
                        "overrides": []},
        "options": {
            "displayMode": "gradient", "legend": {"calcs": [], "displayMode": "list", "placement": "bottom",
                                                  "showLegend": False},
            "maxVizHeight": 300, "minVizHeight": 16, "minVizWidth": 8, "namePlacement": "auto",
            "orientation": "horizontal", "reduceOptions": REDUCE_LAST, "showUnfilled": True, "sizing": "auto",
            "valueMode": "color",
        },
        "targets": [target(expr, legend, instant=True, fmt=fmt)],
    }


def layout(rows: list[tuple[int, list[tuple[int, Panel]]]]) -> list[Panel]:
    """Rows of (height, [(width, panel), ...]) laid out left to right, top to bottom; ids in order."""
    panels, y, next_id = [], 0, 1
    for height, row in rows:
        x = 0
        for width, panel in row:
            panels.append({"id": next_id, **panel, "gridPos": {"h": height, "w": width, "x": x, "y": y}})
            next_id += 1
            x += width
        assert x <= 24, f"row at y={y} is {x} wide"
        y += height
    return panels


def dashboard(uid: str, title: str, description: str, rows: list[tuple[int, list[tuple[int, Panel]]]]) -> dict:
    return {
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
        }]},
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{
            "asDropdown": False, "icon": "external link", "includeVars": True, "keepTime": True,
            "tags": ["cyberjurors"], "targetBlank": False, "title": "CyberJurors dashboards", "tooltip": "",
            "type": "dashboards", "url": "",
        }],
        "panels": layout(rows),
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": ["cyberjurors"],
        "templating": {"list": [
            {
                "current": {"text": "Prometheus", "value": DATASOURCE_UID},
                "description": "the Prometheus that scrapes the workers",
                "hide": 0, "includeAll": False, "label": "Data source", "multi": False, "name": "datasource",
                "options": [], "query": "prometheus", "refresh": 1, "regex": "", "type": "datasource",
            },
            {
                "allValue": ".*",
                "current": {"text": ["All"], "value": ["$__all"]},
                "datasource": DS,
                "definition": "label_values(cyberjurors_cases_in_flight, instance)",
                "description": "worker instances (docker compose --scale worker=N runs N)",
                "hide": 0, "includeAll": True, "label": "Worker", "multi": True, "name": "instance",
                "options": [],
                "query": {"qryType": 1, "query": "label_values(cyberjurors_cases_in_flight, instance)",
                          "refId": "PrometheusVariableQueryEditor-VariableQuery"},
                "refresh": 2, "regex": "", "sort": 1, "type": "query",
            },
        ]},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": title,
        "uid": uid,
        "version": 1,
        "weekStart": "",
    }


def quantiles(metric: str, by: str = "", qs: tuple[float, ...] = (0.5, 0.95, 0.99)) -> list[tuple[str, str]]:
    group = f"le, {by}" if by else "le"
    label = f" {{{{{by}}}}}" if by else ""
    return [(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{{{W}}}[$__rate_interval])))",
             f"p{round(q * 100)}{label}") for q in qs]


# --- the four dashboards ---------------------------------------------------------------------------


def overview() -> dict:
    v, calls, errs = "cyberjurors_verdicts_total", "cyberjurors_llm_calls_total", "cyberjurors_llm_errors_total"
    share_steps = thresholds((None, "red"), (round(PAPER_SELLER_SHARE - DRIFT_BAND, 3), "green"),
                             (round(PAPER_SELLER_SHARE + DRIFT_BAND, 3), "red"))
    return dashboard(
        "cyberjurors-overview", "CyberJurors / Overview",
        "Verdict throughput and latency, LLM health, dead letters and spend at a glance.",
        [
            (4, [
                (3, stat("Verdicts", "verdicts issued in the selected time range",
                         f"sum(increase({v}{{{W}}}[$__range]))", "short", decimals=0)),
                (3, stat("Throughput", "verdicts per minute over the last few scrapes",
                         f"sum(rate({v}{{{W}}}[$__rate_interval])) * 60", "cpm", decimals=1)),
                (3, stat("Cases in flight", "cases received and not yet decided, all selected workers",
                         f"sum(cyberjurors_cases_in_flight{{{W}}})", "short", decimals=0)),
                (3, stat("p95 case latency", "95th percentile of receipt-to-verdict time over the range",
                         f"histogram_quantile(0.95, sum by (le) (rate(cyberjurors_case_latency_seconds_bucket{{{W}}}"
                         f"[$__range])))", "s",
                         steps=thresholds((None, "green"), (120, "orange"), (300, "red")))),
                (3, stat("LLM error ratio", "failed LLM calls (after the SDK's retries) / all calls, over the range",
                         f"(sum(increase({errs}{{{W}}}[$__range])) or vector(0)) / sum(increase({calls}{{{W}}}"
                         f"[$__range]))", "percentunit",
                         steps=thresholds((None, "green"), (0.01, "orange"), (0.05, "red")))),
                (3, stat("Dead letters", "messages sent to disputes.dlq in the range (cyberjurors dlq lists them)",
                         f"sum(increase(cyberjurors_dead_letters_total{{{W}}}[$__range])) or vector(0)", "short",
                         decimals=0, steps=thresholds((None, "green"), (1, "orange")))),
                (3, stat("Estimated cost", "LLM spend in the range, from the configured price table",
                         f"sum(increase(cyberjurors_llm_cost_usd_total{{{W}}}[$__range]))", "currencyUSD",
                         decimals=2)),
                (3, stat("Seller-win share", f"share of the last day's verdicts for the seller, every worker "
                                             f"(recording rule; not filtered by Worker); green within "
                                             f"±{DRIFT_BAND:.0%} of the paper's {PAPER_SELLER_SHARE:.1%}",
                         "cyberjurors:seller_win_share:ratio_rate1d", "percentunit", steps=share_steps)),
            ]),
            (8, [
                (12, timeseries("Verdicts per minute by winner", "rate of verdicts, split by the side that won",
                                [(f"sum by (winner) (rate({v}{{{W}}}[$__rate_interval])) * 60", "{{winner}}")],
                                "cpm", stack=True)),
                (12, timeseries("Case latency", "receipt-to-verdict time quantiles (all categories)",
                                quantiles("cyberjurors_case_latency_seconds"), "s")),
            ]),
            (8, [
                (12, timeseries("LLM calls and errors per second",
                                "calls by backend, and failed calls by error kind (what is left after retries)",
                                [(f"sum by (backend) (rate({calls}{{{W}}}[$__rate_interval]))", "calls {{backend}}"),
                                 (f"sum by (kind) (rate({errs}{{{W}}}[$__rate_interval]))", "errors {{kind}}")],
                                "reqps")),
                (12, timeseries("Dead letters per minute", "messages sent to disputes.dlq by stage and reason",
                                [("sum by (stage, reason) (rate(cyberjurors_dead_letters_total"
                                  f"{{{W}}}[$__rate_interval])) * 60", "{{stage}} {{reason}}")], "cpm")),
            ]),
            (8, [
                (12, timeseries("Cases in flight per worker", "cases each worker holds between receipt and verdict",
                                [(f"sum by (instance) (cyberjurors_cases_in_flight{{{W}}})", "{{instance}}")],
                                "short")),
                (12, bargauge("Verdicts by category", "verdicts issued in the selected range, per category",
                              f"sum by (category) (increase({v}{{{W}}}[$__range]))", "{{category}}", "short",
                              decimals=0)),
            ]),
            (8, [
                (12, timeseries("Consumer lag by topic", LAG_DESCRIPTION + " Summed over each topic's partitions; "
                                "alert: over 100 and not draining for 10 min.",
                                [(f"sum by (group, topic) (max by (group, topic, partition) ({LAG}{{{W}}}))",
                                  "{{topic}}")], "short")),
                (12, bargauge("Consumer lag by partition", LAG_DESCRIPTION + " Lag stuck on one partition while "
                              "the others drain points at a stuck worker.",
                              f"max by (group, topic, partition) ({LAG}{{{W}}})", "{{topic}} {{partition}}", "short",
                              decimals=0)),
            ]),
        ],
    )


def latency() -> dict:
    stage, llm = "cyberjurors_stage_latency_seconds", "cyberjurors_llm_latency_seconds"
    case = "cyberjurors_case_latency_seconds"
    return dashboard(
        "cyberjurors-latency", "CyberJurors / Latency and stages",
        "Where a case's time goes: end-to-end latency, the four pipeline stages (focus, clues, jury "
        "rounds, verdict), LLM call latency and retries, and precedent retrieval.",
        [
            (4, [
                (6, stat("p50 case latency", "median receipt-to-verdict time over the range",
                         f"histogram_quantile(0.5, sum by (le) (rate({case}_bucket{{{W}}}[$__range])))", "s")),
                (6, stat("p95 case latency", "95th percentile over the range (alert: above 5 min for 10 min)",
                         f"histogram_quantile(0.95, sum by (le) (rate({case}_bucket{{{W}}}[$__range])))", "s",
                         steps=thresholds((None, "green"), (120, "orange"), (300, "red")))),
                (6, stat("p99 case latency", "99th percentile over the range",
                         f"histogram_quantile(0.99, sum by (le) (rate({case}_bucket{{{W}}}[$__range])))", "s")),
                (6, stat("Mean LLM call latency", "average duration of one LLM call over the range",
                         f"sum(rate({llm}_sum{{{W}}}[$__range])) / sum(rate({llm}_count{{{W}}}[$__range]))", "s")),
            ]),
            (8, [
                (12, timeseries("End-to-end case latency", "receipt-to-verdict time quantiles",
                                quantiles(case), "s")),
                (12, timeseries("p95 case latency by category", "95th percentile per dispute category",
                                quantiles(case, "category", (0.95,)), "s")),
            ]),
            (8, [
                (12, timeseries("p95 stage latency", "95th percentile of each stage: focus (I), clues (II + "
                                "precedent retrieval), one jury round (III-IV for all jurors + summary), verdict",
                                quantiles(stage, "stage", (0.95,)), "s")),
                (12, timeseries("Mean stage latency", "average time per stage run",
                                [(f"sum by (stage) (rate({stage}_sum{{{W}}}[$__rate_interval])) / sum by (stage) "
                                  f"(rate({stage}_count{{{W}}}[$__rate_interval]))", "{{stage}}")], "s")),
            ]),
            (8, [
                (8, bargauge("Time per case by stage", "seconds each stage adds to an average case over the range "
                             "(rounds summed over all rounds the case needed)",
                             f"sum by (stage) (increase({stage}_sum{{{W}}}[$__range])) / scalar(sum(increase("
                             f"{case}_count{{{W}}}[$__range])))", "{{stage}}", "s")),
                (8, timeseries("p95 LLM call latency by role", "one call: focus, select, perceive, juror, summary",
                               quantiles(llm, "role", (0.95,)), "s")),
                (8, timeseries("p95 LLM call latency by model", "per backend and model",
                               [(f"histogram_quantile(0.95, sum by (le, backend, model) (rate({llm}_bucket{{{W}}}"
                                 f"[$__rate_interval])))", "{{backend}} {{model}}")], "s")),
            ]),
            (8, [
                (8, timeseries("LLM retries per minute", "retries the SDK made before a call succeeded or failed",
                               [("sum by (backend, model) (rate(cyberjurors_llm_retries_total"
                                 f"{{{W}}}[$__rate_interval])) * 60", "{{backend}} {{model}}")], "cpm")),
                (8, timeseries("Precedent retrieval latency", "hybrid search for a case's precedents",
                               quantiles("cyberjurors_precedent_retrieval_seconds", qs=(0.5, 0.95)), "s")),
                (8, timeseries("Precedent fallbacks and cold starts per minute",
                               "cases judged without precedents (retrieval failed, by reason) and cases whose "
                               "category had too few guidelines (cross-category ones added)",
                               [("sum by (reason) (rate(cyberjurors_precedent_fallbacks_total"
                                 f"{{{W}}}[$__rate_interval])) * 60", "fallback {{reason}}"),
                                ("sum by (category) (rate(cyberjurors_precedent_cold_starts_total"
                                 f"{{{W}}}[$__rate_interval])) * 60", "cold start {{category}}")], "cpm")),
            ]),
        ],
    )


def tokens() -> dict:
    t, cost = "cyberjurors_llm_tokens_total", "cyberjurors_llm_cost_usd_total"
    v, calls = "cyberjurors_verdicts_total", "cyberjurors_llm_calls_total"
    return dashboard(
        "cyberjurors-tokens", "CyberJurors / Tokens and cost",
        "Token use by kind (input, output, thinking, prompt-cache read and write), model and role, the "
        "prompt-cache hit ratio per role, and the estimated spend from the configured price table.",
        [
            (4, [
                (4, stat("Estimated cost", "LLM spend in the selected range",
                         f"sum(increase({cost}{{{W}}}[$__range]))", "currencyUSD", decimals=2)),
                (4, stat("Cost per verdict", "spend in the range / verdicts in the range",
                         f"sum(increase({cost}{{{W}}}[$__range])) / sum(increase({v}{{{W}}}[$__range]))",
                         "currencyUSD", decimals=3)),
                (4, stat("Tokens", "all token kinds in the range", f"sum(increase({t}{{{W}}}[$__range]))",
                         "short", decimals=0)),
                (4, stat("Tokens per verdict", "tokens in the range / verdicts in the range",
                         f"sum(increase({t}{{{W}}}[$__range])) / sum(increase({v}{{{W}}}[$__range]))", "short",
                         decimals=0)),
                (4, stat("Prompt cache hit ratio", "share of prompt tokens read from the provider's cache "
                         "(cache read / (input + cache read + cache write)); all 17 jurors share the case prefix",
                         f'(sum(increase({t}{{kind="cache_read", {W}}}[$__range])) or vector(0)) / '
                         f'sum(increase({t}{{kind=~"input|cache_read|cache_write", {W}}}[$__range]))',
                         "percentunit")),
                (4, stat("LLM calls per verdict", "calls in the range / verdicts in the range",
                         f"sum(increase({calls}{{{W}}}[$__range])) / sum(increase({v}{{{W}}}[$__range]))", "short",
                         decimals=1)),
            ]),
            (8, [
                (12, timeseries("Tokens per second by kind", "input, output (the answer), thinking, cache read, "
                                "cache write: the kinds do not overlap",
                                [(f"sum by (kind) (rate({t}{{{W}}}[$__rate_interval]))", "{{kind}}")], "short",
                                stack=True)),
                (12, timeseries("Tokens per second by role", "focus, select, perceive, juror, summary",
                                [(f"sum by (role) (rate({t}{{{W}}}[$__rate_interval]))", "{{role}}")], "short",
                                stack=True)),
            ]),
            (8, [
                (12, timeseries("Cost per hour by model", "estimated spend rate per backend and model",
                                [(f"sum by (backend, model) (rate({cost}{{{W}}}[$__rate_interval])) * 3600",
                                  "{{backend}} {{model}}")], "currencyUSD", stack=True)),
                (12, timeseries("Cost per hour by role", "estimated spend rate per pipeline role",
                                [(f"sum by (role) (rate({cost}{{{W}}}[$__rate_interval])) * 3600", "{{role}}")],
                                "currencyUSD", stack=True)),
            ]),
            (8, [
                (12, bargauge("Cost by model and role", "estimated spend in the selected range",
                              f"sum by (model, role) (increase({cost}{{{W}}}[$__range]))", "{{model}} {{role}}",
                              "currencyUSD", decimals=2)),
                (12, bargauge("Tokens by model and kind", "tokens in the selected range",
                              f"sum by (model, kind) (increase({t}{{{W}}}[$__range]))", "{{model}} {{kind}}",
                              "short", decimals=0)),
            ]),
            (8, [
                (12, timeseries("LLM calls per second by role", "calls per backend and role",
                                [(f"sum by (backend, role) (rate({calls}{{{W}}}[$__rate_interval]))",
                                  "{{backend}} {{role}}")], "reqps", stack=True)),
                (12, timeseries("Prompt cache tokens per second", "tokens read from and written to the "
                                "provider's prompt cache, per model",
                                [(f'sum by (model) (rate({t}{{kind="cache_read", {W}}}[$__rate_interval]))',
                                  "read {{model}}"),
                                 (f'sum by (model) (rate({t}{{kind="cache_write", {W}}}[$__rate_interval]))',
                                  "write {{model}}")], "short")),
            ]),
            (8, [
                (12, timeseries("Prompt cache hit ratio by role", "cache read / (input + cache read + cache write) "
                                "per role: jurors share the case prefix; a prefix below the model's minimum "
                                "cacheable length gets no breakpoint and stays at 0",
                                [(f'sum by (role) (rate({t}{{kind="cache_read", {W}}}[$__rate_interval])) / '
                                  f'sum by (role) (rate({t}{{kind=~"input|cache_read|cache_write", {W}}}'
                                  f'[$__rate_interval]))', "{{role}}")], "percentunit", max_=1)),
                (12, timeseries("Thinking share of output by role", "thinking / (output + thinking) tokens per "
                                "role: what effort and thinking settings spend before the answer",
                                [(f'sum by (role) (rate({t}{{kind="thinking", {W}}}[$__rate_interval])) / '
                                  f'sum by (role) (rate({t}{{kind=~"output|thinking", {W}}}[$__rate_interval]))',
                                  "{{role}}")], "percentunit", max_=1)),
            ]),
        ],
    )


def verdicts() -> dict:
    v, o = "cyberjurors_verdicts_total", "cyberjurors_outcomes_total"
    share_steps = thresholds((None, "red"), (round(PAPER_SELLER_SHARE - DRIFT_BAND, 3), "green"),
                             (round(PAPER_SELLER_SHARE + DRIFT_BAND, 3), "red"))
    accuracy_steps = thresholds((None, "red"), (0.6, "orange"), (0.7, "green"))
    fleet = "every worker, restarts included (recording rule; not filtered by Worker)"
    return dashboard(
        "cyberjurors-verdicts", "CyberJurors / Verdicts, fairness and drift",
        "Who wins, by how much and after how many rounds; the fleet's seller-win share against its "
        "reference, and agreement with the real outcomes reported on disputes.outcomes (recording rules "
        "over every worker's counters, infra/recording.yml).",
        [
            (6, [
                (6, gauge("Seller-win share, last day", f"share of verdicts for the seller, {fleet}; green within "
                          f"±{DRIFT_BAND:.0%} of the paper's {PAPER_SELLER_SHARE:.1%} (alert band)",
                          "cyberjurors:seller_win_share:ratio_rate1d", "percentunit", share_steps)),
                (3, stat("Reference share", "drift_reference_seller_share, the max over the workers",
                         "cyberjurors:seller_win_share_reference_ratio:max", "percentunit")),
                (5, gauge("Outcome accuracy, last day", f"agreement of our winner with the real outcome, {fleet} "
                          "(paper: 72.9%; alert below 60%); no data until outcomes arrive",
                          "cyberjurors:outcome_accuracy:ratio_rate1d", "percentunit", accuracy_steps)),
                (5, stat("Vote MAE, last day", f"mean absolute error of our 17-vote split against the real jury's, "
                         f"{fleet} (paper: 4.73)", "cyberjurors:outcome_vote_error:mean1d", "short", decimals=2,
                         steps=thresholds((None, "green"), (5, "orange"), (7, "red")))),
                (5, stat("Outcomes received", "real outcomes compared with our verdicts in the range",
                         f"sum(increase({o}{{{W}}}[$__range]))", "short", decimals=0)),
            ]),
            (8, [
                (12, timeseries("Seller-win share against the reference", f"over the last hour and day, {fleet}",
                                [("cyberjurors:seller_win_share:ratio_rate1h", "last hour {{job}}"),
                                 ("cyberjurors:seller_win_share:ratio_rate1d", "last day {{job}}"),
                                 ("cyberjurors:seller_win_share_reference_ratio:max", "reference {{job}}")],
                                "percentunit", max_=1)),
                (12, timeseries("Agreement with real outcomes", f"accuracy over the last hour and day, and recall "
                                "per real winner over the day: how often we ruled for the buyer when the real jury "
                                f"did, and for the seller when it did; {fleet}",
                                [("cyberjurors:outcome_accuracy:ratio_rate1h", "accuracy, last hour {{job}}"),
                                 ("cyberjurors:outcome_accuracy:ratio_rate1d", "accuracy, last day {{job}}"),
                                 ("cyberjurors_real_winner:outcome_recall:ratio_rate1d",
                                  "recall {{real_winner}}, last day {{job}}")],
                                "percentunit", max_=1)),
            ]),
            (8, [
                (12, timeseries("Verdicts per minute by category and winner", "",
                                [(f"sum by (category, winner) (rate({v}{{{W}}}[$__rate_interval])) * 60",
                                  "{{category}} {{winner}}")], "cpm", stack=True)),
                (12, bargauge("Seller-win share by category, last day", f"share of verdicts for the seller per "
                              f"category, {fleet}; no value for a category without verdicts",
                              "cyberjurors_category:seller_win_share:ratio_rate1d", "{{category}}", "percentunit",
                              max_=1)),
            ]),
            (8, [
                (6, bargauge("Vote margin distribution", "verdicts in the range by vote margin bucket (the winning "
                             "side's votes minus the losing side's)",
                             f"sum by (le) (increase(cyberjurors_vote_margin_bucket{{{W}}}[$__range]))", "{{le}}",
                             "short", fmt="heatmap", decimals=0)),
                (6, timeseries("Vote margin", "median and 10th percentile: a falling p10 means more narrow splits",
                               quantiles("cyberjurors_vote_margin", qs=(0.1, 0.5)), "short")),
                (6, timeseries("Mean rounds used", "discussion rounds per verdict (T = 3 at most)",
                               [("sum(rate(cyberjurors_rounds_used_sum"
                                 f"{{{W}}}[$__rate_interval])) / sum(rate(cyberjurors_rounds_used_count"
                                 f"{{{W}}}[$__rate_interval]))", "mean rounds")], "short")),
                (6, timeseries("Early-stop share", "verdicts reached before the last round because the majority "
                               "reached the early-stop share (delta = 0.8)",
                               [(f"sum(rate(cyberjurors_early_stops_total{{{W}}}[$__rate_interval])) / "
                                 f"sum(rate({v}{{{W}}}[$__rate_interval]))", "early stops")], "percentunit",
                               max_=1)),
            ]),
            *recourse(v),
            (8, [
                (8, timeseries("Outcomes per hour by agreement", "real outcomes that agree or disagree with our "
                               "verdict",
                               [(f"sum by (agreement) (rate({o}{{{W}}}[$__rate_interval])) * 3600",
                                 "{{agreement}}")], "short", stack=True)),
                (8, bargauge("Outcome accuracy by category, last day", f"agreement with the real outcomes per "
                             f"category, {fleet}; no value for a category without outcomes",
                             "cyberjurors_category:outcome_accuracy:ratio_rate1d", "{{category}}", "percentunit",
                             max_=1)),
                (8, timeseries("Vote MAE against real outcomes", "mean absolute error of the 17-vote split over the "
                               f"last hour and day, {fleet}",
                               [("cyberjurors:outcome_vote_error:mean1h", "last hour {{job}}"),
                                ("cyberjurors:outcome_vote_error:mean1d", "last day {{job}}")], "short")),
            ]),
        ],
    )


def recourse(v: str) -> list[tuple[int, list[tuple[int, Panel]]]]:
    """Escalation to human panels and appeals: rates, reasons and outcomes."""
    e, a = "cyberjurors_escalations_total", "cyberjurors_appeal_verdicts_total"
    decided = (f"(sum(increase({v}{{{W}}}[$__range])) + sum(increase({a}{{{W}}}[$__range])))")
    return [
        (6, [
            (6, stat("Escalated share", "verdicts in the range sent to disputes.escalations for a human panel, for any "
                     "reason (first instance and appeals)",
                     f"sum(increase(cyberjurors_escalated_verdicts_total{{{W}}}[$__range])) / {decided}",
                     "percentunit", decimals=1)),
            (6, stat("Appeal rate", "appeals accepted in the range per first-instance verdict (refused appeals are "
                     "dead letters at stage appeal)",
                     f"sum(increase(cyberjurors_appeals_total{{{W}}}[$__range])) / "
                     f"sum(increase({v}{{{W}}}[$__range]))", "percentunit", decimals=1)),
            (6, bargauge("Second-instance verdicts", "appeal verdicts in the range: reversed (the appellant won) or "
                         "upheld; the reversal rate is reversed over both",
                         f"sum by (result) (increase({a}{{{W}}}[$__range]))", "{{result}}", "short", decimals=0)),
            (6, bargauge("Human panels and the jury", "decisions human panels reported (source human_panel) on "
                         "escalated verdicts in the range, by agreement with the jury's verdict",
                         f"sum by (agreement) (increase(cyberjurors_human_decisions_total{{{W}}}[$__range]))",
                         "{{agreement}}", "short", decimals=0)),
        ]),
        (8, [
            (12, timeseries("Escalations per hour by reason", "verdicts escalated, once per reason (a verdict with "
                            "two reasons counts under both)",
                            [(f"sum by (reason) (rate({e}{{{W}}}[$__rate_interval])) * 3600", "{{reason}}")],
                            "short", stack=True)),
            (12, bargauge("Escalation rate by reason", "share of the verdicts in the range escalated for each reason",
                          f"sum by (reason) (increase({e}{{{W}}}[$__range])) / scalar{decided}", "{{reason}}",
                          "percentunit", max_=1)),
        ]),
    ]


DASHBOARDS = {"overview.json": overview, "latency-and-stages.json": latency, "tokens-and-cost.json": tokens,
              "verdicts-fairness-drift.json": verdicts}


def render() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2, ensure_ascii=False) + "\n" for name, build in DASHBOARDS.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, text in render().items():
        path = HERE / name
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"out of date (run python dashboards/make_dashboards.py): {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
