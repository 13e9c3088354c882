"""The members page (project admins): who is in the project with which role; add a user by username, change
a role, remove a member; invite someone new by a one-time link, revoke an invitation. The link's own page
(no login) lets the invited person set a password."""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.password_validation import password_validators_help_text_html
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from labeling.models import Invitation, Membership, Project
from labeling.selectors.members import project_invitations, project_members
from labeling.selectors.projects import admin_to
from labeling.services.invitations import (
    InvitationError,
    InvitationGone,
    InvitationNotFound,
    invitation_accept,
    invitation_create,
    invitation_for_token,
    invitation_revoke,
)
from labeling.services.members import MembershipError, membership_remove, membership_set
from labeling.views.access import project_view

MANAGE_MEMBERS = admin_to("manage the members")


def _render(request: HttpRequest, project: Project, status: int = 200, **extra: object) -> HttpResponse:
    now = timezone.now()
    context = {
        "project": project,
        "members": project_members(project=project),
        "invitations": [(invitation, invitation.state(now)) for invitation in project_invitations(project=project)],
        "roles": Membership.Role.choices,
        "username": "",
        "role": Membership.Role.EXPERT,
        "invite": {"username": "", "email": "", "role": Membership.Role.EXPERT},
        "invitation_days": settings.INVITATION_DAYS,
        "invitation_email": settings.INVITATION_EMAIL,
        **extra,
    }
    return render(request, "labeling/members.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
@project_view(MANAGE_MEMBERS)
def members_page(request: HttpRequest, project: Project) -> HttpResponse:
    if request.method == "GET":
        return _render(request, project)
    username, role = request.POST.get("username", ""), request.POST.get("role", "")
    try:
        membership = membership_set(project=project, username=username, role=role, by=request.user)
    except MembershipError as exc:
        return _render(request, project, status=400, error=str(exc), username=username, role=role)
    messages.success(request, f"{membership.user.get_username()} is now {membership.role} of {project.name}.")
    return redirect("labeling:members", slug=project.slug)


@login_required
@require_POST
@project_view(MANAGE_MEMBERS)
def invitation_create_view(request: HttpRequest, project: Project) -> HttpResponse:
    """Invite someone; the answer shows the one-time link (this once: only its hash is kept)."""
    invite = {name: request.POST.get(name, "") for name in ("username", "email", "role")}

    def link_for(token: str) -> str:
        return request.build_absolute_uri(reverse("labeling:invitation_accept", kwargs={"token": token}))

    try:
        invited = invitation_create(project=project, username=invite["username"], role=invite["role"],
                                    email=invite["email"], by=request.user, link_for=link_for)
    except (InvitationError, MembershipError) as exc:
        return _render(request, project, status=400, invite_error=str(exc), invite=invite)
    return _render(request, project, new_invitation=invited.invitation, new_link=link_for(invited.token))


@login_required
@require_POST
@project_view(MANAGE_MEMBERS)
def invitation_revoke_view(request: HttpRequest, project: Project, invitation_id: int) -> HttpResponse:
    try:
        revoked = invitation_revoke(project=project, invitation_id=invitation_id, by=request.user)
    except InvitationNotFound as exc:
        raise Http404(str(exc)) from None
    except (InvitationError, MembershipError) as exc:
        return _render(request, project, status=400, invite_error=str(exc))
    messages.success(request, f"Revoked the invitation of {revoked.username}: its link no longer works.")
    return redirect("labeling:members", slug=project.slug)


@never_cache
@sensitive_post_parameters("password", "password_again")
@require_http_methods(["GET", "POST"])
def invitation_accept_view(request: HttpRequest, token: str) -> HttpResponse:
    """The link's page (no login): who is invited to which project, and a form to set the password. Using it
    creates the account, adds it to the project, logs the person in and takes them to the project."""
    try:
        invitation = invitation_for_token(token=token)
    except InvitationError as exc:
        status = 404 if isinstance(exc, InvitationNotFound) else 410
        return _accept_page(request, None, status=status, refused=str(exc))
    if request.method == "GET":
        return _accept_page(request, invitation)
    try:
        user = invitation_accept(token=token, password=request.POST.get("password", ""),
                                 password_again=request.POST.get("password_again", ""))
    except InvitationError as exc:
        gone = isinstance(exc, (InvitationNotFound, InvitationGone))
        return _accept_page(request, None if gone else invitation, status=410 if gone else 400,
                            **{"refused" if gone else "error": str(exc)})
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    messages.success(request, f"Welcome, {user.get_username()}: you are {invitation.role} of {invitation.project.name}.")
    return redirect("labeling:project_detail", slug=invitation.project.slug)


def _accept_page(request: HttpRequest, invitation: Invitation | None, status: int = 200,
                 **extra: object) -> HttpResponse:
    response = render(request, "registration/invitation_accept.html", {
        "invitation": invitation, "password_help": password_validators_help_text_html(), **extra,
    }, status=status)
    # The link's secret is in this page's address: no other site may get it as a referrer. (Not "no-referrer":
    # Chromium then sends "Origin: null" with the form, which Django's CSRF check rightly refuses.)
    response["Referrer-Policy"] = "same-origin"
    return response


@login_required
@require_POST
@project_view(MANAGE_MEMBERS)
def member_remove_view(request: HttpRequest, project: Project, user_id: int) -> HttpResponse:
    try:
        removed = membership_remove(project=project, user_id=user_id, by=request.user)
    except MembershipError as exc:
        return _render(request, project, status=400, error=str(exc))
    messages.success(request, f"Removed {removed.user.get_username()} from {project.name}; their labels stay.")
    return redirect("labeling:members", slug=project.slug)
