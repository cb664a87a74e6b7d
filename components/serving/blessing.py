"""The ModelBlessing artifact's MLMD property names, the one place that spells them: the
Evaluator (components/evaluation/component.py) writes them, TFX's Pusher and
LatestBlessedModelStrategy read `blessed` and `current_model_id` (TFX's own names, spelt here for
bigtrain's code), the push executor reads which variant to serve, and the run report and
`bigtrain lineage` read the rest. Here, below evaluation and push, because both use it."""

from __future__ import annotations

BLESSED = "blessed"                      # 1 when the model may be pushed (TFX)
CURRENT_MODEL, CURRENT_MODEL_ID = "current_model", "current_model_id"      # the blessed model (TFX)
BASELINE_MODEL, BASELINE_MODEL_ID = "baseline_model", "baseline_model_id"  # what it was compared with
REASON = "reason"                        # why (not) blessed
SERVE_VARIANT = "serve_variant"          # the variant to push (export.serve)
SERVE_PATH = "serve_path"                # its folder inside the Model artifact

PROPERTIES = frozenset((BLESSED, CURRENT_MODEL, CURRENT_MODEL_ID, BASELINE_MODEL, BASELINE_MODEL_ID,
                        REASON, SERVE_VARIANT, SERVE_PATH))
