"""opal stages."""
