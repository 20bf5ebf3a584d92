"""The pipeline: run directories, the stages of `capsule reproduce`, re-signing a finished run."""
