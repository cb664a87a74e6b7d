"""Run by the second loader's own python (build/hfloader/venv: PyTorch + transformers, installed by
tests/support/hfloader.sh), never imported by the suite: loads Hugging Face directories with
transformers' Auto classes, exactly as a user would (no patching, no settings handed over), and
writes what they compute for tests/export/test_hf_transformers.py to compare with ours.

Usage: python hf_loader_probe.py REQUEST.json OUT_DIR
REQUEST: {"models": [{"name", "dir", "batch": [[ids]], "prompts": [[ids]], "max_new_tokens"}],
          "tokenizers": [{"name", "dir", "texts": [str]}]}
OUT_DIR/result.json: per model its class, dtype, generation config as transformers read it and
greedy generations; OUT_DIR/<name>.npy its float32 logits on the batch; per tokenizer its ids,
decoded texts and special ids.
"""

import json
import os
import sys

GENERATION_KEYS = ("bos_token_id", "eos_token_id", "pad_token_id", "suppress_tokens", "do_sample")


def probe_model(entry: dict, out_dir: str) -> dict:
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(entry["dir"], dtype=torch.float32)
    model.eval()
    result = {"class": type(model).__name__, "dtype": str(next(model.parameters()).dtype),
              "generation_config": {k: getattr(model.generation_config, k, None)
                                    for k in GENERATION_KEYS}}
    with torch.no_grad():
        if entry.get("batch"):
            logits = model(input_ids=torch.tensor(entry["batch"])).logits
            np.save(os.path.join(out_dir, entry["name"] + ".npy"), logits.float().numpy())
        result["greedy"] = []
        for prompt in entry.get("prompts") or []:
            ids = torch.tensor([prompt])
            out = model.generate(ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=entry["max_new_tokens"])
            result["greedy"].append(out[0].tolist())
    return result


def probe_tokenizer(entry: dict) -> dict:
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(entry["dir"])
    ids = [tokenizer(text)["input_ids"] for text in entry["texts"]]
    return {"class": type(tokenizer).__name__, "ids": ids,
            "decoded": [tokenizer.decode(row) for row in ids],
            "specials": {role: getattr(tokenizer, f"{role}_token_id") for role in ("pad", "bos", "eos")}}


def main(request_path: str, out_dir: str) -> None:
    import tokenizers
    import torch
    import transformers
    request = json.load(open(request_path, encoding="utf-8"))
    torch.manual_seed(0)
    result = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                           "tokenizers": tokenizers.__version__},
              "models": {e["name"]: probe_model(e, out_dir) for e in request.get("models", [])},
              "tokenizers": {e["name"]: probe_tokenizer(e) for e in request.get("tokenizers", [])}}
    with open(os.path.join(out_dir, "result.json"), "w", encoding="utf-8") as fh:
        json.dump(result, fh, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
