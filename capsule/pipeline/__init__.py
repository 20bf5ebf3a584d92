"""The pipeline: run directories, the stages of `capsule reproduce`, one arm of `capsule generate`,
a run's report written or checked, re-signing a finished run."""
