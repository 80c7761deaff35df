"""The account e-mails, through Django's e-mail framework (EMAIL_BACKEND: SMTP in
production, the console or a folder on a laptop), composed as Django's own password-reset
e-mail is: a subject and a plain-text body from templates."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.sites.shortcuts import get_current_site
from django.core.mail import EmailMultiAlternatives
from django.template import loader
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from .tokens import signup_token_generator

logger = logging.getLogger(__name__)


def site_context(request) -> dict:
    """Where links in an e-mail point: the host the request came to (ALLOWED_HOSTS has
    vetted it), over https when the request was."""
    site = get_current_site(request)
    return {"domain": site.domain, "site_name": site.name,
            "protocol": "https" if request.is_secure() else "http"}


def send(*, subject_template: str, body_template: str, context: dict, to: str) -> bool:
    """Send one e-mail; a failure is logged, not raised: the page answers the same either
    way (it never says whether an address has an account), and the customer can ask again."""
    subject = "".join(loader.render_to_string(subject_template, context).splitlines())
    body = loader.render_to_string(body_template, context)
    try:
        EmailMultiAlternatives(subject, body, settings.DEFAULT_FROM_EMAIL, [to]).send()
    except Exception:
        logger.exception("could not send %s to user %s", body_template, context.get("user_id"))
        return False
    return True


def send_signup_link(*, request, user) -> bool:
    context = {**site_context(request), "user_id": user.pk, "email": user.email,
               "uid": urlsafe_base64_encode(force_bytes(user.pk)),
               "token": signup_token_generator.make_token(user),
               "hours": settings.SIGNUP_LINK_TIMEOUT_SECONDS // 3600}
    return send(subject_template="accounts/email/signup_confirm_subject.txt",
                body_template="accounts/email/signup_confirm.txt", context=context, to=user.email)


def send_already_signed_up(*, request, user) -> bool:
    context = {**site_context(request), "user_id": user.pk, "email": user.email}
    return send(subject_template="accounts/email/signup_existing_subject.txt",
                body_template="accounts/email/signup_existing.txt", context=context, to=user.email)
