"""The benchmark client: measures a deployed endpoint as the field report did
(`python -m infra.bench`)."""
