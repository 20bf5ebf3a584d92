"""Analysis: per-prompt outcomes, statistics, paired comparisons, controls, analysis.json and its schema."""
