"""What a training run consumed, the figure the papers' budgets are compared on."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Budget:
    """What a run consumed, counted exactly over all ranks: optimizer steps, tokens the model read in its
    training forward passes (prompts included, padding not), and the objective's target tokens (for a
    distillation objective, the positions the teacher scored), in total and per step."""

    optimizer_steps: int = 0
    forward_tokens: int = 0
    target_tokens: int = 0
    targets_per_step: list[int] = field(default_factory=list)

    def add(self, forward_tokens: int, target_tokens: int) -> None:
        self.optimizer_steps += 1
        self.forward_tokens += forward_tokens
        self.target_tokens += target_tokens
        self.targets_per_step.append(target_tokens)

    def as_dict(self) -> dict:
        return {"optimizer_steps": self.optimizer_steps, "forward_tokens": self.forward_tokens,
                "target_tokens": self.target_tokens, "targets_per_step": list(self.targets_per_step)}
