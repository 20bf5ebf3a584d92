"""Plan authoring: what `capsule plan new` writes (the standard study, sized to a budget, its
rationale skeleton, the plan as TOML). What a plan costs is `capsule.costing`."""
