"""Generate k8s/components/monitoring/prometheusrule.yaml from recording.yml and alerts.yml in this folder.

    python infra/make_prometheusrule.py            # rewrite the PrometheusRule (or: make prometheusrule)
    python infra/make_prometheusrule.py --check    # exit 1 if the committed file differs

One source for both targets: a plain Prometheus loads the two rule files of this folder (prometheus.yml,
docker-compose.yml); the prometheus-operator reads the same groups from a PrometheusRule, whose
``spec`` has the very shape of a rule file (``groups:``). Both files go into one PrometheusRule, the
recording groups first, because the drift alerts read the recording rules: a Prometheus that selects the
alerts must get the records too. Deterministic: same input, same bytes. The comments of the rule files
stay there, where the rules are edited. tests/unit/project/test_monitoring.py fails when the committed
file is stale, validates it against the operator's CRD schema and runs promtool on the groups as the
rendered overlay carries them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SOURCES = (HERE / "recording.yml", HERE / "alerts.yml")
TARGET = ROOT / "k8s" / "components" / "monitoring" / "prometheusrule.yaml"
NAME = "cyberjurors"
WIDTH = 110
HEADER = """\
# GENERATED from infra/recording.yml and infra/alerts.yml by infra/make_prometheusrule.py: edit those
# (and their promtool tests, infra/*.test.yml), then run `make prometheusrule`. Do not edit here:
# tests/unit/project/test_monitoring.py fails when this file differs from what the generator writes.
"""


class _Dumper(yaml.SafeDumper):
    """The safe dumper, with strings styled as below."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # expressions as literal blocks and long descriptions folded, as the rule files write them
    style = "|" if "\n" in text else ">" if len(text) > WIDTH else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _string)


def rule_groups(sources: tuple[Path, ...] = SOURCES) -> list[dict[str, Any]]:
    """Every group of the rule files, in file order."""
    return [group for path in sources for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]]


def prometheus_rule(sources: tuple[Path, ...] = SOURCES) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": NAME,
            "labels": {
                "app.kubernetes.io/name": "cyberjurors",
                "app.kubernetes.io/component": "worker",
                "app.kubernetes.io/part-of": "cyberjurors",
            },
        },
        "spec": {"groups": rule_groups(sources)},
    }


def render(sources: tuple[Path, ...] = SOURCES) -> str:
    body = yaml.dump(prometheus_rule(sources), Dumper=_Dumper, sort_keys=False, width=WIDTH, allow_unicode=True)
    return HEADER + body


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text(encoding="utf-8") != text:
            print(f"out of date (run python infra/make_prometheusrule.py): {TARGET.relative_to(ROOT)}", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
