"""Pre-registration: the plan format (dataclasses, loader, checks), metric names, the ledger, sealing."""
