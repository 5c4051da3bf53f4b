"""The vision-language model of the LIA-MTR reproduction: a CLIP vision tower (:mod:`.tower`), a bridge
(:mod:`relin.layers.bridges`), a chat LLM (:mod:`.llm`) with its chat format (:mod:`.chat`), joined in
:class:`.model.BridgeVLM`."""
