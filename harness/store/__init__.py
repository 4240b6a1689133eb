"""Records: the frozen type, the validator every record passes, the JSON-lines store, the
columnar reader with its snapshots as a layer over it, and the report's one door into them
(changes.py). Imports only the top level and envs.provenance."""
