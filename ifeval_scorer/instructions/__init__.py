"""IFEval's instructions, one module per family (the part of the id before the colon)."""
