"""A small SavedModel-shaped folder to push without training one."""

import os


def fake_saved_model(path, content: bytes):
    os.makedirs(os.path.join(path, "variables"))
    with open(os.path.join(path, "saved_model.pb"), "wb") as fh:
        fh.write(content)
    with open(os.path.join(path, "variables", "variables.data-00000-of-00001"), "wb") as fh:
        fh.write(content * 100)
