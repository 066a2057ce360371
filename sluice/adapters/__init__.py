"""Small adapters over AWS: the only place that imports boto3 or reads AWS error codes."""
