"""The sign-up confirmation link's token: Django's password-reset token (an HMAC of the
user's state and a timestamp), salted for this use. The hashed state includes the pending
flag, so the link stops working once it has confirmed the address, and the password hash,
so a newer sign-up for the same pending address voids the older links. It expires after
SIGNUP_LINK_TIMEOUT_SECONDS, independently of the password-reset links' timeout."""

from django.conf import settings
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.utils.crypto import constant_time_compare
from django.utils.http import base36_to_int


class SignupConfirmationTokenGenerator(PasswordResetTokenGenerator):
    key_salt = "accounts.tokens.SignupConfirmationTokenGenerator"

    def _make_hash_value(self, user, timestamp):
        return f"{user.pk}{user.password}{user.signup_pending}{user.is_active}{timestamp}{user.email}"

    def check_token(self, user, token):
        # Django's own check measures the age against PASSWORD_RESET_TIMEOUT; this link has
        # its own timeout, so the same check with that one.
        if not (user and token):
            return False
        try:
            issued = base36_to_int(token.split("-")[0])
        except ValueError:
            return False
        signed = any(constant_time_compare(self._make_token_with_timestamp(user, issued, secret), token)
                     for secret in [self.secret, *self.secret_fallbacks])
        return signed and self._num_seconds(self._now()) - issued <= settings.SIGNUP_LINK_TIMEOUT_SECONDS


signup_token_generator = SignupConfirmationTokenGenerator()
