"""A Hydra launcher that runs multirun jobs concurrently as Ray tasks (``hydra/launcher=ray``)."""
