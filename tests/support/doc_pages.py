"""The documentation pages and the link rules shared by the README and docs tests: the pages, fenced
blocks, anchors and link targets."""

import glob
import os
import re


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


README = os.path.join(REPO, "README.md")


DOC_PAGES = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))


FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.M | re.S)


REPO_PATH = re.compile(r"(?<![\w/.<>~-])((?:components|pipeline|runners|tests|benchmarks|schemas|docs)"
                       r"/[\w./-]*[\w/])")


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = FENCE.sub("", read(path))  # a `# comment` in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+)$", text, re.M)}


def target_problem(base_dir: str, target: str) -> str | None:
    path, _, anchor = target.partition("#")
    full = os.path.normpath(os.path.join(base_dir, path)) if path else None
    if full is not None and not os.path.exists(full):
        return f"{target}: no such file"
    if anchor and (full is None or full.endswith(".md")) and anchor not in anchors(full):
        return f"{target}: no heading with anchor #{anchor}"
    return None
