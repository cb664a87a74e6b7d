"""The PyTorch peer of benchmarks/peer_torch.py is bigtrain's model and schedule: its llama module
(benchmarks/peer/torch_llama.py) loaded with a bigtrain GPT's weights gives that GPT's logits
within float32 tolerance (one torch process in the hf-loader venv; skipped naming why without
it, as the Hugging Face export tests), and its numpy schedule equals components/training/
optimizer.py's at every step of both schedules (no torch needed)."""

import dataclasses
import json
import os
import subprocess

import numpy as np
import pytest

from components.config import ModelConfig, TrainConfig
from tests.support.hfloader import hf_loader_python

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOLERANCE = 1e-4


@pytest.mark.parametrize("schedule", ["wsd", "cosine"])
def test_the_peer_schedule_is_bigtrains(schedule):
    from benchmarks.peer.plain import learning_rates
    from components.training.optimizer import make_schedule
    t = TrainConfig(train_steps=120, warmup_steps=7, lr_schedule=schedule)
    theirs = np.array([float(make_schedule(t)(s)) for s in range(t.train_steps)], np.float32)
    np.testing.assert_allclose(learning_rates(t.train_steps, dataclasses.asdict(t)), theirs,
                               rtol=1e-6)


@pytest.mark.slow   # one torch process: ~5 CPU-s, ~18 s wall on the busy 2-core VM (torch's import)
def test_the_peer_block_gives_bigtrains_logits(tmp_path):
    """Grouped-query attention (2 key/value heads of 4), a non-default rotary base and norm eps,
    weights at N(0, 0.3) (norm scales included, so a missing scale shows)."""
    python = hf_loader_python()
    from benchmarks.peer_torch import export_weights
    from components.model.gpt import build_model
    from components.model.shapes import swiglu_hidden
    m = ModelConfig(n_layer=2, n_head=4, n_kv_head=2, d_model=32, rope_theta=5000.0, norm_eps=1e-6)
    context, vocab = 16, 259
    model = build_model(m, context, vocab_size=vocab)
    rng = np.random.RandomState(3)
    model.set_weights([rng.normal(0, 0.3, w.shape).astype("float32") for w in model.get_weights()])
    ids = rng.randint(0, vocab, (2, context))
    export_weights(model, str(tmp_path / "weights.npz"))
    request = {"mode": "logits", "seed": 0, "weights": str(tmp_path / "weights.npz"),
               "logits_of": ids.tolist(), "logits_out": str(tmp_path / "logits.npy"),
               "document_sets": {},
               "model": dict(vocab_size=vocab, d_model=32, n_layer=2, n_head=4, n_kv_head=2,
                             hidden=swiglu_hidden(32, 4), norm_eps=1e-6, rope_theta=5000.0,
                             context=context)}
    (tmp_path / "request.json").write_text(json.dumps(request), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TF_"))}
    env.update(PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    done = subprocess.run([python, "-m", "benchmarks.peer.torch_llama", str(tmp_path / "request.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert json.loads(done.stdout.splitlines()[-1])["parameters"] == sum(
        int(np.prod(v.shape)) for v in model.trainable_variables)
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), model(ids).numpy(),
                               atol=TOLERANCE, rtol=0)
