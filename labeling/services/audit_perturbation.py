"""PLACEHOLDER: the helper owning this module replaces it."""
from __future__ import annotations


def perturbation_parameters(raw):
    raise NotImplementedError


def perturbation_probes(*, project, judge, parameters):
    raise NotImplementedError


def perturbation_report(*, project, judge, parameters, probes, verdicts):
    raise NotImplementedError
