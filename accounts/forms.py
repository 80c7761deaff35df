from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache

from .models import KEY_NAME_MAX_LENGTH


def _client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "") if request else ""


class ThrottledLoginForm(AuthenticationForm):
    """Sign-in by email and password, refused for a while after repeated failures from one
    address for one email, so passwords cannot be guessed at speed."""

    username = forms.EmailField(label="Email", widget=forms.EmailInput(attrs={"autofocus": True,
                                                                           "autocomplete": "email"}))
    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": "Too many failed sign-ins. Wait %(minutes)s minutes and try again.",
    }

    def _throttle_key(self) -> str:
        email = (self.data.get("username") or "").strip().lower()
        return f"login-fail:{_client_ip(self.request)}:{email}"

    def clean(self):
        key = self._throttle_key()
        if (cache.get(key) or 0) >= settings.LOGIN_FAILURE_LIMIT:
            raise forms.ValidationError(
                self.error_messages["throttled"], code="throttled",
                params={"minutes": max(1, settings.LOGIN_FAILURE_WINDOW_SECONDS // 60)})
        try:
            return super().clean()
        except forms.ValidationError:
            if not cache.add(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW_SECONDS):
                try:
                    cache.incr(key)
                except ValueError:
                    pass
            raise


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(max_length=KEY_NAME_MAX_LENGTH, strip=True,
                           widget=forms.TextInput(attrs={"placeholder": "e.g. research notebook",
                                                         "autocomplete": "off"}))
    # One submission creates one key: a resubmitted form (reload, double click) is refused.
    nonce = forms.CharField(widget=forms.HiddenInput, max_length=64)

    def clean_nonce(self):
        nonce = self.cleaned_data["nonce"]
        if not cache.add(f"keyform-nonce:{nonce}", 1, timeout=24 * 3600):
            raise forms.ValidationError(
                "This form was already submitted and its key created; its plaintext was "
                "shown once. If you did not copy it, revoke that key and create another.")
        return nonce


class ApiKeyRenameForm(forms.Form):
    """A key's new name: the same field, and so the same rules, as at creation."""

    name = ApiKeyCreateForm.base_fields["name"]
