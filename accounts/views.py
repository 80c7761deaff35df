import secrets

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from .forms import ApiKeyCreateForm, ApiKeyRenameForm, ThrottledLoginForm
from .models import KEYS_PER_ACCOUNT, ApiKey
from .selectors import api_key_cap_reached, api_key_of_account, api_keys_live, api_keys_revoked
from .services import KeyCapReached, KeyRevoked, api_key_create, api_key_rename, api_key_revoke


class LoginView(auth_views.LoginView):
    template_name = "accounts/login.html"
    authentication_form = ThrottledLoginForm
    redirect_authenticated_user = True


def customer_account_or_404(request):
    """The signed-in user's customer account (staff users may have none): the web pages'
    one way to find whose data to show."""
    account = request.user.account
    if account is None:
        raise Http404("This user has no customer account.")
    return account


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
    account = customer_account_or_404(request)
    api_key = api_key_of_account(account=account, key_id=key_id)
    if api_key is None or not api_key.is_live:
        raise Http404("No such key.")
    if request.method == "POST":
        api_key_revoke(api_key=api_key, via=ApiKey.RevokedVia.PAGE, by=request.user)
        messages.success(request, f"Key “{api_key.name}” ({api_key.display}) is revoked. "
                                  "Requests with it are refused from now on.")
        return redirect("accounts:keys")
    return render(request, "accounts/api_key_revoke.html", {"key": api_key})


def home(request):
    return redirect("accounts:keys" if request.user.is_authenticated else "accounts:login")


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_key_rename_page(request, key_id: int):
    """Rename a live key of the signed-in customer's account."""
    account = customer_account_or_404(request)
    api_key = api_key_of_account(account=account, key_id=key_id)
    if api_key is None or not api_key.is_live:
        raise Http404("No such key.")
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
