"""What every HTTP handler shares: the resolver factory, the error registry, auth and the engine."""
