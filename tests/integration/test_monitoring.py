"""The chart's monitoring (monitoring.prometheusRule, monitoring.grafanaDashboard): off by
default; the alerts pass the pinned promtool's checks (hack/promtool) and its unit tests, one
per alert with series that fire it and series that do not; the alerts and the dashboard read
only series that kopf-dra's components serve.

The series names come from the components' registries, as their endpoints serve them
(test_metrics.py scrapes the same registries), not from a list kept here: a metric renamed in
the code and not in the chart fails the test.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from operators.controllers.claim_templates.metrics import REGISTRY as TEMPLATES_REGISTRY
from operators.controllers.fabric.metrics import REGISTRY as FABRIC_REGISTRY
from operators.controllers.pool_validator.metrics import REGISTRY as VALIDATOR_REGISTRY
from operators.controllers.reservations.metrics import REGISTRY as RESERVATIONS_REGISTRY
from operators.controllers.scheduler.metrics import REGISTRY as SCHEDULER_REGISTRY
from operators.driver.metrics import REGISTRY as DRIVER_REGISTRY
from operators.kube.api import KubeAPI
from operators.runtime.metrics import REGISTRY as RUNTIME_REGISTRY
from tests.integration.helpers import (
    create_namespace,
    dry_run_all,
    helm_template,
    pinned_tool,
    render_chart,
)

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "charts" / "kopf-dra" / "dashboards" / "kopf-dra.json"
PROMETHEUS_RULE = "monitoring.coreos.com/v1/PrometheusRule"
SELECTOR = 'namespace="kopf-dra"'
RULE_ONLY = {"monitoring": {"prometheusRule": {"enabled": True}}}
MONITORING = {
    "monitoring": {
        "prometheusRule": {"enabled": True, "selector": SELECTOR},
        "grafanaDashboard": {"enabled": True},
    }
}
# The leader-elected components' Leases, in name order (the chart's alerts' order).
LEASES = [
    f"kopf-dra-{c}"
    for c in ("claim-templates", "fabric", "pool-validator", "reservations", "scheduler")
]
REGISTRIES = [
    RUNTIME_REGISTRY,
    SCHEDULER_REGISTRY,
    TEMPLATES_REGISTRY,
    RESERVATIONS_REGISTRY,
    VALIDATOR_REGISTRY,
    FABRIC_REGISTRY,
    DRIVER_REGISTRY,
]
# The series a family of each type is served as.
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
}
BINDING_TIMEOUTS = "kopf_dra_scheduler_binding_conditions_timeouts_total"
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def served(registries: list[CollectorRegistry]) -> set[str]:
    """Every series name the components' endpoints can serve."""
    return {
        family.name + suffix
        for registry in registries
        for family in registry.collect()
        for suffix in SUFFIXES[family.type]
    }


