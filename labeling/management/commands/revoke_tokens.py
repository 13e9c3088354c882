"""`manage.py revoke_tokens USERNAME | --all-users`: delete API tokens, so that a leaked token stops working."""
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from labeling.services.users import tokens_revoke_all, user_tokens_revoke


class Command(BaseCommand):
    help = (
        "Delete a user's API token (or every user's, with --all-users). Requests with it are refused at once; "
        "the user gets a new token by logging in at /api/token/."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?")
        parser.add_argument("--all-users", action="store_true", help="revoke the tokens of every user")

    def handle(self, *args, username: str | None, all_users: bool, **options):
        if all_users == (username is not None):
            raise CommandError("Name one user, or give --all-users (not both).")
        if all_users:
            count = tokens_revoke_all()
            self.stdout.write(f"Revoked {count} API token{'' if count == 1 else 's'} of all users.")
            return
        user_model = get_user_model()
        try:
            user = user_model._default_manager.get_by_natural_key(username)
        except user_model.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        count = user_tokens_revoke(user=user)
        self.stdout.write(f"Revoked {count} API token{'' if count == 1 else 's'} of {user.get_username()!r}.")
