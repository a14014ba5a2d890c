"""Everything demo (`make run`): seed, runner, demo model, demo catalog, inventory server; no product code imports it."""
