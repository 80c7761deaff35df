"""The front page: the wiring layer's, since it shows what accounts (sign-in, sign-up) and
billing (the plans) offer, and a lower app may not import a higher one."""

from django.shortcuts import redirect, render

from billing.selectors import plans_offered


def home(request):
    """Signed in: the dashboard. Otherwise: what the service offers, the plans as staff set
    them, and the way in."""
    if request.user.is_authenticated:
        return redirect("accounts:keys")
    return render(request, "landing.html", {"plans": plans_offered()})
