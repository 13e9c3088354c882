"""Invitations: a project admin brings a new expert in by a one-time link, without the Django admin."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from labeling.models.project import Membership, Project


class Invitation(models.Model):
    """A one-time link that creates the account `username`, lets its owner set the password and adds them to
    the project with `role`. Only the SHA-256 of the link's token is stored: the link is shown once, at creation
    (and e-mailed when the operator configured e-mail)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="invitations")
    username = models.CharField(max_length=150)
    email = models.EmailField(blank=True, default="")
    role = models.CharField(max_length=16, choices=Membership.Role.choices)
    token_sha256 = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(role__in=["admin", "expert", "viewer"]), name="invitation_role_valid"),
            # One open invitation per name and project: a second would leave two live links for one account.
            models.UniqueConstraint(fields=["project", "username"], condition=Q(used_at__isnull=True,
                                    revoked_at__isnull=True), name="invitation_one_open_per_name"),
        ]

    def __str__(self) -> str:
        return f"invitation of {self.username} ({self.role}) to {self.project}"

    def state(self, now) -> str:
        """used, revoked, expired or open (at `now`)."""
        if self.used_at is not None:
            return "used"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return "open"
