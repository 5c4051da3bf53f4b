"""relin: attention-linearization papers (LIA-MTR, HedgeMamba, OPAL) reproduced end to end.

Importing relin registers its model classes with transformers' Auto classes (:mod:`relin._auto`), so that
``AutoModelForCausalLM.from_pretrained`` loads any model a relin stage saved.
"""
from ._auto import register_on_import

register_on_import()
