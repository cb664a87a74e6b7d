"""Small input corpora for pipeline runs, and the settings of a run that reads and writes an object
store."""

from components.storage import fs
from tests.e2e.conftest import ONE_DEVICE, PLAIN_STEP


def _tiny_corpus(root: str) -> None:
    import random
    rng = random.Random(0)
    words = "def return class import for while if else print self value data model train".split()
    for i in range(8):
        with fs.open_file(f"{root}/{'ab'[i % 2]}/f{i}.py", "w") as fh:
            fh.write("".join(" ".join(rng.choice(words) for _ in range(8)) + "\n" for _ in range(120)))


def s3_args(prefix: str) -> list[str]:
    return ["--set", f"data.input={prefix}/corpus", "--set", f"orchestrator.pipeline_root={prefix}/root",
            "--set", f"orchestrator.serving_dir={prefix}/serving",
            "--set", "data.eval_fraction=0.3", "--set", "data.seq_len=64",
            "--set", "train.train_steps=10", "--set", "train.warmup_steps=2",
            "--set", "train.checkpoint_every=5", "--set", "train.log_every=5",
            # One block: every stage's reads and writes on s3:// are the same for any depth, and
            # the export (the Trainer's longest part) traces each block's graph once per signature.
            "--set", "model.n_layer=1", "--set", "train.eval_batches=2",
            # 10 steps learn little: a loose threshold so the model is blessed and pushed.
            "--set", "eval.max_loss=10", "--set", "eval.max_batches=2", "--set", "eval.batch_size=8",
            "--set", "eval.sets=[]",   # the held-out set and code tasks: the chain's
            *ONE_DEVICE, *PLAIN_STEP]
