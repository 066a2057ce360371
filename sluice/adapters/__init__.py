"""Small adapters over AWS: the only place that imports botocore (or boto3) or reads AWS error codes."""
