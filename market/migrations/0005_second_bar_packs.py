"""The packed tier of the second bars: one row per pair and minute (market/bar_pack.py). In
PostgreSQL partitioned by day of minute_ts_ms like the bar tables, its data stored out of
line uncompressed (it is zstd already: pglz would only spend CPU failing to shrink it).
Stored second bars stay as they are, in the row tier, until their minute is packed."""

import django.db.models.deletion
import django.db.models.functions.math
import django.db.models.lookups
from django.db import migrations, models


def partition(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from market.partitions import table_rebuild_partitioned

    model = apps.get_model("market", "secondbarpack")
    # the foreign key to the pair is CreateModel's, added at the migration's end (deferred)
    table_rebuild_partitioned(schema_editor, model, key="minute_ts_ms", span="day",
                              primary_key=("pair_id", "minute_ts_ms"))
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("ALTER TABLE market_secondbarpack ALTER COLUMN data SET STORAGE EXTERNAL")


class Migration(migrations.Migration):

    dependencies = [
        ('market', '0004_bar_tables_compact_partitioned'),
    ]

    operations = [
        migrations.CreateModel(
            name='SecondBarPack',
            fields=[
                ('pk', models.CompositePrimaryKey('pair', 'minute_ts_ms', blank=True, editable=False, primary_key=True, serialize=False)),
                ('minute_ts_ms', models.BigIntegerField()),
                ('seconds', models.BigIntegerField(help_text='Bit i set: the bar at minute_ts_ms + i s is in the pack')),
                ('data', models.BinaryField(help_text='market.bar_pack: format byte, then zstd of null masks and values')),
                ('pair', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='market.pair')),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(django.db.models.lookups.Exact(django.db.models.functions.math.Mod('minute_ts_ms', 60000), 0), ('minute_ts_ms__gte', 0)), name='secondbarpack_minute_whole'), models.CheckConstraint(condition=models.Q(('seconds__gt', 0), ('seconds__lt', 1152921504606846976)), name='secondbarpack_seconds_valid')],
            },
        ),
        migrations.RunPython(partition, migrations.RunPython.noop),
    ]
