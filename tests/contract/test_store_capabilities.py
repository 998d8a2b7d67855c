"""The contract suite's list of stores is complete, and each store declares exactly the
capabilities the suite expects of it, so no test skips on a store by accident."""

from __future__ import annotations

import pkgutil

import pytest
from support.stores import STORES

import tinyjobs.stores


def test_the_suite_runs_on_every_store_package():
    packages = {module.name for module in pkgutil.iter_modules(tinyjobs.stores.__path__) if module.ispkg}
    assert packages == set(STORES)


def test_each_store_declares_the_capabilities_the_suite_expects(store, request: pytest.FixtureRequest):
    name = request.node.callspec.params["store"]
    assert store.capabilities == STORES[name]
