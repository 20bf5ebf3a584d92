"""Pre-registration: the plan format (dataclasses, loader, checks, control kinds, backend specs, ad-hoc
arms), metric names, the ledger, sealing. Writing and pricing plans is `capsule.authoring`'s."""
