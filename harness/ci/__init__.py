"""Beyond one machine: the nightly fan-out, diff of two stores, tox.ini from matrix.yaml.
May import every stage but cli/."""
