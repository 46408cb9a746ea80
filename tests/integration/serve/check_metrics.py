#!/usr/bin/python3
"""Parses GET /metrics of a live serve with prometheus_client's own parser (Debian's
python3-prometheus-client) and checks the families the docs promise (docs/cli.md, "GET
/metrics"). Usage: check_metrics.py URL ENV [HOSTS]; prints "ok: N families" or raises.

With HOSTS (host-0,host-1,...), URL is a gateway's (docs/fleet.md, "Live views across the
fleet"): every sample but the gateway's own carries a host label (host-N), the serve hosts are
exactly HOSTS (their "host" process), each family has one HELP and one TYPE line, and the
gateway's families are there. ENV's calls and durations are checked on the hosts that ran it;
its frees are not (the gateway has no /free to ask for one)."""
import collections
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

GATEWAY = "comfy_orch_gateway_"


def main():
    url, env = sys.argv[1], sys.argv[2]
    hosts = sys.argv[3].split(",") if len(sys.argv) > 3 else None
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
    if hosts:
        expected.update({GATEWAY + "hosts": "gauge", GATEWAY + "hosts_up": "gauge",
                         GATEWAY + "host_up": "gauge", GATEWAY + "queue_pending": "gauge",
                         GATEWAY + "queue_running": "gauge"})
    for name, kind in expected.items():
        assert name in families, f"{name} missing; have {sorted(families)}"
        assert families[name].type == kind, f"{name} is {families[name].type}, not {kind}"
    host_of = (lambda s: s.labels.get("host")) if hosts else (lambda s: None)
    if hosts:
        for kind in ("HELP", "TYPE"):
            lines = [l.split()[2] for l in text.splitlines() if l.startswith(f"# {kind} ")]
            twice = [n for n, c in collections.Counter(lines).items() if c > 1]
            assert not twice, f"{kind} more than once for {twice}"
        for f in families.values():
            if f.name.startswith(GATEWAY):
                continue
            for s in f.samples:
                assert (host_of(s) or "").startswith("host-"), f"{s} has no host label"
        info_hosts = {host_of(s) for s in families["comfy_orch_process_info"].samples
                      if s.labels["process"] == "host"}
        assert info_hosts == set(hosts), f"the hosts' own processes: {info_hosts}, not {hosts}"
    processes = {s.labels["process"] for s in families["comfy_orch_process_info"].samples}
    assert "host" in processes and env in processes, processes
    calls = collections.Counter()
    for s in families["comfy_orch_calls"].samples:
        calls[s.labels["process"]] += s.value
    assert calls.get(env, 0) >= 1, calls
    by_host = collections.defaultdict(list)
    ran = False
    for s in families["comfy_orch_node_call_duration_seconds"].samples:
        if s.labels.get("env") == env:
            by_host[host_of(s)].append(s)
    assert by_host, "no durations of " + env
    for hist in by_host.values():
        count = [s.value for s in hist if s.name.endswith("_count")]
        assert len(count) == 1, hist
        ran = ran or count[0] >= 1
        buckets = [s for s in hist if s.name.endswith("_bucket")]
        assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == count[0], buckets
        values = [b.value for b in buckets]
        assert values == sorted(values), f"buckets are not cumulative: {values}"
    assert ran, f"no call of {env} counted: {dict(by_host)}"
    if not hosts:
        frees = {s.labels["process"]: s.value for s in families["comfy_orch_frees"].samples}
        assert frees.get(env, 0) >= 1, frees
    print(f"ok: {len(families)} families")


if __name__ == "__main__":
    main()
