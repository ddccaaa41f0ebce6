# The live share links' index takes the id after the time: GET /api/shares/ pages by keyset (the last
# link's created_at and id, KeysetPagination), and its seek and its order (-created_at, -id) are then one
# range scan of it. The new index is made before the old one goes, so Settings' list always has one.

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0030_conversation_list_seek_idx'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name='conversationshare',
            index=models.Index(condition=models.Q(('revoked_at__isnull', True)), fields=['owner', '-created_at', '-id'], name='share_owner_live_id_idx'),
        ),
        migrations.RemoveIndex(
            model_name='conversationshare',
            name='share_owner_live_idx',
        ),
    ]
