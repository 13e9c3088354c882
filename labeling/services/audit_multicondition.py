"""PLACEHOLDER: the helper owning this module replaces it."""
from __future__ import annotations


def multicondition_parameters(raw):
    raise NotImplementedError


def multicondition_probes(*, project, judge, parameters):
    raise NotImplementedError


def multicondition_report(*, project, judge, parameters, probes, verdicts):
    raise NotImplementedError
