"""In PostgreSQL, scheme events become a table partitioned by day of build start, every
stored event kept (rename, create, copy, drop: docs/DECISIONS.md). Django still sees `id` as
the primary key; the database's is (id, build_start_ms), since a unique key of a
partitioned table must hold its partition key, and `id` comes from a sequence of its own
(PostgreSQL 15 has no identity columns on partitioned tables). SQLite keeps its table."""

from django.db import migrations


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from market.partitions import table_rebuild_partitioned

    model = apps.get_model("schemes", "SchemeEvent")
    table = model._meta.db_table
    sequence = f"{table}_id_seq"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
        (old_sequence,) = cursor.fetchone()
        if old_sequence:
            cursor.execute(f"ALTER SEQUENCE {old_sequence} RENAME TO \"{table}_id_seq_old\"")
        cursor.execute(f'CREATE SEQUENCE "{sequence}"')
        cursor.execute(f'SELECT setval(%s, COALESCE((SELECT MAX(id) FROM "{table}"), 0) + 1, false)', [sequence])
    table_rebuild_partitioned(
        schema_editor, model, key="build_start_ms", span="day", primary_key=("id", "build_start_ms"),
        defaults={"id": f"nextval('\"{sequence}\"')"},
        extra=("CONSTRAINT {table}_pair_id_fk FOREIGN KEY (pair_id) REFERENCES market_pair (id) "
               "DEFERRABLE INITIALLY DEFERRED",))
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f'ALTER SEQUENCE "{sequence}" OWNED BY "{table}"."id"')


class Migration(migrations.Migration):

    dependencies = [
        ("schemes", "0003_scheme_event_feed_position"),
        ("market", "0004_bar_tables_compact_partitioned"),
    ]

    operations = [
        migrations.RunPython(partition),  # no way back: the old table is gone
    ]
