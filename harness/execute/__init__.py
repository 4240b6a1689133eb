"""The run: steps, jobs and shards, scheduler, environment preparer, progress, runner, warm
worker and process groups. May import spec/, envs/, store/, the top level (report/ at the end)."""
