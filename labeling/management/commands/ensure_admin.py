"""`manage.py ensure_admin`: create the first superuser with a random password, or leave an existing one alone."""
from django.core.management.base import BaseCommand

from labeling.services.users import admin_ensure


class Command(BaseCommand):
    help = (
        "Create a superuser with a freshly generated password and print it once. "
        "If the user exists, change nothing and print no password."
    )

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")
        parser.add_argument("--email", default="")

    def handle(self, *args, username: str, email: str, **options):
        user, password = admin_ensure(username=username, email=email)
        if password is None:
            self.stdout.write(
                f"Admin user '{user.username}' already exists; its password was printed when it was created "
                f"(reset it with `.venv/bin/python manage.py changepassword {user.username}`)"
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created admin user '{user.username}' with password: {password} "
                    f"(shown once; change it with `manage.py changepassword {user.username}`)"
                )
            )
