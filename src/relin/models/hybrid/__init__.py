"""The hybrid causal LM shared by OPAL and HedgeMamba, registered with the transformers Auto classes
(``AutoConfig`` / ``AutoModelForCausalLM`` load a saved hybrid once ``relin.models.hybrid`` is imported)."""
from transformers import AutoConfig, AutoModelForCausalLM

from .cache import HybridCache, StaticHybridCache
from .configuration import MIXER_TYPES, HybridConfig
from .modeling import HybridForCausalLM, HybridModel

AutoConfig.register(HybridConfig.model_type, HybridConfig, exist_ok=True)
AutoModelForCausalLM.register(HybridConfig, HybridForCausalLM, exist_ok=True)

__all__ = ["MIXER_TYPES", "HybridCache", "HybridConfig", "HybridForCausalLM", "HybridModel", "StaticHybridCache"]
