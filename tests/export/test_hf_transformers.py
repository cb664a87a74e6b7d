"""The Hugging Face layout, checked by the loader most users have: PyTorch + transformers, in their
own venv (`make hf-loader`: build/hfloader/venv; tests/support/hfloader.sh), run in a subprocess
(tests/support/hf_loader_probe.py). AutoModelForCausalLM and AutoTokenizer read our exported
directories as they are: unlike keras-hub (tests/export/test_hf.py), transformers honours every
setting of config.json (activation_function, rms_norm_eps, rope_theta, head_dim, the QK-norms'
eps), so nothing is handed over and a disagreement is a bug in our config.json. Checked: the
class per model.arch, float32 logits equal ours within 1e-4 on a fixed batch (weights at a
trained model's scale), greedy generations equal ours (PAD and BOS banned, stop at EOS: our
serving's rule, which generation_config.json carries), the tokenizer's ids equal ours on a test
corpus with multilingual text (bytes and SentencePiece BPE), and that transformers' generate
reads generation_config.json. Without the venv these tests skip naming why (in CI they fail,
unless the install script stated the limit: the CPU wheel of torch absent)."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from components.config import ModelConfig
from components.serving.hf import CONFIG_FILE, GENERATION_FILE, directory, mapping
from components.tokenizer.byte_level import BOS_ID, EOS_ID, PAD_ID, ByteTokenizer
from tests.export.conftest import CONTEXT, tiny_model, trained_tiny_model
from tests.support.hf_models import BATCH, interleave_rotary
from tests.support.texts import corpus
from tests.support.hfloader import LOCK, hf_loader_python, run_probe

pytestmark = pytest.mark.slow   # three trainings, a SentencePiece model and one torch process: ~90 s

ARCHS = ("gpt2", "llama", "qwen3")
CLASSES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM"}
PROMPTS = [[257, 104, 101, 108, 108], [257, 123, 34, 97, 34]]
NEW_TOKENS = CONTEXT - len(PROMPTS[0])
TOLERANCE = 1e-4
QWEN3 = dict(arch="llama", n_layer=2, n_head=2, d_model=32, n_kv_head=1, qk_norm=True,
             tie_embeddings=False, norm_eps=1e-6, rope_theta=5000.0)
# config.json mistakes the logits test must catch (each a plausible converter bug): GPT-2's usual
# tanh GELU instead of our exact one, transformers' default eps instead of model.norm_eps, the
# Llama default rotary base instead of model.rope_theta. And the interleaved rotary pairing.
WRONG_CONFIGS = {"gpt2-gelu_new": ("gpt2", {"activation_function": "gelu_new"}),
                 "llama-eps": ("llama", {"rms_norm_eps": 1e-2}),
                 "qwen3-eps": ("qwen3", {"rms_norm_eps": 1e-2}),
                 "qwen3-rope_theta": ("qwen3", {"rope_theta": 10000.0})}


def trained_models() -> dict:
    """Weights at a trained model's scale (200 Adam steps on stdlib bytes) for each class."""
    return {"gpt2": trained_tiny_model("gpt2"), "llama": trained_tiny_model("llama"),
            "qwen3": trained_tiny_model("llama", config=ModelConfig(**QWEN3))}


def generating_models() -> dict:
    """N(0, 0.3) weights: clear argmax margins, so greedy choices do not hinge on rounding."""
    from components.model.gpt import build_model
    from components.tokenizer.byte_level import VOCAB_SIZE
    qwen3 = build_model(ModelConfig(**QWEN3), CONTEXT, vocab_size=VOCAB_SIZE)
    rng = np.random.RandomState(1)
    qwen3.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in qwen3.get_weights()])
    return {"gpt2": tiny_model(arch="gpt2"), "llama": tiny_model(arch="llama"), "qwen3": qwen3}


def bos_loving_model():
    """A GPT-2 whose unbanned argmax is BOS at every step (ln_f's offset on one width and BOS's
    embedding there): what a generate that ignored generation_config.json would emit."""
    model = tiny_model(arch="gpt2")
    beta = np.zeros(model.ln_f.beta.shape, "float32")
    beta[0] = 2.0
    model.ln_f.beta.assign(beta)
    table = model.token_embedding.embeddings.numpy()
    table[BOS_ID, 0] = 5.0
    model.token_embedding.embeddings.assign(table)
    return model


