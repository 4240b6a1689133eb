"""What the project's files declare: matrix.yaml, entry.yaml, a repro.py's VARIANTS, a domain's
triage.yaml, all read through the one bounded YAML reader. Imports only the top level."""
