"""Who may act in the console, and forms only the console's own pages can submit.

Review decisions and replays need a person: HTTP basic auth against ``console_users`` (name ->
password), or the ``console_token`` as the password (any name, which is recorded as the reviewer),
or ``Authorization: Bearer <console_token>`` for scripts. Pages that only show may be open
(``console_public_pages``, or the embedded default). Every POST form carries a CSRF token that must
equal the console's cookie of the same name (a double-submit cookie, SameSite=Strict, set when a
page is rendered): another site can make a browser post, with its basic-auth credentials, but
cannot read the cookie to put it in the form. A cross-site ``Origin`` is refused as well.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

REALM = 'Basic realm="cyberjurors console", charset="UTF-8"'
CSRF_COOKIE = "cj_csrf"
CSRF_FIELD = "csrf"


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


@dataclass(frozen=True)
class Auth:
    token: str | None
    users: dict[str, str]
    public_pages: bool

    @property
    def configured(self) -> bool:
        return bool(self.token or self.users)

    def user(self, request: Request) -> str | None:
        """The person the request authenticates as, or None."""
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self.token and _same(value.strip(), self.token):
            return "token"
        if scheme.lower() != "basic":
            return None
        try:
            name, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        known = self.users.get(name)
        if known is not None and _same(password, known):
            return name
        if self.token and _same(password, self.token):
            return name or "token"
        return None

    def require(self, request: Request) -> str:
        """The person, or 401 with a basic-auth challenge."""
        if not self.configured:
            raise HTTPException(403, "no console_token or console_users is configured: review and replay are off")
        who = self.user(request)
        if who is None:
            raise HTTPException(
                401,
                "sign in to review or replay (basic auth: a console user, or the console token)",
                headers={"WWW-Authenticate": REALM},
            )
        return who

    def may_read(self, request: Request) -> None:
        if not self.public_pages:
            self.require(request)


def csrf_token(request: Request) -> str:
    """The token the page's forms carry: the console's cookie when the browser has one, else a new one."""
    return request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)


def keep_csrf(response: Response, token: str) -> Response:
    response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="strict", path="/")
    return response


def check_form(request: Request, form_token: str | None) -> None:
    """403 unless the form's token equals the cookie and the request does not come from another origin."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise HTTPException(403, "a form from another site is refused")
    cookie = request.cookies.get(CSRF_COOKIE)
    if not cookie or not form_token or not _same(form_token, cookie):
        raise HTTPException(403, "the form's CSRF token is missing or stale: reload the page and submit again")
