from django.contrib import admin, messages
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin

from .models import Account, ApiKey, User
from .services import account_payment_set, api_key_revoke


class UserInline(admin.TabularInline):
    model = User
    fields = ("email", "is_active", "last_login")
    readonly_fields = ("email", "last_login")
    extra = 0
    can_delete = False
    show_change_link = True


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ("name", "display", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    list_display = ("name", "plan", "payment", "created_at")
    list_filter = ("plan", "payment")
    list_editable = ("payment",)
    search_fields = ("name", "users__email")
    inlines = [UserInline, ApiKeyInline]

    def save_model(self, request, obj, form, change):
        payment = obj.payment
        if change and "payment" in form.changed_data:
            obj.payment = Account.objects.get(pk=obj.pk).payment
            super().save_model(request, obj, form, change)
            account_payment_set(account=obj, payment=payment)
        else:
            super().save_model(request, obj, form, change)


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    ordering = ("email",)
    list_display = ("email", "account", "is_staff", "is_active", "last_login")
    list_filter = ("is_staff", "is_active", "signup_pending", "account__plan")
    search_fields = ("email", "account__name")
    autocomplete_fields = ("account",)
    fieldsets = (
        (None, {"fields": ("email", "password", "account")}),
        ("Permissions", {"fields": ("is_active", "signup_pending", "is_staff", "is_superuser", "groups",
                                    "user_permissions")}),
        ("Dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "account", "password1", "password2")}),)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys can be looked at and revoked, never created or edited here; the hash is never shown."""

    list_display = ("name", "display", "account", "created_at", "last_used_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "lookup_id", "account__name", "account__users__email")
    fields = ("name", "display", "account", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke_selected"]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # view only; revoking is the action below

    @admin.action(description="Revoke selected keys", permissions=["view"])
    def revoke_selected(self, request, queryset):
        count = 0
        for api_key in queryset.filter(revoked_at__isnull=True):
            api_key_revoke(api_key=api_key)
            count += 1
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)
