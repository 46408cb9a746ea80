"""A fleet of comfy-orch hosts on Ray (docs/fleet.md, "The Ray side"): `host_actor` runs one
`comfy-orch serve` on its node, and `python -m comfy_orch.fleet.driver` places one such actor on
each of N nodes and reports, as JSON lines, where each host answers and when Ray has lost or
restarted one.

This subpackage runs only in Ray's venv (.deps/ray, made by scripts/install-deps); nothing else
in comfy_orch imports it, and importing it alone imports no Ray."""
