"""What every kernel op shares: backend choice, dot products, chunk tables and Triton helpers."""
