# The conversation list's index takes the id after the time: GET /api/conversations/ pages by keyset
# (the last row's updated_at and id, KeysetPagination), and its seek and its order (-updated_at, -id) are
# then one range scan of it. The new index is made before the old one goes, so the sidebar's query
# always has one.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0001_squashed_0029'),
        ('providers', '0001_squashed_0002'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
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
