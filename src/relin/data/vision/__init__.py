"""The drawn scenes of LIA-MTR (captions, conversations, the MME-style set) and LLaVA's real-data formats."""
