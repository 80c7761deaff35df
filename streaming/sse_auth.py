"""Who may open an SSE stream, decided before the stream starts (synchronous; the SSE app
runs it in a worker thread once per connection).

Refusals: 401 (bad key or token), 403 plan_forbidden, 404 unknown pair, 402
payment_required (pair not in the account's subscriptions, or payment lapsed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.core import signing
from django.db import connections

from accounts.authentication import bearer_token, caller_for_token
from accounts.models import Account, ApiKey, User
from accounts.selectors import account_recent
from billing.selectors import streaming_refusal
from config.api.errors import ApiError, NotFound, PaymentRequired, PlanForbidden, Unauthorized
from market.models import Pair
from market.precision import NOISE_ONLY, Rounding
from market.selectors import pair_streamable

from . import selectors
from .models import StreamSubscription

TOKEN_SALT = "mdp-sse-token"


def token_issue(*, account_id: int, pair_id: int, key_id: int | None = None, user_id: int | None = None) -> str:
    """A short-lived signed token for EventSource, which cannot send headers."""
    return signing.dumps({"a": account_id, "p": pair_id, "k": key_id, "u": user_id}, salt=TOKEN_SALT, compress=False)


def not_subscribed(pair: Pair) -> PaymentRequired:
    """The refusal of a pair's stream data to an account that does not subscribe to it (the
    SSE connect, status, snapshot, live and the stream token)."""
    return PaymentRequired(f"{pair.path} is not in the account's streaming subscription; subscribe with "
                           f"POST /api/v1/streams {{\"exchange\": \"{pair.exchange.slug}\", \"base\": "
                           f"\"{pair.base.symbol}\", \"quote\": \"{pair.quote.symbol}\"}} first.",
                           details={"reason": "not_subscribed", "pair": pair.path})


def _token_account(token: str, pair: Pair) -> tuple[int, int | None]:
    try:
        claims = signing.loads(token, salt=TOKEN_SALT, max_age=settings.SSE_TOKEN_SECONDS)
    except signing.SignatureExpired:
        raise Unauthorized("The stream token has expired; request a new one.") from None
    except signing.BadSignature:
        raise Unauthorized("The stream token is not valid.") from None
    if claims.get("p") != pair.pk:
        raise Unauthorized("The stream token was issued for another pair.")
    if claims.get("k"):
        if not ApiKey.objects.filter(pk=claims["k"], account_id=claims["a"], revoked_at__isnull=True).exists():
            raise Unauthorized("The API key behind this token has been revoked.")
    elif not User.objects.filter(pk=claims.get("u"), account_id=claims["a"], is_active=True).exists():
        raise Unauthorized("The user behind this token can no longer sign in.")
    return claims["a"], claims.get("k")


@dataclass
class StreamGrant:
    account_id: int
    key_id: int | None
    pair_id: int
    pair_path: str
    metrics: list[str]
    circulating_supply: float | None
    status: dict
    rounding: Rounding = NOISE_ONLY
    replay: list = field(default_factory=list)
    reset: dict | None = None
    position: tuple[int, int] = (0, 0)  # (last bar ts_ms, last scheme event id) the stream starts from


def authorize(*, authorization: str | None, token: str | None, exchange: str, base: str, quote: str,
              last_event_id: str | None, listen=None) -> StreamGrant | ApiError:
    """The grant of a stream, or the refusal. `listen(pair_id)` is called once the stream
    is allowed and before its position is read (the replay, or the present for a fresh
    stream), so an event committed meanwhile is queued live rather than lost; the stream
    drops what the replay already sent."""
    try:
        return _authorize(authorization, token, exchange, base, quote, last_event_id, listen)
    except ApiError as error:
        return error
    finally:
        connections.close_all()  # this worker thread returns its connection to the pool


def _authorize(authorization, token, exchange, base, quote, last_event_id, listen=None) -> StreamGrant:
    pair = pair_streamable(exchange=exchange, base=base, quote=quote)
    header_token = bearer_token(authorization)
    if token and header_token is None:
        if pair is None:
            raise NotFound(f"No streamable pair {exchange}/{base}/{quote}.")
        account_id, key_id = _token_account(token, pair)
    else:
        caller = caller_for_token(header_token)
        account_id, key_id = caller.account_id, caller.key_id
    account = account_recent(account_id=account_id)
    if account is None:
        raise Unauthorized("The account no longer exists.")
    refusal = streaming_refusal(account)
    if refusal is not None:
        raise refusal
    if pair is None:
        raise NotFound(f"No streamable pair {exchange}/{base}/{quote}.")
    if listen is not None:
        listen(pair.pk)  # before the position is read; a refused stream's listener is dropped
    metrics, present = selectors.stream_opening(account_id=account.pk, pair=pair)
    if metrics is None:
        raise not_subscribed(pair)
    grant = StreamGrant(account_id=account.pk, key_id=key_id, pair_id=pair.pk, pair_path=pair.path,
                        metrics=metrics, circulating_supply=pair.base.circulating_supply, rounding=pair.rounding,
                        status=selectors.pair_status(pair=pair, account=account, subscribed=metrics, recent=True))
    if last_event_id:
        grant.replay, grant.reset = selectors.replay_since(pair=pair, cursor=last_event_id)
    resumed = selectors.parse_cursor(last_event_id) if last_event_id and grant.reset is None else None
    grant.position = resumed or present
    return grant


CLOSING_REASONS = {PlanForbidden: "the account's plan no longer includes streaming",
                   PaymentRequired: "the account's payment lapsed"}


def grants_withdrawn(grants: list[StreamGrant]) -> dict[int, str]:
    """The open streams whose grant no longer holds, by position in `grants`, with the
    reason: the key revoked, the payment lapsed, the plan lost streaming, the pair
    unsubscribed. Three queries whatever the number of streams; the serving process asks
    this every SSE_GRANT_RECHECK_SECONDS, so a change made by any process (another server,
    the staff command, the admin) closes its streams within that time in either mode."""
    try:
        return _grants_withdrawn(grants)
    finally:
        connections.close_all()  # this worker thread returns its connection to the pool


def _grants_withdrawn(grants: list[StreamGrant]) -> dict[int, str]:
    key_ids = {g.key_id for g in grants if g.key_id is not None}
    revoked = set(ApiKey.objects.filter(pk__in=key_ids, revoked_at__isnull=False).values_list("pk", flat=True)) \
        if key_ids else set()
    accounts = {a.pk: a for a in Account.objects.select_related("plan").filter(pk__in={g.account_id for g in grants})}
    subscribed = set(StreamSubscription.objects.filter(
        account_id__in={g.account_id for g in grants}, pair_id__in={g.pair_id for g in grants},
    ).values_list("account_id", "pair_id"))
    out = {}
    for n, grant in enumerate(grants):
        account = accounts.get(grant.account_id)
        if grant.key_id in revoked:
            out[n] = "the API key was revoked"
        elif account is None:
            out[n] = "the account's payment lapsed"
        elif (refusal := streaming_refusal(account)) is not None:
            out[n] = CLOSING_REASONS[type(refusal)]
        elif (grant.account_id, grant.pair_id) not in subscribed:
            out[n] = "the pair was unsubscribed"
    return out
