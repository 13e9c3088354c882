"""The API's token login: DRF's obtain_auth_token under the same login throttling as the HTML logins."""
from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import AuthenticationFailed, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from labeling.api.exceptions import api_error
from labeling.api.fields import StrictCharField
from labeling.login_throttle import client_address, lockout_message, lockout_seconds, login_failures_forgive
from labeling.services.users import user_token_ensure


class TokenObtainView(ObtainAuthToken):
    """POST your username and password to get your API token. After too many failed logins for the account or from
    your address, it answers 429 with how long to wait (also in Retry-After), even for the right password."""

    @extend_schema(
        responses={
            200: inline_serializer("Token", {"token": StrictCharField()}),
            401: OpenApiResponse(description="Wrong username or password."),
            429: OpenApiResponse(description="Too many failed logins: wait (Retry-After says how long)."),
        },
    )
    def post(self, request: Request, *args, **kwargs) -> Response:
        serializer = self.get_serializer(data=request.data)
        if not serializer.is_valid():
            # axes marks the DRF request it refused, not the Django request its middleware sees: say it here.
            if getattr(request, "axes_locked_out", False):
                raise api_error(429, "throttled", lockout_message(request), wait=lockout_seconds(request))
            refused = serializer.errors.get("non_field_errors", [])
            if any(getattr(message, "code", None) == "authorization" for message in refused):
                # Well formed, wrong username or password: 401, as for a bad token.
                raise AuthenticationFailed(" ".join(refused))
            raise ValidationError(serializer.errors)
        # A token login is a login, but DRF sends no user_logged_in: forgive the failures as a page login does.
        login_failures_forgive(username=serializer.validated_data["username"], ip_address=client_address(request))
        token = user_token_ensure(user=serializer.validated_data["user"])
        return Response({"token": token.key})
