"""The machine: host, GPU, software and numerics probes, the manifest, its diff, preflight (doctor)."""
