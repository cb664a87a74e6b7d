"""One declaration per stage: `StageReads`, the config sections (and fields of them) a stage reads.

Each stage's module declares its own (docs/configuration.md lists them). From that one record
come the stage's hand-off (`handoff`: one canonical JSON per section, its TFX execution properties
or custom_config keys, so its cache key), the Config the stage works with on the other side
(`read_back`: a section it was not sent raises on first use, naming the declaration) and, for the
Trainer, its checkpoint key (`model_view`: the sections that decide the trained model, without
where it trains). A stage handed a TFX custom_config (the Trainer, the Tuner, the Pusher) also
declares the keys it gets beside its sections (`extras`): `custom_config` and `read_custom` raise
on any other key, so nothing reaches the stage undeclared."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from components.config.loading import from_dict, section_json, section_part, section_without, to_dict
from components.config.tree import Config, ConfigError


@dataclass(frozen=True)
class Reads:
    """What a stage reads of one section: `only` these fields (every other at its default in the
    hand-off), or every field `without` these."""
    only: tuple[str, ...] | None = None
    without: tuple[str, ...] = ()

    def part(self, section: Any) -> Any:
        if self.only is not None:
            return section_part(section, *self.only)
        return section_without(section, *self.without)


ALL = Reads()


def only(*names: str) -> Reads:
    return Reads(only=names)


def without(*names: str) -> Reads:
    return Reads(without=names)


@dataclass(frozen=True)
class StageReads:
    """stage: the node id; declared_in: where the declaration lives (named by every error);
    sections: {section: Reads}; keys: the execution property of a section when it is not the
    section's name; model: the sections that decide a trained model (the checkpoint key) and
    placement: their "section.field"s that say where it trains, not what (left out of that key);
    extras: {custom_config key beside the sections: what it carries} (custom_config stages)."""
    stage: str
    declared_in: str
    sections: Mapping[str, Reads]
    keys: Mapping[str, str] = field(default_factory=dict)
    model: tuple[str, ...] = ()
    placement: tuple[str, ...] = ()
    extras: Mapping[str, str] = field(default_factory=dict)

    def key(self, section: str) -> str:
        return self.keys.get(section, section)


def typed_sections(stage: StageReads, config: Config) -> dict[str, Any]:
    """{section: the typed section as the stage gets it} (unread fields at their defaults)."""
    return {name: reads.part(getattr(config, name)) for name, reads in stage.sections.items()}


def handoff(stage: StageReads, config: Config) -> dict[str, str]:
    """The stage's hand-off, its cache key: {property or custom_config key: section_json}."""
    return {stage.key(name): section_json(section)
            for name, section in typed_sections(stage, config).items()}


def custom_config(stage: StageReads, config: Config, **extras: str) -> dict[str, str]:
    """A custom_config stage's hand-off, its cache key: its sections (handoff) and the extras
    given, each of which its declaration names."""
    _check_extras(stage, extras)
    return {**handoff(stage, config), **extras}


def read_custom(stage: StageReads, custom: Mapping[str, str]) -> Config:
    """read_back of a custom_config: a key that is neither a section's nor a declared extra
    raises, naming the declaration."""
    sections = {stage.key(name) for name in stage.sections}
    _check_extras(stage, [key for key in custom if key not in sections])
    return read_back(stage, custom)


def _check_extras(stage: StageReads, keys) -> None:
    unknown = sorted(set(keys) - set(stage.extras))
    if unknown:
        raise ConfigError(f"{stage.stage}: custom_config keys {unknown} are not in its declaration "
                          f"({stage.declared_in}: sections {sorted(stage.sections)}, extras "
                          f"{sorted(stage.extras)}): declare them there")


class Unsent:
    """A section a stage was not sent: reading any field of it raises ConfigError naming the
    section, the field and the stage's declaration (never a silent default)."""
    __slots__ = ("_section", "_stage")

    def __init__(self, section: str, stage: StageReads):
        object.__setattr__(self, "_section", section)
        object.__setattr__(self, "_stage", stage)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        stage = self._stage
        raise ConfigError(
            f"{stage.stage} read {self._section}.{name}, but the section {self._section!r} is not "
            f"in its declaration ({stage.declared_in}: {', '.join(stage.sections)}): declare "
            f"the read there, or remove it")

    def __repr__(self) -> str:
        return f"Unsent({self._section!r}, {self._stage.stage!r})"


def read_back(stage: StageReads, payload: Mapping[str, str]) -> Config:
    """The inverse of handoff: the Config the stage works with. Its declared sections are read
    back strictly (from_dict: unknown keys are errors; a missing key names the declaration); every
    other section is Unsent."""
    missing = [stage.key(name) for name in stage.sections if stage.key(name) not in payload]
    if missing:
        raise ConfigError(f"{stage.stage}: its hand-off lacks {missing} ({stage.declared_in})")
    config = from_dict(Config, {name: json.loads(payload[stage.key(name)])
                                for name in stage.sections})
    unsent = {f.name: Unsent(f.name, stage) for f in dataclasses.fields(Config)
              if f.name not in stage.sections and dataclasses.is_dataclass(getattr(config, f.name))}
    return dataclasses.replace(config, **unsent)


def model_view(stage: StageReads, config: Config) -> dict:
    """The part of the config that decides the trained model (the Trainer's checkpoint key and
    MODEL_INFO's config): the fields stage.model's sections read, less stage.placement."""
    view = {}
    for name in stage.model:
        reads, values = stage.sections[name], to_dict(getattr(config, name))
        keep = reads.only if reads.only is not None else [k for k in values if k not in reads.without]
        view[name] = {k: values[k] for k in keep}
    for dotted in stage.placement:
        section, name = dotted.split(".", 1)
        view[section].pop(name)
    return view


def digest_of(stage: StageReads, config: Config) -> str:
    """A short digest of the sections the stage was handed (CONFIG_DIGEST of a model)."""
    return hashlib.sha256(json.dumps(handoff(stage, config), sort_keys=True).encode()).hexdigest()[:16]
