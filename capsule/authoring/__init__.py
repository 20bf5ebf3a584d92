"""Plan authoring: what `capsule plan new` writes (the standard study, sized to a budget, its
rationale skeleton, the plan as TOML) and what `capsule plan cost` prints (the throughput and
response-length tables, a plan's estimate on a device)."""
