"""The run: steps, jobs and shards, scheduler, preparer, progress, runner, warm worker and
process groups. May import spec/, envs/, store/, the top level (aggregate/, report/ at the end)."""
