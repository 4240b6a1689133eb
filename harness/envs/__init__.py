"""Target environments: backends (uv, an existing interpreter), their probe and capabilities,
and the provenance of the machine. May import spec/ and the top level."""
