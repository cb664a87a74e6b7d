"""bigtrain's training loop against a nanoGPT-style PyTorch loop of the same block, optimizer,
schedule and data (issue 58, deliverable 4; docs/benchmarks.md, "The PyTorch peer, 2026-12-07").

    make setup hf-loader
    nice .venv/bin/python benchmarks/peer_torch.py [--home HOME] [--preset tiny] [--set KEY=VALUE]
        [--steps N] [--seeds 1,2,3] [--threads 1] [--out build/peer/run] [--no-equal-wall]
    .venv/bin/python benchmarks/peer_torch.py --table build/peer/run/results.jsonl   # reprint
    .venv/bin/python benchmarks/peer_torch.py --check-hf HOME/serving/gpt/VERSION/hf

HOME (default build/peer/home): a bigtrain home with a finished data stage (`bigtrain run
--preset tiny --home HOME --set 'push.formats=[hf]'` for --check-hf; without Examples there the
driver runs `--until TextExampleGen` first); its newest Examples artifact gives the train split (every row of
Split-train, exported once to a .npy) and the documents both sides are scored on, chosen by
bigtrain's own rule (components/evaluation/documents.py choose_documents): the eval split's and
each eval.sets held-out set's (bigtrain_code by default), exported as ids + UTF-8 byte counts.

Per seed, in an order rotated from seed to seed (so neither side always runs first on a busy
machine), three training runs of the same steps and batch:
  bigtrain   components/training/loop.py train() with the config from --preset / --set as the
             CLI builds it (strategy, XLA, threads, input order: whatever the config and its
             defaults say; nothing is set here but the seed, the steps, validation off
             (train.eval_every=0) and one checkpoint at the end), scored in process by
             documents.document_nats, the Evaluator's scorer;
  eager      benchmarks/peer/torch_llama.py in the hf-loader venv, --threads threads;
  compile    the same under torch.compile; its cache (TORCHINDUCTOR_CACHE_DIR under --out) is
             warmed by one short compiled run before the first seed.
tokens/s is the steady rate (steps after the first log window, --warmup), per second of wall
and per second of the process's CPU time (all its threads: TF's too); wall_s the whole
training call (build, trace or compile, steps). Then "equal wall-clock": the slower of bigtrain
and torch.compile (by mean wall) is run again, per seed, for the steps its steady rate fits in
the faster one's wall time (its schedule over those steps), and scored.
Checks before any figure: the schedule re-implemented for torch equals bigtrain's at every step;
the torch model loaded with the first bigtrain model's weights scores its documents as
bigtrain's scorer does (printed side by side, 4 decimals).
Prints the machine, one JSON line per run (also --out/results.jsonl) and the table (mean +- sd).
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks._machine import describe  # noqa: E402
from benchmarks.peer.plain import learning_rates  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TORCH_PYTHON = os.path.join(ROOT, "build", "hfloader", "venv", "bin", "python")


def newest_examples(home: str, preset: str, overrides: list) -> str:
    """The home's newest Examples artifact; without one, the data stage is run there first."""
    from runners.local.home import PIPELINES_FOLDER
    pattern = os.path.join(home, PIPELINES_FOLDER, "*", "TextExampleGen", "examples", "*")
    if not glob.glob(pattern):
        command = [os.path.join(os.path.dirname(sys.executable), "bigtrain"), "run", "--preset",
                   preset, "--home", home, "--until", "TextExampleGen"]
        command += [f"--set={item}" for item in overrides]
        print("no Examples in the home: " + " ".join(command), flush=True)
        subprocess.run(command, check=True)
    return sorted(glob.glob(pattern), key=os.path.getmtime)[-1]


def save_documents(path: str, documents: list, tokenizer) -> None:
    sizes = [len(tokenizer.decode(ids)) for ids in documents]
    offsets = np.cumsum([0] + [len(ids) for ids in documents])
    np.savez(path, ids=np.concatenate(documents).astype(np.int32), offsets=offsets,
             bytes=np.asarray(sizes, np.int64))


