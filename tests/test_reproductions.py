"""The registry of reproductions: one module per source document, found by name."""

import pytest

from vmsched import reproduce, reproductions


def test_seed000_is_registered_with_its_source():
    r = reproductions.get("seed000")
    assert r.source == "000_b3ad2313bd30aebd" and "Context1" in r.title
    assert r.run.__module__ == "vmsched.reproductions.seed000"
    assert ("seed000", r.source, r.title) in reproduce.listing()


def test_every_module_registers_one_reproduction():
    import pkgutil

    modules = sorted(m.name for m in pkgutil.iter_modules(reproductions.__path__))
    names = [r.run.__module__.rsplit(".", 1)[1] for r in reproductions.registered()]
    assert sorted(names) == modules


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="seed000"):
        reproductions.get("seed999")


def test_a_name_cannot_be_registered_twice():
    with pytest.raises(ValueError, match="twice"):
        reproductions.register("seed000", "other", "x", run=lambda **kw: 0)