def series_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads. Without its strings, label matchers, ranges
    and label lists, an expression is names, functions (a parenthesis follows them), keywords
    and numbers: the names are what is left."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}", " ", bare)
    bare = re.sub(r"\[[^\]]*\]", " ", bare)
    bare = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return {
        m.group(1)
        for m in re.finditer(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", bare)
        if m.group(2) is None and m.group(1).lower() not in PROMQL_WORDS
    }


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def dashboards(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dashboard's ConfigMap (the chart has others)."""
    return [
        o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "kopf-dra-dashboard"
    ]


def rule_groups(values: dict[str, Any]) -> list[dict[str, Any]]:
    """The alert groups of the PrometheusRule rendered with ``values`` on a cluster that
    serves the kind."""
    (rule,) = by_kind(render_chart(values, api_versions=[PROMETHEUS_RULE]), "PrometheusRule")
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alerts(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for group in groups for rule in group["rules"]]


def dashboard_queries(dashboard: dict[str, Any]) -> list[str]:
    """The PromQL of every panel's targets and of the template variables' label_values()."""
    queries = [
        target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        query = variable.get("definition", "")
        found = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
        if found:
            queries.append(found.group(1))
    return queries


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(pinned_tool("promtool")), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        timeout=120,
    )


def test_nothing_of_monitoring_is_rendered_unless_asked_for_and_served() -> None:
    """Off by default; on, the PrometheusRule needs the kind served by the cluster (else the
    whole install would fail on an unknown kind), and nothing else changes."""
    default = render_chart()
    assert render_chart(api_versions=[PROMETHEUS_RULE]) == default
    assert render_chart(RULE_ONLY) == default, "no PrometheusRule where the kind is not served"
    assert not by_kind(default, "PrometheusRule")
    assert not dashboards(default)
    with_rule = render_chart(RULE_ONLY, api_versions=[PROMETHEUS_RULE])
    assert [o for o in with_rule if o["kind"] != "PrometheusRule"] == default
    (rule,) = by_kind(with_rule, "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["namespace"] == "kopf-dra"


def test_the_objects_carry_their_labels_and_namespaces() -> None:
    values = {
        "monitoring": {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "prometheus"},
                "namespace": "monitoring",
            },
            "grafanaDashboard": {
                "enabled": True,
                "labels": {"team": "dra"},
                "annotations": {"grafana_folder": "DRA"},
                "namespace": "grafana",
            },
        }
    }
    objects = render_chart(values, api_versions=[PROMETHEUS_RULE])
    (rule,) = by_kind(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    (dashboard,) = dashboards(objects)
    assert dashboard["metadata"]["namespace"] == "grafana"
    # The sidecar's default label stays: Helm merges the labels given with the chart's.
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert dashboard["metadata"]["labels"]["team"] == "dra"
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "DRA"}
    assert json.loads(dashboard["data"]["kopf-dra.json"]) == json.loads(DASHBOARD.read_text())


def test_a_component_switched_off_has_no_alerts() -> None:
    groups = rule_groups(
        {**MONITORING, "scheduler": {"enabled": False}, "reservations": {"enabled": False}}
    )
    assert [g["name"] for g in groups] == ["kopf-dra-pools", "kopf-dra-leaders", "kopf-dra-claims"]
    leases = [r["labels"]["lease"] for r in alerts(groups) if r["alert"] == "KopfDraNoLeader"]
    assert leases == LEASES[:3], "reservations' and the scheduler's gone"
    (queue,) = [r for r in alerts(groups) if r["alert"] == "KopfDraClaimWorkQueueBacklog"]
    assert 'name=~"claim-templates|claim-templates-podgroups"' in queue["expr"]
    # No controller, no alert: not even an empty PrometheusRule.
    controllers = ("scheduler", "claimTemplates", "reservations", "poolValidator", "fabric")
    none = {**MONITORING, **{c: {"enabled": False} for c in controllers}}
    assert not by_kind(render_chart(none, api_versions=[PROMETHEUS_RULE]), "PrometheusRule")


def test_the_series_parser_finds_names_and_only_names() -> None:
    """The check below is only as good as this parser."""
    expr = (
        "histogram_quantile(0.99, sum by (le) ("
        'rate(x_bucket{a="b{c}", d=~"$d"}[$__rate_interval])))'
        " / on (pod) group_left (node) (max(up) or vector(0)) > bool 1e3"
    )
    assert series_names(expr) == {"x_bucket", "up"}


def test_every_series_the_alerts_and_the_dashboard_read_is_served() -> None:
    names = served(REGISTRIES)
    # Each type's series, as scrapes show them (test_metrics.py).
    assert {"workqueue_depth", "kopf_dra_scheduler_filter_timeouts_total"} <= names
    assert "kopf_dra_scheduler_pod_scheduling_duration_seconds_bucket" in names
    dashboard = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(dashboard)
    assert len(queries) > 20
    rules = alerts(rule_groups(MONITORING)) + alerts(rule_groups(RULE_ONLY))
    read = {
        name: query
        for query in [*queries, *(r["expr"] for r in rules)]
        for name in series_names(query)
    }
    assert "kopf_dra_scheduler_oldest_pending_pod_age_seconds" in read
    assert {name: query for name, query in read.items() if name not in names} == {}


def test_every_alert_says_what_to_run_next() -> None:
    for rule in alerts(rule_groups(MONITORING)):
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]
        assert "kubectl " in rule["annotations"]["description"], rule["alert"]
    described = " ".join(r["annotations"]["description"] for r in alerts(rule_groups(MONITORING)))
    for command in ("kubectl dra why <pod>", "kubectl dra pools", "kubectl dra claims"):
        assert command in described


