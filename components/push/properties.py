"""The PushedModel artifact's MLMD property names, the one place that spells them. TFX's Pusher
marks the artifact (`pushed`, `pushed_version`, `pushed_destination`: its own names, spelt here
for bigtrain's readers); bigtrain's executor (components/push/executor.py) adds the variant, the
version already serving when nothing was pushed, and the reason."""

from __future__ import annotations

PUSHED = "pushed"                            # 1 when a new version was pushed (TFX)
PUSHED_VERSION = "pushed_version"            # the version folder's name (TFX)
PUSHED_DESTINATION = "pushed_destination"    # the version folder's path (TFX)
VARIANT = "variant"                          # the pushed (or refused) export variant
SERVED_VERSION = "served_version"            # the version serving when nothing was pushed
REASON = "reason"                            # why it was (not) pushed

PROPERTIES = frozenset((PUSHED, PUSHED_VERSION, PUSHED_DESTINATION, VARIANT, SERVED_VERSION, REASON))