def export_data(config, examples: str, out: str) -> dict:
    """The train rows (.npy) and each document set (.npz) under out; reused when present."""
    from components.evaluation import documents as documents_lib
    from components.evaluation.held_out_sets import set_documents
    from components.text_example_gen import shards
    from components.text_example_gen.eval_split import eval_split_documents
    from components.tokenizer import artifact as tokenizer_artifact
    tokenizer = tokenizer_artifact.examples_tokenizer(examples)
    paths = {"train_rows": os.path.join(out, "train_rows.npy"),
             "eval_split": os.path.join(out, "eval_split.npz")}
    paths.update({s.name: os.path.join(out, f"set_{s.name}.npz") for s in config.eval.sets})
    if not os.path.exists(paths["train_rows"]):
        files = sorted(glob.glob(os.path.join(shards.split_dir(examples, "train"), "*")))
        rows = [w for f in files for w in shards.read_windows(f)]
        np.save(paths["train_rows"], np.stack(rows).astype(np.int32))
    if not os.path.exists(paths["eval_split"]):
        chosen = documents_lib.choose_documents(
            eval_split_documents(examples, "the peer benchmark", tokenizer),
            tokenizer.token_byte_lengths(), config.eval.document_bytes,
            config.eval.max_document_bytes)
        save_documents(paths["eval_split"], chosen, tokenizer)
    for s in config.eval.sets:
        if not os.path.exists(paths[s.name]):
            chosen = set_documents(s, tokenizer, config.eval.max_document_bytes)
            save_documents(paths[s.name], chosen.documents, tokenizer)
    return paths


def peer_request(config, data: dict, out: str, threads: int) -> dict:
    """What torch_llama.py needs of the config: the model, train.*, the scoring rule."""
    from components.evaluation.documents import stride_context_for
    from components.model.shapes import swiglu_hidden
    from components.tokenizer.spec import token_spec
    m, spec = config.model, token_spec(config.data)
    if m.arch != "llama" or m.qk_norm or not m.tie_embeddings or m.dropout:
        sys.exit("the peer implements model.arch=llama, tied, no QK-norm, no dropout")
    model = dict(vocab_size=spec.vocab_size, d_model=m.d_model, n_layer=m.n_layer, n_head=m.n_head,
                 n_kv_head=m.n_kv_head or m.n_head, hidden=swiglu_hidden(m.d_model, m.mlp_ratio,
                                                                         m.mlp_hidden),
                 norm_eps=m.norm_eps, rope_theta=m.rope_theta, context=config.data.seq_len)
    return {"model": model, "train": dataclasses.asdict(config.train), "threads": threads,
            "train_rows": data["train_rows"],
            "document_sets": {k: v for k, v in data.items() if k != "train_rows"},
            "scoring": dict(stride_context=stride_context_for(config.eval.stride_context,
                                                              config.data.seq_len),
                            batch_size=config.eval.batch_size, bos_id=spec.bos_id,
                            eos_id=spec.eos_id, pad_id=spec.pad_id)}


