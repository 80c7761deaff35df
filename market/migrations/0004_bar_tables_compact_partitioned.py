"""Bar tables: (pair, ts_ms) becomes the primary key (no id column, no second unique index,
no separate pair index) and, in PostgreSQL, each table is partitioned by ts_ms with its
columns laid out widest first. Every stored bar is kept: the table is renamed, the new one
created, the rows copied and the old table dropped (docs/DECISIONS.md)."""

import django.db.models.deletion
from django.db import migrations, models

SPANS = {"secondbar": "day", "minutebar": "day", "hourbar": "month", "daybar": "year"}


def rebuild(apps, schema_editor):
    from market.partitions import table_rebuild_partitioned

    connection = schema_editor.connection
    for name, span in SPANS.items():
        model = apps.get_model("market", name)
        table = model._meta.db_table
        if connection.vendor == "postgresql":
            table_rebuild_partitioned(
                schema_editor, model, key="ts_ms", span=span, primary_key=("pair_id", "ts_ms"),
                extra=("CONSTRAINT {table}_pair_id_fk FOREIGN KEY (pair_id) REFERENCES market_pair (id) "
                       "DEFERRABLE INITIALLY DEFERRED",))
            continue
        quote = schema_editor.quote_name
        names = ", ".join(quote(f.column) for f in model._meta.local_concrete_fields if f.column)
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {quote(table)} RENAME TO {quote(table + '_old')}")
            schema_editor.create_model(model)
            cursor.execute(f"INSERT INTO {quote(table)} ({names}) SELECT {names} FROM {quote(table + '_old')}")
            cursor.execute(f"DROP TABLE {quote(table + '_old')}")


def _state(model_name):
    return [
        migrations.RemoveConstraint(model_name=model_name, name=f"{model_name}_pair_ts"),
        migrations.RemoveField(model_name=model_name, name="id"),
        migrations.AddField(
            model_name=model_name, name="pk",
            field=models.CompositePrimaryKey("pair", "ts_ms", blank=True, editable=False, primary_key=True,
                                             serialize=False)),
        migrations.AlterField(
            model_name=model_name, name="pair",
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                    to="market.pair")),
    ]


class Migration(migrations.Migration):

    dependencies = [
        ("market", "0003_pair_precision_and_status"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[op for name in SPANS for op in _state(name)], database_operations=[]),
        migrations.RunPython(rebuild),  # no way back: the old tables are gone
    ]