def sentencepiece_bpe():
    from components.tokenizer import training
    from components.tokenizer.sentencepiece_model import SentencePieceTokenizer
    from tests.support.texts import stdlib_texts
    return SentencePieceTokenizer(training.train_sentencepiece(stdlib_texts(["json", "email"]), 400, "bpe"))


def export(model, root, name, tokenizer=None) -> str:
    out = os.path.join(str(root), name)
    directory.write_hf_directory(model, tokenizer or ByteTokenizer(), out)
    return out


def edit_config(hf_dir: str, changes: dict) -> None:
    path = os.path.join(hf_dir, CONFIG_FILE)
    config = json.load(open(path))
    config.update(changes)
    json.dump(config, open(path, "w"))


def copy_with(hf_dir: str, root, name: str, changes: dict) -> str:
    out = os.path.join(str(root), name)
    shutil.copytree(hf_dir, out)
    edit_config(out, changes)
    return out


def interleaved_export(model, root) -> str:
    """Our llama with q/k rows permuted for the interleaved (GPT-J/Meta) rotary pairing."""
    out = os.path.join(str(root), "llama-interleaved")
    original = mapping.hf_tensors
    mapping.hf_tensors = lambda m: interleave_rotary(original(m), m)
    try:
        return export(model, root, "llama-interleaved")
    finally:
        mapping.hf_tensors = original


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Every directory exported, then one run of transformers over all of them:
    (transformers' result, its output folder, our models, the SentencePiece tokenizer)."""
    hf_loader_python()                                 # skip before any export work
    root = tmp_path_factory.mktemp("hf-transformers")
    trained, generating = trained_models(), generating_models()
    sp = sentencepiece_bpe()
    dirs = {name: export(model, root, name) for name, model in trained.items()}
    dirs.update({f"{name}-generate": export(model, root, f"{name}-generate")
                 for name, model in generating.items()})
    dirs["bos-loving"] = export(bos_loving_model(), root, "bos-loving")
    dirs["bos-loving-no-generation-config"] = shutil.copytree(
        dirs["bos-loving"], os.path.join(str(root), "bos-loving-no-generation-config"))
    os.remove(os.path.join(dirs["bos-loving-no-generation-config"], GENERATION_FILE))
    for name, (arch, changes) in WRONG_CONFIGS.items():
        dirs[name] = copy_with(dirs[arch], root, name, changes)
    dirs["llama-interleaved"] = interleaved_export(trained["llama"], root)
    from components.model.gpt import build_model
    sp_model = build_model(ModelConfig(arch="llama", n_layer=1, n_head=2, d_model=32), CONTEXT,
                           vocab_size=sp.vocab_size)
    dirs["sentencepiece"] = export(sp_model, root, "sentencepiece", sp)
    batch = BATCH.tolist()
    models = ([{"name": n, "dir": dirs[n], "batch": batch} for n in ARCHS + tuple(WRONG_CONFIGS)]
              + [{"name": "llama-interleaved", "dir": dirs["llama-interleaved"], "batch": batch}]
              + [{"name": n, "dir": dirs[n], "prompts": PROMPTS, "max_new_tokens": NEW_TOKENS}
                 for n in [f"{a}-generate" for a in ARCHS] + ["bos-loving",
                                                             "bos-loving-no-generation-config"]])
    texts = corpus()
    request = {"models": models, "tokenizers": [
        {"name": "bytes", "dir": dirs["gpt2"], "texts": texts},
        {"name": "sentencepiece", "dir": dirs["sentencepiece"], "texts": texts}]}
    result = run_probe(request, os.path.join(str(root), "transformers"))
    ours = dict(trained, **{f"{a}-generate": m for a, m in generating.items()},
                **{"bos-loving": bos_loving_model()})
    return result, os.path.join(str(root), "transformers"), ours, sp


def their_logits(loaded, name: str) -> np.ndarray:
    return np.load(os.path.join(loaded[1], name + ".npy"))


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_logits_equal_ours(loaded, arch):
    result, _, ours, _ = loaded
    assert result["models"][arch]["class"] == CLASSES[arch]
    assert result["models"][arch]["dtype"] == "torch.float32"
    theirs, mine = their_logits(loaded, arch), ours[arch](BATCH).numpy()
    assert theirs.shape == mine.shape
    assert np.abs(theirs - mine).max() < TOLERANCE
    assert np.abs(mine).max() > 1.0          # logits of a size where a wrong mapping shows


@pytest.mark.parametrize("name", sorted(WRONG_CONFIGS) + ["llama-interleaved"])
def test_a_wrong_config_or_rotary_pairing_is_caught(loaded, name):
    """The logits test can fail: each plausible converter mistake moves transformers' logits
    past the tolerance (so our config.json's values are the ones that matter)."""
    arch = WRONG_CONFIGS[name][0] if name in WRONG_CONFIGS else "llama"
    mine = loaded[2][arch](BATCH).numpy()
    assert np.abs(their_logits(loaded, name) - mine).max() > 2 * TOLERANCE


def our_greedy(model, prompt: list[int], steps: int) -> list[int]:
    """Our serving's greedy rule on our Keras model: PAD and BOS never chosen (decoding.ban),
    stop after EOS; no cache, the whole window."""
    ids = list(prompt)
    for _ in range(steps):
        logits = model(np.array([ids], np.int32)).numpy()[0, -1]
        logits[[PAD_ID, BOS_ID]] = -np.inf
        ids.append(int(np.argmax(logits)))
        if ids[-1] == EOS_ID:
            break
    return ids


@pytest.mark.parametrize("arch", ARCHS)
def test_transformers_greedy_generation_equals_ours(loaded, arch):
    result, _, ours, _ = loaded
    theirs = result["models"][f"{arch}-generate"]["greedy"]
    assert theirs == [our_greedy(ours[f"{arch}-generate"], p, NEW_TOKENS) for p in PROMPTS]
    assert all(len(set(row[len(PROMPTS[0]):])) > 1 for row in theirs)   # not one token repeated


def test_transformers_generate_reads_generation_config(loaded):
    """generation_config.json's ids and suppressed tokens are what transformers uses: on a model
    whose raw argmax is always BOS its generate never emits BOS and equals ours; the same
    directory without generation_config.json emits BOS."""
    result, _, ours, _ = loaded
    read = result["models"]["bos-loving"]["generation_config"]
    assert read == directory.generation_config(ByteTokenizer().special_ids())
    theirs = result["models"]["bos-loving"]["greedy"]
    assert theirs == [our_greedy(ours["bos-loving"], p, NEW_TOKENS) for p in PROMPTS]
    assert all(BOS_ID not in row[1:] for row in theirs)
    without = result["models"]["bos-loving-no-generation-config"]["greedy"]
    assert all(row[len(PROMPTS[0])] == BOS_ID for row in without)


def test_transformers_tokenizer_ids_equal_ours(loaded):
    result, _, _, sp = loaded
    texts = corpus()
    for name, ours in (("bytes", ByteTokenizer()), ("sentencepiece", sp)):
        theirs = result["tokenizers"][name]
        assert theirs["class"] == "TokenizersBackend" or theirs["class"].endswith("Fast")
        assert theirs["ids"] == [ours.encode(t).tolist() for t in texts], name
        decoded = [ours.decode(ours.encode(t).tolist()).decode("utf-8") for t in texts]
        assert theirs["decoded"] == decoded, name
        assert theirs["specials"] == {r: getattr(ours, f"{r}_id") for r in ("pad", "bos", "eos")}
    assert any(ord(ch) > 0x3000 for t in texts for ch in t)   # CJK and emoji are in the corpus


def test_the_loader_is_the_one_locked():
    """The venv holds the versions tests/support/hfloader.lock pins (torch's CPU build)."""
    python = hf_loader_python()
    out = subprocess.run([python, "-c", "import torch, transformers; print(torch.__version__, "
                          "transformers.__version__, torch.cuda.is_available())"],
                         capture_output=True, text=True, check=True).stdout.split()
    pins = dict(line.split(" ")[0].split("==") for line in open(LOCK) if "==" in line)
    assert out == [pins["torch"], pins["transformers"], "False"]
