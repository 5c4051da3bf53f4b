"""Language-model evaluation: perplexity and accuracy per task family, context length and depth.

- :mod:`.data`: the evaluation split (``synth_text`` test rows) checked against the row contract;
- :mod:`.batches`: equal-length batches, so no model ever sees padding;
- :mod:`.teacher_forced`: one forward pass per batch, scored at the labelled positions
  (perplexity of the filler text, MQAR recall);
- :mod:`.generation`: greedy continuations of prompts (NIAH, arithmetic);
- :mod:`.tasks`: how each task family turns a model's output into a score;
- :mod:`.results`: per-example scores aggregated per family, length and depth;
- :mod:`.lm`: the whole evaluation of one causal LM.
"""
