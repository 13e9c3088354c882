from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    # Resolved per request: with hashed static names the manifest exists only after collectstatic.
    return HttpResponsePermanentRedirect(static("favicon.svg"))


# A server error under /api/ answers the API's error body (an unknown API path does too: labeling.api.urls).
handler500 = "labeling.api.exceptions.server_error"
# A page a member's role does not open answers a page of the site saying why, not a bare "403 Forbidden".
handler403 = "labeling.views.errors.permission_denied"

urlpatterns = [
    # Browsers ask for /favicon.ico on pages without an icon link (JSON, errors): answer with the one we have.
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("labeling.api.urls")),
    path("", include("labeling.urls")),
]
