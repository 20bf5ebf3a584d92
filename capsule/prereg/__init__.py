"""Pre-registration: the plan format (dataclasses, loader, checks), metrics, control kinds, ledger."""
