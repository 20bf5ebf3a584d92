"""The report: number formatting, RESULTS.md blocks, plots, and checks that quoted numbers match."""
