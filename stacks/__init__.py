"""The Sluice CDK app: one construct per concern, composed by `SluiceStack`."""
