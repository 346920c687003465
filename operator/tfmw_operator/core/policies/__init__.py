"""The run-policy rules: one module each, each returning a verdict (verdicts.py)."""
