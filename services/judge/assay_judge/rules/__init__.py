"""The rule judge: deterministic checks over sealed files (no artifacts, claims, injections, the task's reference checks)."""
