#!/usr/bin/python3
"""Parses GET /metrics of a live serve with prometheus_client's own parser (Debian's
python3-prometheus-client) and checks the families the docs promise (docs/cli.md, "GET
/metrics"). Usage: check_metrics.py URL ENV; prints "ok: N families" or raises."""
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main():
    url, env = sys.argv[1], sys.argv[2]
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers
        text = r.read().decode("utf-8")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {
        "comfy_orch_process_info": "gauge",
        "comfy_orch_pager_resident_bytes": "gauge",
        "comfy_orch_pinned_reserved_bytes": "gauge",
        "comfy_orch_cast_buffer_bytes": "gauge",
        "comfy_orch_cast_high_water_bytes": "gauge",
        "comfy_orch_device_free_bytes": "gauge",
        "comfy_orch_divergences": "gauge",
        "comfy_orch_budget_bytes": "gauge",
        # prometheus_client names a counter family without its _total suffix.
        "comfy_orch_calls": "counter",
        "comfy_orch_restarts": "counter",
        "comfy_orch_boundary_releases": "counter",
        "comfy_orch_evictions": "counter",
        "comfy_orch_frees": "counter",
        "comfy_orch_node_call_duration_seconds": "histogram",
    }
    for name, kind in expected.items():
        assert name in families, f"{name} missing; have {sorted(families)}"
        assert families[name].type == kind, f"{name} is {families[name].type}, not {kind}"
    processes = {s.labels["process"] for s in families["comfy_orch_process_info"].samples}
    assert "host" in processes and env in processes, processes
    calls = {s.labels["process"]: s.value for s in families["comfy_orch_calls"].samples}
    assert calls.get(env, 0) >= 1, calls
    hist = [s for s in families["comfy_orch_node_call_duration_seconds"].samples
            if s.labels.get("env") == env]
    count = [s.value for s in hist if s.name.endswith("_count")]
    assert count and count[0] >= 1, hist
    buckets = [s for s in hist if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == count[0], buckets
    values = [b.value for b in buckets]
    assert values == sorted(values), f"buckets are not cumulative: {values}"
    frees = {s.labels["process"]: s.value for s in families["comfy_orch_frees"].samples}
    assert frees.get(env, 0) >= 1, frees
    print(f"ok: {len(families)} families")


if __name__ == "__main__":
    main()
