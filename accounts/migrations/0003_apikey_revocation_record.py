import django.db.models.deletion
from django.db import migrations, models


def keys_revoked_before_are_unrecorded(apps, schema_editor):
    apps.get_model("accounts", "ApiKey").objects.filter(revoked_at__isnull=False).update(revoked_via="unrecorded")


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0002_user_signup_pending"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="revoked_via",
            field=models.CharField(blank=True, choices=[
                ("page", "on the API keys page"), ("admin", "by staff in admin"),
                ("command", "from the command line (manage.py apikey --revoke)"),
                ("demo_seed", "replaced by the demo seeding (manage.py seed_demo)"),
                ("unrecorded", "before revocations were recorded")], default="", editable=False, max_length=12),
        ),
        migrations.AddField(
            model_name="apikey",
            name="revoked_by",
            field=models.ForeignKey(blank=True, editable=False, null=True,
                                    on_delete=django.db.models.deletion.SET_NULL, related_name="+",
                                    to="accounts.user"),
        ),
        migrations.RunPython(keys_revoked_before_are_unrecorded, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="apikey",
            constraint=models.CheckConstraint(
                condition=models.Q(models.Q(("revoked_at__isnull", True), ("revoked_by__isnull", True),
                                            ("revoked_via", "")),
                                   models.Q(("revoked_at__isnull", False),
                                            ("revoked_via__in", ["page", "admin", "command", "demo_seed",
                                                                 "unrecorded"])),
                                   _connector="OR"),
                name="apikey_revocation_recorded"),
        ),
    ]
