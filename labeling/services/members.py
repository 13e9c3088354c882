"""Project membership: an admin adds people by username, changes their role or removes them; a project always
keeps at least one admin."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from labeling.exceptions import DomainError
from labeling.models import Lease, Membership, Project
from labeling.selectors.projects import project_role


class MembershipError(DomainError):
    """A membership change that cannot be made (unknown user or role, the last admin, not an admin...)."""


def locked_by_admin(project: Project, by: AbstractBaseUser) -> None:
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise MembershipError("only a project admin can change the project's members")
    # Locking the project row serializes membership changes of the project, so two admins demoting each
    # other at once cannot both pass the last-admin check.
    Project.objects.select_for_update().filter(pk=project.pk).values_list("pk", flat=True).first()


def _refuse_losing_last_admin(project: Project, membership: Membership, what: str) -> None:
    if membership.role != Membership.Role.ADMIN:
        return
    if not Membership.objects.filter(project=project, role=Membership.Role.ADMIN).exclude(pk=membership.pk).exists():
        raise MembershipError(
            f"{membership.user.get_username()} is the project's last admin: make someone else admin before you "
            f"{what} them"
        )


@transaction.atomic
def membership_set(*, project: Project, username: str, role: str, by: AbstractBaseUser) -> Membership:
    """Give the user with `username` the role in the project, adding them as a member if they are not one."""
    if role not in Membership.Role.values:
        raise MembershipError(f"unknown role {role!r}; one of {', '.join(Membership.Role.values)}")
    locked_by_admin(project, by)
    user = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username.strip()}).first()
    if user is None:
        raise MembershipError(f"there is no user named {username.strip()!r}: invite them to create the account")
    membership = Membership.objects.filter(project=project, user=user).select_related("user").first()
    if membership is None:
        return Membership.objects.create(project=project, user=user, role=role)
    if membership.role != role:
        _refuse_losing_last_admin(project, membership, "demote")
        membership.role = role
        membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, project: Project, user_id: int, by: AbstractBaseUser) -> Membership:
    """Remove a member from the project. Their labels stay; the items they held go back to the others.
    Returns the removed membership."""
    locked_by_admin(project, by)
    membership = Membership.objects.filter(project=project, user_id=user_id).select_related("user").first()
    if membership is None:
        raise MembershipError(f"user {user_id!r} is not a member of project {project.slug!r}")
    _refuse_losing_last_admin(project, membership, "remove")
    membership.delete()
    Lease.objects.filter(annotator_id=user_id, pair__project=project).delete()
    return membership
