"""ToolCall.call_uid: the audit row's identity before it is stored (the audit spool replays by it)."""

import uuid

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("tools_app", "0006_plugin_hooks")]

    operations = [
        # Added without a default first: existing rows keep NULL (a callable default would be one value for all
        # of them, against the unique constraint); new rows get theirs from Python.
        migrations.AddField(model_name="toolcall", name="call_uid",
                            field=models.UUIDField(null=True, unique=True, editable=False)),
        migrations.AlterField(model_name="toolcall", name="call_uid",
                              field=models.UUIDField(null=True, unique=True, editable=False, default=uuid.uuid4)),
    ]
