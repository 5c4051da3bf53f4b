"""Weight-copy conversions of teachers into hybrid students (OPAL: attention -> Gated DeltaNet / SWA)."""
