"""The local runtime: the same handlers on an embedded moto server."""
