"""Synthetic text tasks (MQAR, RULER-style NIAH, arithmetic, filler language) and the project's tokenizer."""
