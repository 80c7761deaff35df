from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.db.models import Q
from django.utils import timezone

from . import keys

KEYS_PER_ACCOUNT = 2


class Account(models.Model):
    """The customer: holds the plan, the payment standing, the keys and the usage."""

    class Payment(models.TextChoices):
        ACTIVE = "active", "Active"
        LAPSED = "lapsed", "Lapsed"

    name = models.CharField(max_length=200)
    plan = models.ForeignKey("billing.Plan", on_delete=models.PROTECT, related_name="accounts")
    payment = models.CharField("payment standing", max_length=10, choices=Payment.choices,
                               default=Payment.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(payment__in=["active", "lapsed"]),
                                   name="account_payment_valid"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def payment_active(self) -> bool:
        return self.payment == self.Payment.ACTIVE


class UserManager(BaseUserManager):
    use_in_migrations = True

    def _create(self, email, password, **extra):
        if not email:
            raise ValueError("An email address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email, password=None, **extra):
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email, password=None, **extra):
        extra.update(is_staff=True, is_superuser=True)
        return self._create(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A person who signs in: a customer's user (with an account) or staff (maybe without)."""

    email = models.EmailField(unique=True)
    account = models.ForeignKey(Account, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="users")
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)
    # Signed up on the web page and the e-mailed link not followed yet: such a user cannot
    # sign in (inactive) until the link confirms that the address is theirs.
    signup_pending = models.BooleanField(
        "e-mail address unconfirmed", default=False,
        help_text="Signed up; waits for the link e-mailed to the address. Cannot sign in until then.")

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    class Meta:
        ordering = ["email"]
        constraints = [
            models.CheckConstraint(condition=Q(signup_pending=False) | Q(is_active=False),
                                   name="user_pending_signup_is_inactive"),
        ]

    def __str__(self) -> str:
        return self.email


class ApiKey(models.Model):
    """An API key. Only its lookup id and an argon2id hash are stored; the plaintext is
    shown once when created. `slot` (1 or 2, unique among live keys of an account) is the
    database's backstop for the two-key cap."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100)
    lookup_id = models.CharField(max_length=keys.LOOKUP_LEN, unique=True, editable=False)
    key_hash = models.CharField(max_length=200, editable=False)
    slot = models.PositiveSmallIntegerField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(slot__gte=1) & Q(slot__lte=KEYS_PER_ACCOUNT),
                                   name="apikey_slot_in_cap"),
            models.UniqueConstraint(fields=["account", "slot"], condition=Q(revoked_at__isnull=True),
                                    name="apikey_one_live_key_per_slot"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.display})"

    @property
    def display(self) -> str:
        return keys.display_prefix(self.lookup_id)

    @property
    def is_live(self) -> bool:
        return self.revoked_at is None
