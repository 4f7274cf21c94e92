"""Starting a local Ray: RAY_AUTH_MODE set to Ray's own default before Ray is imported, so that
Ray 2.59+ does not warn at every start that it turned token authentication on."""

from __future__ import annotations

import importlib.metadata
import os
import sys

import pytest

from dapo.trainer.ray_policy import quiet_local_token_auth


@pytest.mark.parametrize(("version", "user_mode", "imported", "mode"), [
    ("2.60.0", None, False, "token"),  # Ray's default since 2.59, set before Ray would warn that it sets it
    ("2.59.0", None, False, "token"),
    ("2.58.1", None, False, None),  # token mode is opt-in there: left to the user
    ("2.60.0", "disabled", False, "disabled"),  # the user's choice stays
    ("2.60.0", None, True, None),  # Ray imported already: its config has read the variable, too late
    ("nightly", None, False, None),
])
def test_a_local_start_sets_ray_token_auth_where_ray_defaults_to_it(monkeypatch, version, user_mode, imported, mode):
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    if user_mode is not None:
        monkeypatch.setenv("RAY_AUTH_MODE", user_mode)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == "ray" else "0")
    if imported:
        monkeypatch.setitem(sys.modules, "ray", object())
    else:
        monkeypatch.delitem(sys.modules, "ray", raising=False)
    quiet_local_token_auth()
    assert os.environ.get("RAY_AUTH_MODE") == mode
