from django import forms
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm, SetPasswordMixin
from django.core.cache import cache
from django.urls import reverse
from django.utils.html import format_html

from . import mail
from .models import User
from .selectors import user_with_pending_signup
from .services import Signup, signup_register
from .throttles import PASSWORD_RESET, SIGN_IN, SIGN_UP, Throttle


def email_field(**attrs) -> forms.EmailField:
    return forms.EmailField(label="Email", max_length=254,
                            widget=forms.EmailInput(attrs={"autocomplete": "email", **attrs}))


def refuse_if_throttled(throttle: Throttle, request, email, what: str) -> None:
    if throttle.refused(request, email):
        raise forms.ValidationError(
            "Too many %(what)s for this address. Wait %(minutes)s minutes and try again.",
            code="throttled", params={"what": what, "minutes": throttle.minutes})


class ThrottledLoginForm(AuthenticationForm):
    """Sign-in by email and password, refused for a while after repeated failures from one
    address for one email, so passwords cannot be guessed at speed."""

    username = email_field(autofocus=True)
    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": "Too many failed sign-ins. Wait %(minutes)s minutes and try again.",
    }

    def clean(self):
        email = self.data.get("username")
        if SIGN_IN.refused(self.request, email):
            raise forms.ValidationError(self.error_messages["throttled"], code="throttled",
                                        params={"minutes": SIGN_IN.minutes})
        try:
            return super().clean()
        except forms.ValidationError:
            pending = user_with_pending_signup(email=email)
            if pending is not None and pending.check_password(self.cleaned_data.get("password") or ""):
                # Right password, address not confirmed yet: say so (only the password's owner
                # learns it), and how to get a new link.
                raise forms.ValidationError(format_html(
                    "Confirm your e-mail address first: follow the link we sent to it. "
                    "No e-mail? <a href=\"{}\">Send a new link</a>.", reverse("accounts:signup_resend")),
                    code="unconfirmed")
            SIGN_IN.count(self.request, email)
            raise


class SignupForm(SetPasswordMixin, forms.Form):
    """E-mail, an optional account name, and a password twice, checked by the password
    validators of AUTH_PASSWORD_VALIDATORS. Whether the address already has an account is
    never shown here: the e-mail sent to the address says it (`signup_register`)."""

    email = email_field(autofocus=True)
    account_name = forms.CharField(
        label="Team or company (optional)", max_length=200, required=False, strip=True,
        widget=forms.TextInput(attrs={"autocomplete": "organization", "placeholder": "e.g. Quant Desk"}))
    password1, password2 = SetPasswordMixin.create_password_fields()

    def __init__(self, *args, request=None, **kwargs):
        self.request = request
        super().__init__(*args, **kwargs)

    def clean(self):
        refuse_if_throttled(SIGN_UP, self.request, self.data.get("email"), "sign-ups")
        cleaned = super().clean()
        self.validate_passwords()
        email = cleaned.get("email")
        if email:
            self.validate_password_for_user(User(email=email.lower()))
        return cleaned

    def save(self) -> Signup:
        SIGN_UP.count(self.request, self.cleaned_data["email"])
        signup = signup_register(email=self.cleaned_data["email"], password=self.cleaned_data["password1"],
                                 account_name=self.cleaned_data["account_name"])
        if signup.outcome == Signup.EXISTING:
            mail.send_already_signed_up(request=self.request, user=signup.user)
        else:
            mail.send_signup_link(request=self.request, user=signup.user)
        return signup


class SignupResendForm(forms.Form):
    """A new confirmation link for an address still waiting for its sign-up to be confirmed;
    any other address gets the same answer and no e-mail."""

    email = email_field(autofocus=True)

    def __init__(self, *args, request=None, **kwargs):
        self.request = request
        super().__init__(*args, **kwargs)

    def clean(self):
        refuse_if_throttled(SIGN_UP, self.request, self.data.get("email"), "sign-up e-mails")
        return super().clean()

    def save(self) -> None:
        SIGN_UP.count(self.request, self.cleaned_data["email"])
        pending = user_with_pending_signup(email=self.cleaned_data["email"])
        if pending is not None:
            mail.send_signup_link(request=self.request, user=pending)


class ThrottledPasswordResetForm(PasswordResetForm):
    """Django's reset form, throttled like sign-in; an address whose sign-up is not confirmed
    yet gets a new confirmation link instead (Django mails active users only)."""

    email = email_field(autofocus=True)

    def __init__(self, *args, request=None, **kwargs):
        self.request = request
        super().__init__(*args, **kwargs)

    def clean(self):
        refuse_if_throttled(PASSWORD_RESET, self.request, self.data.get("email"), "password resets")
        return super().clean()

    def save(self, *, request=None, **kwargs):
        request = request or self.request
        PASSWORD_RESET.count(request, self.cleaned_data["email"])
        super().save(request=request, **kwargs)
        pending = user_with_pending_signup(email=self.cleaned_data["email"])
        if pending is not None:
            mail.send_signup_link(request=request, user=pending)


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True,
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
