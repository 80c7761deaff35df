import secrets

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.utils.encoding import force_str
from django.utils.http import urlsafe_base64_decode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods
from django.views.generic import FormView

from .forms import (ApiKeyCreateForm, ApiKeyRenameForm, SignupForm, SignupResendForm, ThrottledLoginForm,
                    ThrottledPasswordResetForm)
from .models import KEYS_PER_ACCOUNT, ApiKey, User
from .selectors import api_key_cap_reached, api_key_of_account, api_keys_live, api_keys_revoked
from .services import (KeyCapReached, KeyRevoked, api_key_create, api_key_rename, api_key_revoke,
                       signup_confirm)
from .throttles import SIGN_IN
from .tokens import signup_token_generator

SIGNED_OUT = "You are signed out."


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = ThrottledLoginForm
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    """POST signs out and lands on the sign-in page with a notice. GET (a typed or bookmarked
    /signout/) asks first, with the POST button: a link or a prefetch must not sign anyone
    out, and a signed-out visitor is told they are."""

    http_method_names = ["get", "post", "options"]

    def get(self, request, *args, **kwargs):
        if not request.user.is_authenticated:
            messages.info(request, SIGNED_OUT)
            return redirect(settings.LOGOUT_REDIRECT_URL)
        return render(request, "accounts/signout_confirm.html")

    def post(self, request, *args, **kwargs):
        response = super().post(request, *args, **kwargs)
        messages.success(request, SIGNED_OUT)  # kept in a cookie: the session is gone
        return response


class AnonymousFormView(FormView):
    """A form for visitors who are not signed in (a signed-in one goes to their keys), given
    the request for its throttle."""

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated:
            return redirect(settings.LOGIN_REDIRECT_URL)
        return super().dispatch(request, *args, **kwargs)

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}


class SignupView(AnonymousFormView):
    template_name = "accounts/signup.html"
    form_class = SignupForm
    success_url = reverse_lazy("accounts:signup_sent")

    def form_valid(self, form):
        form.save()
        self.request.session["signup_email"] = form.cleaned_data["email"].lower()
        return super().form_valid(form)


class SignupResendView(SignupView):
    template_name = "accounts/signup_resend.html"
    form_class = SignupResendForm


@require_GET
def signup_sent(request):
    return render(request, "accounts/signup_sent.html", {
        "email": request.session.get("signup_email"),
        "hours": settings.SIGNUP_LINK_TIMEOUT_SECONDS // 3600})


@never_cache
@require_GET
def signup_confirm_link(request, uidb64: str, token: str):
    """The e-mailed link: confirms the address once, then sends the user to sign in. An
    expired, used or mangled link says so and offers a new one."""
    try:
        user = User.objects.filter(pk=int(force_str(urlsafe_base64_decode(uidb64)))).first()
    except (TypeError, ValueError, OverflowError):
        user = None
    if user is not None and signup_token_generator.check_token(user, token) and signup_confirm(user=user):
        messages.success(request, "Your e-mail address is confirmed. Sign in to create your first API key.")
        return redirect("accounts:login")
    if user is not None and user.is_active and not user.signup_pending:
        messages.info(request, "This address is already confirmed. Sign in.")
        return redirect("accounts:login")
    return render(request, "accounts/signup_link_invalid.html",
                  {"hours": settings.SIGNUP_LINK_TIMEOUT_SECONDS // 3600})


class PasswordResetView(auth_views.PasswordResetView):
    form_class = ThrottledPasswordResetForm
    template_name = "registration/password_reset_form.html"
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"
    success_url = reverse_lazy("accounts:password_reset_done")

    @property
    def extra_email_context(self):
        return {"minutes": settings.PASSWORD_RESET_TIMEOUT // 60}

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "request": self.request}

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "minutes": settings.PASSWORD_RESET_TIMEOUT // 60}


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    template_name = "registration/password_reset_done.html"

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "minutes": settings.PASSWORD_RESET_TIMEOUT // 60}


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "registration/password_reset_confirm.html"
    success_url = reverse_lazy("accounts:password_reset_complete")

    def form_valid(self, form):
        # The new password ends the sign-in throttle this browser earned with the old one.
        SIGN_IN.clear(self.request, self.user.email)
        return super().form_valid(form)


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "registration/password_reset_complete.html"


def customer_account_or_404(request):
    """The signed-in user's customer account (staff users may have none): the web pages'
    one way to find whose data to show."""
    account = request.user.account
    if account is None:
        raise Http404("This user has no customer account.")
    return account


def live_key_or_404(request, key_id: int):
    """A live key of the signed-in customer's account; 404 for any other (revoked, or
    another account's: the page does not say which)."""
    api_key = api_key_of_account(account=customer_account_or_404(request), key_id=key_id)
    if api_key is None or not api_key.is_live:
        raise Http404("No such key.")
    return api_key


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_keys(request):
    """List the live keys and the history of revoked ones, create a key (plaintext shown on
    this response only)."""
    account = customer_account_or_404(request)
    form = ApiKeyCreateForm(request.POST if request.method == "POST" else None)
    created = None
    if form.is_bound and form.is_valid():
        try:
            created = api_key_create(account=account, name=form.cleaned_data["name"])
        except KeyCapReached as exc:
            form.add_error(None, str(exc))
    nonce = secrets.token_urlsafe(24)
    if created or not form.is_bound:
        form = ApiKeyCreateForm(initial={"nonce": nonce})
    else:  # keep what was typed beside the errors, with a nonce for the next try
        form.data = form.data.copy()
        form.data["nonce"] = nonce
    context = {
        "account": account,
        "keys": api_keys_live(account=account),
        "revoked_keys": api_keys_revoked(account=account),
        "form": form,
        "created": created,
        "cap": KEYS_PER_ACCOUNT,
        "cap_reached": api_key_cap_reached(account=account),
    }
    return render(request, "accounts/api_keys.html", context)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_key_revoke_confirm(request, key_id: int):
    api_key = live_key_or_404(request, key_id)
    if request.method == "POST":
        api_key_revoke(api_key=api_key, via=ApiKey.RevokedVia.PAGE, by=request.user)
        messages.success(request, f"Key “{api_key.name}” ({api_key.display}) is revoked. "
                                  "Requests with it are refused from now on.")
        return redirect("accounts:keys")
    return render(request, "accounts/api_key_revoke.html", {"key": api_key})


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_key_rename_page(request, key_id: int):
    """Rename a live key of the signed-in customer's account."""
    api_key = live_key_or_404(request, key_id)
    form = ApiKeyRenameForm(request.POST if request.method == "POST" else None,
                            initial={"name": api_key.name})
    if form.is_bound and form.is_valid():
        previous = api_key.name
        try:
            api_key_rename(api_key=api_key, name=form.cleaned_data["name"])
        except (KeyRevoked, ValueError) as exc:
            form.add_error("name", str(exc))
        else:
            messages.success(request, f"Key {api_key.display} is renamed from “{previous}” to “{api_key.name}”.")
            return redirect("accounts:keys")
    return render(request, "accounts/api_key_rename.html", {"key": api_key, "form": form})
