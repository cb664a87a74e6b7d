"""Building a config: preset -> YAML -> --set overrides, all checked; and (de)serialization (the
resolved config travels as JSON into TFX exec properties and is saved as YAML with the artifacts)."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import stat
import types
import typing
from dataclasses import fields, replace
from typing import Any, Mapping

import yaml

from components.config.heldout import with_decontamination
from components.config.presets import PRESETS
from components.config.rules import finite, validate
from components.config.tree import ON_OFF_KEYS, Config, ConfigError

# Deeper than any config (section.key: a list of numbers is depth 3): a 10,000-deep list would
# otherwise exhaust Python's recursion in PyYAML's composer and dump thousands of frames.
MAX_YAML_NESTING = 32
# Nodes a document may expand to through its aliases: a 510-byte alias bomb (&a1 [*a0 x9] ...
# nine levels) expands to ~10^9 and grew `bigtrain config` past 1.7 GB. Any config is < 10^4.
MAX_YAML_NODES = 100_000
MAX_CONFIG_FILE_BYTES = 1 << 20


class YAMLStructureError(yaml.constructor.ConstructorError):
    """YAML that parses but that no config can be: a duplicate key (last-wins would silently drop
    a setting) or nesting deeper than MAX_YAML_NESTING."""


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses duplicate mapping keys and pathological nesting."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_NESTING:
                raise YAMLStructureError(None, None, f"nested deeper than {MAX_YAML_NESTING} levels",
                                         self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        if node is not None and _expanded_size(node, {}) > MAX_YAML_NODES:
            raise YAMLStructureError(None, None, f"its aliases expand to more than "
                                     f"{MAX_YAML_NODES:,} nodes", node.start_mark)
        return node

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, typing.Hashable) and key in seen:
                raise YAMLStructureError(
                    None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def _expanded_size(node, memo: dict) -> int:
    """Nodes `node` stands for with every alias expanded (an alias is the same node object);
    a cycle counts as too many. Depth is bounded by MAX_YAML_NESTING."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = MAX_YAML_NODES + 1                  # on the stack: a cycle is unbounded
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = min(size, MAX_YAML_NODES + 1)
    return memo[id(node)]


def strict_yaml(text: str):
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (StrictLoader is a SafeLoader)


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Return `value` as the field's type, or raise ConfigError naming `key`."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # `X | None`: null keeps None
        if value is None:
            return None
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _coerce(key, value, inner[0])
    if origin is tuple:
        item_type = typing.get_args(annotation)[0]
        if dataclasses.is_dataclass(item_type):  # a list of sections, each a mapping
            if not isinstance(value, (list, tuple)):
                raise ConfigError(f"{key}: expected a list of mappings, got {value!r}")
            return tuple(item if isinstance(item, item_type) else merge(item_type(), item, f"{key}[{i}].")
                         for i, item in enumerate(value))
        if item_type is not str:  # numbers: each item checked like a scalar field
            if not isinstance(value, (list, tuple)):
                value = [value]
            return tuple(_coerce(f"{key}[{i}]", v, item_type) for i, v in enumerate(value))
        if isinstance(value, str):
            value = [value] if value else []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return tuple(value)
    if annotation is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return finite(key, float(value))
        if isinstance(value, str):  # YAML 1.1 reads `3e-4` (no dot) as a string
            try:
                number = float(value)
            except ValueError:
                pass
            else:
                return finite(key, number)
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if annotation is str:
        if isinstance(value, str):
            return value
        if isinstance(value, bool) and key in ON_OFF_KEYS:  # YAML 1.1 reads on/off as booleans
            return "on" if value else "off"
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    raise ConfigError(f"{key}: unsupported field type {annotation!r}")  # pragma: no cover


