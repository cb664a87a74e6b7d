"""Code tasks without code execution, run through the exported model's signatures (what is served
is what is measured): next-line completion and multiple choice, on lines of a held-out set.

Items (deterministic: seeded, content-keyed). The task set's chosen documents (held_out_sets), as
text. An eligible line: not the first of its document, 8 to max_line_bytes bytes once its
indentation and trailing blanks are cut, and not a blank or comment-only line. Each item is one
eligible line, keyed sha256(seed | document text | line number); the eval.task_items smallest keys
are the items. Its prompt: the document before the line plus the line's indentation (the model
sees the last `context` tokens of it); its target: the rest of the line.

(a) Completion (CodeXGLUE's line-level completion metrics): the `sample` signature with
temperature 0 (greedy) and stop "\n" continues the prompt to the end of the line; exact match =
the continuation (trailing blanks cut) equals the target; edit similarity = difflib's
SequenceMatcher ratio (what fuzzywuzzy's fuzz.ratio computes without python-Levenshtein), 0-1.
(b) Multiple choice: the target against 3 lines of other documents (the eligible lines with the
smallest sha256(item key | candidate) keys whose text differs from the target's and from each
other's), in an order set by the item key; the model picks the option with the highest
`score` log-likelihood per byte of the option (length-normalised, as lm-eval's acc_norm);
accuracy, and centred accuracy (accuracy - 1/4) / (3/4) as nanochat's CORE centres a task
(0 = chance, 1 = perfect).
"""

from __future__ import annotations

import difflib
import hashlib
from dataclasses import dataclass

import numpy as np

TASK_FIGURES = ("task_completion_exact_match", "task_completion_edit_similarity",
                "task_choice_accuracy", "task_choice_centred_accuracy")
TASK_COUNTS = ("task_items",)
CHOICES = 4
MIN_LINE_BYTES = 8


@dataclass(frozen=True)
class Item:
    key: bytes
    prompt: bytes
    target: bytes
    options: tuple[bytes, ...]     # CHOICES lines, the target among them
    answer: int                    # the target's index in options


def _key(*parts: bytes) -> bytes:
    return hashlib.sha256(b"|".join(parts)).digest()


def eligible_lines(text: bytes, max_line_bytes: int) -> list[tuple[int, bytes, bytes]]:
    """(line number, prompt, target) of every eligible line of one document (module docstring)."""
    out, offset = [], 0
    for number, line in enumerate(text.split(b"\n")):
        body = line.strip()
        indent = line[:len(line) - len(line.lstrip())]
        if (number > 0 and MIN_LINE_BYTES <= len(body) <= max_line_bytes
                and not body.startswith(b"#")):
            out.append((number, text[:offset] + indent, body))
        offset += len(line) + 1
    return out


def build_items(texts: list[bytes], count: int, seed: int, max_line_bytes: int) -> list[Item]:
    """The `count` items with the smallest keys (module docstring), smallest first."""
    candidates = []                  # (key, document index, prompt, target)
    for index, text in enumerate(texts):
        digest = _key(text)
        for number, prompt, target in eligible_lines(text, max_line_bytes):
            key = _key(str(seed).encode(), digest, str(number).encode())
            candidates.append((key, index, prompt, target))
    candidates.sort()
    items = []
    for key, index, prompt, target in candidates[:count]:
        others = sorted((_key(key, other_key), other_target)
                        for other_key, other_index, _, other_target in candidates
                        if other_index != index and other_target != target)
        distractors: list[bytes] = []
        for _, line in others:
            if line not in distractors:
                distractors.append(line)
            if len(distractors) == CHOICES - 1:
                break
        if len(distractors) < CHOICES - 1:
            continue                 # a set of one document has no distractors
        answer = key[0] % CHOICES
        options = tuple(distractors[:answer] + [target] + distractors[answer:])
        items.append(Item(key, prompt, target, options, answer))
    return items


def completion_scores(sample_fn, items: list[Item], batch_size: int, max_new_tokens: int) -> dict:
    """sample_fn(prompts bytes[B], max_new_tokens int32[B]) -> continuations bytes[B] (greedy,
    stopped after "\\n"). Exact match and mean edit similarity over the items."""
    exact, similarity = [], []
    for start in range(0, len(items), batch_size):
        part = items[start:start + batch_size]
        outs = sample_fn([i.prompt for i in part], [max_new_tokens] * len(part))
        for item, out in zip(part, outs):
            predicted = out.split(b"\n", 1)[0].rstrip()
            exact.append(predicted == item.target)
            similarity.append(difflib.SequenceMatcher(None, predicted, item.target).ratio())
    return {"task_completion_exact_match": float(np.mean(exact)),
            "task_completion_edit_similarity": float(np.mean(similarity))}


def choice_scores(score_fn, items: list[Item], batch_size: int) -> dict:
    """score_fn(prompts bytes[B], continuations bytes[B]) -> log_prob float[B]. The pick: the
    highest log-likelihood per byte; accuracy and centred accuracy."""
    rows = [(item.prompt, option) for item in items for option in item.options]
    log_probs = []
    for start in range(0, len(rows), batch_size):
        part = rows[start:start + batch_size]
        log_probs.extend(float(v) for v in score_fn([p for p, _ in part], [c for _, c in part]))
    per_byte = np.array(log_probs).reshape(len(items), CHOICES) / np.array(
        [[len(o) for o in item.options] for item in items])
    accuracy = float(np.mean(np.argmax(per_byte, axis=1) == [i.answer for i in items]))
    return {"task_choice_accuracy": accuracy,
            "task_choice_centred_accuracy": (accuracy - 1 / CHOICES) / (1 - 1 / CHOICES)}


def run_tasks(loaded, texts: list[bytes], eval_config, context: int) -> dict:
    """Both tasks on a loaded SavedModel's `sample` and `score` signatures; {} without items."""
    import tensorflow as tf
    max_line_bytes = min(80, context // 2)   # an option must fit the window beside some prompt
    items = build_items(texts, eval_config.task_items, eval_config.task_seed, max_line_bytes)
    if not items:
        return {}
    sample, score = loaded.signatures["sample"], loaded.signatures["score"]

    def sample_fn(prompts, max_new):
        n = len(prompts)
        out = sample(prompt=tf.constant(prompts), max_new_tokens=tf.constant(max_new, tf.int32),
                     temperature=tf.zeros([n]), top_k=tf.zeros([n], tf.int32),
                     top_p=tf.ones([n]), seed=tf.zeros([n], tf.int32),
                     stop=tf.constant([b"\n"] * n))
        return list(out["text_bytes"].numpy())

    def score_fn(prompts, continuations):
        return score(prompt=tf.constant(prompts), continuation=tf.constant(continuations))[
            "log_prob"].numpy()
    figures = {"task_items": len(items)}
    figures.update(completion_scores(sample_fn, items, eval_config.batch_size, max_line_bytes + 8))
    figures.update(choice_scores(score_fn, items, eval_config.batch_size))
    return figures
