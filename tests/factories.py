"""factory_boy factories for the auth user and every labeling model. Related rows default to the same
project, so `PairFactory()` builds one consistent project with a query and a passage."""
from __future__ import annotations

from datetime import timedelta
from functools import cache

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db.models import Max
from django.utils import timezone

from labeling.models import (
    Judge,
    Judgment,
    Label,
    Lease,
    Membership,
    Pair,
    PairSource,
    Passage,
    Project,
    Query,
    RelevanceDefinition,
)

PASSWORD = "correct-horse-battery"


@cache
def _password_hash() -> str:
    # Hashing is deliberately slow; hash once and share it, since every test user has the same password.
    return make_password(PASSWORD)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.org")
    password = factory.LazyFunction(_password_hash)


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    slug = factory.Sequence(lambda n: f"project-{n}")
    name = factory.Sequence(lambda n: f"Project {n}")
    description = "A test project."


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    project = factory.SubFactory(ProjectFactory)
    user = factory.SubFactory(UserFactory)
    role = Membership.Role.EXPERT


class QueryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Query

    project = factory.SubFactory(ProjectFactory)
    external_id = factory.Sequence(lambda n: f"q{n}")
    text = factory.Faker("sentence")


def _next_version(definition: RelevanceDefinition) -> int:
    # Versions are unique per query: default to the one after the query's newest.
    newest = RelevanceDefinition.objects.filter(query=definition.query).aggregate(v=Max("version"))["v"]
    return (newest or 0) + 1


class RelevanceDefinitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RelevanceDefinition

    query = factory.SubFactory(QueryFactory)
    version = factory.LazyAttribute(_next_version)
    text = factory.Faker("paragraph")


class PassageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Passage

    project = factory.SubFactory(ProjectFactory)
    external_id = factory.Sequence(lambda n: f"d{n}")
    title = factory.Faker("sentence", nb_words=4)
    text = factory.Faker("paragraph")


class PairFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Pair

    project = factory.SubFactory(ProjectFactory)
    query = factory.SubFactory(QueryFactory, project=factory.SelfAttribute("..project"))
    passage = factory.SubFactory(PassageFactory, project=factory.SelfAttribute("..project"))


class PairSourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PairSource

    pair = factory.SubFactory(PairFactory)
    system = factory.Sequence(lambda n: f"system-{n}")
    rank = factory.Sequence(lambda n: n + 1)


class LabelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Label

    pair = factory.SubFactory(PairFactory)
    annotator = factory.SubFactory(UserFactory)
    grade = 1
    created_at = factory.LazyFunction(timezone.now)


class LeaseFactory(factory.django.DjangoModelFactory):
    """An item handed to an expert by a queue (experts label only what they were given)."""

    class Meta:
        model = Lease
        django_get_or_create = ("pair", "annotator")  # one lease per expert and item

    pair = factory.SubFactory(PairFactory)
    annotator = factory.SubFactory(UserFactory)
    queue = "sequential"
    claimed_at = factory.LazyFunction(timezone.now)
    expires_at = factory.LazyFunction(lambda: timezone.now() + timedelta(minutes=30))


class JudgeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Judge

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"judge-{n}")
    backend = "import"


class JudgmentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Judgment

    pair = factory.SubFactory(PairFactory)
    judge = factory.SubFactory(JudgeFactory, project=factory.SelfAttribute("..pair.project"))
    status = Judgment.Status.OK
    p_relevant = 0.5
    created_at = factory.LazyFunction(timezone.now)
