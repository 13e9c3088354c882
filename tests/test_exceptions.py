"""Every error the app defines derives from labeling.exceptions.DomainError, so an interface can tell the domain's
refusals (a message for the person who asked) from bugs with one except clause."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import labeling
from labeling.exceptions import DomainError


def _modules():
    for info in pkgutil.walk_packages(labeling.__path__, "labeling."):
        if ".migrations" not in info.name:
            yield importlib.import_module(info.name)


def test_every_error_the_app_defines_is_a_domain_error():
    defined = [cls for module in _modules() for _, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, Exception) and cls.__module__ == module.__name__]
    assert len(defined) >= 15
    strays = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in defined if not issubclass(cls, DomainError))
    assert not strays, f"derive these from labeling.exceptions.DomainError: {strays}"
