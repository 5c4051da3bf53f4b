"""The exact families (walks, lists) are read in one teacher-forced pass: it must score what greedy generation scores,
answer by answer, on a softmax-attention model and on a hybrid of Gated DeltaNet and attention (whose decode runs
the recurrent step, its forward the chunk kernel), for a family scored with its eos (lists) and one scored on its
answer alone (walks)."""
import pytest
import torch
from datasets import Dataset

from relin.config.eval import EvalConfig
from relin.data.rows import answer_row
from relin.eval.generation import continuations, greedy_generator
from relin.eval.lm import evaluate_lm
from relin.eval.tasks import TASKS
from relin.models.hybrid import HybridConfig, HybridForCausalLM

VOCAB, EOS, BOS = 61, 1, 2


def _model(mixers: list[str], seed: int) -> HybridForCausalLM:
    config = HybridConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=len(mixers),
                          num_attention_heads=2, num_key_value_heads=2, head_dim=16, mixer_types=mixers,
                          tie_word_embeddings=False, max_position_embeddings=128, gdn={"qk_norm": False},
                          eos_token_id=EOS, pad_token_id=0, kernel_backend="torch")
    torch.manual_seed(seed)
    model = HybridForCausalLM(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("weight") and "norm" not in name:
                p.normal_(0.0, 0.3)        # peaked logits: greedy paths that repeat, with margins between tokens
    return model


class _Tokenizer:
    eos_token_id, pad_token_id = EOS, 0


def _rows(model, count: int, answer_len: int, seed: int, task: str) -> list[dict]:
    """Prompts with three kinds of gold: the model's own greedy answer, closed by the token greedy writes next as the
    row's end token (exact 1), that answer with one token changed at a random place (exact 0), and its greedy answer
    cut short by an early eos (exact 0 when the family's eos is scored)."""
    gen = torch.Generator().manual_seed(seed)
    prompts = [[BOS, *torch.randint(3, VOCAB, (int(torch.randint(3, 9, (), generator=gen)),), generator=gen).tolist()]
               for _ in range(count)]
    greedy = continuations(greedy_generator(model, None, 0), prompts, answer_len + 1, 8, None)
    rows = []
    for i, (prompt, own) in enumerate(zip(prompts, greedy)):
        answer, end = own[:answer_len], EOS
        if i % 3 == 0:
            end = own[answer_len]
        elif i % 3 == 1:
            at = int(torch.randint(answer_len, (), generator=gen))
            answer = answer[:at] + [3 + (answer[at] - 2) % (VOCAB - 3)] + answer[at + 1:]
        elif i % 3 == 2:
            answer = own[:answer_len // 2]
        rows.append(answer_row(task, BOS, end, prompt[1:], answer, answer="", answers=[""],
                               length=len(prompt) + len(answer) + 1))
    return rows


@pytest.mark.parametrize("task", ["list_copy", "walk"])
@pytest.mark.parametrize("mixers", [["attention", "attention"], ["gdn", "attention", "gdn"]],
                         ids=["attention", "gdn hybrid"])
def test_teacher_forced_exact_match_scores_what_greedy_generation_does(mixers, task):
    model = _model(mixers, seed=len(mixers))
    rows = _rows(model, 36, answer_len=12, seed=7, task=task)
    scoring = TASKS[task]
    generated = continuations(greedy_generator(model, None, 0), [r["input_ids"][:r["prompt_len"]] for r in rows],
                              max(scoring.budget(r) for r in rows), 8, None)
    by_generation = [scoring.score_tokens(tokens, row) for tokens, row in zip(generated, rows)]
    result = evaluate_lm(model, Dataset.from_list(rows), _Tokenizer(), EvalConfig(batch_size=8), name="m")
    assert [s.hits for s in result.scores] == by_generation
    assert 0 < sum(by_generation) < len(rows), "both outcomes occur: the comparison can fail"


def test_a_walk_is_scored_on_its_items_and_a_list_with_its_eos():
    """The same gold and the same greedy tokens: written right but not stopped, a walk scores and a list does not."""
    row = answer_row("walk", BOS, EOS, [5, 6], [7, 8, 9], answer="", answers=[""], length=7)
    right_unstopped, wrong = [7, 8, 9, 9], [7, 3, 9, EOS]
    assert TASKS["walk"].score_tokens(right_unstopped, row) == 1.0
    assert TASKS["list_copy"].score_tokens(right_unstopped, row) == 0.0
    assert TASKS["walk"].score_tokens(wrong, row) == 0.0
    assert TASKS["list_copy"].score_tokens([7, 8, 9, EOS], row) == 1.0
