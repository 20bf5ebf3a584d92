"""capsule: check a model card's IFEval claim with sealed plans, controls and signed evidence."""

__version__ = "0.1.0"
