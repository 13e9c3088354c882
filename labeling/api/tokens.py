"""The API's token login: DRF's obtain_auth_token under the same login throttling as the HTML logins."""
from __future__ import annotations

from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from labeling.login_throttle import client_address, lockout_message, lockout_seconds, login_failures_forgive
from labeling.services.users import user_token_ensure


class TokenObtainView(ObtainAuthToken):
    """POST your username and password to get your API token. After too many failed logins for the account or from
    your address, it answers 429 with how long to wait (also in Retry-After), even for the right password."""

    def post(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            # axes marks the DRF request it refused, not the Django request its middleware sees: say it here.
            if getattr(request, "axes_locked_out", False):
                return Response(
                    {"detail": lockout_message(request)},
                    status=429,
                    headers={"Retry-After": str(lockout_seconds(request))},
                )
            raise ValidationError(serializer.errors)
        # A token login is a login, but DRF sends no user_logged_in: forgive the failures as a page login does.
        login_failures_forgive(username=serializer.validated_data["username"], ip_address=client_address(request))
        token = user_token_ensure(user=serializer.validated_data["user"])
        return Response({"token": token.key})
