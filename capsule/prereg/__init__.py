"""Pre-registration: the plan format (dataclasses, loader, checks, ad-hoc arms), metrics, ledger, sealing."""
