"""What the workspace's tests share: a member logged in through the test client, and the workspace's URLs."""
from __future__ import annotations

from django.urls import reverse

from tests.factories import PASSWORD, MembershipFactory, UserFactory


def login_member(client, project, role="expert", name="alice"):
    user = UserFactory(username=name)
    MembershipFactory(project=project, user=user, role=role)
    client.login(username=name, password=PASSWORD)
    return user


def workspace_url(project, name="workspace"):
    return reverse(f"labeling:{name}", kwargs={"slug": project.slug})
