"""The command line: `tftrain` (main) and one module per command; each parses its options and calls a wing."""
