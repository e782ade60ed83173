"""Reusable Pulumi components for the gemma-graviton deployment; they know nothing about stacks."""
