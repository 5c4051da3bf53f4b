"""The one training loop, its objectives, schedules, batching, checkpoints and backends."""
