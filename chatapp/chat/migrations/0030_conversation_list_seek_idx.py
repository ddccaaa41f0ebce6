# The conversation list's index takes the id after the time: GET /api/conversations/ pages by keyset
# (the last row's updated_at and id, KeysetPagination), and its seek and its order (-updated_at, -id) are
# then one range scan of it. The new index is made before the old one goes, so the sidebar's query
# always has one.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        # Only the table it indexes: makemigrations also named the user model and the model configs,
        # which chat's first migration already depends on.
        ('chat', '0001_squashed_0029'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='conversation',
            index=models.Index(fields=['owner', '-updated_at', '-id'], name='conv_owner_updated_id_idx'),
        ),
        migrations.RemoveIndex(
            model_name='conversation',
            name='conv_owner_updated_idx',
        ),
    ]
