"""The run: the pipeline steps, jobs and shards, the runner, the warm worker and process groups.
May import spec/, envs/, store/ and the top level (report/ only to report at the end)."""
