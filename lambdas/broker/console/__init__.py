"""The browser console (`GET /console`): static files the broker serves from its own code asset.

Not a protocol face: the page calls the native API like any client, with the token the user signs in
with. `assets` is imported on the first console request only (lambdas/broker/handler.py), so the send
path never loads it.
"""
