"""The engine: queues, shard maps, publish, consume and auth over the storage adapters."""