def _unknown_key(key: str, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown config key {key!r}{hint}; known here: {', '.join(sorted(known))}")


def merge(obj: Any, updates: Mapping[str, Any], prefix: str = "") -> Any:
    """Return a copy of dataclass `obj` with nested `updates` applied, type-checked."""
    if not isinstance(updates, Mapping):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {updates!r}")
    hints = typing.get_type_hints(type(obj))
    by_name = {f.name: f for f in fields(obj)}
    changes = {}
    for name, value in updates.items():
        key = prefix + str(name)
        if name not in by_name:
            raise _unknown_key(key, list(by_name))
        annotation = hints[name]
        current = getattr(obj, name)
        if dataclasses.is_dataclass(current):
            changes[name] = merge(current, value, key + ".")
        else:
            changes[name] = _coerce(key, value, annotation)
    return replace(obj, **changes)


def parse_override(text: str) -> dict[str, Any]:
    """`train.learning_rate=3e-4` -> {"train": {"learning_rate": 3e-4}} (value parsed as YAML)."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form section.key=value")
    dotted, raw = text.split("=", 1)
    parts = dotted.strip().split(".")
    if not all(parts):
        raise ConfigError(f"override {text!r}: empty key")
    try:
        value = strict_yaml(raw) if raw.strip() else ""
    except YAMLStructureError as err:
        raise ConfigError(f"override {dotted.strip()}: {err.problem}") from None
    except yaml.YAMLError:
        value = raw  # not YAML (e.g. "@daily"): a plain string, type-checked like any value
    if value is None:
        value = raw
    nested: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        nested = {part: nested}
    return nested


def load_yaml(path: str) -> dict[str, Any]:
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_CONFIG_FILE_BYTES:
            raise ConfigError(f"--config {path}: not a config file (a regular file of at most "
                              f"{MAX_CONFIG_FILE_BYTES:,} bytes)")
        with open(path, encoding="utf-8") as fh:
            text = fh.read(MAX_CONFIG_FILE_BYTES + 1)
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else f"not UTF-8 text ({err.reason})"
        raise ConfigError(f"--config {path}: cannot read the file: {reason}") from None
    try:
        loaded = strict_yaml(text) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}:1: expected a mapping of config sections at the top level")
    return loaded


def yaml_key_lines(path: str) -> dict[str, int]:
    """{dotted.key: line number} of a YAML file's mapping keys, to point errors at their line."""
    lines: dict[str, int] = {}

    def walk(node, prefix):
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                dotted = f"{prefix}{key.value}"
                lines[dotted] = key.start_mark.line + 1
                walk(value, dotted + ".")
    try:
        with open(path, encoding="utf-8") as fh:
            walk(yaml.compose(fh, Loader=StrictLoader), "")
    except (OSError, yaml.YAMLError):
        pass
    return lines


def build_config(preset: str = "tiny", yaml_path: str | None = None,
                 overrides: list[str] | tuple[str, ...] = (), *,
                 num_replicas: int | None = None) -> Config:
    """Preset, then YAML file, then dotted overrides; validated. Raises ConfigError."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    config = PRESETS[preset]()
    if yaml_path:
        loaded = load_yaml(yaml_path)
        loaded.pop("preset", None)
        try:
            config = merge(config, loaded)
        except ConfigError as err:  # name the file and line of the offending key
            lines = yaml_key_lines(yaml_path)
            key = next((k for k in sorted(lines, key=len, reverse=True) if repr(k) in str(err)
                        or str(err).startswith(k + ":")), None)
            where = f"{yaml_path}:{lines[key]}" if key else yaml_path
            raise ConfigError(f"{where}: {err}") from None
    for text in overrides:
        config = merge(config, parse_override(text))
    config = with_decontamination(config)   # eval.sets -> data.decontaminate.eval_files
    validate(config, num_replicas=num_replicas)
    return config



# ----------------------------------------------------------------------------------------------
# Serialization: the resolved config travels as JSON (into TFX exec properties) and is saved as
# YAML next to the artifacts.


def to_dict(config: Any) -> dict[str, Any]:
    out = {}
    for f in fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = to_dict(value)
        elif isinstance(value, tuple):
            out[f.name] = [to_dict(v) if dataclasses.is_dataclass(v) else v for v in value]
        else:
            out[f.name] = value
    return out


def from_dict(cls: type, values: Mapping[str, Any]) -> Any:
    """Inverse of to_dict for any config dataclass (strict: unknown keys are errors)."""
    return merge(cls(), values)


def section_json(section: Any) -> str:
    """Canonical JSON of one config section: the exact exec property a stage's cache keys on."""
    return json.dumps(to_dict(section), sort_keys=True)


def section_part(section: Any, *names: str) -> Any:
    """The part of a section a stage reads: the named fields as set, every other at its default
    (so a change to those cannot touch that stage's cache key)."""
    default = type(section)()
    return replace(default, **{name: getattr(section, name) for name in names})


def section_without(section: Any, *names: str) -> Any:
    """The section with the named fields at their defaults (what a stage must not key on)."""
    default = type(section)()
    return replace(section, **{name: getattr(default, name) for name in names})


def digest(config: Any) -> str:
    return hashlib.sha256(json.dumps(to_dict(config), sort_keys=True).encode()).hexdigest()[:16]


CONFIG_FILE = "config.yaml"   # a run's resolved config, in its run folder


def save_config(config: Config, directory: str) -> str:
    """Write the resolved config to <directory>/config.yaml; returns that path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, CONFIG_FILE)
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(to_dict(config), fh, sort_keys=False)
    return path
