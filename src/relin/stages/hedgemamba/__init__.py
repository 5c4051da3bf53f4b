"""hedgemamba stages."""
