"""Sluice: serverless, sharded queues and bottomless streams on AWS."""