# --- promtool ---------------------------------------------------------------------------------


def series(metric: str, values: str, /, **labels: str) -> dict[str, str]:
    """An input series of a promtool test, scraped from a replica in namespace kopf-dra."""
    matchers = ", ".join(f'{k}="{v}"' for k, v in {"namespace": "kopf-dra", **labels}.items())
    return {"series": f"{metric}{{{matchers}}}", "values": values}


def expected(rules: list[dict[str, Any]], alert: str, /, **labels: str) -> dict[str, Any]:
    """A firing alert as promtool shows it: its rule's labels, ``labels`` from the series, and
    its annotations with those labels filled in."""
    (rule,) = [
        r
        for r in rules
        if r["alert"] == alert and all(labels.get(k, v) == v for k, v in r["labels"].items())
    ]
    annotations = {
        key: text.replace("{{ $labels.name }}", labels.get("name", ""))
        for key, text in rule["annotations"].items()
    }
    return {"exp_labels": {**rule["labels"], **labels}, "exp_annotations": annotations}


def cases(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One promtool test group per alert: series that fire it, series that do not (another
    installation's among them, which the selector leaves out), evaluated before and after."""

    def fired(alert: str, at: str, *firing: dict[str, Any]) -> dict[str, Any]:
        return {"eval_time": at, "alertname": alert, "exp_alerts": list(firing)}

    pending = "KopfDraPodsPendingTooLong"
    filtered = "KopfDraSchedulerFilterTimeouts"
    binding = "KopfDraBindingConditionsTimeouts"
    pools = "KopfDraResourcePoolsInvalid"
    leader = "KopfDraNoLeader"
    queue = "KopfDraClaimWorkQueueBacklog"
    age = "kopf_dra_scheduler_oldest_pending_pod_age_seconds"
    timeouts = "kopf_dra_scheduler_filter_timeouts_total"
    status = "leader_election_master_status"
    templates, fabric, validator, reservations, scheduler = LEASES
    return [
        {  # The oldest pod passes 900 s at 16m; the pod bound at 30m ends it.
            "input_series": [
                series(age, "0+60x30 0x10", pod="scheduler-0"),
                series(age, "0+60x30 0x10", pod="scheduler-1"),
                series(age, "5000x40", namespace="other", pod="scheduler-0"),
            ],
            "alert_rule_test": [
                fired(pending, "15m"),
                fired(pending, "16m"),  # above the threshold, not yet for a minute
                fired(pending, "18m", expected(rules, pending)),
                fired(pending, "35m"),
            ],
        },
        {  # One timeout at 11m: reported for the 15 minutes after.
            "input_series": [
                series(timeouts, "0x10 1x30", pod="s-0"),
                series(timeouts, "0x40", pod="s-1"),
                series(timeouts, "0+1x40", namespace="other"),
            ],
            "alert_rule_test": [
                fired(filtered, "5m"),
                fired(filtered, "12m", expected(rules, filtered)),
                fired(filtered, "40m"),
            ],
        },
        {
            "input_series": [
                series(BINDING_TIMEOUTS, "0x10 2x30"),
                series(BINDING_TIMEOUTS, "0+1x40", namespace="other"),
            ],
            "alert_rule_test": [
                fired(binding, "5m"),
                fired(binding, "12m", expected(rules, binding)),
                fired(binding, "40m"),
            ],
        },
        {  # Two pools invalid from 6m, for 10 minutes by 16m; valid and incomplete ones never.
            "input_series": [
                series("kopf_dra_resource_pools", "0x5 2x20", state="invalid", pod="v-0"),
                series("kopf_dra_resource_pools", "3x25", state="valid", pod="v-0"),
                series("kopf_dra_resource_pools", "4x25", state="incomplete", pod="v-0"),
                series("kopf_dra_resource_pools", "1x25", state="invalid", namespace="other"),
            ],
            "alert_rule_test": [
                fired(pools, "5m"),
                fired(pools, "12m"),  # pending: not yet 10 minutes
                fired(pools, "17m", expected(rules, pools)),
            ],
        },
        {  # scheduler: its leader gone at 6m; reservations: none until 6m; fabric: no replica
            # scraped at all; claim-templates and pool-validator lead throughout (and another
            # installation's scheduler leads, which does not count).
            "input_series": [
                series(status, "1x5 0x20", name=scheduler, pod="s-0"),
                series(status, "0x25", name=scheduler, pod="s-1"),
                series(status, "1x25", name=scheduler, namespace="other"),
                series(status, "0x25", name=templates, pod="t-0"),
                series(status, "1x25", name=templates, pod="t-1"),
                series(status, "0x5 1x20", name=reservations, pod="r-0"),
                series(status, "1x25", name=validator, pod="v-0"),
            ],
            "alert_rule_test": [
                fired(
                    leader,
                    "3m",
                    expected(rules, leader, lease=fabric),
                    expected(rules, leader, lease=reservations),
                ),
                fired(
                    leader,
                    "10m",
                    expected(rules, leader, lease=fabric),
                    expected(rules, leader, lease=scheduler),
                ),
            ],
        },
        {  # claim-templates grows 20 a minute: above 100 from 6m, for 10 minutes by 16m; the
            # scheduler's long queue is not a claim controller's.
            "input_series": [
                series("workqueue_depth", "0+20x30", name="claim-templates", pod="t-0"),
                series("workqueue_depth", "0x30", name="claim-templates", pod="t-1"),
                series("workqueue_depth", "100x30", name="reservations", pod="r-0"),
                series("workqueue_depth", "500x30", name="scheduler", pod="s-0"),
                series("workqueue_depth", "500x30", name="reservations", namespace="other"),
            ],
            "alert_rule_test": [
                fired(queue, "10m"),
                fired(queue, "17m", expected(rules, queue, name="claim-templates")),
            ],
        },
    ]


def test_the_alerts_pass_promtool_and_each_fires_only_when_it_should(tmp_path: Path) -> None:
    groups = rule_groups(MONITORING)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    # Without a selector, every series is the installation's: `metric{}` must parse too.
    bare = rule_groups(RULE_ONLY)
    (tmp_path / "bare.yaml").write_text(yaml.safe_dump({"groups": bare}))
    checked = promtool("check", "rules", "rules.yaml", "bare.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS" in checked.stdout

    rules = alerts(groups)
    tests = cases(rules)
    tested = {t["alertname"] for case in tests for t in case["alert_rule_test"]}
    assert tested == {r["alert"] for r in rules}, "every alert has its test"
    unit = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", **case} for case in tests],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(unit, width=1000))
    ran = promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SUCCESS" in ran.stdout


async def test_the_dashboard_configmap_is_accepted_by_a_server_side_dry_run(
    kube: KubeAPI, api: Any
) -> None:
    namespace = await create_namespace(api)
    rendered = dashboards(render_chart(MONITORING, namespace=namespace))
    assert len(rendered) == 1
    assert await dry_run_all(kube, rendered) == {}


@pytest.mark.parametrize("value", [0, "900"])
def test_the_schema_refuses_a_bad_threshold(value: Any) -> None:
    rendered = helm_template({"monitoring": {"prometheusRule": {"pendingForSeconds": value}}})
    assert rendered.returncode != 0
    assert "/monitoring/prometheusRule/pendingForSeconds" in rendered.stderr
