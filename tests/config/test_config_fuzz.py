"""Issue 41, item 2: the config loader and `--set` under generated input (hypothesis). For any YAML
file and any overrides, `bigtrain config` (in-process, through runners/cli/app.py main, as a user
runs it) answers exit 0 with a config, or exit 2 with one `bigtrain: config error: ...` line that
names where (the file; for `--set`, the key as typed or the setting it names), never a traceback (exit 1), and stays within a
memory bound (tracemalloc's peak over the call).

What is generated: mappings of real setting names (every dotted key of the tiny preset, their
sections, near-misses) and random ones, holding scalars of every YAML kind (big and tiny floats,
inf/nan spellings, negative zero, unicode, booleans, null), lists and nested mappings; raw YAML
texts with anchors and aliases (nested alias chains, the shape of a billion-laughs document);
`--set key=value` pairs of the same values. Time is bounded by construction, not measured: the
loader's alias budget (components/config/loading.py) caps what a document can expand to, and
hypothesis' deadline is off so a loaded VM cannot fail the test.

Catches (each tried on a copy of the loader, 2026-11-27): the alias budget removed (the
billion-laughs shape exceeds the memory bound), a ConfigError turned into a ValueError (exit 1
with a traceback), an unknown-key message without the key."""

from __future__ import annotations

import contextlib
import io
import os
import tracemalloc

import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from components import config as config_lib
from runners.cli import app as cli

MEMORY_BOUND = 64 * 2**20   # bytes; the largest document the alias budget admits is ~100k nodes
KEYS = sorted(
    {f"{section}.{key}" for section, values in config_lib.to_dict(config_lib.PRESETS["tiny"]())
     .items() if isinstance(values, dict) for key in values})
SECTIONS = sorted({k.split(".")[0] for k in KEYS})
FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

names = st.one_of(st.sampled_from(KEYS), st.sampled_from(SECTIONS),
                  st.sampled_from(KEYS).map(lambda k: k[:-1] + "x"),
                  st.text(min_size=1, max_size=12))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
        ["1e309", "-1e-300", "-0", ".nan", ".inf", "0x1F", "1_000", "~", "yes", "0o17"]),
    st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(names, inner, max_size=4)), max_leaves=12)


@st.composite
def alias_documents(draw) -> str:
    """An anchored list nested `levels` deep, each level `width` aliases of the one before: up to
    width ** levels nodes once expanded."""
    levels, width = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    key = draw(st.sampled_from(KEYS))
    section, leaf = key.split(".", 1)
    return "\n".join(lines + [f"{section}:", f"  {leaf}: *a{levels - 1}"]) + "\n"


@st.composite
def flow_alias_values(draw) -> str:
    """An override's value in flow style: a list whose items alias the item before, `width`
    times each (up to width ** levels nodes), or a mapping with a repeated key."""
    if draw(st.booleans()):
        return "{k: 1, k: 2}"
    levels, width = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    items = [f"&a0 [{', '.join(['x'] * width)}]"]
    items += [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def _bigtrain_config(argv: list[str]) -> tuple[int, str, int]:
    """(exit code, stderr, peak bytes allocated) of `bigtrain config ARGV` in this process."""
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["config", *argv])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return code, err.getvalue(), peak


def _check(argv: list[str], where: list[str]) -> None:
    code, err, peak = _bigtrain_config(argv)
    assert code in (0, 2), (argv, err[-3000:])
    assert peak < MEMORY_BOUND, (argv, peak)
    if code == 2:
        (line,) = [l for l in err.splitlines() if l.startswith("bigtrain: config error: ")]
        # a name may be printed as its repr (non-printable characters escaped)
        assert any(n in line for name in where for n in (name, repr(name)[1:-1])), (where, line)
        assert "Traceback" not in err, err


def _dump(document) -> str:
    return yaml.safe_dump(document, allow_unicode=True) if not isinstance(document, str) \
        else document


@FUZZ
@given(document=st.one_of(st.dictionaries(names, values, max_size=5), values, alias_documents(),
                          st.text(max_size=200)))
def test_any_config_file_is_a_config_or_a_named_error(tmp_path_factory, document):
    path = os.path.join(tmp_path_factory.mktemp("fuzz"), "cfg.yaml")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
        fh.write(_dump(document))
    _check(["--config", path], [path])


@FUZZ
@given(overrides=st.lists(st.tuples(names, st.one_of(values.map(
    lambda v: yaml.safe_dump(v, default_flow_style=True).strip()), st.text(max_size=30),
    flow_alias_values())), min_size=1, max_size=3))
def test_any_set_override_is_a_config_or_a_named_error(overrides):
    argv = [a for key, value in overrides for a in ("--set", f"{key}={value}")]
    # the override's key as typed, the setting it names (a value error names section.key), or
    # the whole override when it has no usable key
    keys = [(f"{key}={value}".split("=", 1)[0].strip(), f"{key}={value}")   # as the CLI splits
            for key, value in overrides]
    _check(argv, [name for key, text in keys for name in (key, key.split(".")[-1], repr(text))
                  if name])