def run_peer(request: dict, out: str) -> dict:
    """torch_llama.py in the hf-loader venv on one request; its JSON line."""
    if not os.path.exists(TORCH_PYTHON):
        sys.exit(f"{TORCH_PYTHON} is missing: run `make hf-loader`")
    handle, path = tempfile.mkstemp(suffix=".json", dir=out)
    with os.fdopen(handle, "w", encoding="utf-8") as fh:
        json.dump(request, fh)
    threads = str(request["threads"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "TF_"))}
    env.update(OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, OMP_WAIT_POLICY="PASSIVE",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(out, "inductor-cache"), PYTHONPATH=ROOT)
    done = subprocess.run([TORCH_PYTHON, "-m", "benchmarks.peer.torch_llama", path], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"the PyTorch peer failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def with_train(config, **train):
    return dataclasses.replace(config, train=dataclasses.replace(config.train, **train))


def bigtrain_bits(model, data: dict, scoring: dict, context: int) -> dict:
    """bits/byte of each document set by the Evaluator's scorer (documents.document_nats)."""
    from benchmarks.peer.plain import load_documents
    from components.evaluation.documents import document_nats
    out = {}
    for name, path in data.items():
        if name == "train_rows":
            continue
        documents, sizes = load_documents(path)
        nats, _ = document_nats(lambda ids: model(ids, training=False), documents, context=context,
                                **scoring)
        out[name] = float(nats.sum() / math.log(2) / sizes.sum())
    return out


def export_weights(model, path: str) -> None:
    """The GPT's llama variables by the names Llama.load_bigtrain reads."""
    weights = {"token_embedding": model.token_embedding.embeddings.numpy(),
               "ln_f": model.ln_f.scale.numpy()}
    for i, block in enumerate(model.blocks):
        weights.update({f"block_{i}/ln1": block.ln1.scale.numpy(),
                        f"block_{i}/ln2": block.ln2.scale.numpy(),
                        f"block_{i}/qkv": block.attn.qkv.kernel.numpy(),
                        f"block_{i}/proj": block.attn.proj.kernel.numpy(),
                        f"block_{i}/fc": block.fc.kernel.numpy(),
                        f"block_{i}/fc_out": block.fc_out.kernel.numpy()})
    np.savez(path, **weights)


def run_bigtrain(config, examples: str, data: dict, request: dict, out: str, warmup: int) -> tuple:
    """bigtrain's loop on the config (seed and steps set by the caller); (figures, model)."""
    from components.storage import checkpoints
    from components.text_example_gen import shards
    from components.training import loop
    t = config.train
    config = with_train(config, checkpoint_every=t.train_steps, log_every=warmup, eval_every=0)
    stamps = {}
    run_dir = tempfile.mkdtemp(dir=out)
    started = time.perf_counter()
    result = loop.train(config, [os.path.join(shards.split_dir(examples, "train"), "*")],
                        os.path.join(run_dir, "run"), checkpoints.root(run_dir),
                        on_step=lambda step, loss: stamps.setdefault(
                            step, (time.perf_counter(), time.process_time())))
    wall = time.perf_counter() - started
    first = min(warmup, t.train_steps - 1)
    done = (t.train_steps - first) * t.global_batch_size * config.data.seq_len
    (wall0, cpu0), (wall1, cpu1) = stamps[first], stamps[t.train_steps]
    figures = {"wall_s": wall, "steps": t.train_steps, "final_loss": result.final_loss,
               "tokens_per_s": done / (wall1 - wall0), "tokens_per_cpu_s": done / (cpu1 - cpu0),
               "parameters": result.parameter_count, "replicas": result.num_replicas,
               "bits_per_byte": bigtrain_bits(result.model, data, request["scoring"],
                                              config.data.seq_len)}
    return figures, result.model


def check_schedule(config, steps: int) -> None:
    from components.training.optimizer import make_schedule
    t = config.train
    theirs = np.array([float(make_schedule(t)(s)) for s in range(steps)], np.float32)
    ours = learning_rates(steps, dataclasses.asdict(t))
    worst = float(np.max(np.abs(theirs - ours) / np.maximum(theirs, 1e-12)))
    print(f"schedule check: {t.lr_schedule} over {steps} steps, largest relative difference "
          f"{worst:.2e}", flush=True)
    if worst > 1e-6:
        sys.exit("the re-implemented schedule differs from bigtrain's")


def check_scorer(model, figures: dict, request: dict, out: str) -> None:
    """The torch model with bigtrain's weights, scored by the peer's scorer, against bigtrain's."""
    path = os.path.join(out, "bigtrain_weights.npz")
    export_weights(model, path)
    theirs = run_peer(dict(request, mode="score", seed=0, weights=path), out)["bits_per_byte"]
    for name, value in figures["bits_per_byte"].items():
        print(f"scorer check, {name}: bigtrain {value:.4f}, the PyTorch peer on bigtrain's weights "
              f"{theirs[name]:.4f}", flush=True)
        if abs(value - theirs[name]) > 5e-5:
            sys.exit("the peer's model or scorer differs from bigtrain's")


def record(out: str, row: dict) -> None:
    print(json.dumps(row), flush=True)
    with open(os.path.join(out, "results.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


def one_run(kind: str, config, args, examples, data, request, seed: int) -> tuple:
    if kind == "bigtrain":
        return run_bigtrain(with_train(config, seed=seed, train_steps=args.steps), examples, data,
                            request, args.out, args.warmup)
    job = dict(request, mode="train", seed=seed, compiled=kind == "compile",
               warmup_steps=args.warmup, train=dict(request["train"], train_steps=args.steps))
    return run_peer(job, args.out), None


def equal_wall(rows: list, config, args, examples, data, request) -> None:
    """The slower of bigtrain and torch.compile again, for the steps it fits in the faster one's
    wall time, per seed."""
    wall = {k: statistics.mean(r["wall_s"] for r in rows if r["kind"] == k) for k in ("bigtrain", "compile")}
    slow, fast = sorted(wall, key=wall.get, reverse=True)
    for seed in args.seeds:
        mine = next(r for r in rows if r["kind"] == slow and r["seed"] == seed)
        theirs = next(r for r in rows if r["kind"] == fast and r["seed"] == seed)
        per_step = config.train.global_batch_size * config.data.seq_len / mine["tokens_per_s"]
        fixed = max(mine["wall_s"] - args.steps * per_step, 0.0)
        steps = max(args.warmup + 1, min(args.steps, int((theirs["wall_s"] - fixed) / per_step)))
        keep = args.steps
        args.steps = steps
        figures, _ = one_run(slow, config, args, examples, data, request, seed)
        args.steps = keep
        record(args.out, dict(figures, kind=f"{slow} @ {fast}'s wall", seed=seed))
        rows.append(dict(figures, kind=f"{slow} @ {fast}'s wall", seed=seed))


def spread(values: list, digits: int = 4) -> str:
    """mean +- sample sd (n - 1), `digits` decimals; the mean alone for one value."""
    mean = statistics.mean(values)
    if len(values) == 1:
        return f"{mean:,.{digits}f}"
    return f"{mean:,.{digits}f} +- {statistics.stdev(values):,.{digits}f}"


def table(rows: list, set_names: list) -> str:
    cpu = all("tokens_per_cpu_s" in r for r in rows)
    head = (["run", "seeds", "steps", "tokens/s"] + ["tokens/CPU-s"] * cpu + ["wall s"]
            + [f"bits/byte {n}" for n in set_names])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for kind in dict.fromkeys(r["kind"] for r in rows):
        mine = [r for r in rows if r["kind"] == kind]
        steps = [r["steps"] for r in mine]
        cells = [kind, str(len(mine)), (f"{min(steps)}" if min(steps) == max(steps)
                                        else f"{min(steps)}-{max(steps)}"),
                 spread([r["tokens_per_s"] for r in mine], 0)]
        if cpu:
            cells.append(spread([r["tokens_per_cpu_s"] for r in mine], 0))
        cells += [spread([r["wall_s"] for r in mine], 1)]
        cells += [spread([r["bits_per_byte"][n] for r in mine]) for n in set_names]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=os.path.join(ROOT, "build", "peer", "home"),
                        help="a bigtrain home with a finished data stage (run there if absent)")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--steps", type=int, default=0, help="training steps (default: the preset's)")
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="PyTorch's threads (TF: its config)")
    parser.add_argument("--warmup", type=int, default=20, help="steps left out of tokens/s")
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=["bigtrain", "eager", "compile"],
                        help="which loops to run, comma-separated (a diagnostic of one side)")
    parser.add_argument("--no-equal-wall", action="store_true")
    parser.add_argument("--check-hf", metavar="DIR", help="only score a pushed version's hf/ "
                        "export with the peer (to set beside the run report's figures)")
    parser.add_argument("--table", metavar="JSONL", help="only print the table of a results file")
    parser.add_argument("--out", default=os.path.join(ROOT, "build", "peer", "run"),
                        help="exports (reused), the compile cache, results.jsonl (appended)")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    from components.config.loading import build_config
    config = build_config(args.preset, overrides=args.overrides)
    from components.training.strategy import cpu_devices_needed, ensure_cpu_replicas
    if cpu_devices_needed(config.runtime):   # before any TF op: as `bigtrain run`'s Trainer splits
        ensure_cpu_replicas(cpu_devices_needed(config.runtime))   # the CPU (else: 1 replica)
    set_names = ["eval_split"] + [s.name for s in config.eval.sets]
    if args.table:
        with open(args.table, encoding="utf-8") as fh:
            print(table([json.loads(line) for line in fh], set_names))
        return 0
    args.steps = args.steps or config.train.train_steps
    os.makedirs(args.out, exist_ok=True)
    print(describe(), flush=True)
    print(f"bigtrain: preset {args.preset} {' '.join(args.overrides)}; {args.steps} steps of "
          f"{config.train.global_batch_size} x {config.data.seq_len}; seeds {args.seeds}; PyTorch "
          f"threads {args.threads}, TF's from the config", flush=True)
    examples = newest_examples(args.home, args.preset, args.overrides)
    data = export_data(config, examples, args.out)
    request = peer_request(config, data, args.out, args.threads)
    if args.check_hf:
        from components.serving.hf import WEIGHTS_FILE
        print(json.dumps(run_peer(dict(request, mode="score", seed=0,
                                       hf_weights=os.path.join(args.check_hf, WEIGHTS_FILE)),
                                  args.out)))
        return 0
    check_schedule(with_train(config, train_steps=args.steps), args.steps)
    if "compile" in args.kinds:   # warm the compile cache
        run_peer(dict(request, mode="train", seed=0, compiled=True, warmup_steps=1,
                      train=dict(request["train"], train_steps=3)), args.out)
    rows, kinds, checked = [], args.kinds, False
    for i, seed in enumerate(args.seeds):
        for kind in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:
            figures, model = one_run(kind, config, args, examples, data, request, seed)
            if model is not None and not checked:
                check_scorer(model, figures, request, args.out)
                checked = True
            rows.append(dict(figures, kind=kind, seed=seed))
            record(args.out, rows[-1])
    if not args.no_equal_wall and {"bigtrain", "compile"} <= set(kinds):
        equal_wall(rows, config, args, examples, data, request)
    print(table(rows, set_names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
