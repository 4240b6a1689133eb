"""Records: the frozen type, the validator every record passes, the JSON-lines store, and the
columnar reader with its snapshots as a layer over it. Imports only the top level and envs.provenance."""
